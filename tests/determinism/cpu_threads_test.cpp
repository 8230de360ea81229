// The `cpu` backend splits work at boundaries that depend only on the shapes, so its
// outputs are bitwise the same for any thread count (backends/cpu/parallel.h). Checked by
// setting MSA_CPU_THREADS (read by the backend whenever it (re)builds its oneTBB arena)
// to 1, 2 and 3 over the quick cases plus long-context cases that take the split-K path,
// and the training ops on the same shapes (their KV-gradient sums run per page over the
// queries that attended it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "check/attention_cases.h"
#include "check/case.h"
#include "check/training_cases.h"
#include "hal/registry.h"
#include "run_util.h"

namespace {

// Sets MSA_CPU_THREADS for the scope; restores the previous value.
class ThreadsEnv {
 public:
  explicit ThreadsEnv(int n) {
    if (const char* v = std::getenv("MSA_CPU_THREADS")) old_ = v;
    setenv("MSA_CPU_THREADS", std::to_string(n).c_str(), 1);
  }
  ~ThreadsEnv() {
    if (old_)
      setenv("MSA_CPU_THREADS", old_->c_str(), 1);
    else
      unsetenv("MSA_CPU_THREADS");
  }

 private:
  std::optional<std::string> old_;
};

msa::cases::CaseList cases() {
  using msa::cases::AttnParams;
  msa::cases::CaseList all = msa::cases::make_cases("quick");
  // Decode over a long context: few (sequence, KV head) groups, so the cpu backend
  // splits each key list into chunks and merges the partial results.
  AttnParams decode;
  decode.q_len = {1, 1};
  decode.kv_len = {3000, 1777};
  decode.Hq = 8, decode.Hkv = 2, decode.D = 64, decode.Bs = 64, decode.k = 16;
  decode.dtype = msa::hal::DType::bf16;
  all.push_back(msa::cases::dense_attention_case(decode));
  all.push_back(msa::cases::sparse_attention_case(decode));
  all.push_back(msa::cases::indexer_score_case(decode));
  all.push_back(msa::cases::block_topk_case(decode));
  all.push_back(msa::cases::dense_attention_backward_case(decode));
  all.push_back(msa::cases::sparse_attention_backward_case(decode));
  // Prefill with many groups (the unsplit, tiled path), f32.
  AttnParams prefill = decode;
  prefill.q_len = {100, 37};
  prefill.kv_len = {300, 37};
  prefill.dtype = msa::hal::DType::f32;
  prefill.k = 4;
  all.push_back(msa::cases::dense_attention_case(prefill));
  all.push_back(msa::cases::sparse_attention_case(prefill));
  all.push_back(msa::cases::indexer_score_case(prefill));
  all.push_back(msa::cases::dense_attention_backward_case(prefill));
  all.push_back(msa::cases::sparse_attention_backward_case(prefill));
  for (auto stage : {msa::ops::KlStage::sparse, msa::ops::KlStage::dense})
    all.push_back(msa::cases::indexer_kl_case(prefill, stage, true));
  // Sparse with query blocks in shared mode (one selection per 64 queries, every head).
  prefill.Qb = 64;
  prefill.mode = msa::ops::SelectionMode::shared;
  all.push_back(msa::cases::sparse_attention_backward_case(prefill));
  all.push_back(msa::cases::indexer_kl_case(prefill, msa::ops::KlStage::sparse, false));
  msa::cases::VitParams vit;
  vit.items = {{4, 6, 6}, {1, 5, 7}};
  vit.dtype = msa::hal::DType::f32;
  all.push_back(msa::cases::patch_attention_3d_backward_case(vit));
  return all;
}

TEST(CpuThreads, OutputsDoNotDependOnTheThreadCount) {
  if (const std::string why = msa_test::unavailable("cpu"); !why.empty()) GTEST_SKIP() << why;
  const msa::cases::CaseList list = cases();
  std::map<size_t, msa_test::Outputs> base;
  for (int threads : {1, 2, 3}) {
    ThreadsEnv env(threads);
    auto dev = msa::hal::create_device("cpu");
    ASSERT_EQ(dev->info().compute_units, threads) << "MSA_CPU_THREADS was not honoured";
    int ran = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const auto& c = *list[i];
      SCOPED_TRACE(c.name() + " " + c.vars() + " threads=" + std::to_string(threads));
      msa_test::Outputs o = msa_test::run_case(c, *dev, c.seed());
      if (!o.skipped.empty()) continue;
      ++ran;
      if (threads == 1)
        base[i] = std::move(o);
      else
        EXPECT_EQ(msa_test::bitwise_diff(base[i], o), "") << "differs from MSA_CPU_THREADS=1";
    }
    EXPECT_GT(ran, 0);
  }
}

}  // namespace
