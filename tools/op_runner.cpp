#include "tools/op_runner.h"

#include "hal/error.h"
#include "ops/ops.h"

namespace msa::cli {

ops::SelectionMode parse_mode(const std::string& s) {
  if (s == "per_kv_head") return ops::SelectionMode::per_kv_head;
  if (s == "shared") return ops::SelectionMode::shared;
  throw Error("argument '--param mode': '" + s + "' is not per_kv_head or shared");
}

int64_t resolve_nq(OpIo& io, OpParams& p, int Qb, int64_t rows, const std::string& rows_of) {
  const int64_t counted = ops::count_query_blocks(io.host_i32("cu_q"), io.host_i32("kv_len"), Qb);
  const int64_t nq = p.has("NQ") ? p.get_int("NQ", 0) : counted;
  if (nq != counted)
    throw Error("argument '--param NQ': is " + std::to_string(nq) + " but cu_q, kv_len and Qb give " +
                std::to_string(counted) + " query blocks");
  if (nq > rows)
    throw Error("argument 'cu_q': gives " + std::to_string(nq) + " query blocks, more than the " +
                std::to_string(rows) + " rows of " + rows_of);
  return nq;
}

int int_param(OpParams& p, const char* key, int fallback) { return static_cast<int>(p.get_int(key, fallback)); }
float float_param(OpParams& p, const char* key, float fallback) { return p.get_float(key, fallback); }
float scale_param(OpParams& p, const char* key) { return p.get_nonzero_float(key); }

}  // namespace msa::cli
