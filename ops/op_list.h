// The op list (hal/op_id.h) joined to the argument structs of ops/args.h: each op's
// Args type by id, and the macros that declare a backend's kernels from the list.
#pragma once
#include <string>

#include "hal/op_id.h"
#include "hal/stream.h"
#include "ops/args.h"

namespace msa::ops {

template <hal::OpId op>
struct OpTraits;
#define MSA_OP_TRAITS(name, ArgsT)   \
  template <>                        \
  struct OpTraits<hal::OpId::name> { \
    using Args = ArgsT;              \
  };
MSA_FOR_EACH_OP(MSA_OP_TRAITS)
#undef MSA_OP_TRAITS

// The argument struct of `op`: ArgsOf<hal::OpId::matmul> is MatmulArgs.
template <hal::OpId op>
using ArgsOf = typename OpTraits<op>::Args;

}  // namespace msa::ops

// X-macro callbacks for a backend's kernels.h, expanded inside the backend's namespace:
//   MSA_FOR_EACH_KERNEL_OP(MSA_DECLARE_KERNEL)  // every kernel op
//   MY_BACKEND_OPS(MSA_DECLARE_KERNEL_OF)       // a list of names only: X(matmul) ...
#define MSA_DECLARE_KERNEL(name, Args) void name(::msa::hal::Stream&, const ::msa::ops::Args&);
#define MSA_DECLARE_KERNEL_OF(name) void name(::msa::hal::Stream&, const ::msa::ops::ArgsOf<::msa::hal::OpId::name>&);
// ... and a size predicate ("" = supported, else why not) beside each kernel.
#define MSA_DECLARE_SUPPORTS(name, Args) std::string supports_##name(const ::msa::ops::Args&);
