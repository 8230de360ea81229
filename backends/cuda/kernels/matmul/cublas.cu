// CUDA-only matmul through cuBLAS (kept out of the portable kernels: Debian's HIP has no
// hipBLAS). y[M][N] = x[M][K] w[N][K]^T is, column-major, y^T = w * x^T: cublasGemmEx
// with op(A) = T on w. f32 uses CUBLAS_COMPUTE_32F_PEDANTIC (no TF32); bf16/f16 accumulate
// in f32. A bias is broadcast into y first and added with beta = 1 (one rounding).
#include <cublas_v2.h>

#include <memory>
#include <string>

#include "backends/cuda/kernels/matmul/cublas.h"
#include "backends/cuda/kernels/portable/launch.cuh"

namespace msa::cuda {
namespace {

constexpr size_t kCublasWorkspace = 32u << 20;

struct Blas {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
  ~Blas() {
    if (handle != nullptr) cublasDestroy(handle);
    if (workspace != nullptr) cudaFree(workspace);
  }
};

void check_blas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuda: ") + what + " failed: " + cublasGetStatusString(st) + " (status " +
                std::to_string(static_cast<int>(st)) + ")");
}

// The stream's cuBLAS handle with a fixed workspace (graph-capturable), created once.
Blas& blas_of(Stream& st) {
  auto& slot = st.extension(0);
  if (!slot) {
    auto b = std::make_shared<Blas>();
    check_blas(cublasCreate(&b->handle), "cublasCreate");
    check_blas(cublasSetStream(b->handle, st.native()), "cublasSetStream");
    check_blas(cublasSetMathMode(b->handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    MSA_CUDA_CHECK(cudaMalloc(&b->workspace, kCublasWorkspace));
    check_blas(cublasSetWorkspace(b->handle, b->workspace, kCublasWorkspace), "cublasSetWorkspace");
    slot = b;
  }
  return *static_cast<Blas*>(slot.get());
}

template <typename U>
__global__ void broadcast_bias(const U* __restrict__ bias, U* __restrict__ y, int64_t M, int64_t N) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < M * N; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = bias[i % N];
}

}  // namespace

void cublas_matmul(Stream& st, const ops::MatmulArgs& a) {
  const int64_t M = a.x.dim(0), K = a.x.dim(1), N = a.w.dim(0);
  cudaDataType_t type;
  cublasComputeType_t compute;
  switch (a.x.dtype) {
    case hal::DType::f32:
      type = CUDA_R_32F;
      compute = CUBLAS_COMPUTE_32F_PEDANTIC;
      break;
    case hal::DType::f16:
      type = CUDA_R_16F;
      compute = CUBLAS_COMPUTE_32F;
      break;
    case hal::DType::bf16:
      type = CUDA_R_16BF;
      compute = CUBLAS_COMPUTE_32F;
      break;
    default:
      throw Error("cuda: matmul: cuBLAS was chosen for dtype " + std::string(hal::dtype_name(a.x.dtype)));
  }
  Blas& b = blas_of(st);
  float beta = 0.0f;
  if (a.bias.present()) {
    beta = 1.0f;
    if (a.x.dtype == hal::DType::f32)
      broadcast_bias<float>
          <<<grid_for(M * N, 256, st.props()), 256, 0, st.native()>>>(a.bias.data<float>(), a.y.data<float>(), M, N);
    else
      broadcast_bias<uint16_t><<<grid_for(M * N, 256, st.props()), 256, 0, st.native()>>>(a.bias.data<uint16_t>(),
                                                                                          a.y.data<uint16_t>(), M, N);
    MSA_CUDA_CHECK_LAUNCH();
  }
  const float alpha = 1.0f;
  check_blas(
      cublasGemmEx(b.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K),
                   &alpha, a.w.data<void>(), type, static_cast<int>(K), a.x.data<void>(), type, static_cast<int>(K),
                   &beta, a.y.data<void>(), type, static_cast<int>(N), compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

}  // namespace msa::cuda
