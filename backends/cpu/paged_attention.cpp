// The plan runner of dense_attention and sparse_block_attention on the paged,
// block-major KV cache (docs/spec.md; the ops build their plans in <op>.cpp). Host side:
// validate the index data and finish a PagedAttnPlan (groups of rows sharing a key list,
// split over the key list for decode-like calls). Per target: each task converts one KV
// block (one contiguous Bs x D slab per KV head) to f32 once and runs it against all rows
// of its group (attention_core-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/paged_attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <vector>

#include "backends/cpu/attention_core-inl.h"
#include "backends/cpu/attention_plan.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/scratch.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

template <typename T>
void RunTask(const PagedAttnPlan& p, const PagedAttnPlan::Task& task) {
  const PagedAttnPlan::Group& grp = p.groups[static_cast<size_t>(task.group)];
  const SeqInfo& seq = p.batch.seqs[static_cast<size_t>(grp.seq)];
  const size_t D = static_cast<size_t>(p.D), G = static_cast<size_t>(p.G);
  const size_t Bs = static_cast<size_t>(p.Bs);
  const size_t N = hn::Lanes(DF());
  const size_t ntok = static_cast<size_t>(grp.t_end - grp.t_begin);

  RowGroupState g;
  g.D = D;
  g.rows = ntok * G;
  g.rpad = static_cast<size_t>(PagedAttnPlan::pad_rows(static_cast<int64_t>(g.rows)));
  g.qt = scratch_floats(0, D * g.rpad);
  g.o = scratch_floats(1, D * g.rpad);
  float* ml = scratch_floats(2, 3 * g.rpad);
  g.m = ml;
  g.l = ml + g.rpad;
  g.lim = ml + 2 * g.rpad;
  g.s = scratch_floats(3, Bs * kTileVecs * N);
  float* ktile = scratch_floats(4, Bs * D);
  float* vtile = scratch_floats(5, Bs * D);

  // Scaled, transposed queries: row r = (token i, head hh) -> qt[d][r].
  const T* q = static_cast<const T*>(p.q);
  for (size_t i = 0; i < ntok; ++i) {
    const int64_t t = grp.t_begin + static_cast<int64_t>(i);
    const float pos = static_cast<float>(seq.pos0 + (t - seq.q_begin));
    for (size_t hh = 0; hh < G; ++hh) {
      const size_t r = i * G + hh;
      const T* qrow = q + (static_cast<size_t>(t) * p.Hq + grp.kv_head * p.G + hh) * D;
      for (size_t d = 0; d < D; ++d) g.qt[d * g.rpad + r] = ToF32(qrow[d]) * p.scale;
      g.lim[r] = pos;
    }
  }
  for (size_t r = g.rows; r < g.rpad; ++r) {
    for (size_t d = 0; d < D; ++d) g.qt[d * g.rpad + r] = 0.0f;
    g.lim[r] = g.lim[g.rows - 1];
  }
  ResetRows(g);

  const int64_t max_pos = seq.pos0 + (grp.t_end - 1 - seq.q_begin);
  const int64_t e0 = task.chunk * p.chunk;
  const int64_t e1 = grp.n_chunks > 1 ? std::min(grp.n_list, e0 + p.chunk) : grp.n_list;
  const T* kc = static_cast<const T*>(p.k_cache);
  const T* vc = static_cast<const T*>(p.v_cache);
  // The page of list entry e, or -1 when it contributes nothing (negative, past the
  // sequence's blocks, or wholly after the group's last query).
  auto page_of = [&](int64_t e) -> int64_t {
    const int64_t c = grp.list != nullptr ? grp.list[e] : e;
    if (c < 0 || c >= seq.n_blocks || c * p.Bs > max_pos) return -1;
    return p.block_table[grp.seq * p.max_blocks + c];
  };
  const size_t slab = Bs * D;  // elements of one (page, KV head) slab
  // Merged groups: per entry, rows of tokens that did not select it see nothing of it.
  const uint8_t* sel = grp.sel_off >= 0 ? p.sel.data() + grp.sel_off : nullptr;
  float* lim_rows = g.lim;
  float* lim_entry = sel != nullptr ? scratch_floats(6, g.rpad) : nullptr;
  float* vbad = scratch_floats(7, Bs);
  for (int64_t e = e0; e < e1; ++e) {
    const int64_t page = page_of(e);
    if (page < 0) continue;
    const int64_t c = grp.list != nullptr ? grp.list[e] : e;
    const size_t nk = static_cast<size_t>(std::min<int64_t>(p.Bs, seq.kv_len - c * p.Bs));
    const size_t base = static_cast<size_t>(page * p.Hkv + grp.kv_head) * slab;
    ConvertRows(kc + base, D, nk, D, nullptr, ktile);
    ConvertRows(vc + base, D, nk, D, nullptr, vtile);
    g.vbad = ScrubValues(vtile, nk, D, vbad);
    if (sel != nullptr) {
      const uint8_t* se = sel + static_cast<size_t>(e) * ntok;
      for (size_t r = 0; r < g.rpad; ++r) {
        const size_t i = std::min(r, g.rows - 1) / G;
        lim_entry[r] = se[i] ? lim_rows[r] : -1.0f;
      }
      g.lim = lim_entry;
    }
    AttendTile(g, ktile, vtile, nk, static_cast<float>(c * p.Bs));
    g.lim = lim_rows;
  }

  if (grp.n_chunks > 1) {
    float* slot = p.partial.data() + grp.part_off + task.chunk * p.slot_floats(static_cast<int64_t>(g.rows));
    std::copy(g.o, g.o + D * g.rpad, slot);
    std::copy(g.m, g.m + 2 * g.rpad, slot + D * g.rpad);  // m then l
    return;
  }
  T* out = static_cast<T*>(p.out);
  for (size_t r = 0; r < g.rows; ++r) {
    const size_t t = static_cast<size_t>(grp.t_begin) + r / G;
    const size_t row = t * p.Hq + grp.kv_head * p.G + r % G;
    FinishRow(g.o + r, g.rpad, D, g.m[r], g.l[r], out + row * D, p.lse + row);
  }
}

// Merges the chunks of a split group in chunk order.
template <typename T>
void MergeGroup(const PagedAttnPlan& p, const PagedAttnPlan::Group& grp) {
  const size_t D = static_cast<size_t>(p.D), G = static_cast<size_t>(p.G);
  const size_t rows = static_cast<size_t>(grp.t_end - grp.t_begin) * G;
  const size_t rpad = static_cast<size_t>(PagedAttnPlan::pad_rows(static_cast<int64_t>(rows)));
  const size_t slot = static_cast<size_t>(p.slot_floats(static_cast<int64_t>(rows)));
  const float* base = p.partial.data() + grp.part_off;
  const size_t nc = static_cast<size_t>(grp.n_chunks);
  float* acc = scratch_floats(0, D);
  float* w = scratch_floats(1, nc);
  T* out = static_cast<T*>(p.out);
  for (size_t r = 0; r < rows; ++r) {
    float M = -std::numeric_limits<float>::infinity();
    for (size_t c = 0; c < nc; ++c) M = std::max(M, base[c * slot + D * rpad + r]);
    const size_t t = static_cast<size_t>(grp.t_begin) + r / G;
    const size_t row = t * p.Hq + grp.kv_head * p.G + r % G;
    float L = 0.0f;
    bool bad = false;  // a chunk saw a non-finite logit (its sum is NaN)
    for (size_t c = 0; c < nc; ++c) {
      const float m = base[c * slot + D * rpad + r], l = base[c * slot + D * rpad + rpad + r];
      bad |= std::isnan(l);
      w[c] = M == -std::numeric_limits<float>::infinity() || l == 0.0f ? 0.0f : std::exp(m - M);
      L += l * w[c];
    }
    std::fill(acc, acc + D, 0.0f);
    for (size_t c = 0; c < nc; ++c) {
      if (w[c] == 0.0f) continue;
      const float* o = base + c * slot;
      for (size_t d = 0; d < D; ++d) acc[d] += o[d * rpad + r] * w[c];
    }
    FinishRow(acc, 1, D, M, bad ? std::numeric_limits<float>::quiet_NaN() : L, out + row * D, p.lse + row);
  }
}

template <typename T>
void RunPlanT(const PagedAttnPlan& p) {
  parallel_for(static_cast<int64_t>(p.tasks.size()),
               [&](int64_t i) { RunTask<T>(p, p.tasks[static_cast<size_t>(i)]); });
  std::vector<int64_t> split;
  for (size_t i = 0; i < p.groups.size(); ++i)
    if (p.groups[i].n_chunks > 1) split.push_back(static_cast<int64_t>(i));
  parallel_for(static_cast<int64_t>(split.size()),
               [&](int64_t i) { MergeGroup<T>(p, p.groups[static_cast<size_t>(split[static_cast<size_t>(i)])]); });
}

void RunPagedPlan(const PagedAttnPlan& p) {
  switch (p.dtype) {
    case hal::DType::bf16:
      RunPlanT<hwy::bfloat16_t>(p);
      break;
    case hal::DType::f16:
      RunPlanT<hwy::float16_t>(p);
      break;
    default:
      RunPlanT<float>(p);
      break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <string>

#include "backends/cpu/kernels.h"
#include "hal/error.h"

namespace msa::cpu {

HWY_EXPORT(RunPagedPlan);

void init_plan(PagedAttnPlan& p, const char* op, const hal::Tensor& q, const hal::Tensor& k_cache,
               const hal::Tensor& v_cache, const hal::Tensor& block_table, const hal::Tensor& kv_len,
               const hal::Tensor& cu_q, int64_t Qb, float scale, const hal::Tensor& out, const hal::Tensor& lse) {
  p.dtype = q.dtype;
  p.q = q.data<const void>();
  p.k_cache = k_cache.data<const void>();
  p.v_cache = v_cache.data<const void>();
  p.block_table = block_table.data<const int32_t>();
  p.out = out.data<void>();
  p.lse = lse.data<float>();
  p.max_blocks = block_table.dim(1);
  p.Hq = q.dim(1);
  p.Hkv = k_cache.dim(1);
  p.Bs = k_cache.dim(2);
  p.D = q.dim(2);
  MSA_CHECK_ARG(p.Hkv > 0 && p.Hq % p.Hkv == 0, op, "q", "Hq must be a multiple of Hkv");
  p.G = p.Hq / p.Hkv;
  p.scale = scale != 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.D)));
  p.batch = make_batch(op, cu_q, kv_len, q.dim(0), p.Bs, p.max_blocks, Qb);
  check_block_table(op, p.batch, block_table, k_cache.dim(0));
}

void add_group(PagedAttnPlan& p, int64_t seq, int64_t hk, int64_t t0, int64_t t1, const int32_t* list, int64_t n_list) {
  PagedAttnPlan::Group g;
  g.seq = seq;
  g.kv_head = hk;
  g.t_begin = t0;
  g.t_end = t1;
  g.list = list;
  g.n_list = n_list;
  p.groups.push_back(g);
}

void finish_plan(PagedAttnPlan& p, int64_t chunk) {
  // At most kMaxChunks chunks per group bounds the partial workspace at long contexts
  // (dense decode at 1M: 128 chunks of 64 blocks, not 1024 of 8). Shapes only decide.
  int64_t longest = 0;
  for (const PagedAttnPlan::Group& g : p.groups) longest = std::max(longest, g.n_list);
  p.chunk = std::max(chunk, ceil_div(longest, kMaxChunks));
  const bool split = static_cast<int64_t>(p.groups.size()) < kSplitBelowGroups;
  int64_t off = 0;
  for (size_t gi = 0; gi < p.groups.size(); ++gi) {
    PagedAttnPlan::Group& g = p.groups[gi];
    g.n_chunks = split && g.n_list > p.chunk ? ceil_div(g.n_list, p.chunk) : 1;
    g.task0 = static_cast<int64_t>(p.tasks.size());
    for (int64_t c = 0; c < g.n_chunks; ++c) p.tasks.push_back({static_cast<int64_t>(gi), c});
    if (g.n_chunks > 1) {
      g.part_off = off;
      off += g.n_chunks * p.slot_floats((g.t_end - g.t_begin) * p.G);
    }
  }
  p.partial.assign(static_cast<size_t>(off), 0.0f);
}

int64_t tokens_per_group(int64_t G) { return std::max<int64_t>(1, kGroupRows / G); }

void run_paged_plan(const PagedAttnPlan& p) { HWY_DYNAMIC_DISPATCH(RunPagedPlan)(p); }

}  // namespace msa::cpu
#endif  // HWY_ONCE
