// Tests of the checker itself: a device whose kernels are cpu-ref's, deliberately broken
// in one way at a time, must fail the cross-check (so the harness cannot silently pass);
// the unbroken device and harmless differences must pass; refusals are skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "check/case.h"
#include "check/check.h"
#include "check/compare.h"
#include "hal/error.h"
#include "hal/host_device.h"
#include "hal/registry.h"
#include "ops/args.h"

namespace msa::cases {
namespace {

using hal::OpId;

enum class Fault {
  none,
  scale_out,     // out *= 1.01
  tiny_out,      // out *= 1 + 1e-7 (within the f32 bound: must still pass)
  nan_out,       // one out element NaN
  skip,          // kernel not run: outputs stay poisoned
  guard_after,   // one byte past the end of out
  guard_before,  // one byte before lse
  lse_off,       // lse += 1e-3 * max(1, |lse|)
  lse_neg_inf,   // one finite lse set to -inf
  write_input,   // one element of q changed
  throws,        // the kernel throws msa::Error
  swap_idx,      // two block_idx entries of one row swapped
  drop_cnt,      // block_cnt[0] decremented
  grad_scale,    // backward: dq *= 1 + 1e-3
  grad_slack,    // backward: 1e-6 in one dk_cache slot no query attended
};

Fault g_fault = Fault::none;
hal::KernelTable g_ref;  // cpu-ref's kernels, called by the faulty wrappers

template <typename Args>
void call_ref(OpId op, hal::Stream& s, const Args& a) {
  g_ref[op].run(s, &a);
}

void scale_tensor(const hal::Tensor& t, double f) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float x = hal::load_as_f32(t.dtype, t.data<uint8_t>(), static_cast<size_t>(i));
    hal::store_from_f32(t.dtype, t.data<uint8_t>(), static_cast<size_t>(i), static_cast<float>(x * f));
  }
}

void faulty_sparse(hal::Stream& s, const ops::SparseAttentionArgs& a) {
  if (g_fault == Fault::throws) throw Error("faulty kernel: deliberate failure");
  if (g_fault != Fault::skip) call_ref(OpId::sparse_block_attention, s, a);
  const int64_t n = a.out.numel();
  float* lse = a.lse.data<float>();
  switch (g_fault) {
    case Fault::scale_out:
      scale_tensor(a.out, 1.01);
      break;
    case Fault::tiny_out:
      scale_tensor(a.out, 1.0 + 1e-7);
      break;
    case Fault::nan_out:
      hal::store_from_f32(a.out.dtype, a.out.data<uint8_t>(), static_cast<size_t>(n / 2), std::nanf(""));
      break;
    case Fault::guard_after:
      a.out.data<uint8_t>()[a.out.nbytes()] ^= 0x01;
      break;
    case Fault::guard_before:
      a.lse.data<uint8_t>()[-1] ^= 0x01;
      break;
    case Fault::lse_off:
      for (int64_t i = 0; i < a.lse.numel(); ++i)
        if (std::isfinite(lse[i])) lse[i] += 1e-3f * std::max(1.0f, std::fabs(lse[i]));
      break;
    case Fault::lse_neg_inf:
      for (int64_t i = 0; i < a.lse.numel(); ++i)
        if (std::isfinite(lse[i])) {
          lse[i] = -std::numeric_limits<float>::infinity();
          break;
        }
      break;
    case Fault::write_input: {
      const float x = hal::load_as_f32(a.q.dtype, a.q.data<uint8_t>(), 0);
      hal::store_from_f32(a.q.dtype, a.q.data<uint8_t>(), 0, x + 1.0f);
      break;
    }
    default:
      break;
  }
}

void faulty_topk(hal::Stream& s, const ops::BlockTopkArgs& a) {
  call_ref(OpId::block_topk, s, a);
  if (g_fault == Fault::swap_idx) {
    int32_t* idx = a.block_idx.data<int32_t>();
    const int64_t k = a.block_idx.dim(2);
    for (int64_t r = 0; r < a.block_idx.numel() / k; ++r)
      if (k >= 2 && idx[r * k] >= 0 && idx[r * k + 1] >= 0) {
        std::swap(idx[r * k], idx[r * k + 1]);
        break;
      }
  }
  if (g_fault == Fault::drop_cnt && a.block_cnt.numel() > 0) a.block_cnt.data<int32_t>()[0] -= 1;
}

void faulty_sparse_backward(hal::Stream& s, const ops::SparseAttentionBackwardArgs& a) {
  call_ref(OpId::sparse_block_attention_backward, s, a);
  if (g_fault == Fault::grad_scale) scale_tensor(a.dq, 1.0 + 1e-3);
  if (g_fault == Fault::grad_slack) {
    float* dk = a.dk_cache.data<float>();
    const int64_t D = a.dk_cache.dim(3);
    for (int64_t r = 0; r < a.dk_cache.numel() / D; ++r)
      if (std::all_of(dk + r * D, dk + (r + 1) * D, [](float x) { return x == 0.0f; })) {
        dk[r * D] = 1e-6f;
        break;
      }
  }
}

std::string refuse_add(const ops::AddArgs&) { return "refused by the test"; }

// cpu-ref's kernels with sparse attention and top-k wrapped by the faults above, and add
// refused through supports().
std::unique_ptr<hal::Device> faulty_device() {
  g_ref = hal::create_device("cpu-ref")->kernels();
  hal::KernelTable t = g_ref;
  t.set(OpId::sparse_block_attention, &faulty_sparse);
  t.set(OpId::block_topk, &faulty_topk);
  t.set(OpId::sparse_block_attention_backward, &faulty_sparse_backward);
  t.set_supports(OpId::add, &refuse_add);
  return std::make_unique<hal::HostDevice>("faulty", "faulty", t, 1);
}

class Checker : public ::testing::Test {
 protected:
  void SetUp() override {
    dev_ = faulty_device();
    ref_ = hal::create_device("cpu-ref");
  }
  void TearDown() override { g_fault = Fault::none; }
  // The first quick case of `op` whose vars contain `with`.
  std::unique_ptr<Case> pick(const std::string& op, const std::string& with) {
    for (auto& c : make_cases("quick", op))
      if (c->vars().find(with) != std::string::npos) return std::move(c);
    ADD_FAILURE() << "no quick " << op << " case with " << with;
    return nullptr;
  }
  CheckResult run(Fault f, const Case& c) {
    g_fault = f;
    CheckResult r = c.check(*dev_, *ref_);
    g_fault = Fault::none;
    return r;
  }
  std::unique_ptr<hal::Device> dev_, ref_;
};

TEST_F(Checker, UnbrokenKernelsPass) {
  for (const char* op : {"sparse_block_attention", "block_topk"})
    for (const auto& c : make_cases("quick", op)) {
      const CheckResult r = run(Fault::none, *c);
      EXPECT_TRUE(r.passed && !r.skipped) << op << " [" << c->vars() << "]: " << r.message;
    }
}

TEST_F(Checker, HarmlessDifferencePasses) {
  auto c = pick("sparse_block_attention", "dtype=f32");
  ASSERT_TRUE(c);
  const CheckResult r = run(Fault::tiny_out, *c);
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_GT(r.worst_error, 0.0);
  EXPECT_LE(r.worst_error, r.tolerance);
}

struct FaultCase {
  Fault fault;
  const char* dtype;
  const char* expect;  // a word the message must contain
};

class CheckerDetects : public Checker, public ::testing::WithParamInterface<FaultCase> {};

TEST_P(CheckerDetects, SparseAttentionFault) {
  const FaultCase& fc = GetParam();
  auto c = pick("sparse_block_attention", std::string("dtype=") + fc.dtype);
  ASSERT_TRUE(c);
  const CheckResult r = run(fc.fault, *c);
  EXPECT_FALSE(r.passed) << "fault not detected: " << r.message;
  EXPECT_FALSE(r.skipped);
  EXPECT_NE(r.message.find(fc.expect), std::string::npos) << r.message;
}

INSTANTIATE_TEST_SUITE_P(
    Faults, CheckerDetects,
    ::testing::Values(FaultCase{Fault::scale_out, "f32", "out"}, FaultCase{Fault::scale_out, "bf16", "out"},
                      FaultCase{Fault::nan_out, "bf16", "nan"}, FaultCase{Fault::skip, "f32", "nan"},
                      FaultCase{Fault::guard_after, "bf16", "guard byte 0 after"},
                      FaultCase{Fault::guard_before, "f32", "guard byte 1 before"},
                      FaultCase{Fault::lse_off, "f32", "lse"}, FaultCase{Fault::lse_neg_inf, "bf16", "infinity"},
                      FaultCase{Fault::write_input, "bf16", "input modified"},
                      FaultCase{Fault::throws, "f32", "deliberate failure"}),
    [](const ::testing::TestParamInfo<FaultCase>& i) {
      return "fault" + std::to_string(i.index) + "_" + i.param.dtype;
    });

TEST_F(Checker, DetectsWrongSelection) {
  for (Fault f : {Fault::swap_idx, Fault::drop_cnt}) {
    auto c = pick("block_topk", "");
    ASSERT_TRUE(c);
    const CheckResult r = run(f, *c);
    EXPECT_FALSE(r.passed) << r.message;
    EXPECT_NE(r.message.find("differ"), std::string::npos) << r.message;
  }
}

// A gradient off by 1e-3 fails the f32 bound; a nonzero gradient in a slot no query
// attended fails even when tiny (the contract: such slots are 0).
TEST_F(Checker, DetectsWrongGradients) {
  auto c = pick("sparse_block_attention_backward", "dtype=f32");
  ASSERT_TRUE(c);
  EXPECT_TRUE(run(Fault::none, *c).passed);
  CheckResult r = run(Fault::grad_scale, *c);
  EXPECT_FALSE(r.passed) << r.message;
  EXPECT_NE(r.message.find("dq"), std::string::npos) << r.message;
  r = run(Fault::grad_slack, *c);
  EXPECT_FALSE(r.passed) << r.message;
  EXPECT_NE(r.message.find("dk_cache row"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("not zero"), std::string::npos) << r.message;
}

// The gradient metric's per-row floor: a row far below the tensor's mean energy is judged
// against the mean (cancellation noise passes), a typical row by its own energy.
TEST(CompareGradients, RowFloorIsTheMeanRowEnergy) {
  hal::HostTensor ref(hal::DType::f32, {3, 4}), got(hal::DType::f32, {3, 4});
  for (int i = 0; i < 12; ++i) ref.set(static_cast<size_t>(i), i < 8 ? 1.0f : 1e-6f);  // row 2 is tiny
  got = ref;
  got.set(8, 1e-6f + 1e-8f);  // row 2: NMSE 1e-6 / 4 of its own energy, ~3e-17 of the mean
  const Compare grad = Compare::grad(hal::DType::f32);
  EXPECT_TRUE(compare_tensors("dq", got, ref, grad).ok) << compare_tensors("dq", got, ref, grad).what;
  Compare plain = grad;
  plain.row_floor = 0;
  EXPECT_FALSE(compare_tensors("dq", got, ref, plain).ok);
  got = ref;
  got.set(0, 1.0f + 1e-4f);  // row 0: NMSE 2.5e-9, within 1e-8; global 1.25e-9 > 1e-10
  const Verdict v = compare_tensors("dq", got, ref, grad);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.what.find("global"), std::string::npos) << v.what;
}

TEST_F(Checker, RefusalIsASkipNotAFailure) {
  auto c = pick("add", "");
  ASSERT_TRUE(c);
  const CheckResult r = run(Fault::none, *c);
  EXPECT_TRUE(r.skipped);
  EXPECT_TRUE(r.passed);
  EXPECT_NE(r.message.find("refused by the test"), std::string::npos) << r.message;
}

// run_check counts failures, marks the op and lists each failing case with its vars.
TEST_F(Checker, RunCheckReportsFailures) {
  g_fault = Fault::scale_out;
  std::ostringstream out;
  const int failed = run_check(*dev_, "quick", "sparse_block_attention", out);
  g_fault = Fault::none;
  EXPECT_EQ(failed, static_cast<int>(make_cases("quick", "sparse_block_attention").size())) << out.str();
  EXPECT_NE(out.str().find("FAIL"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("FAILED sparse_block_attention [B="), std::string::npos) << out.str();

  std::ostringstream clean;
  EXPECT_EQ(run_check(*dev_, "quick", "block_topk,add", clean), 0) << clean.str();
  EXPECT_NE(clean.str().find("skipped add: skipped (refused by the test)"), std::string::npos) << clean.str();
}

// --match keeps the cases whose printed parameters match; a bad pattern or one that
// matches nothing is an msa::Error naming the argument (not a pass with no case run).
TEST_F(Checker, RunCheckMatch) {
  const CaseList all = make_cases("quick", "block_topk");
  ASSERT_GT(all.size(), 1u);
  const std::string vars = all.front()->vars();
  int same = 0;
  for (const auto& c : all) same += c->vars() == vars ? 1 : 0;
  ASSERT_LT(same, static_cast<int>(all.size()));
  // The first case's vars, anchored, with the regex metacharacters escaped.
  const std::string pattern = "^" + std::regex_replace(vars, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") + "$";
  std::ostringstream some;
  EXPECT_EQ(run_check(*dev_, "quick", "block_topk", some, pattern), 0) << some.str();
  char row[64];
  std::snprintf(row, sizeof row, "%-32s %6d", "block_topk", same);
  EXPECT_NE(some.str().find(row), std::string::npos) << pattern << "\n" << some.str();
  for (const char* bad : {"(", "no-case-has-this"}) {
    std::ostringstream out;
    try {
      run_check(*dev_, "quick", "block_topk", out, bad);
      ADD_FAILURE() << "no error for --match " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("argument '--match'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace msa::cases
