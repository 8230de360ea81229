// The softmax-attention core shared by dense_attention, sparse_block_attention and
// patch_attention_3d: gather the attended K/V rows of one head, then compute
// softmax(scale * q.k) @ v and its log-sum-exp in double for a group of query rows that
// see the same rows (the G query heads of one KV head at one position), reading each K/V
// row once per group.
//
// Precision (docs/spec.md, "Data types"): everything is double; the reference does NOT
// round the probabilities to the input dtype before P @ V (a backend may). The only
// rounding is the final store of `out` in its dtype (see store() in common.h).
#pragma once
#include <cstdint>
#include <vector>

#include "hal/tensor.h"

namespace msa::cpu_ref {

// K and V rows of one head over a set of tokens. Kept as f32, which holds every input
// dtype (f32, bf16, f16) exactly; products and sums are formed in double.
struct KvRows {
  int64_t D = 0;
  std::vector<int64_t> pos;           // logical position of each row (for the causal mask)
  std::vector<float> k, v;            // [rows][D]
  std::vector<int64_t> k_off, v_off;  // element offset of each row in its K / V source

  int64_t rows() const { return static_cast<int64_t>(pos.size()); }
  void clear() {
    pos.clear();
    k_off.clear();
    v_off.clear();
    k.clear();
    v.clear();
  }
  // Appends the rows at element offsets k_off / v_off (D contiguous elements each).
  void append(const hal::Tensor& k_src, int64_t k_off, const hal::Tensor& v_src, int64_t v_off, int64_t position);
  // Appends tokens [c*Bs, min((c+1)*Bs, kv_len)) of logical block c, KV head g, from
  // page `page` of k_cache / v_cache [P][Hkv][Bs][D]. Slots at or past kv_len are never read.
  void append_block(const hal::Tensor& k_cache, const hal::Tensor& v_cache, int64_t page, int64_t g, int64_t c,
                    int64_t kv_len);
};

// For each of the nq query rows q[i*D .. i*D+D): out row i = softmax(scale * q.k_s) @ v_s
// over the rows s with pos <= limit, and lse[i] = the natural-log softmax denominator
// (scale included). An empty set gives out = 0 and lse = -inf; a non-finite logit (NaN,
// or past float range) or value in the set gives NaN in the row's out and lse
// (docs/spec.md, "Non-finite inputs"). `scratch` is reused.
void attend_rows(const double* q, int64_t nq, const KvRows& kv, int64_t limit, double scale, double* out, double* lse,
                 std::vector<double>& scratch);

// Buffers reused across attend_heads calls.
struct AttendScratch {
  std::vector<double> q, out, lse, logits;
};

// Query heads h0 .. h0+nh-1 of token t (q, out [T][H][D], lse [T][H] f32) attend to `kv`
// rows with pos <= limit: loads the queries, runs attend_rows, stores out and lse.
void attend_heads(const hal::Tensor& q, int64_t t, int64_t h0, int64_t nh, const KvRows& kv, int64_t limit,
                  double scale, const hal::Tensor& out, const hal::Tensor& lse, AttendScratch& ws);

// Loads n elements from element offset `off` of a float tensor into doubles.
void load_row(const hal::Tensor& t, int64_t off, int64_t n, double* dst);

// Writes n consecutive output elements from element offset `off`, rounded to out's dtype.
void store_row(const hal::Tensor& out, int64_t off, const double* src, int64_t n);

}  // namespace msa::cpu_ref
