// CUDA-only: sparse/dense/patch attention kernels instantiated with the tensor-core core
// (attention_tc.cuh) for bf16 and f16 on the native tier (MSA_CUDA_TIER != portable).
#include "backends/cuda/kernels/cuda_only/attention_tc.cuh"
#include "backends/cuda/kernels/portable/attention_kernels.cuh"
#include "backends/cuda/kernels/portable/attention_launch.cuh"

namespace msa::cuda {
namespace {

bool tc_ok(const Stream& st, hal::DType dt) {
  return st.tuning().native() && st.props().cc_major >= 8 && (dt == hal::DType::bf16 || dt == hal::DType::f16);
}

// Runs BODY with DT bound to bf16 or f16 and DP to 64 or 128.
#define MSA_TC_DISPATCH(dt, D, ...)      \
  if ((dt) == hal::DType::bf16) {        \
    constexpr int DT = kBF16;            \
    MSA_DISPATCH_DP(D, DP, __VA_ARGS__); \
  } else {                               \
    constexpr int DT = kF16;             \
    MSA_DISPATCH_DP(D, DP, __VA_ARGS__); \
  }

}  // namespace

bool launch_tc_sparse(Stream& st, const SparseParams& p, unsigned grid, hal::DType dt) {
  if (!tc_ok(st, dt)) return false;
  MSA_TC_DISPATCH(dt, p.D, {
    constexpr int smem = TcLayout<DT, DP>::BYTES;
    allow_smem<sparse_kernel<DT, DP, TcCore>>(smem, st.props().index);
    sparse_kernel<DT, DP, TcCore><<<grid, kAttnThreads, smem, st.native()>>>(p);
  });
  MSA_CUDA_CHECK_LAUNCH();
  return true;
}

bool launch_tc_dense(Stream& st, const DenseParams& p, unsigned grid, hal::DType dt) {
  if (!tc_ok(st, dt)) return false;
  MSA_TC_DISPATCH(dt, p.D, {
    constexpr int smem = TcLayout<DT, DP>::BYTES;
    allow_smem<dense_kernel<DT, DP, TcCore>>(smem, st.props().index);
    dense_kernel<DT, DP, TcCore><<<grid, kAttnThreads, smem, st.native()>>>(p);
  });
  MSA_CUDA_CHECK_LAUNCH();
  return true;
}

bool launch_tc_patch(Stream& st, const PatchParams& p, unsigned grid, hal::DType dt) {
  if (!tc_ok(st, dt)) return false;
  MSA_TC_DISPATCH(dt, p.D, {
    constexpr int smem = TcLayout<DT, DP>::BYTES;
    allow_smem<patch_kernel<DT, DP, TcCore>>(smem, st.props().index);
    patch_kernel<DT, DP, TcCore><<<grid, kAttnThreads, smem, st.native()>>>(p);
  });
  MSA_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace msa::cuda
