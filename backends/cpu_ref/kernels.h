// One function per kernel op of the op list (hal/op_id.h), each defined in <op>.cpp of
// this folder.
#pragma once
#include "ops/op_list.h"

namespace msa::cpu_ref {

MSA_FOR_EACH_KERNEL_OP(MSA_DECLARE_KERNEL)

}  // namespace msa::cpu_ref
