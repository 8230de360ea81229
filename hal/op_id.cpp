#include "hal/op_id.h"

namespace msa::hal {

namespace {
constexpr const char* kNames[] = {
#define MSA_OP_NAME(name, Args) #name,
    MSA_FOR_EACH_OP(MSA_OP_NAME)
#undef MSA_OP_NAME
};
}  // namespace

const char* op_name(OpId op) { return kNames[static_cast<int>(op)]; }

bool parse_op(std::string_view name, OpId& op) {
  for (int i = 0; i < kOpCount; ++i) {
    if (name == kNames[i]) {
      op = static_cast<OpId>(i);
      return true;
    }
  }
  return false;
}

}  // namespace msa::hal
