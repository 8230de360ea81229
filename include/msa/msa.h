// The public API of msa in one include: the op functions and their argument structs
// (ops/), the devices, tensors, dtypes and errors they take (hal/), and msa::version().
//
// Include it as <msa/msa.h>. The headers it pulls in include each other as "hal/...",
// "ops/..." (their paths in the source tree); an installed msa keeps that layout under
// <prefix>/include/msa/, and msa::msa puts both <prefix>/include and <prefix>/include/msa
// on its users' include path. The model (model/) and multi-device (dist/) headers are
// installed too, for users who run whole layers: include them by name.
#pragma once

#include "hal/device.h"       // hal::Device, Stream, Buffer, KernelTable
#include "hal/dtype.h"        // hal::DType and its conversions
#include "hal/error.h"        // msa::Error, the one exception type
#include "hal/host_tensor.h"  // hal::HostTensor, to_device / to_host
#include "hal/nvfp4.h"        // NVFP4 key quantization for indexer_score's fp4 keys
#include "hal/registry.h"     // hal::create_device("cpu-ref", "cpu", "cuda:N", ...), list_backends
#include "hal/tensor.h"       // hal::Tensor, the view every op argument is
#include "hal/version.h"      // msa::version()
#include "ops/args.h"         // the argument struct of each op
#include "ops/ops.h"          // the op functions
