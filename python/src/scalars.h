// Scalar arguments from Python: range-checked narrowing and enum names, each failure an
// msa::ArgError naming the parameter.
#pragma once
#include <cstdint>
#include <string>

#include "ops/args.h"

namespace msa::python {

int to_int(const std::string& op, const char* arg, int64_t v);
float to_float(const std::string& op, const char* arg, double v);
ops::SelectionMode to_mode(const std::string& op, const std::string& name);
ops::Pool to_pool(const std::string& op, const std::string& name);
ops::NormKind to_norm_kind(const std::string& op, const std::string& name);

}  // namespace msa::python
