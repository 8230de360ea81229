#include "backends/vulkan/device_errors.h"

namespace msa::vulkan {

std::string describe_device_errors(uint32_t bits) {
  static const struct {
    uint32_t bit;
    const char* text;
  } kBits[] = {
      {kErrCuQ, "argument 'cu_q': not prefix sums of the query lengths (cu_q[0] != 0, decreasing, or cu_q[B] != T)"},
      {kErrKvLen, "argument 'kv_len': kv_len < q_len or kv_len > max_blocks * Bs"},
      {kErrBlockTable, "argument 'block_table': a page id of a sequence's blocks is outside [0, P)"},
      {kErrNQ, "argument 'NQ': differs from the query blocks given by cu_q, kv_len and Qb"},
      {kErrK, "argument 'k': a query block has more forced blocks than k"},
      {kErrIds, "argument 'ids': a token id is outside the table's rows"},
      {kErrItems, "argument 'items': a grid size < 1, or the items' tokens do not sum to N"},
      {kErrPlaceholders, "argument 'vis': the number of placeholder tokens differs from vis's rows"},
      {kErrLoops,
       "the Vulkan driver ended a shader's loops early (lavapipe runs at most 65535 loop iterations "
       "per shader invocation), so the result is incomplete: split the call or use another device"},
  };
  std::string s;
  for (const auto& b : kBits) {
    if ((bits & b.bit) == 0) continue;
    if (!s.empty()) s += "; ";
    s += b.text;
  }
  if (s.empty()) s = "unknown device error bits " + std::to_string(bits);
  return s;
}

}  // namespace msa::vulkan
