// kv_append: writes this call's keys, values and (optionally) indexer keys into their
// cache slots (docs/spec.md, "Paged, block-major KV cache"). Token i of sequence b goes to
// position pos = kv_len[b] - q_len[b] + i, i.e. slot pos % Bs of page
// block_table[b][pos / Bs]. K and V have the cache dtype and are copied bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backends/cpu_ref/common.h"
#include "backends/cpu_ref/kernels.h"
#include "hal/nvfp4.h"

namespace msa::cpu_ref {

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
  const bool with_scale = with_ki && a.ki_scale.present();  // (NVFP4 keys always have scales)
  const bool fp8 = with_ki && a.ki_cache.dtype == hal::DType::fp8_e4m3;

  const size_t row_bytes = static_cast<size_t>(D) * hal::dtype_size(a.k.dtype);
  const auto* k_src = a.k.data<const uint8_t>();
  const auto* v_src = a.v.data<const uint8_t>();
  auto* k_dst = a.k_cache.data<uint8_t>();
  auto* v_dst = a.v_cache.data<uint8_t>();
  for (size_t b = 0; b < batch.seqs.size(); ++b) {
    const Sequence& s = batch.seqs[b];
    for (int64_t i = 0; i < s.q_len; ++i) {
      const int64_t t = s.q_begin + i, pos = s.pos0 + i;
      const int64_t page = page_of(a.block_table, static_cast<int64_t>(b), pos / Bs);
      const int64_t slot = pos % Bs;
      for (int64_t h = 0; h < Hkv; ++h) {
        const size_t src = static_cast<size_t>(t * Hkv + h) * row_bytes;
        const size_t dst = static_cast<size_t>((page * Hkv + h) * Bs + slot) * row_bytes;
        std::memcpy(k_dst + dst, k_src + src, row_bytes);
        std::memcpy(v_dst + dst, v_src + src, row_bytes);
      }
      if (!with_ki) continue;
      if (a.ki_cache.dtype == hal::DType::fp4_e2m1x2) {  // NVFP4: per group of 16 dims
        const int64_t row = page * Bs + slot, G = Di / hal::kNvfp4Group;
        float x[hal::kNvfp4Group];
        for (int64_t g = 0; g < G; ++g) {
          for (int i = 0; i < hal::kNvfp4Group; ++i)
            x[i] = hal::load_as_f32(a.ki.dtype, a.ki.data<const uint8_t>(),
                                    static_cast<size_t>(t * Di + g * hal::kNvfp4Group + i));
          hal::quantize_nvfp4_group(x, a.ki_cache.data<uint8_t>() + row * (Di / 2) + g * (hal::kNvfp4Group / 2),
                                    a.ki_scale.data<uint8_t>() + row * G + g);
        }
        continue;
      }
      // fp8 keys with a scale tensor: scale = amax / 448 in f32 (1 for an all-zero row),
      // stored value = x / scale rounded (saturating) to e4m3. Without a scale tensor, or
      // for bf16/f32 keys, the value is converted directly and any scale written is 1.
      float ki_scale = 1.0f;
      if (fp8 && with_scale) {
        float amax = 0.0f;
        for (int64_t d = 0; d < Di; ++d)
          amax = std::max(amax, std::fabs(hal::load_as_f32(a.ki.dtype, a.ki.data<const uint8_t>(),
                                                           static_cast<size_t>(t * Di + d))));
        if (amax > 0.0f) ki_scale = amax / 448.0f;
      }
      const int64_t dst_row = (page * Bs + slot) * Di;
      for (int64_t d = 0; d < Di; ++d) {
        const float x = hal::load_as_f32(a.ki.dtype, a.ki.data<const uint8_t>(), static_cast<size_t>(t * Di + d));
        hal::store_from_f32(a.ki_cache.dtype, a.ki_cache.data<uint8_t>(), static_cast<size_t>(dst_row + d),
                            fp8 && with_scale ? x / ki_scale : x);
      }
      if (with_scale) a.ki_scale.data<float>()[page * Bs + slot] = ki_scale;
    }
  }
}

}  // namespace msa::cpu_ref
