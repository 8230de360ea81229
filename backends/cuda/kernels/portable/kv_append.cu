// kv_append: token i of sequence b goes to position kv_len[b] - q_len[b] + i, i.e. slot
// pos % Bs of page block_table[b][pos / Bs]. One block per token: K and V rows of every
// KV head are copied (same dtype), the indexer key is converted to ki_cache's dtype; fp8
// keys with a ki_scale get the per-token scale amax/448 (1 for an all-zero row); NVFP4 keys
// are quantized per group of 16 dims as hal::quantize_nvfp4_group does (one thread a group).
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "backends/cuda/kernels/portable/paged_batch.cuh"
#include "backends/cuda/kernels/portable/seq.cuh"
#include "hal/op_id.h"

namespace msa::MSA_GPU_NS {
namespace {

struct AppendParams {
  Batch bt;
  const uint16_t* k = nullptr;  // [T][Hkv][D] as 2-byte units
  const uint16_t* v = nullptr;
  uint16_t* k_cache = nullptr;  // [P][Hkv][Bs][D]
  uint16_t* v_cache = nullptr;
  int64_t row_units = 0;  // D * esize / 2
  int Hkv = 0;
  const void* ki = nullptr;  // [T][Di]
  int ki_dt = 0;
  void* ki_cache = nullptr;  // [P][Bs][Di]
  int kic_dt = 0;
  float* ki_scale = nullptr;     // [P][Bs]
  uint8_t* ki_scale8 = nullptr;  // NVFP4: [P][Bs][Di/16] e4m3
  int Di = 0;
};

__global__ void kv_append_kernel(AppendParams p) {
  __shared__ float scratch[32];
  const int t = blockIdx.x;
  if (blockIdx.x == 0) {  // validate every sequence once
    for (int b = threadIdx.x; b < p.bt.B; b += blockDim.x) load_seq(p.bt, b);
  }
  const int b = seq_of_token(p.bt, t);
  if (b < 0) return;
  const Seq sq = load_seq(p.bt, b, false);
  if (!sq.ok) return;
  const int pos = sq.kv - sq.qlen + (t - sq.q0);
  const int c = pos / p.bt.Bs, slot = pos % p.bt.Bs;
  if (c >= p.bt.max_blocks) return;
  const int64_t page = page_of(p.bt, b, c);  // all threads read it; flag raised by each (idempotent)
  if (page < 0) return;
  const int64_t n = p.row_units * p.Hkv;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t h = i / p.row_units, e = i % p.row_units;
    const int64_t dst = ((page * p.Hkv + h) * p.bt.Bs + slot) * p.row_units + e;
    p.k_cache[dst] = p.k[int64_t{t} * n + i];
    p.v_cache[dst] = p.v[int64_t{t} * n + i];
  }
  if (p.ki == nullptr) return;
  if (p.kic_dt == kFP4) {  // NVFP4: thread g quantizes group g (8 code bytes, 1 scale)
    const int G = p.Di / 16;
    const int64_t row = page * p.bt.Bs + slot;
    for (int g = threadIdx.x; g < G; g += blockDim.x) {
      float x[16];
      float amax = 0.0f;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        x[i] = load_any(p.ki, p.ki_dt, int64_t{t} * p.Di + g * 16 + i);
        if (x[i] == x[i]) amax = fmaxf(amax, fabsf(x[i]));
      }
      const uint8_t sb = f32_to_fp8_bits(amax * (1.0f / 6.0f));
      const float sc = fp8_bits_to_f32(sb);
      uint32_t w[2] = {0u, 0u};
      if (sc > 0.0f) {
#pragma unroll
        for (int i = 0; i < 16; ++i) w[i / 8] |= e2m1_code(x[i], sc) << (4 * (i % 8));
      }
      uint8_t* dst = static_cast<uint8_t*>(p.ki_cache) + row * (p.Di / 2) + g * 8;
      if (reinterpret_cast<uintptr_t>(dst) % 8 == 0) {
        *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
      } else {  // a view at any byte offset: byte stores
        for (int i = 0; i < 8; ++i) dst[i] = static_cast<uint8_t>(w[i / 4] >> (8 * (i % 4)));
      }
      p.ki_scale8[row * G + g] = sb;
    }
    return;
  }
  const int64_t src = int64_t{t} * p.Di, dst = (page * p.bt.Bs + slot) * int64_t{p.Di};
  float scale = 1.0f;
  if (p.ki_scale != nullptr) {
    float amax = 0.0f;
    for (int i = threadIdx.x; i < p.Di; i += blockDim.x) amax = fmaxf(amax, fabsf(load_any(p.ki, p.ki_dt, src + i)));
    amax = block_max(amax, scratch);
    scale = amax > 0.0f ? amax / 448.0f : 1.0f;
    if (threadIdx.x == 0) p.ki_scale[page * p.bt.Bs + slot] = scale;
  }
  for (int i = threadIdx.x; i < p.Di; i += blockDim.x) {
    float x = load_any(p.ki, p.ki_dt, src + i);
    if (p.ki_scale != nullptr) x = x / scale;
    store_any(p.ki_cache, p.kic_dt, dst + i, x);
  }
}

}  // namespace

void kv_append(hal::Stream& s, const ops::KvAppendArgs& a) {
  const int64_t T = a.k.dim(0);
  if (T == 0) return;
  auto& st = gpu_stream(s);
  AppendParams p;
  p.bt = to_batch(st, ops::batch_of(a), T, a.k_cache.dim(2), a.k_cache.dim(0), hal::OpId::kv_append);
  p.k = a.k.data<uint16_t>();
  p.v = a.v.data<uint16_t>();
  p.k_cache = a.k_cache.data<uint16_t>();
  p.v_cache = a.v_cache.data<uint16_t>();
  p.row_units = a.k.dim(2) * static_cast<int64_t>(hal::dtype_size(a.k.dtype)) / 2;
  p.Hkv = static_cast<int>(a.k.dim(1));
  if (a.ki_cache.present()) {
    p.ki = a.ki.data<void>();
    p.ki_dt = dt_code(a.ki.dtype);
    p.ki_cache = a.ki_cache.data<void>();
    p.kic_dt = dt_code(a.ki_cache.dtype);
    const bool nvfp4 = a.ki_cache.dtype == hal::DType::fp4_e2m1x2;
    p.ki_scale = a.ki_scale.present() && !nvfp4 ? a.ki_scale.data<float>() : nullptr;
    p.ki_scale8 = nvfp4 ? a.ki_scale.data<uint8_t>() : nullptr;
    p.Di = static_cast<int>(a.ki.dim(1));
  }
  kv_append_kernel<<<static_cast<unsigned>(T), 128, 0, st.native()>>>(p);
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::MSA_GPU_NS
