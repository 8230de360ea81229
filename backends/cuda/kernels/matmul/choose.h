// matmul's kernels on CUDA and the one function that picks between them (plain C++:
// tested without a GPU in tests/cuda_choose). entry.cu launches what it picks.
#pragma once
#include <cstdint>

#include "backends/cuda/device_props.h"
#include "backends/cuda/tuning.h"
#include "hal/dtype.h"
#include "ops/args.h"

namespace msa::cuda {

enum class MatmulKernel {
  portable,  // shared-memory tiled FMA product (portable/matmul.cu, also HIP's)
  cublas,    // cublasGemmEx (cublas.cu)
};
const char* kernel_name(MatmulKernel k);

struct MatmulShape {
  hal::DType dtype = hal::DType::f32;
  int64_t M = 0, N = 0, K = 0;  // y [M][N] = x [M][K] w [N][K]^T
};
MatmulShape matmul_shape(const ops::MatmulArgs& a);

MatmulKernel choose_matmul(const MatmulShape& s, const DeviceProps& pr, const Tuning& t);

}  // namespace msa::cuda
