// An independent f64 host implementation of the tiny model's math, written from
// docs/model-spec.md and docs/spec.md without the ops layer: the oracle of
// reference_test.cpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/video.h"
#include "model/weights.h"

namespace msa::model::reference {

using Mat = std::vector<double>;  // row-major

inline Mat get(const Weights& w, const std::string& name) {
  const auto& t = w.at(name);
  Mat m(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < m.size(); ++i) m[i] = t.get(i);
  return m;
}

// y[M][N] = x[M][K] W[N][K]^T + b
inline Mat linear(const Mat& x, const Mat& W, int64_t K, const Mat* b = nullptr) {
  const int64_t M = static_cast<int64_t>(x.size()) / K, N = static_cast<int64_t>(W.size()) / K;
  Mat y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = b ? (*b)[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) acc += x[m * K + k] * W[n * K + k];
      y[m * N + n] = acc;
    }
  return y;
}

// Gemma RMSNorm over rows of length N, in place.
inline void rms_norm(Mat& x, const Mat& w, int64_t N, double eps) {
  for (size_t r = 0; r < x.size() / N; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < N; ++i) ss += x[r * N + i] * x[r * N + i];
    const double inv = 1.0 / std::sqrt(ss / N + eps);
    for (int64_t i = 0; i < N; ++i) x[r * N + i] *= inv * (1.0 + w[i]);
  }
}

inline void layer_norm(Mat& x, const Mat& w, const Mat& b, int64_t N, double eps) {
  for (size_t r = 0; r < x.size() / N; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < N; ++i) mean += x[r * N + i];
    mean /= N;
    for (int64_t i = 0; i < N; ++i) var += (x[r * N + i] - mean) * (x[r * N + i] - mean);
    const double inv = 1.0 / std::sqrt(var / N + eps);
    for (int64_t i = 0; i < N; ++i) x[r * N + i] = (x[r * N + i] - mean) * inv * w[i] + b[i];
  }
}

// Rotates pairs (j, j + half) of one head row by angle[j].
inline void rotate(double* v, int64_t half, const std::vector<double>& angle) {
  for (int64_t j = 0; j < half; ++j) {
    const double a = v[j], b = v[j + half];
    v[j] = a * std::cos(angle[j]) - b * std::sin(angle[j]);
    v[j + half] = b * std::cos(angle[j]) + a * std::sin(angle[j]);
  }
}

// Neox RoPE on the first rd dims of every head of x [T][H][D].
inline void rope(Mat& x, int64_t H, int64_t D, int64_t rd, double theta, const std::vector<int>& pos) {
  std::vector<double> angle(static_cast<size_t>(rd / 2));
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int64_t j = 0; j < rd / 2; ++j) angle[j] = pos[t] * std::pow(theta, -2.0 * j / rd);
    for (int64_t h = 0; h < H; ++h) rotate(&x[(t * H + h) * D], rd / 2, angle);
  }
}

inline double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// softmax(scale q.k_s) @ v_s over the tokens s in `keys` of one head.
inline void attend(const double* q, const Mat& k, const Mat& v, int64_t stride, int64_t off, int64_t D,
                   const std::vector<int64_t>& keys, double* out) {
  std::vector<double> l(keys.size());
  double mx = -INFINITY;
  for (size_t i = 0; i < keys.size(); ++i) {
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += q[d] * k[keys[i] * stride + off + d];
    l[i] = s / std::sqrt(static_cast<double>(D));
    mx = std::max(mx, l[i]);
  }
  double den = 0;
  for (double& x : l) den += (x = std::exp(x - mx));
  for (int64_t d = 0; d < D; ++d) {
    double acc = 0;
    for (size_t i = 0; i < keys.size(); ++i) acc += l[i] * v[keys[i] * stride + off + d];
    out[d] = acc / den;
  }
}

// Logits [T][V] of every position of one sequence (embeddings x0 [T][H] given, so the
// caller may have scattered vision rows in).
inline Mat decoder_logits(const Weights& w, Mat x) {
  const Config& c = w.config;
  const int64_t H = c.hidden_size, T = static_cast<int64_t>(x.size()) / H, D = c.head_dim;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, G = Hq / Hkv;
  const int64_t Hi = c.sparse_num_index_heads, Di = c.sparse_index_dim, Bs = c.sparse_block_size;
  std::vector<int> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int>(t);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Mat h = x;
    rms_norm(h, get(w, p + "input_layernorm.weight"), H, c.rms_norm_eps);
    Mat q = linear(h, get(w, p + "self_attn.q_proj.weight"), H);
    Mat k = linear(h, get(w, p + "self_attn.k_proj.weight"), H);
    const Mat v = linear(h, get(w, p + "self_attn.v_proj.weight"), H);
    rms_norm(q, get(w, p + "self_attn.q_norm.weight"), D, c.rms_norm_eps);
    rms_norm(k, get(w, p + "self_attn.k_norm.weight"), D, c.rms_norm_eps);
    rope(q, Hq, D, c.rotary_dim, c.rope_theta, pos);
    rope(k, Hkv, D, c.rotary_dim, c.rope_theta, pos);
    // keys[t][g]: the tokens query t attends to through KV head g.
    std::vector<std::vector<std::vector<int64_t>>> keys(T, std::vector<std::vector<int64_t>>(Hkv));
    if (c.is_dense_layer(l)) {
      for (int64_t t = 0; t < T; ++t)
        for (int64_t g = 0; g < Hkv; ++g)
          for (int64_t s = 0; s <= t; ++s) keys[t][g].push_back(s);
    } else {
      Mat qi = linear(h, get(w, p + "self_attn.indexer.q_proj.weight"), H);
      Mat ki = linear(h, get(w, p + "self_attn.indexer.k_proj.weight"), H);
      rms_norm(qi, get(w, p + "self_attn.indexer.q_norm.weight"), Di, c.rms_norm_eps);
      rms_norm(ki, get(w, p + "self_attn.indexer.k_norm.weight"), Di, c.rms_norm_eps);
      rope(qi, Hi, Di, c.index_rotary_dim(), c.rope_theta, pos);
      rope(ki, 1, Di, c.index_rotary_dim(), c.rope_theta, pos);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t nvalid = t / Bs + 1;
        for (int64_t g = 0; g < Hi; ++g) {
          std::vector<int64_t> chosen;
          if (nvalid <= c.sparse_topk_blocks) {
            for (int64_t b = 0; b < nvalid; ++b) chosen.push_back(b);
          } else {
            // M3: max-pooled logits per block; the local block forced; ties to the lower block.
            std::vector<std::pair<double, int64_t>> sc;
            for (int64_t b = 0; b + 1 < nvalid; ++b) {
              double mx = -INFINITY;
              for (int64_t s = b * Bs; s < (b + 1) * Bs; ++s) {
                double d = 0;
                for (int64_t i = 0; i < Di; ++i) d += qi[(t * Hi + g) * Di + i] * ki[s * Di + i];
                mx = std::max(mx, d / std::sqrt(static_cast<double>(Di)));
              }
              sc.push_back({-mx, b});
            }
            std::sort(sc.begin(), sc.end());
            chosen.push_back(nvalid - 1);
            for (int64_t i = 0; i + 1 < c.sparse_topk_blocks; ++i) chosen.push_back(sc[i].second);
          }
          std::sort(chosen.begin(), chosen.end());
          for (int64_t b : chosen)
            for (int64_t s = b * Bs; s < std::min((b + 1) * Bs, t + 1); ++s) keys[t][g].push_back(s);
        }
      }
    }
    Mat attn(static_cast<size_t>(T * Hq * D));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t hq = 0; hq < Hq; ++hq)
        attend(&q[(t * Hq + hq) * D], k, v, Hkv * D, (hq / G) * D, D, keys[t][hq / G], &attn[(t * Hq + hq) * D]);
    const Mat o = linear(attn, get(w, p + "self_attn.o_proj.weight"), Hq * D);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    h = x;
    rms_norm(h, get(w, p + "post_attention_layernorm.weight"), H, c.rms_norm_eps);
    Mat gate = linear(h, get(w, p + "mlp.gate_proj.weight"), H);
    const Mat up = linear(h, get(w, p + "mlp.up_proj.weight"), H);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
    const Mat d = linear(gate, get(w, p + "mlp.down_proj.weight"), c.intermediate_size);
    for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
  }
  rms_norm(x, get(w, "model.norm.weight"), H, c.rms_norm_eps);
  return linear(x, get(w, c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"), H);
}

// Vision tokens [N/4][hidden] of one video.
inline Mat vision_tokens(const Weights& w, const VisionInput& in) {
  const VisionConfig& v = w.config.vision;
  const int64_t N = in.num_patches(), C = v.hidden_size, H = v.num_heads, Dv = v.head_dim();
  const double eps = v.layer_norm_eps;
  Mat px(static_cast<size_t>(in.patches.numel()));
  for (size_t i = 0; i < px.size(); ++i) px[i] = in.patches.get(i);
  Mat x = linear(px, get(w, "visual.patch_embed.proj.weight"), v.patch_dim());
  layer_norm(x, get(w, "visual.pre_layernorm.weight"), get(w, "visual.pre_layernorm.bias"), C, eps);
  // rope_3d: a = 2 floor(D/6) dims per axis, frequencies [t | h | w].
  const int64_t npair = Dv / 6;
  auto rope3d = [&](Mat& m) {
    std::vector<double> angle(static_cast<size_t>(3 * npair));
    for (int64_t n = 0; n < N; ++n) {
      for (int ax = 0; ax < 3; ++ax)
        for (int64_t j = 0; j < npair; ++j)
          angle[ax * npair + j] =
              in.pos[n * 3 + ax] * std::pow(static_cast<double>(v.rope_theta), -2.0 * j / (2 * npair));
      for (int64_t h = 0; h < H; ++h) rotate(&m[(n * H + h) * Dv], 3 * npair, angle);
    }
  };
  const int64_t per_t = static_cast<int64_t>(in.grid[1]) * in.grid[2];
  for (int b = 0; b < v.depth; ++b) {
    const std::string p = "visual.blocks." + std::to_string(b) + ".";
    Mat h = x;
    layer_norm(h, get(w, p + "norm1.weight"), get(w, p + "norm1.bias"), C, eps);
    const Mat qkv = linear(h, get(w, p + "attn.qkv.weight"), C, nullptr);
    const Mat bias = get(w, p + "attn.qkv.bias");
    Mat q(static_cast<size_t>(N * C)), k(q.size()), vv(q.size());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < C; ++i) {
        q[n * C + i] = qkv[n * 3 * C + i] + bias[i];
        k[n * C + i] = qkv[n * 3 * C + C + i] + bias[C + i];
        vv[n * C + i] = qkv[n * 3 * C + 2 * C + i] + bias[2 * C + i];
      }
    rope3d(q);
    rope3d(k);
    Mat o(q.size());
    for (int64_t n = 0; n < N; ++n) {
      const int64_t win = n / per_t / v.window;  // window of this patch's temporal patch
      std::vector<int64_t> keys;
      for (int64_t s = 0; s < N; ++s)
        if (s / per_t / v.window == win) keys.push_back(s);
      for (int64_t hh = 0; hh < H; ++hh)
        attend(&q[(n * H + hh) * Dv], k, vv, C, hh * Dv, Dv, keys, &o[(n * H + hh) * Dv]);
    }
    const Mat pb = get(w, p + "attn.proj.bias");
    const Mat a = linear(o, get(w, p + "attn.proj.weight"), C, &pb);
    for (size_t i = 0; i < x.size(); ++i) x[i] += a[i];
    h = x;
    layer_norm(h, get(w, p + "norm2.weight"), get(w, p + "norm2.bias"), C, eps);
    const Mat b1 = get(w, p + "mlp.fc1.bias"), b2 = get(w, p + "mlp.fc2.bias");
    Mat f = linear(h, get(w, p + "mlp.fc1.weight"), C, &b1);
    for (double& e : f) e = gelu(e);
    const Mat f2 = linear(f, get(w, p + "mlp.fc2.weight"), v.intermediate_size, &b2);
    for (size_t i = 0; i < x.size(); ++i) x[i] += f2[i];
  }
  layer_norm(x, get(w, "visual.merger.ln_q.weight"), get(w, "visual.merger.ln_q.bias"), C, eps);
  const Mat b0 = get(w, "visual.merger.mlp.0.bias"), b2 = get(w, "visual.merger.mlp.2.bias");
  Mat m = linear(x, get(w, "visual.merger.mlp.0.weight"), 4 * C, &b0);
  for (double& e : m) e = gelu(e);
  return linear(m, get(w, "visual.merger.mlp.2.weight"), 4 * C, &b2);
}

}  // namespace msa::model::reference
