// Host-side argument checks shared by the op functions. Every failure throws msa::Error
// "<op>: argument '<name>': <what>".
#pragma once
#include <initializer_list>
#include <string>

#include "hal/device.h"
#include "hal/dtype.h"
#include "hal/op_id.h"
#include "hal/tensor.h"

// Checks `cond` with Checker `checker`; the message (the arguments after `arg`) is built
// only when the check fails, so passing checks cost no string formatting per call.
#define MSA_REQUIRE(checker, cond, arg, ...)         \
  do {                                               \
    if (!(cond)) (checker).fail((arg), __VA_ARGS__); \
  } while (0)

namespace msa::ops::detail {

class Checker {
 public:
  Checker(hal::Device& device, hal::OpId op) : device_(device), op_(hal::op_name(op)) {}

  // Throws "<op>: argument '<arg>': <what>".
  [[noreturn]] void fail(const std::string& arg, const std::string& what) const;
  // Prefer MSA_REQUIRE, which builds the message only on failure.
  void require(bool cond, const std::string& arg, const std::string& what) const {
    if (!cond) fail(arg, what);
  }
  // Present, on this device, inside its buffer, of rank `rank`.
  void tensor(const hal::Tensor& t, const std::string& arg, int rank) const;
  // As tensor(), plus one of the allowed dtypes.
  void tensor(const hal::Tensor& t, const std::string& arg, int rank, std::initializer_list<hal::DType> dtypes) const;
  // Dim `i` of `t` equals `expected` (described as `what`, e.g. "T").
  void dim(const hal::Tensor& t, const std::string& arg, int i, int64_t expected, const std::string& what) const;
  // Every dim equal to `ref`'s and the same dtype.
  void same_shape(const hal::Tensor& t, const std::string& arg, const hal::Tensor& ref,
                  const std::string& ref_arg) const;
  void same_dtype(const hal::Tensor& t, const std::string& arg, const hal::Tensor& ref,
                  const std::string& ref_arg) const;
  // Output `out` shares no bytes with input `in` (unless `allow_identical` and they are
  // the very same view).
  void no_alias(const hal::Tensor& out, const std::string& out_arg, const hal::Tensor& in, const std::string& in_arg,
                bool allow_identical = false) const;
  // Finite scalar; `positive` additionally requires > 0.
  void finite(double v, const std::string& arg, bool positive = false) const;
  // Qb is 1 or a power of two up to 128.
  void query_block_size(int Qb) const;

  hal::Device& device() const { return device_; }
  const char* op() const { return op_; }

 private:
  hal::Device& device_;
  const char* op_;
};

// Runs `args` on the device's kernel for `op` after asking its supports(); throws
// msa::Error naming the device and the reason when unsupported.
void dispatch(hal::Device& device, hal::OpId op, const void* args);
// True when the device has a kernel for `op` that supports `args` (dispatch would run it).
bool supported(hal::Device& device, hal::OpId op, const void* args);
// Runs a composite op's fused kernel when the device has one that supports and takes
// `args`; false, with nothing enqueued, when the caller must run the op's parts.
bool try_fused(hal::Device& device, hal::OpId op, const void* args);

// Validates the index data of a varlen, paged batch when it is readable on the host
// (CPU devices): cu_q, kv_len, block_table and NQ (when nq >= 0). Does nothing for
// device memory (kernels check it there).
void check_batch_on_host(const Checker& c, const hal::Tensor& cu_q, const hal::Tensor& kv_len,
                         const hal::Tensor* block_table, int64_t num_pages, int Bs, int Qb, int64_t nq, int64_t T);

}  // namespace msa::ops::detail
