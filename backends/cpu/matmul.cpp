// matmul (y = x W^T + bias) on Highway + oneTBB. Tasks are fixed (48-row x 128-column)
// output blocks. Inside a task, K is walked in chunks of 512: the x rows of the chunk are
// converted to f32 once and every (MR rows x NR columns) register block runs dot
// products along K with MR*NR vector accumulators (W converted on load, no packing or
// transposes), reduced once per chunk. Fixed order everywhere: deterministic.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/matmul.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>

#include "backends/cpu/convert-inl.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/scratch.h"
#include "hwy/highway.h"
#include "ops/args.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

constexpr size_t kMatM = 48, kMatN = 128, kMatK = 512;
constexpr int kMR = kVecRegs == 32 ? 6 : 2;
constexpr int kNR = 4;

// acc[m][n] += sum_k x[m][k] * w[n][k] for m < MR, n < NR over kc elements.
template <int MR, int NR, typename T>
HWY_INLINE void DotBlock(const float* HWY_RESTRICT x, size_t ldx, const T* HWY_RESTRICT w, size_t ldw, size_t kc,
                         float* HWY_RESTRICT acc, size_t lda) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const size_t kv = kc / L * L;
  VF a[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NR; ++n) a[m][n] = hn::Zero(df);
  for (size_t k = 0; k < kv; k += L) {
    VF wv[NR];
    for (int n = 0; n < NR; ++n) wv[n] = LoadF32(df, w + n * ldw + k);
    for (int m = 0; m < MR; ++m) {
      const VF xv = hn::LoadU(df, x + m * ldx + k);
      for (int n = 0; n < NR; ++n) a[m][n] = hn::MulAdd(xv, wv[n], a[m][n]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NR; ++n) {
      float s = hn::GetLane(hn::SumOfLanes(df, a[m][n]));
      for (size_t k = kv; k < kc; ++k) s += x[m * ldx + k] * ToF32(w[n * ldw + k]);
      acc[m * lda + n] += s;
    }
}

template <typename T>
void MatmulT(const ops::MatmulArgs& a) {
  const size_t M = static_cast<size_t>(a.x.dim(0)), K = static_cast<size_t>(a.x.dim(1));
  const size_t N = static_cast<size_t>(a.w.dim(0));
  const T* x = a.x.data<const T>();
  const T* w = a.w.data<const T>();
  const T* bias = a.bias.present() ? a.bias.data<const T>() : nullptr;
  T* y = a.y.data<T>();
  const size_t mblocks = (M + kMatM - 1) / kMatM, nblocks = (N + kMatN - 1) / kMatN;
  parallel_for(static_cast<int64_t>(mblocks * nblocks), [&](int64_t task) {
    const size_t m0 = static_cast<size_t>(task) / nblocks * kMatM, n0 = static_cast<size_t>(task) % nblocks * kMatN;
    const size_t mc = std::min(kMatM, M - m0), nc = std::min(kMatN, N - n0);
    float* xs = scratch_floats(0, kMatM * kMatK);
    float* acc = scratch_floats(1, kMatM * kMatN);
    std::fill(acc, acc + mc * kMatN, 0.0f);
    for (size_t k0 = 0; k0 < K; k0 += kMatK) {
      const size_t kc = std::min(kMatK, K - k0);
      ConvertRows(x + m0 * K + k0, K, mc, kc, nullptr, xs);
      for (size_t n = 0; n < nc; n += kNR) {
        const T* wb = w + (n0 + n) * K + k0;
        const bool full_n = n + kNR <= nc;
        size_t m = 0;
        for (; m + kMR <= mc; m += kMR) {
          if (full_n)
            DotBlock<kMR, kNR>(xs + m * kc, kc, wb, K, kc, acc + m * kMatN + n, kMatN);
          else
            for (size_t j = n; j < nc; ++j)
              DotBlock<kMR, 1>(xs + m * kc, kc, wb + (j - n) * K, K, kc, acc + m * kMatN + j, kMatN);
        }
        for (; m < mc; ++m) {
          if (full_n)
            DotBlock<1, kNR>(xs + m * kc, kc, wb, K, kc, acc + m * kMatN + n, kMatN);
          else
            for (size_t j = n; j < nc; ++j)
              DotBlock<1, 1>(xs + m * kc, kc, wb + (j - n) * K, K, kc, acc + m * kMatN + j, kMatN);
        }
      }
    }
    for (size_t m = 0; m < mc; ++m)
      for (size_t n = 0; n < nc; ++n) {
        float v = acc[m * kMatN + n];
        if (bias != nullptr) v += ToF32(bias[n0 + n]);
        FromF32(v, y + (m0 + m) * N + n0 + n);
      }
  });
}

void MatmulImpl(const ops::MatmulArgs& a) {
  switch (a.x.dtype) {
    case hal::DType::bf16:
      MatmulT<hwy::bfloat16_t>(a);
      break;
    case hal::DType::f16:
      MatmulT<hwy::float16_t>(a);
      break;
    default:
      MatmulT<float>(a);
      break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/kernels.h"

namespace msa::cpu {

HWY_EXPORT(MatmulImpl);

void matmul(hal::Stream&, const ops::MatmulArgs& a) { HWY_DYNAMIC_DISPATCH(MatmulImpl)(a); }

}  // namespace msa::cpu
#endif  // HWY_ONCE
