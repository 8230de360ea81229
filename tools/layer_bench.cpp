#include "tools/layer_bench.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <set>

#include "hal/error.h"
#include "ops/ops.h"
#include "tools/device_tensor_pool.h"
#include "tools/median.h"

namespace msa::cli {
namespace {

int parse_int_field(const std::string& key, const std::string& v) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || x < 0 || x > (1 << 20))
    throw Error("argument '--config " + key + "': '" + v + "' is not a non-negative integer");
  return static_cast<int>(x);
}

// Fills `h` from a pool of random values (rounded to its dtype), copied at random offsets
// so large caches are cheap to build yet never constant.
void fill_random(hal::HostTensor& h, std::mt19937_64& rng, float amplitude) {
  const size_t es = hal::dtype_size(h.dtype);
  const size_t pool_elems = 1 << 20;
  hal::HostTensor pool(h.dtype, {static_cast<int64_t>(pool_elems)});
  std::uniform_real_distribution<float> u(-amplitude, amplitude);
  for (size_t i = 0; i < pool_elems; ++i) {
    float x = u(rng);
    if (std::fabs(x) < 1e-3f) x = 1e-3f;
    pool.set(i, x);
  }
  const size_t n = h.nbytes();
  const size_t chunk = 4096 * es;
  for (size_t off = 0; off < n; off += chunk) {
    const size_t len = std::min(chunk, n - off);
    const size_t src = (rng() % (pool_elems - 4096)) * es;
    std::memcpy(h.bytes.data() + off, pool.bytes.data() + src, len);
  }
}

// Rewrites each sequence's later rows of qi [T][Hi][Di] as x_t = a x_{t-1} + sqrt(1 - a^2)
// n_t, n_t the row's own random values: adjacent tokens' queries stay close.
void walk_drafts(hal::HostTensor& qi, int B, int q_len) {
  constexpr double a = 0.99;
  const double b = std::sqrt(1.0 - a * a);
  const int64_t row = qi.shape[1] * qi.shape[2];
  std::vector<double> x(static_cast<size_t>(row));
  for (int s = 0; s < B; ++s)
    for (int j = 0; j < q_len; ++j) {
      const int64_t base = (int64_t{s} * q_len + j) * row;
      for (int64_t e = 0; e < row; ++e) {
        const double n = qi.get(static_cast<size_t>(base + e));
        double& v = x[static_cast<size_t>(e)];
        v = j == 0 ? n : a * v + b * n;
        qi.set(static_cast<size_t>(base + e), static_cast<float>(v));
      }
    }
}

}  // namespace

Drafts parse_drafts(const std::string& v) {
  if (v == "random") return Drafts::random;
  if (v == "walk") return Drafts::walk;
  throw Error("argument '--drafts': '" + v + "' is not random or walk");
}

hal::HostTensor layer_random_tensor(hal::DType dtype, std::vector<int64_t> shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  hal::HostTensor t(dtype, std::move(shape));
  fill_random(t, rng, 1.0f);
  return t;
}

double layer_nmse(const hal::HostTensor& a, const hal::HostTensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get(i), r = b.get(i);
    num += (x - r) * (x - r);
    den += r * r;
  }
  if (std::isnan(num)) return INFINITY;
  return den > 0 ? num / den : num;
}

LayerConfig parse_layer_config(const std::vector<std::string>& overrides) {
  LayerConfig c;
  std::set<std::string> seen;
  for (const auto& kv : overrides) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) throw Error("argument '--config': '" + kv + "' is not field=value");
    const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (!seen.insert(k).second) throw Error("argument '--config': '" + k + "' given twice");
    if (k == "Hq")
      c.Hq = parse_int_field(k, v);
    else if (k == "Hkv")
      c.Hkv = parse_int_field(k, v);
    else if (k == "D")
      c.D = parse_int_field(k, v);
    else if (k == "Hi")
      c.Hi = parse_int_field(k, v);
    else if (k == "Di")
      c.Di = parse_int_field(k, v);
    else if (k == "Bs")
      c.Bs = parse_int_field(k, v);
    else if (k == "k")
      c.k = parse_int_field(k, v);
    else if (k == "n_sink")
      c.n_sink = parse_int_field(k, v);
    else if (k == "n_local")
      c.n_local = parse_int_field(k, v);
    else if (k == "Qb")
      c.Qb = parse_int_field(k, v);
    else if (k == "dtype")
      c.dtype = hal::parse_dtype(v, "--config dtype");
    else if (k == "ki_dtype")
      c.ki_dtype = hal::parse_dtype(v, "--config ki_dtype");
    else if (k == "mode") {
      if (v == "per_kv_head")
        c.mode = ops::SelectionMode::per_kv_head;
      else if (v == "shared")
        c.mode = ops::SelectionMode::shared;
      else
        throw Error("argument '--config mode': '" + v + "' is not per_kv_head or shared");
    } else if (k == "pool") {
      if (v == "max")
        c.pool = ops::Pool::max;
      else if (v == "lse")
        c.pool = ops::Pool::lse;
      else
        throw Error("argument '--config pool': '" + v + "' is not max or lse");
    } else {
      throw Error("argument '--config': unknown field '" + k + "'");
    }
  }
  if (c.Hkv < 1 || c.Hq < 1 || c.Hq % c.Hkv != 0)
    throw Error("argument '--config Hq': must be a positive multiple of Hkv");
  if (c.Bs < 1 || c.D < 1 || c.Di < 1 || c.k < 1) throw Error("argument '--config': Bs, D, Di and k must be >= 1");
  const int want_hi = c.mode == ops::SelectionMode::shared ? 1 : c.Hkv;
  if (c.Hi != want_hi)
    throw Error("argument '--config Hi': must be " + std::to_string(want_hi) + " in " +
                (c.mode == ops::SelectionMode::shared ? "shared" : "per_kv_head") + " mode");
  return c;
}

LayerProblem::LayerProblem(const LayerConfig& c, int batch, int64_t ctx, int qlen, uint64_t seed, Drafts drafts)
    : cfg(c), B(batch), context(ctx), q_len(qlen) {
  std::mt19937_64 rng(seed);
  const int64_t T = int64_t{B} * q_len;
  const int64_t blocks = (context + c.Bs - 1) / c.Bs;
  const int64_t P = B * blocks;
  q = hal::HostTensor(c.dtype, {T, c.Hq, c.D});
  k_cache = hal::HostTensor(c.dtype, {P, c.Hkv, c.Bs, c.D});
  v_cache = hal::HostTensor(c.dtype, {P, c.Hkv, c.Bs, c.D});
  qi = hal::HostTensor(c.dtype, {T, c.Hi, c.Di});
  const bool nvfp4 = c.ki_dtype == hal::DType::fp4_e2m1x2;
  ki_cache = hal::HostTensor(c.ki_dtype, {P, c.Bs, nvfp4 ? c.Di / 2 : c.Di});
  for (auto* t : {&q, &k_cache, &v_cache, &qi}) fill_random(*t, rng, 1.0f);
  if (drafts == Drafts::walk) walk_drafts(qi, B, q_len);
  if (nvfp4) {  // random E2M1 code bytes, e4m3 group scales in [0.1, 0.4]
    for (int64_t i = 0; i < ki_cache.numel(); ++i) ki_cache.data<uint8_t>()[i] = static_cast<uint8_t>(rng() & 0xffu);
    ki_scale = hal::HostTensor(hal::DType::fp8_e4m3, {P, c.Bs, c.Di / 16});
    std::uniform_real_distribution<float> u(0.1f, 0.4f);
    for (int64_t i = 0; i < ki_scale.numel(); ++i) ki_scale.set(i, u(rng));
  } else {
    fill_random(ki_cache, rng, c.ki_dtype == hal::DType::fp8_e4m3 ? 200.0f : 1.0f);
  }
  if (c.ki_dtype == hal::DType::fp8_e4m3) {
    ki_scale = hal::HostTensor(hal::DType::f32, {P, c.Bs});
    std::uniform_real_distribution<float> u(0.002f, 0.01f);
    for (int64_t i = 0; i < ki_scale.numel(); ++i) ki_scale.set(i, u(rng));
  }
  // Shuffled pages; slack slots of each last page hold NaN.
  std::vector<int32_t> pages(static_cast<size_t>(P));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  block_table = hal::HostTensor(hal::DType::i32, {B, blocks});
  std::memcpy(block_table.bytes.data(), pages.data(), pages.size() * 4);
  kv_len = hal::HostTensor(hal::DType::i32, {B});
  cu_q = hal::HostTensor(hal::DType::i32, {B + 1});
  for (int b = 0; b < B; ++b) {
    kv_len.data<int32_t>()[b] = static_cast<int32_t>(context);
    cu_q.data<int32_t>()[b + 1] = static_cast<int32_t>((b + 1) * int64_t{q_len});
    const int64_t used = context - (blocks - 1) * c.Bs;
    const int32_t last = pages[b * blocks + blocks - 1];
    for (int h = 0; h < c.Hkv; ++h)
      for (int64_t s = used; s < c.Bs; ++s)
        for (int d = 0; d < c.D; ++d) {
          const size_t i = ((static_cast<size_t>(last) * c.Hkv + h) * c.Bs + s) * c.D + d;
          k_cache.set(i, NAN);
          v_cache.set(i, NAN);
        }
  }
  NQ = ops::count_query_blocks({cu_q.data<int32_t>(), static_cast<size_t>(B + 1)},
                               {kv_len.data<int32_t>(), static_cast<size_t>(B)}, c.Qb);
}

struct LayerRun::Impl : DeviceTensorPool {
  hal::Tensor busy;  // the queued timing's head of device work (allocated on first use)
  ops::IndexerScoreArgs idx;
  ops::BlockTopkArgs topk;
  ops::SparseAttentionArgs sparse;
  ops::DenseAttentionArgs dense;
};

LayerRun::LayerRun(hal::Device& device, const LayerProblem& p)
    : device_(device), prob_(p), impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  const auto& c = p.cfg;
  const hal::Tensor q = m.up(device, p.q), kc = m.up(device, p.k_cache), vc = m.up(device, p.v_cache);
  const hal::Tensor bt = m.up(device, p.block_table), kl = m.up(device, p.kv_len), cu = m.up(device, p.cu_q);
  const int64_t T = p.q.shape[0], max_blocks = p.block_table.shape[1];
  const int64_t Hs = c.mode == ops::SelectionMode::shared ? 1 : c.Hkv;
  m.idx = {m.up(device, p.qi),
           m.up(device, p.ki_cache),
           m.up(device, p.ki_scale),
           bt,
           kl,
           cu,
           c.Qb,
           p.NQ,
           c.mode,
           0.0f,
           c.pool,
           m.make(device, hal::DType::f32, {p.NQ, c.Hi, max_blocks})};
  m.topk = {m.idx.block_score,
            kl,
            cu,
            c.Qb,
            p.NQ,
            c.Bs,
            c.k,
            c.n_sink,
            c.n_local,
            m.make(device, hal::DType::i32, {p.NQ, Hs, c.k}),
            m.make(device, hal::DType::i32, {p.NQ, Hs})};
  m.sparse = {q,
              kc,
              vc,
              bt,
              kl,
              cu,
              c.Qb,
              p.NQ,
              c.mode,
              m.topk.block_idx,
              0.0f,
              m.make(device, c.dtype, {T, c.Hq, c.D}),
              m.make(device, hal::DType::f32, {T, c.Hq})};
  m.dense = {
      q, kc, vc, bt, kl, cu, 0.0f, m.make(device, c.dtype, {T, c.Hq, c.D}), m.make(device, hal::DType::f32, {T, c.Hq})};
}

LayerRun::~LayerRun() = default;

void LayerRun::run_once() {
  ops::indexer_topk(device_, {impl_->idx, impl_->topk});
  ops::sparse_block_attention(device_, impl_->sparse);
  ops::dense_attention(device_, impl_->dense);
  device_.stream().synchronize();
}

void LayerRun::busy_head() {
  auto& m = *impl_;
  if (!m.busy.present()) m.busy = m.make(device_, hal::DType::i32, {int64_t{1} << 28});  // 1 GiB
  device_.stream().fill_bytes(m.busy, 0);
}

LayerTimes LayerRun::time(int iters, bool queued) {
  run_once();  // warm-up
  auto e0 = device_.create_event(), e1 = device_.create_event();
  std::vector<double> a, b, c, d, f;
  for (int it = 0; it < iters; ++it) {
    const LayerTimes t = time_sparse(queued);
    f.push_back(time_fused(queued));
    if (queued) busy_head();
    device_.stream().record(*e0);
    ops::dense_attention(device_, impl_->dense);
    device_.stream().record(*e1);
    device_.stream().synchronize();
    a.push_back(t.indexer_ms);
    b.push_back(t.topk_ms);
    c.push_back(t.sparse_ms);
    d.push_back(e1->elapsed_ms(*e0));
  }
  LayerTimes t{median(a), median(b), median(c), median(d)};
  t.fused_ms = median(f);
  return t;
}

double LayerRun::time_fused(bool queued) {
  auto e0 = device_.create_event(), e1 = device_.create_event();
  auto& s = device_.stream();
  if (queued) busy_head();
  s.record(*e0);
  ops::indexer_topk(device_, {impl_->idx, impl_->topk});
  s.record(*e1);
  s.synchronize();
  return e1->elapsed_ms(*e0);
}

LayerTimes LayerRun::time_sparse(bool queued) {
  std::vector<std::unique_ptr<hal::Event>> ev;
  for (int i = 0; i < 4; ++i) ev.push_back(device_.create_event());
  auto& s = device_.stream();
  if (queued) busy_head();
  s.record(*ev[0]);
  ops::indexer_score(device_, impl_->idx);
  s.record(*ev[1]);
  ops::block_topk(device_, impl_->topk);
  s.record(*ev[2]);
  ops::sparse_block_attention(device_, impl_->sparse);
  s.record(*ev[3]);
  s.synchronize();
  return {ev[1]->elapsed_ms(*ev[0]), ev[2]->elapsed_ms(*ev[1]), ev[3]->elapsed_ms(*ev[2]), 0.0};
}

hal::HostTensor LayerRun::download(const std::string& what) {
  if (what == "block_idx") return hal::to_host(device_, impl_->topk.block_idx);
  if (what == "block_cnt") return hal::to_host(device_, impl_->topk.block_cnt);
  if (what == "sparse_out") return hal::to_host(device_, impl_->sparse.out);
  if (what == "dense_out") return hal::to_host(device_, impl_->dense.out);
  throw Error("layer run: unknown output '" + what + "'");
}

double LayerRun::attended_fraction() {
  const hal::HostTensor idx = download("block_idx");
  const int64_t rows = idx.shape[0] * idx.shape[1], k = idx.shape[2];
  if (rows == 0) return 0;
  const int64_t Bs = prob_.cfg.Bs, L = prob_.context;
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t tokens = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t c = idx.data<int32_t>()[r * k + j];
      if (c >= 0) tokens += std::min<int64_t>(Bs, L - c * Bs);
    }
    sum += static_cast<double>(tokens) / static_cast<double>(L);
  }
  return sum / static_cast<double>(rows);
}

double LayerRun::selection_union() {
  const hal::HostTensor idx = download("block_idx");
  const int64_t Hs = idx.shape[1], k = idx.shape[2];
  if (prob_.B == 0 || prob_.NQ == 0 || Hs == 0) return 0;
  const int64_t nqb = prob_.NQ / prob_.B;  // every sequence has the same shape: as many query blocks
  double sum = 0;
  std::set<int32_t> blocks;
  for (int64_t s = 0; s < prob_.B; ++s)
    for (int64_t h = 0; h < Hs; ++h) {
      blocks.clear();
      for (int64_t r = 0; r < nqb; ++r)
        for (int64_t j = 0; j < k; ++j) {
          const int32_t c = idx.data<int32_t>()[((s * nqb + r) * Hs + h) * k + j];
          if (c >= 0) blocks.insert(c);
        }
      sum += static_cast<double>(blocks.size());
    }
  return sum / static_cast<double>(prob_.B * Hs);
}

LayerCompare compare_layers(LayerRun& run, LayerRun& ref) {
  LayerCompare c;
  const auto a = run.download("block_idx"), b = ref.download("block_idx");
  c.same_blocks = a.bytes == b.bytes;
  c.sparse_nmse = layer_nmse(run.download("sparse_out"), ref.download("sparse_out"));
  c.dense_nmse = layer_nmse(run.download("dense_out"), ref.download("dense_out"));
  c.tolerance = run.dtype() == hal::DType::f32 ? 1e-10 : 5e-5;
  return c;
}

}  // namespace msa::cli
