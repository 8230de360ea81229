#include "tools/op_runner.h"

#include "hal/error.h"
#include "ops/ops.h"

namespace msa::cli {

ops::SelectionMode parse_mode(const std::string& s) {
  if (s == "per_kv_head") return ops::SelectionMode::per_kv_head;
  if (s == "shared") return ops::SelectionMode::shared;
  throw Error("argument '--param mode': '" + s + "' is not per_kv_head or shared");
}

int64_t resolve_nq(OpIo& io, OpParams& p, int Qb) {
  if (p.has("NQ")) return p.get_int("NQ", 0);
  return ops::count_query_blocks(io.host_i32("cu_q"), io.host_i32("kv_len"), Qb);
}

int int_param(OpParams& p, const char* key, int fallback) { return static_cast<int>(p.get_int(key, fallback)); }
float float_param(OpParams& p, const char* key, double fallback) { return static_cast<float>(p.get_float(key, fallback)); }

}  // namespace msa::cli
