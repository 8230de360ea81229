// matmul's chooser (choose.h): cuBLAS on the native tier for f32 / f16 / bf16 with every
// size an int (its API) and K > 0 (an empty sum is the portable kernel's bias or zero).
#include "backends/cuda/kernels/matmul/choose.h"

#include <climits>

namespace msa::cuda {

const char* kernel_name(MatmulKernel k) { return k == MatmulKernel::cublas ? "cublas" : "portable"; }

MatmulShape matmul_shape(const ops::MatmulArgs& a) {
  return MatmulShape{a.x.dtype, a.x.dim(0), a.w.dim(0), a.x.dim(1)};
}

MatmulKernel choose_matmul(const MatmulShape& s, const DeviceProps&, const Tuning& t) {
  const bool type_ok = s.dtype == hal::DType::f32 || s.dtype == hal::DType::f16 || s.dtype == hal::DType::bf16;
  const bool ints = s.M <= INT32_MAX && s.N <= INT32_MAX && s.K <= INT32_MAX;
  return t.native() && s.K > 0 && type_ok && ints ? MatmulKernel::cublas : MatmulKernel::portable;
}

}  // namespace msa::cuda
