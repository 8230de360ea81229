// CUDA-only: y = x W^T (+ bias) through cuBLAS (cublas.cu), for the calls choose_matmul
// routes here (f32 / f16 / bf16, sizes that fit an int).
#pragma once
#include "backends/cuda/stream.h"
#include "ops/args.h"

namespace msa::cuda {

void cublas_matmul(Stream& st, const ops::MatmulArgs& a);

}  // namespace msa::cuda
