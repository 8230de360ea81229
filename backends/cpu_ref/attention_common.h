// The softmax-attention core shared by dense_attention, sparse_block_attention and
// patch_attention_3d: gather the attended K/V rows of one head into doubles, then one
// query row at a time compute softmax(scale * q.k) @ v and its log-sum-exp in double.
//
// Precision (docs/spec.md, "Data types"): everything is double; the reference does NOT
// round the probabilities to the input dtype before P @ V (a backend may). The only
// rounding is the final store of `out` in its dtype (see store() in common.h).
#pragma once
#include <cstdint>
#include <vector>

#include "hal/tensor.h"

namespace msa::cpu_ref {

// K and V rows of one head over a set of tokens, converted to double.
struct KvRows {
  int64_t D = 0;
  std::vector<int64_t> pos;  // logical position of each row (for the causal mask)
  std::vector<double> k, v;  // [rows][D]

  int64_t rows() const { return static_cast<int64_t>(pos.size()); }
  void clear() {
    pos.clear();
    k.clear();
    v.clear();
  }
  // Appends the rows at element offsets k_off / v_off (D contiguous elements each).
  void append(const hal::Tensor& k_src, int64_t k_off, const hal::Tensor& v_src, int64_t v_off,
              int64_t position);
  // Appends tokens [c*Bs, min((c+1)*Bs, kv_len)) of logical block c, KV head g, from
  // page `page` of k_cache / v_cache [P][Hkv][Bs][D]. Slots at or past kv_len are never read.
  void append_block(const hal::Tensor& k_cache, const hal::Tensor& v_cache, int64_t page,
                    int64_t g, int64_t c, int64_t kv_len);
};

// out[0..D) = softmax(scale * q.k_s) @ v_s over the rows s with pos <= limit; returns the
// natural-log softmax denominator (scale included). An empty set gives out = 0 and -inf.
// `scratch` is reused between calls.
double attend_row(const double* q, const KvRows& kv, int64_t limit, double scale, double* out,
                  std::vector<double>& scratch);

// Writes one output row (D elements from element offset `off`) and its lse.
void store_row(const hal::Tensor& out, int64_t off, const double* row, int64_t D,
               const hal::Tensor& lse, int64_t lse_index, double lse_value);

// Loads D elements from element offset `off` of a float tensor into doubles.
void load_row(const hal::Tensor& t, int64_t off, int64_t D, double* dst);

}  // namespace msa::cpu_ref
