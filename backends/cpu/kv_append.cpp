// kv_append (docs/spec.md, "Paged, block-major KV cache"): token i of sequence b goes to
// slot pos % Bs of page block_table[b][pos / Bs], pos = kv_len[b] - q_len[b] + i. K and
// V rows are copied bit for bit (one contiguous D-row per KV head); indexer keys are
// converted to the cache dtype exactly as cpu-ref does (fp8 with a scale tensor: scale =
// amax / 448, value = x / scale; NVFP4: hal::quantize_nvfp4_group per group of 16 dims of
// the f32 values). Tokens run in parallel; each writes its own slots.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/varlen.h"
#include "hal/dtype.h"
#include "hal/error.h"
#include "hal/nvfp4.h"

namespace msa::cpu {

void kv_append(hal::Stream&, const ops::KvAppendArgs& a) {
  const char* op = "kv_append";
  const int64_t T = a.k.dim(0), Hkv = a.k.dim(1), D = a.k.dim(2);
  const int64_t P = a.k_cache.dim(0), Bs = a.k_cache.dim(2);
  MSA_CHECK_ARG(a.k.dtype == a.k_cache.dtype && a.v.dtype == a.v_cache.dtype, op, "k",
                "k and v must have the cache dtype");
  const Batch batch = make_batch(op, a.cu_q, a.kv_len, T, Bs, a.block_table.dim(1), 1);
  check_block_table(op, batch, a.block_table, P);
  const bool with_ki = a.ki.present() && a.ki_cache.present();
  const int64_t Di = with_ki ? a.ki.dim(1) : 0;
  const bool with_scale = with_ki && a.ki_scale.present();
  const bool fp8 = with_ki && a.ki_cache.dtype == hal::DType::fp8_e4m3;
  const int64_t mb = a.block_table.dim(1);
  const int32_t* bt = a.block_table.data<const int32_t>();

  // Token -> (sequence, position), flattened so tokens can run in parallel.
  std::vector<int64_t> tok_seq(static_cast<size_t>(T), -1);
  for (size_t b = 0; b < batch.seqs.size(); ++b)
    for (int64_t i = 0; i < batch.seqs[b].q_len; ++i)
      tok_seq[static_cast<size_t>(batch.seqs[b].q_begin + i)] = static_cast<int64_t>(b);

  const size_t row_bytes = static_cast<size_t>(D) * hal::dtype_size(a.k.dtype);
  const auto* k_src = a.k.data<const uint8_t>();
  const auto* v_src = a.v.data<const uint8_t>();
  auto* k_dst = a.k_cache.data<uint8_t>();
  auto* v_dst = a.v_cache.data<uint8_t>();
  parallel_for(
      T,
      [&](int64_t t) {
        const int64_t b = tok_seq[static_cast<size_t>(t)];
        if (b < 0) return;
        const SeqInfo& s = batch.seqs[static_cast<size_t>(b)];
        const int64_t pos = s.pos0 + (t - s.q_begin);
        const int64_t page = bt[b * mb + pos / Bs], slot = pos % Bs;
        for (int64_t h = 0; h < Hkv; ++h) {
          const size_t src = static_cast<size_t>(t * Hkv + h) * row_bytes;
          const size_t dst = static_cast<size_t>((page * Hkv + h) * Bs + slot) * row_bytes;
          std::memcpy(k_dst + dst, k_src + src, row_bytes);
          std::memcpy(v_dst + dst, v_src + src, row_bytes);
        }
        if (!with_ki) return;
        const auto* ki = a.ki.data<const uint8_t>();
        if (a.ki_cache.dtype == hal::DType::fp4_e2m1x2) {  // NVFP4: codes + e4m3 scale per 16 dims
          constexpr int kG = hal::kNvfp4Group;
          const int64_t row = page * Bs + slot, G = Di / kG;
          uint8_t* codes = a.ki_cache.data<uint8_t>() + row * (Di / 2);
          uint8_t* scales = a.ki_scale.data<uint8_t>() + row * G;
          float x[kG];
          for (int64_t g = 0; g < G; ++g) {
            for (int i = 0; i < kG; ++i)
              x[i] = hal::load_as_f32(a.ki.dtype, ki, static_cast<size_t>(t * Di + g * kG + i));
            hal::quantize_nvfp4_group(x, codes + g * (kG / 2), scales + g);
          }
          return;
        }
        float scale = 1.0f;
        if (fp8 && with_scale) {
          float amax = 0.0f;
          for (int64_t d = 0; d < Di; ++d)
            amax = std::max(amax, std::fabs(hal::load_as_f32(a.ki.dtype, ki, static_cast<size_t>(t * Di + d))));
          if (amax > 0.0f) scale = amax / 448.0f;
        }
        const int64_t dst_row = (page * Bs + slot) * Di;
        for (int64_t d = 0; d < Di; ++d) {
          const float x = hal::load_as_f32(a.ki.dtype, ki, static_cast<size_t>(t * Di + d));
          hal::store_from_f32(a.ki_cache.dtype, a.ki_cache.data<uint8_t>(), static_cast<size_t>(dst_row + d),
                              fp8 && with_scale ? x / scale : x);
        }
        if (with_scale) a.ki_scale.data<float>()[page * Bs + slot] = scale;
      },
      16);
}

}  // namespace msa::cpu
