// matmul on CUDA: the kernel choose_matmul picks (choose.h), launched.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/matmul/choose.h"
#include "backends/cuda/kernels/matmul/cublas.h"
#include "backends/cuda/kernels/portable/entries.h"

namespace msa::cuda {

void matmul(hal::Stream& s, const ops::MatmulArgs& a) {
  const MatmulShape sh = matmul_shape(a);
  if (sh.M == 0 || sh.N == 0) return;
  auto& st = gpu_stream(s);
  switch (choose_matmul(sh, st.props(), st.tuning())) {
    case MatmulKernel::cublas:
      cublas_matmul(st, a);
      return;
    case MatmulKernel::portable:
      matmul_portable(s, a);
      return;
  }
}

}  // namespace msa::cuda
