// Tensor factory for the op fuzzer: builds small host-device tensors from fuzz bytes and,
// when the input says so, damages them the ways a careless caller could (wrong dtype,
// wrong or negative or huge dims, wrong rank, absent, buffer too small, offset past the
// buffer or misaligned, aliasing another tensor). Every op must answer each with
// msa::Error or a correct result.
#pragma once
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "hal/device.h"
#include "hal/dtype.h"
#include "hal/tensor.h"

namespace msa_fuzz {

using msa::hal::DType;
using msa::hal::Tensor;

// Largest element count the harness allocates for one tensor (keeps each run fast).
inline constexpr int64_t kMaxElems = 1 << 14;

class TensorMaker {
 public:
  TensorMaker(FuzzedDataProvider& fdp, msa::hal::Device& dev, uint32_t seed) : fdp_(fdp), dev_(dev), rng_(seed) {}

  std::mt19937& rng() { return rng_; }
  // True once any tensor was damaged: the op may then only fail or succeed, results are
  // not compared with expectations.
  bool damaged() const { return damaged_; }

  // A tensor of this dtype and shape holding `bytes` (its natural contents, resized to
  // the tensor), possibly damaged as the fuzz input decides.
  Tensor make(DType dt, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    const uint8_t m = fdp_.ConsumeIntegral<uint8_t>();
    const int kind = m >= 232 ? (m - 232) % 10 : -1;  // ~9% of tensors are damaged
    if (kind >= 0) damaged_ = true;
    DType real_dt = dt;
    std::vector<int64_t> real_shape = shape;
    switch (kind) {
      case 0:  // another dtype
        real_dt = static_cast<DType>(fdp_.ConsumeIntegralInRange<int>(0, msa::hal::kDTypeCount - 1));
        break;
      case 1:  // one dim off by one, or zero
        if (!real_shape.empty()) {
          auto& d = real_shape[fdp_.ConsumeIntegralInRange<size_t>(0, real_shape.size() - 1)];
          d = std::max<int64_t>(0, d + fdp_.ConsumeIntegralInRange<int>(-1, 1));
        }
        break;
      case 2:  // rank one lower or higher
        if (!real_shape.empty() && fdp_.ConsumeBool())
          real_shape.pop_back();
        else if (real_shape.size() < msa::hal::kMaxRank)
          real_shape.push_back(1);
        break;
      case 3:
        return Tensor{};  // absent
      default:
        break;
    }
    const int64_t n = numel_capped(real_shape);
    const size_t esize = msa::hal::dtype_size(real_dt);
    size_t nbytes = static_cast<size_t>(n) * esize;
    size_t offset = 0, alloc_bytes = nbytes;
    if (kind == 4 && nbytes > 0) alloc_bytes = nbytes - fdp_.ConsumeIntegralInRange<size_t>(1, nbytes);
    if (kind == 5) offset = alloc_bytes + fdp_.ConsumeIntegralInRange<size_t>(0, 64);
    if (kind == 6) {
      offset = fdp_.ConsumeIntegralInRange<size_t>(1, esize > 1 ? esize - 1 : 1);
      alloc_bytes += offset;
    }
    Tensor t;
    if (kind == 7 && !buffers_.empty()) {  // alias an earlier tensor's buffer
      t.buffer = buffers_[fdp_.ConsumeIntegralInRange<size_t>(0, buffers_.size() - 1)].get();
    } else {
      buffers_.push_back(dev_.alloc(alloc_bytes));
      t.buffer = buffers_.back().get();
      bytes.resize(alloc_bytes, 0);
      if (alloc_bytes > 0) std::memcpy(t.buffer->handle(), bytes.data(), alloc_bytes);
    }
    t.offset = offset;
    t.dtype = real_dt;
    t.rank = static_cast<int>(real_shape.size());
    for (int i = 0; i < t.rank; ++i) t.shape[i] = real_shape[i];
    if (kind == 8 && t.rank > 0) {  // a dim no real tensor has
      static constexpr int64_t kOdd[] = {-1,
                                         -3,
                                         int64_t{1} << 31,
                                         int64_t{1} << 40,
                                         std::numeric_limits<int64_t>::max(),
                                         std::numeric_limits<int64_t>::min()};
      t.shape[fdp_.ConsumeIntegralInRange<int>(0, t.rank - 1)] =
          kOdd[fdp_.ConsumeIntegralInRange<size_t>(0, std::size(kOdd) - 1)];
    }
    if (kind == 9) t.offset = std::numeric_limits<size_t>::max() - fdp_.ConsumeIntegralInRange<size_t>(0, 8);
    return t;
  }

  // Float tensor of random values in [-2, 2] rounded to dt.
  Tensor floats(DType dt, std::vector<int64_t> shape) { return make(dt, shape, random_bytes(dt, numel_capped(shape))); }
  Tensor zeros(DType dt, std::vector<int64_t> shape) {
    return make(dt, shape, std::vector<uint8_t>(static_cast<size_t>(numel_capped(shape)) * msa::hal::dtype_size(dt)));
  }
  Tensor ints(std::vector<int64_t> shape, const std::vector<int32_t>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return make(DType::i32, shape, std::move(b));
  }

  std::vector<uint8_t> random_bytes(DType dt, int64_t n) {
    std::vector<uint8_t> b(static_cast<size_t>(n) * msa::hal::dtype_size(dt));
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (int64_t i = 0; i < n; ++i) msa::hal::store_from_f32(dt, b.data(), static_cast<size_t>(i), u(rng_));
    return b;
  }

  static int64_t numel_capped(const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (int64_t d : s) n = std::min<int64_t>(n * std::max<int64_t>(d, 0), kMaxElems);
    return n;
  }

 private:
  FuzzedDataProvider& fdp_;
  msa::hal::Device& dev_;
  std::mt19937 rng_;
  std::vector<msa::hal::BufferPtr> buffers_;
  bool damaged_ = false;
};

}  // namespace msa_fuzz
