#include "ops/checks.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "hal/error.h"
#include "ops/ops.h"

namespace msa::ops::detail {

void Checker::fail(const std::string& arg, const std::string& what) const { throw_arg_error(op_, arg, what); }

void Checker::tensor(const hal::Tensor& t, const std::string& arg, int rank) const {
  MSA_REQUIRE(*this, t.present(), arg, "is required but absent");
  MSA_REQUIRE(*this, &t.buffer->device() == &device_, arg,
              "lives on device " + t.buffer->device().name() + ", not on " + device_.name());
  MSA_REQUIRE(*this, t.rank == rank, arg, "must have rank " + std::to_string(rank) + ", got " + t.str());
  // Dims are public fields: reject negative ones and sizes whose byte count overflows
  // before nbytes() is computed; then an unaligned offset (a kernel would load misaligned).
  int64_t n = 1;
  for (int i = 0; i < t.rank; ++i)
    MSA_REQUIRE(
        *this,
        t.shape[i] >= 0 && !__builtin_mul_overflow(n, std::max<int64_t>(t.shape[i], 1), &n) && n <= INT64_MAX / 8, arg,
        t.str() + " has a negative dim or too many elements");
  MSA_REQUIRE(*this, t.offset % hal::dtype_size(t.dtype) == 0, arg,
              "byte offset " + std::to_string(t.offset) + " is not a multiple of the element size");
  MSA_REQUIRE(*this, t.offset <= t.buffer->bytes() && t.nbytes() <= t.buffer->bytes() - t.offset, arg,
              t.str() + " at byte offset " + std::to_string(t.offset) + " extends past its buffer of " +
                  std::to_string(t.buffer->bytes()) + " bytes");
}

void Checker::tensor(const hal::Tensor& t, const std::string& arg, int rank,
                     std::initializer_list<hal::DType> dtypes) const {
  tensor(t, arg, rank);
  std::string names;
  for (hal::DType d : dtypes) {
    if (d == t.dtype) return;
    names += (names.empty() ? "" : ", ") + std::string(hal::dtype_name(d));
  }
  fail(arg, "dtype " + std::string(hal::dtype_name(t.dtype)) + " not allowed (expected " + names + ")");
}

void Checker::dim(const hal::Tensor& t, const std::string& arg, int i, int64_t expected,
                  const std::string& what) const {
  MSA_REQUIRE(*this, t.shape[i] == expected, arg,
              "dim " + std::to_string(i) + " of " + t.str() + " must be " + what + " = " + std::to_string(expected));
}

void Checker::same_shape(const hal::Tensor& t, const std::string& arg, const hal::Tensor& ref,
                         const std::string& ref_arg) const {
  bool same = t.rank == ref.rank;
  for (int i = 0; same && i < t.rank; ++i) same = t.shape[i] == ref.shape[i];
  MSA_REQUIRE(*this, same, arg, "shape " + t.str() + " must equal the shape of '" + ref_arg + "' " + ref.str());
  same_dtype(t, arg, ref, ref_arg);
}

void Checker::same_dtype(const hal::Tensor& t, const std::string& arg, const hal::Tensor& ref,
                         const std::string& ref_arg) const {
  MSA_REQUIRE(*this, t.dtype == ref.dtype, arg,
              std::string("dtype ") + hal::dtype_name(t.dtype) + " must equal the dtype of '" + ref_arg + "' (" +
                  hal::dtype_name(ref.dtype) + ")");
}

void Checker::no_alias(const hal::Tensor& out, const std::string& out_arg, const hal::Tensor& in,
                       const std::string& in_arg, bool allow_identical) const {
  if (!out.present() || !in.present() || out.buffer != in.buffer) return;
  if (out.nbytes() == 0 || in.nbytes() == 0) return;
  if (allow_identical && out.offset == in.offset && out.nbytes() == in.nbytes()) return;
  const bool overlap = out.offset < in.offset + in.nbytes() && in.offset < out.offset + out.nbytes();
  MSA_REQUIRE(*this, !overlap, out_arg, "output overlaps input '" + in_arg + "' (outputs must not alias inputs)");
}

void Checker::finite(double v, const std::string& arg, bool positive) const {
  MSA_REQUIRE(*this, std::isfinite(v), arg, "must be finite");
  if (positive) MSA_REQUIRE(*this, v > 0, arg, "must be > 0, got " + std::to_string(v));
}

void Checker::query_block_size(int Qb) const {
  MSA_REQUIRE(*this, Qb >= 1 && Qb <= 128 && (Qb & (Qb - 1)) == 0, "Qb",
              "must be 1 or a power of two up to 128, got " + std::to_string(Qb));
}

void dispatch(hal::Device& device, hal::OpId op, const void* args) {
  const hal::KernelEntry& e = device.kernels()[op];
  if (!e.run) throw Error(std::string(hal::op_name(op)) + ": not supported on " + device.name() + ": " + e.reason);
  if (e.supports) {
    const std::string why = e.supports(args);
    if (!why.empty()) throw Error(std::string(hal::op_name(op)) + ": not supported on " + device.name() + ": " + why);
  }
  e.run(device.stream(), args);
}

bool supported(hal::Device& device, hal::OpId op, const void* args) {
  const hal::KernelEntry& e = device.kernels()[op];
  return e.run && (!e.supports || e.supports(args).empty());
}

bool try_fused(hal::Device& device, hal::OpId op, const void* args) {
  return supported(device, op, args) && device.kernels()[op].run(device.stream(), args);
}

namespace {
std::vector<int32_t> read_i32(hal::Device& dev, const hal::Tensor& t) {
  std::vector<int32_t> v(static_cast<size_t>(t.numel()));
  if (!v.empty()) dev.stream().download(v.data(), t);
  return v;
}
}  // namespace

void check_batch_on_host(const Checker& c, const hal::Tensor& cu_q, const hal::Tensor& kv_len,
                         const hal::Tensor* block_table, int64_t num_pages, int Bs, int Qb, int64_t nq, int64_t T) {
  if (!c.device().host_accessible()) return;
  const auto cu = read_i32(c.device(), cu_q);
  const auto len = read_i32(c.device(), kv_len);
  const size_t B = len.size();
  MSA_REQUIRE(c, cu.size() == B + 1, "cu_q", "must have B+1 entries");
  MSA_REQUIRE(c, cu[0] == 0, "cu_q", "cu_q[0] must be 0, got " + std::to_string(cu[0]));
  MSA_REQUIRE(
      c, cu[B] == T, "cu_q",
      "cu_q[B] must equal the number of query tokens T = " + std::to_string(T) + ", got " + std::to_string(cu[B]));
  const int64_t max_blocks = block_table ? block_table->shape[1] : 0;
  std::vector<int32_t> table;
  if (block_table) table = read_i32(c.device(), *block_table);
  for (size_t b = 0; b < B; ++b) {
    const int64_t q_len = int64_t{cu[b + 1]} - cu[b];
    MSA_REQUIRE(c, q_len >= 0, "cu_q", "must be non-decreasing (sequence " + std::to_string(b) + ")");
    MSA_REQUIRE(c, len[b] >= q_len, "kv_len",
                "kv_len[" + std::to_string(b) + "] = " + std::to_string(len[b]) + " is less than the query length " +
                    std::to_string(q_len) + " (kv_len includes this step's tokens)");
    if (block_table) {
      MSA_REQUIRE(c, int64_t{len[b]} <= max_blocks * Bs, "kv_len",
                  "kv_len[" + std::to_string(b) + "] = " + std::to_string(len[b]) +
                      " exceeds max_blocks * Bs = " + std::to_string(max_blocks * Bs));
      const int64_t used = (int64_t{len[b]} + Bs - 1) / Bs;
      for (int64_t j = 0; j < used; ++j) {
        const int32_t page = table[b * max_blocks + j];
        MSA_REQUIRE(c, page >= 0 && page < num_pages, "block_table",
                    "block_table[" + std::to_string(b) + "][" + std::to_string(j) + "] = " + std::to_string(page) +
                        " is not a page id in [0, " + std::to_string(num_pages) + ")");
      }
    }
  }
  if (nq >= 0) {
    const int64_t want = count_query_blocks(cu, len, Qb);
    MSA_REQUIRE(c, nq == want, "NQ",
                "is " + std::to_string(nq) + " but cu_q, kv_len and Qb give " + std::to_string(want) + " query blocks");
  }
}

}  // namespace msa::ops::detail
