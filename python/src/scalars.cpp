#include "python/src/scalars.h"

#include <cmath>
#include <limits>

#include "hal/error.h"

namespace msa::python {

int to_int(const std::string& op, const char* arg, int64_t v) {
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    throw_arg_error(op, arg, std::to_string(v) + " does not fit a 32-bit int");
  return static_cast<int>(v);
}

float to_float(const std::string& op, const char* arg, double v) {
  const auto f = static_cast<float>(v);
  // A value that float cannot hold (overflow to inf, or a nonzero value flushed to 0)
  // would silently become another parameter (0 is "the default scale").
  if (std::isfinite(v) && (!std::isfinite(f) || (v != 0.0 && f == 0.0f)))
    throw_arg_error(op, arg, std::to_string(v) + " is not representable as a 32-bit float");
  return f;
}

ops::SelectionMode to_mode(const std::string& op, const std::string& name) {
  if (name == "per_kv_head") return ops::SelectionMode::per_kv_head;
  if (name == "shared") return ops::SelectionMode::shared;
  throw_arg_error(op, "mode", "'" + name + "' is not a selection mode (per_kv_head or shared)");
}

ops::Pool to_pool(const std::string& op, const std::string& name) {
  if (name == "max") return ops::Pool::max;
  if (name == "lse") return ops::Pool::lse;
  throw_arg_error(op, "pool", "'" + name + "' is not a pooling (max or lse)");
}

ops::NormKind to_norm_kind(const std::string& op, const std::string& name) {
  if (name == "gemma") return ops::NormKind::gemma;
  if (name == "plain") return ops::NormKind::plain;
  throw_arg_error(op, "kind", "'" + name + "' is not a norm kind (gemma or plain)");
}

}  // namespace msa::python
