// Fuzzes the argument validation of the attention ops on cpu-ref: indexer_score,
// block_topk, sparse_block_attention, dense_attention, patch_attention_3d, kv_append.
// The input picks the op, a small varlen paged batch (lengths, cu_q, kv_len, page table,
// Qb, NQ, k, n_sink, n_local, block indices, items, dtypes, scalars), then damages some
// of it. Each call must end in msa::Error or a result that satisfies the contract's
// invariants (checked below); anything else (another exception, a crash, a hang, a
// sanitizer report) is a bug.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_tensors.h"
#include "hal/error.h"
#include "hal/registry.h"
#include "ops/ops.h"

namespace {

using msa::hal::DType;
using msa::hal::Tensor;
using msa_fuzz::TensorMaker;

constexpr DType kAct[] = {DType::f32, DType::bf16, DType::f16};
constexpr DType kKeys[] = {DType::f32, DType::bf16, DType::fp8_e4m3, DType::fp4_e2m1x2};

void check(bool cond) {
  if (!cond) std::abort();  // a contract invariant does not hold: report as a crash
}

// A small varlen batch, valid unless the input perturbs it.
struct Batch {
  int64_t B = 0, T = 0, Bs = 1, max_blocks = 0, P = 1, NQ = 0;
  int Qb = 1;
  std::vector<int32_t> cu_q, kv_len, table;
  bool valid = true;  // index data untouched by the perturbations
};

int32_t odd_int(FuzzedDataProvider& f) {
  static constexpr int32_t kOdd[] = {
      -1, 0, 1, 2, 7, 128, -128, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), 1 << 20};
  return f.ConsumeBool() ? f.ConsumeIntegral<int32_t>()
                         : kOdd[f.ConsumeIntegralInRange<size_t>(0, std::size(kOdd) - 1)];
}

Batch make_batch(FuzzedDataProvider& f) {
  Batch b;
  b.B = f.ConsumeIntegralInRange<int64_t>(0, 3);
  static constexpr int kBs[] = {1, 2, 3, 4, 8};
  b.Bs = kBs[f.ConsumeIntegralInRange<size_t>(0, std::size(kBs) - 1)];
  static constexpr int kQb[] = {1, 1, 1, 2, 4, 8, 128, 3, 0, -4, 256};
  b.Qb = kQb[f.ConsumeIntegralInRange<size_t>(0, std::size(kQb) - 1)];
  b.cu_q.push_back(0);
  int64_t longest = 0;
  for (int64_t i = 0; i < b.B; ++i) {
    const int q = f.ConsumeIntegralInRange<int>(0, 4);
    const int kv = q + f.ConsumeIntegralInRange<int>(0, 9);
    b.cu_q.push_back(b.cu_q.back() + q);
    b.kv_len.push_back(kv);
    longest = std::max<int64_t>(longest, kv);
  }
  b.T = b.cu_q.back();
  b.max_blocks = (longest + b.Bs - 1) / b.Bs + f.ConsumeIntegralInRange<int>(0, 1);
  b.P = f.ConsumeIntegralInRange<int64_t>(1, 6);
  for (int64_t i = 0; i < b.B * b.max_blocks; ++i)
    b.table.push_back(f.ConsumeIntegralInRange<int32_t>(0, static_cast<int32_t>(b.P - 1)));
  // Perturbations of the index data (each rare).
  const uint8_t p = f.ConsumeIntegral<uint8_t>();
  if (p >= 200) {
    b.valid = false;
    switch (p % 5) {
      case 0:
        b.cu_q[f.ConsumeIntegralInRange<size_t>(0, b.cu_q.size() - 1)] = odd_int(f);
        break;
      case 1:
        if (b.B > 0) b.kv_len[f.ConsumeIntegralInRange<size_t>(0, b.kv_len.size() - 1)] = odd_int(f);
        break;
      case 2:
        if (!b.table.empty()) b.table[f.ConsumeIntegralInRange<size_t>(0, b.table.size() - 1)] = odd_int(f);
        break;
      case 3:
        b.max_blocks = std::max<int64_t>(0, b.max_blocks - 1), b.table.resize(b.B * b.max_blocks);
        break;
      case 4:
        b.Bs = f.ConsumeBool() ? 0 : -b.Bs;
        break;
    }
  }
  try {
    b.NQ = msa::ops::count_query_blocks(b.cu_q, b.kv_len, b.Qb);
  } catch (const msa::Error&) {
    b.NQ = f.ConsumeIntegralInRange<int64_t>(0, 4);
    b.valid = false;
  }
  if (f.ConsumeIntegral<uint8_t>() >= 240) {
    b.NQ += f.ConsumeIntegralInRange<int>(-2, 2);
    b.valid = false;
  }
  if (b.NQ < -2 || b.NQ > 1000) b.NQ = 0;
  return b;
}

float pick_scale(FuzzedDataProvider& f) {
  static constexpr float kScale[] = {0.0f,
                                     0.0f,
                                     0.0f,
                                     0.5f,
                                     -1.0f,
                                     1e-30f,
                                     std::numeric_limits<float>::infinity(),
                                     std::numeric_limits<float>::quiet_NaN()};
  return kScale[f.ConsumeIntegralInRange<size_t>(0, std::size(kScale) - 1)];
}

template <typename E>
E pick_enum(FuzzedDataProvider& f, int valid_count) {
  // Mostly valid values; occasionally one outside the enum.
  const uint8_t v = f.ConsumeIntegral<uint8_t>();
  return static_cast<E>(v >= 250 ? valid_count + (v & 1) * 5 : v % valid_count);
}

// Float tensor read back as f32 (host device).
std::vector<float> read_floats(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = msa::hal::load_as_f32(t.dtype, t.data<const uint8_t>(), i);
  return v;
}

// The cache with every slot NaN except those below kv_len reached through the table,
// which get finite values: slack must never reach an output (docs/spec.md).
std::vector<uint8_t> cache_bytes(TensorMaker& m, DType dt, const Batch& b, int64_t Hkv, int64_t D,
                                 std::vector<int64_t>& shape) {
  shape = {b.P, Hkv, std::max<int64_t>(b.Bs, 0), D};
  const int64_t n = TensorMaker::numel_capped(shape);
  std::vector<uint8_t> bytes = m.random_bytes(dt, n);
  if (b.Bs < 1) return bytes;
  std::vector<char> live(static_cast<size_t>(n), 0);
  for (int64_t s = 0; s < b.B; ++s)
    for (int64_t pos = 0; pos < b.kv_len[s] && pos < b.max_blocks * b.Bs && pos >= 0; ++pos) {
      const int64_t page = b.table[s * b.max_blocks + pos / b.Bs];
      if (page < 0 || page >= b.P) continue;
      for (int64_t g = 0; g < Hkv; ++g)
        for (int64_t d = 0; d < D; ++d) {
          const int64_t i = ((page * Hkv + g) * b.Bs + pos % b.Bs) * D + d;
          if (i < n) live[static_cast<size_t>(i)] = 1;
        }
    }
  for (int64_t i = 0; i < n; ++i)
    if (!live[static_cast<size_t>(i)]) msa::hal::store_from_f32(dt, bytes.data(), i, std::nanf(""));
  return bytes;
}

void fuzz_indexer_score(FuzzedDataProvider& f, msa::hal::Device& dev, TensorMaker& m) {
  Batch b = make_batch(f);
  msa::ops::IndexerScoreArgs a;
  const DType kd = kKeys[f.ConsumeIntegralInRange<size_t>(0, std::size(kKeys) - 1)];
  const bool nvfp4 = kd == DType::fp4_e2m1x2;  // Di/2 code bytes and Di/16 e4m3 scales a key
  const int64_t Hi = f.ConsumeIntegralInRange<int64_t>(1, 3);
  const int64_t Di = nvfp4 ? 16 * f.ConsumeIntegralInRange<int64_t>(1, 2) : f.ConsumeIntegralInRange<int64_t>(1, 8);
  a.qi = m.floats(kAct[f.ConsumeIntegralInRange<size_t>(0, 2)], {b.T, Hi, Di});
  std::vector<int64_t> shape;
  const int64_t Bs = std::max<int64_t>(b.Bs, 0), row = nvfp4 ? Di / 2 : Di;
  std::vector<uint8_t> keys = cache_bytes(m, kd, b, 1, row, shape);
  a.ki_cache = m.make(kd, {b.P, Bs, row}, keys);
  if (nvfp4) {  // scales NaN in slack slots; now and then missing (an error)
    if (f.ConsumeIntegral<uint8_t>() < 240)
      a.ki_scale = m.make(DType::fp8_e4m3, {b.P, Bs, Di / 16}, cache_bytes(m, DType::fp8_e4m3, b, 1, Di / 16, shape));
  } else if (kd == DType::fp8_e4m3 && f.ConsumeBool()) {
    a.ki_scale = m.floats(DType::f32, {b.P, Bs});
  }
  a.block_table = m.ints({b.B, b.max_blocks}, b.table);
  a.kv_len = m.ints({b.B}, b.kv_len);
  a.cu_q = m.ints({b.B + 1}, b.cu_q);
  a.Qb = b.Qb;
  a.NQ = b.NQ;
  a.mode = pick_enum<msa::ops::SelectionMode>(f, 2);
  a.pool = pick_enum<msa::ops::Pool>(f, 2);
  a.scale = pick_scale(f);
  a.block_score = m.zeros(DType::f32, {std::max<int64_t>(b.NQ, 0), Hi, b.max_blocks});
  msa::ops::indexer_score(dev, a);
  // Scores are -inf or finite: no NaN from slack slots, no +inf from finite inputs.
  if (!m.damaged() && a.scale == 0.0f)
    for (float s : read_floats(a.block_score)) check(!std::isnan(s) && s != std::numeric_limits<float>::infinity());
}

void fuzz_block_topk(FuzzedDataProvider& f, msa::hal::Device& dev, TensorMaker& m) {
  Batch b = make_batch(f);
  msa::ops::BlockTopkArgs a;
  const int64_t Hs = f.ConsumeIntegralInRange<int64_t>(1, 3);
  const int64_t NQ = std::max<int64_t>(b.NQ, 0);
  // Scores drawn from a small set so ties, NaN, -inf, +inf and -0 are common.
  static constexpr float kS[] = {0.0f,
                                 -0.0f,
                                 1.0f,
                                 1.0f,
                                 2.0f,
                                 -1.0f,
                                 std::numeric_limits<float>::quiet_NaN(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::infinity(),
                                 3.5f};
  std::vector<float> sc(static_cast<size_t>(TensorMaker::numel_capped({NQ, Hs, b.max_blocks})));
  for (auto& s : sc) s = kS[m.rng()() % std::size(kS)];
  std::vector<uint8_t> sb(sc.size() * 4);
  if (!sc.empty()) std::memcpy(sb.data(), sc.data(), sb.size());
  a.block_score = m.make(DType::f32, {NQ, Hs, b.max_blocks}, sb);
  a.kv_len = m.ints({b.B}, b.kv_len);
  a.cu_q = m.ints({b.B + 1}, b.cu_q);
  a.Qb = b.Qb;
  a.NQ = b.NQ;
  a.Bs = static_cast<int>(b.Bs);
  a.k = f.ConsumeIntegralInRange<int>(-1, 6);
  a.n_sink = f.ConsumeIntegralInRange<int>(-1, 3);
  a.n_local = f.ConsumeIntegralInRange<int>(-1, 3);
  if (f.ConsumeIntegral<uint8_t>() >= 250) a.k = odd_int(f), a.n_sink = odd_int(f), a.n_local = odd_int(f);
  const int64_t k = std::clamp<int64_t>(a.k, 0, 64);
  a.block_idx = m.zeros(DType::i32, {NQ, Hs, k});
  a.block_cnt = m.zeros(DType::i32, {NQ, Hs});
  msa::ops::block_topk(dev, a);
  if (m.damaged() || !b.valid) return;
  // Invariants: ascending distinct valid block ids, -1 padding, count matches, every
  // block chosen when there are at most k, and never a NaN / -inf block beyond the forced.
  const int32_t* idx = a.block_idx.data<const int32_t>();
  const int32_t* cnt = a.block_cnt.data<const int32_t>();
  int64_t n = 0;
  for (int64_t s = 0; s < b.B; ++s) {
    const int64_t q_len = b.cu_q[s + 1] - b.cu_q[s];
    if (q_len == 0) continue;
    const int64_t first = b.kv_len[s] - q_len, last = b.kv_len[s] - 1;
    for (int64_t blk = first / b.Qb; blk <= last / b.Qb; ++blk, ++n) {
      const int64_t p1 = std::min(last, blk * b.Qb + b.Qb - 1);
      const int64_t nvalid = p1 / b.Bs + 1;
      for (int64_t h = 0; h < Hs; ++h) {
        const int32_t* row = idx + (n * Hs + h) * a.k;
        const int32_t c = cnt[n * Hs + h];
        check(c >= 0 && c <= a.k);
        for (int64_t j = 0; j < a.k; ++j) {
          if (j < c)
            check(row[j] >= 0 && row[j] < nvalid && (j == 0 || row[j] > row[j - 1]));
          else
            check(row[j] == -1);
        }
        if (nvalid <= a.k) check(c == nvalid);
      }
    }
  }
  check(n == b.NQ);
}

// Shared by sparse and dense attention.
struct Paged {
  Batch b;
  int64_t Hq = 1, Hkv = 1, D = 1;
  DType dt = DType::f32;
  Tensor q, k_cache, v_cache, block_table, kv_len, cu_q, out, lse;
};

Paged make_paged(FuzzedDataProvider& f, TensorMaker& m) {
  Paged p;
  p.b = make_batch(f);
  p.Hkv = f.ConsumeIntegralInRange<int64_t>(1, 2);
  p.Hq = p.Hkv * f.ConsumeIntegralInRange<int64_t>(1, 3);
  p.D = f.ConsumeIntegralInRange<int64_t>(1, 8);
  p.dt = kAct[f.ConsumeIntegralInRange<size_t>(0, 2)];
  p.q = m.floats(p.dt, {p.b.T, p.Hq, p.D});
  std::vector<int64_t> shape;
  p.k_cache =
      m.make(p.dt, {p.b.P, p.Hkv, std::max<int64_t>(p.b.Bs, 0), p.D}, cache_bytes(m, p.dt, p.b, p.Hkv, p.D, shape));
  p.v_cache =
      m.make(p.dt, {p.b.P, p.Hkv, std::max<int64_t>(p.b.Bs, 0), p.D}, cache_bytes(m, p.dt, p.b, p.Hkv, p.D, shape));
  p.block_table = m.ints({p.b.B, p.b.max_blocks}, p.b.table);
  p.kv_len = m.ints({p.b.B}, p.b.kv_len);
  p.cu_q = m.ints({p.b.B + 1}, p.b.cu_q);
  p.out = m.zeros(p.dt, {p.b.T, p.Hq, p.D});
  p.lse = m.zeros(DType::f32, {p.b.T, p.Hq});
  return p;
}

// Attention outputs: finite (|out| <= max |v| = 2), lse finite or -inf, never NaN.
void check_attention(const TensorMaker& m, const Tensor& out, const Tensor& lse) {
  if (m.damaged()) return;
  for (float x : read_floats(out)) check(std::isfinite(x) && std::fabs(x) <= 2.01f);
  for (float x : read_floats(lse)) check(!std::isnan(x) && x != std::numeric_limits<float>::infinity());
}

void fuzz_sparse(FuzzedDataProvider& f, msa::hal::Device& dev, TensorMaker& m) {
  Paged p = make_paged(f, m);
  msa::ops::SparseAttentionArgs a;
  a.q = p.q, a.k_cache = p.k_cache, a.v_cache = p.v_cache, a.block_table = p.block_table;
  a.kv_len = p.kv_len, a.cu_q = p.cu_q, a.out = p.out, a.lse = p.lse;
  a.Qb = p.b.Qb;
  a.NQ = p.b.NQ;
  a.mode = pick_enum<msa::ops::SelectionMode>(f, 2);
  const int64_t Hs = a.mode == msa::ops::SelectionMode::shared ? 1 : p.Hkv;
  const int64_t K = f.ConsumeIntegralInRange<int64_t>(0, 5);
  std::vector<int32_t> idx(static_cast<size_t>(TensorMaker::numel_capped({std::max<int64_t>(p.b.NQ, 0), Hs, K})));
  for (auto& v : idx) v = f.ConsumeIntegralInRange<int32_t>(-2, static_cast<int32_t>(p.b.max_blocks) + 1);
  if (!idx.empty() && f.ConsumeIntegral<uint8_t>() >= 250)
    idx[f.ConsumeIntegralInRange<size_t>(0, idx.size() - 1)] = odd_int(f);
  a.block_idx = m.ints({std::max<int64_t>(p.b.NQ, 0), Hs, K}, idx);
  a.scale = pick_scale(f);
  msa::ops::sparse_block_attention(dev, a);
  if (a.scale == 0.0f) check_attention(m, a.out, a.lse);
}

void fuzz_dense(FuzzedDataProvider& f, msa::hal::Device& dev, TensorMaker& m) {
  Paged p = make_paged(f, m);
  msa::ops::DenseAttentionArgs a;
  a.q = p.q, a.k_cache = p.k_cache, a.v_cache = p.v_cache, a.block_table = p.block_table;
  a.kv_len = p.kv_len, a.cu_q = p.cu_q, a.out = p.out, a.lse = p.lse;
  a.scale = pick_scale(f);
  msa::ops::dense_attention(dev, a);
  if (a.scale == 0.0f) check_attention(m, a.out, a.lse);
}

void fuzz_patch(FuzzedDataProvider& f, msa::hal::Device& dev, TensorMaker& m) {
  msa::ops::PatchAttention3dArgs a;
  const int n = f.ConsumeIntegralInRange<int>(0, 3);
  std::vector<int32_t> items;
  int64_t N = 0;
  for (int i = 0; i < n; ++i) {
    const int gt = f.ConsumeIntegralInRange<int>(1, 5), gh = f.ConsumeIntegralInRange<int>(1, 2),
              gw = f.ConsumeIntegralInRange<int>(1, 3);
    items.insert(items.end(), {gt, gh, gw});
    N += int64_t{gt} * gh * gw;
  }
  if (!items.empty() && f.ConsumeIntegral<uint8_t>() >= 220)
    items[f.ConsumeIntegralInRange<size_t>(0, items.size() - 1)] = odd_int(f);
  if (f.ConsumeIntegral<uint8_t>() >= 245) N += f.ConsumeIntegralInRange<int>(-1, 1);
  N = std::max<int64_t>(N, 0);
  const int64_t H = f.ConsumeIntegralInRange<int64_t>(1, 3), D = f.ConsumeIntegralInRange<int64_t>(1, 8);
  const DType dt = kAct[f.ConsumeIntegralInRange<size_t>(0, 2)];
  a.q = m.floats(dt, {N, H, D});
  a.k = m.floats(dt, {N, H, D});
  a.v = m.floats(dt, {N, H, D});
  a.items = m.ints({n, 3}, items);
  a.window = f.ConsumeIntegralInRange<int>(-1, 5);
  if (f.ConsumeIntegral<uint8_t>() >= 250) a.window = odd_int(f);
  a.scale = pick_scale(f);
  a.out = m.zeros(dt, {N, H, D});
  a.lse = m.zeros(DType::f32, {N, H});
  msa::ops::patch_attention_3d(dev, a);
  if (a.scale == 0.0f) check_attention(m, a.out, a.lse);
}

void fuzz_kv_append(FuzzedDataProvider& f, msa::hal::Device& dev, TensorMaker& m) {
  Batch b = make_batch(f);
  msa::ops::KvAppendArgs a;
  const int64_t Hkv = f.ConsumeIntegralInRange<int64_t>(1, 2), D = f.ConsumeIntegralInRange<int64_t>(1, 8);
  const DType dt = kAct[f.ConsumeIntegralInRange<size_t>(0, 2)];
  const int64_t Bs = std::max<int64_t>(b.Bs, 0);
  a.k = m.floats(dt, {b.T, Hkv, D});
  a.v = m.floats(dt, {b.T, Hkv, D});
  a.block_table = m.ints({b.B, b.max_blocks}, b.table);
  a.kv_len = m.ints({b.B}, b.kv_len);
  a.cu_q = m.ints({b.B + 1}, b.cu_q);
  a.k_cache = m.zeros(dt, {b.P, Hkv, Bs, D});
  a.v_cache = m.zeros(dt, {b.P, Hkv, Bs, D});
  const uint8_t with_ki = f.ConsumeIntegralInRange<uint8_t>(0, 3);
  if (with_ki >= 1) {
    const DType kd = kKeys[f.ConsumeIntegralInRange<size_t>(0, std::size(kKeys) - 1)];
    const bool nvfp4 = kd == DType::fp4_e2m1x2;
    const int64_t Di = nvfp4 ? 16 * f.ConsumeIntegralInRange<int64_t>(1, 2) : f.ConsumeIntegralInRange<int64_t>(1, 8);
    a.ki = m.floats(kAct[f.ConsumeIntegralInRange<size_t>(0, 2)], {b.T, Di});
    a.ki_cache = m.zeros(kd, {b.P, Bs, nvfp4 ? Di / 2 : Di});
    if (nvfp4 && with_ki >= 2)
      a.ki_scale = m.zeros(DType::fp8_e4m3, {b.P, Bs, Di / 16});  // 1: missing (an error)
    else if (with_ki == 3)
      a.ki_scale = m.zeros(DType::f32, {b.P, Bs});
  }
  msa::ops::kv_append(dev, a);
  if (m.damaged() || !b.valid) return;
  // With distinct pages per slot, every new token's K and V land bit-exactly in its slot.
  std::vector<int> owner(static_cast<size_t>(b.P * Bs), -1);
  const size_t es = msa::hal::dtype_size(dt), row = static_cast<size_t>(D) * es;
  for (int64_t s = 0; s < b.B; ++s)
    for (int64_t i = 0; i < b.cu_q[s + 1] - b.cu_q[s]; ++i) {
      const int64_t pos = b.kv_len[s] - (b.cu_q[s + 1] - b.cu_q[s]) + i, t = b.cu_q[s] + i;
      const int64_t page = b.table[s * b.max_blocks + pos / Bs], slot = page * Bs + pos % Bs;
      if (owner[static_cast<size_t>(slot)] != -1) return;  // two tokens share a slot: order unspecified
      owner[static_cast<size_t>(slot)] = static_cast<int>(t);
    }
  for (size_t slot = 0; slot < owner.size(); ++slot) {
    if (owner[slot] < 0) continue;
    const int64_t page = static_cast<int64_t>(slot) / Bs, off = static_cast<int64_t>(slot) % Bs;
    for (int64_t g = 0; g < Hkv; ++g) {
      const size_t c = static_cast<size_t>(((page * Hkv + g) * Bs + off)) * row;
      const size_t x = static_cast<size_t>(owner[slot] * Hkv + g) * row;
      check(std::memcmp(a.k_cache.data<const char>() + c, a.k.data<const char>() + x, row) == 0);
      check(std::memcmp(a.v_cache.data<const char>() + c, a.v.data<const char>() + x, row) == 0);
    }
  }
}

// Outcome counts per op, printed at exit when MSA_FUZZ_STATS is set (shows how many
// inputs got past validation and had their results checked).
// With MSA_FUZZ_STATS=2 also every distinct "<op>: argument '<arg>'" that rejected an input.
struct Stats {
  long ok[6] = {}, rejected[6] = {};
  std::map<std::string, long> errors;
  void error(const char* what) {
    std::string s(what);
    const size_t arg = s.find("'", s.find("argument '") == std::string::npos ? 0 : s.find("argument '") + 10);
    errors[s.substr(0, arg == std::string::npos ? 60 : arg + 1)]++;
  }
  ~Stats() {
    const char* env = std::getenv("MSA_FUZZ_STATS");
    if (env == nullptr) return;
    static const char* names[] = {"indexer_score",   "block_topk",         "sparse_block_attention",
                                  "dense_attention", "patch_attention_3d", "kv_append"};
    for (int i = 0; i < 6; ++i)
      std::fprintf(stderr, "fuzz_ops: %-24s ok %ld  msa::Error %ld\n", names[i], ok[i], rejected[i]);
    if (std::string(env) == "2")
      for (const auto& [m, n] : errors) std::fprintf(stderr, "fuzz_ops:   %6ld  %s\n", n, m.c_str());
  }
};
Stats g_stats;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<msa::hal::Device> dev = msa::hal::create_device("cpu-ref");
  FuzzedDataProvider f(data, size);
  const int op = f.ConsumeIntegralInRange<int>(0, 5);
  TensorMaker m(f, *dev, f.ConsumeIntegral<uint32_t>());
  try {
    switch (op) {
      case 0:
        fuzz_indexer_score(f, *dev, m);
        break;
      case 1:
        fuzz_block_topk(f, *dev, m);
        break;
      case 2:
        fuzz_sparse(f, *dev, m);
        break;
      case 3:
        fuzz_dense(f, *dev, m);
        break;
      case 4:
        fuzz_patch(f, *dev, m);
        break;
      case 5:
        fuzz_kv_append(f, *dev, m);
        break;
    }
    ++g_stats.ok[op];
  } catch (const msa::Error& e) {
    ++g_stats.rejected[op];
    g_stats.error(e.what());  // rejected with a message naming the argument: fine
  }
  return 0;
}
