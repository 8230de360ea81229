// The per-op runners of `msa op`: each reads its tensors (OpIo) and parameters (OpParams)
// by the contract's names, allocates the outputs and calls the op. Shared parsing helpers
// for the runner files (tools/cmd_op.cpp, tools/training_runners.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "hal/device.h"
#include "ops/args.h"
#include "tools/op_io.h"
#include "tools/op_params.h"

namespace msa::cli {

using Runner = std::function<void(hal::Device&, OpIo&, OpParams&)>;
using RunnerTable = std::map<std::string, Runner>;

// --param mode=per_kv_head|shared.
ops::SelectionMode parse_mode(const std::string& s);
// --param NQ when given, else counted from the inputs cu_q and kv_len.
int64_t resolve_nq(OpIo& io, OpParams& p, int Qb);
// Typed parameters with defaults.
int int_param(OpParams& p, const char* key, int fallback);
float float_param(OpParams& p, const char* key, double fallback);

// Adds the training ops (docs/training.md) to `table`.
void add_training_runners(RunnerTable& table);

}  // namespace msa::cli
