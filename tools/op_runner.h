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
// NQ: --param NQ, else counted from cu_q, kv_len and Qb. Output rows are sized from it
// before the op runs, so it is checked first: it must be what cu_q, kv_len and Qb give
// (the op's own rule) and at most `rows`, the rows of the input it indexes (`rows_of`).
int64_t resolve_nq(OpIo& io, OpParams& p, int Qb, int64_t rows, const std::string& rows_of);
// Typed parameters with defaults (floats that do not survive the conversion are errors).
int int_param(OpParams& p, const char* key, int fallback);
float float_param(OpParams& p, const char* key, float fallback);
// A scale: absent is the op's default (0 in ops::), a given value is never that sentinel.
float scale_param(OpParams& p, const char* key);

// Adds the training ops (docs/training.md) to `table`.
void add_training_runners(RunnerTable& table);

}  // namespace msa::cli
