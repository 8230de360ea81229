#include "model/workspace.h"

namespace msa::model {

hal::Tensor Workspace::get(const std::string& slot, hal::DType dtype, std::initializer_list<int64_t> shape) {
  hal::Tensor t(nullptr, dtype, shape);
  const size_t need = t.nbytes();
  hal::BufferPtr& b = slots_[slot];
  if (!b || b->bytes() < need) {
    // Grow by at least half again, so a context that grows token by token reallocates
    // only logarithmically often.
    const size_t old = b ? b->bytes() : 0;
    const size_t want = need > old + old / 2 ? need : old + old / 2;
    b.reset();
    b = device_.alloc(want);
  }
  t.buffer = b.get();
  return t;
}

size_t Workspace::bytes() const {
  size_t n = 0;
  for (const auto& [name, b] : slots_) n += b ? b->bytes() : 0;
  return n;
}

}  // namespace msa::model
