// The Vulkan kernels: for every kernel op of the op list (hal/op_id.h), one host function
// recording its dispatch on the stream and its supports() predicate ("" = supported, else
// why not), both defined in <op>.cpp of this folder.
#pragma once
#include "ops/op_list.h"

namespace msa::vulkan {

MSA_FOR_EACH_KERNEL_OP(MSA_DECLARE_KERNEL)
MSA_FOR_EACH_KERNEL_OP(MSA_DECLARE_SUPPORTS)

}  // namespace msa::vulkan
