#include "hal/tensor.h"

#include <sstream>

#include "hal/error.h"

namespace msa::hal {

Tensor::Tensor(Buffer* b, DType t, std::initializer_list<int64_t> dims, size_t byte_offset)
    : buffer(b), offset(byte_offset), dtype(t) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) throw Error("tensor: rank above 4");
  for (int64_t d : dims) {
    if (d < 0) throw Error("tensor: negative dimension");
    shape[rank++] = d;
  }
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

Tensor Tensor::reshape(std::initializer_list<int64_t> dims) const {
  Tensor r(buffer, dtype, dims, offset);
  if (r.numel() != numel()) throw Error("tensor reshape: " + str() + " has a different element count");
  return r;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  if (rank < 1 || begin < 0 || end < begin || end > shape[0])
    throw Error("tensor slice_rows: rows [" + std::to_string(begin) + ", " + std::to_string(end) + ") outside " +
                str());
  Tensor r = *this;
  const int64_t row = rank == 1 ? 1 : numel() / std::max<int64_t>(shape[0], 1);
  r.offset += static_cast<size_t>(begin * row) * dtype_size(dtype);
  r.shape[0] = end - begin;
  return r;
}

std::string Tensor::str() const {
  std::ostringstream s;
  s << dtype_name(dtype) << "[";
  for (int i = 0; i < rank; ++i) s << (i ? ", " : "") << shape[i];
  s << "]";
  return s.str();
}

bool check_copy(const std::string& who, const Tensor& dst, const Tensor& src) {
  const size_t n = dst.nbytes();
  if (n != src.nbytes()) throw Error(who + ": copy: dst " + dst.str() + " and src " + src.str() + " differ in size");
  if (n == 0 || (dst.buffer == src.buffer && dst.offset == src.offset)) return false;
  if (dst.buffer == src.buffer && dst.offset < src.offset + n && src.offset < dst.offset + n)
    throw Error(who + ": copy: dst " + dst.str() + " and src " + src.str() + " overlap in one buffer (bytes " +
                std::to_string(dst.offset) + " and " + std::to_string(src.offset) + ", " + std::to_string(n) +
                " long)");
  return true;
}

}  // namespace msa::hal
