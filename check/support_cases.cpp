// Cases of the supporting ops: matmul, rms_norm, layer_norm, rope, swiglu, gelu, add,
// embedding, scatter_visual, argmax.
#include "check/support_cases.h"

#include <cmath>
#include <limits>

#include "check/attn_common.h"
#include "ops/ops.h"

namespace msa::cases {
namespace {

using detail::random_input;

std::string dims(const RowParams& p) {
  return "M=" + std::to_string(p.M) + " N=" + std::to_string(p.N) + " dtype=" + hal::dtype_name(p.dtype);
}

double es(hal::DType t) { return static_cast<double>(hal::dtype_size(t)); }

// Outputs of the pointwise/row ops: the contract's attention bounds (f32 1e-10/1e-8,
// bf16/f16 5e-5/2e-4) fit them too: the reference differs only by accumulation order
// and the final rounding.
Compare row_out(hal::DType t) { return Compare::out(t); }

// Base for the cases over a RowParams.
class RowCase : public Case {
 public:
  explicit RowCase(const RowParams& p) : p_(p) {}

 protected:
  RowParams p_;
};

class MatmulCase : public RowCase {
 public:
  using RowCase::RowCase;
  hal::OpId op() const override { return hal::OpId::matmul; }
  std::string vars() const override {
    return "M=" + std::to_string(p_.M) + " N=" + std::to_string(p_.N) + " K=" + std::to_string(p_.K) +
           " dtype=" + hal::dtype_name(p_.dtype) + (p_.flag ? " bias" : "");
  }
  double flops() const override { return 2.0 * p_.M * p_.N * p_.K; }
  double bytes() const override {
    return (p_.M * p_.K + p_.N * p_.K + p_.M * p_.N + (p_.flag ? p_.N : 0)) * es(p_.dtype);
  }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    CaseData d;
    d.slots.push_back(random_input("x", p_.dtype, {p_.M, p_.K}, rng, 1.0, perf));
    d.slots.push_back(random_input("w", p_.dtype, {p_.N, p_.K}, rng, 1.0 / std::sqrt(double(p_.K)), perf));
    d.slots.push_back(p_.flag ? random_input("bias", p_.dtype, {p_.N}, rng, 1.0, perf) : Slot::none("bias"));
    d.slots.push_back(Slot::output("y", p_.dtype, {p_.M, p_.N}, row_out(p_.dtype)));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::MatmulArgs a;
    a.x = t("x");
    a.w = t("w");
    a.bias = t("bias");
    a.y = t("y");
    return make_launch(dev, op(), a, &ops::matmul);
  }
};

class RmsNormCase : public RowCase {
 public:
  using RowCase::RowCase;
  hal::OpId op() const override { return hal::OpId::rms_norm; }
  std::string vars() const override {
    return dims(p_) + (p_.kind == ops::NormKind::gemma ? " kind=gemma" : " kind=plain") + (p_.flag ? " w=f32" : "");
  }
  double flops() const override { return 4.0 * p_.M * p_.N; }
  double bytes() const override { return 2.0 * p_.M * p_.N * es(p_.dtype) + p_.N * es(w_dtype()); }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    CaseData d;
    d.slots.push_back(random_input("x", p_.dtype, {p_.M, p_.N}, rng, 3.0, perf));
    d.slots.push_back(random_input("w", w_dtype(), {p_.N}, rng, 0.5, perf));
    d.slots.push_back(Slot::output("y", p_.dtype, {p_.M, p_.N}, row_out(p_.dtype)));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::RmsNormArgs a;
    a.x = t("x");
    a.w = t("w");
    a.kind = p_.kind;
    a.y = t("y");
    return make_launch(dev, op(), a, &ops::rms_norm);
  }

 private:
  hal::DType w_dtype() const { return p_.flag ? hal::DType::f32 : p_.dtype; }
};

class LayerNormCase : public RowCase {
 public:
  using RowCase::RowCase;
  hal::OpId op() const override { return hal::OpId::layer_norm; }
  std::string vars() const override { return dims(p_) + (p_.flag ? " bias" : ""); }
  double flops() const override { return 7.0 * p_.M * p_.N; }
  double bytes() const override { return 2.0 * p_.M * p_.N * es(p_.dtype) + (p_.flag ? 2 : 1) * p_.N * es(p_.dtype); }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    CaseData d;
    // A non-zero mean per row, so a kernel that forgets to subtract it fails.
    Slot x = random_input("x", p_.dtype, {p_.M, p_.N}, rng, 2.0, perf);
    if (!x.tiled)
      for (int64_t m = 0; m < p_.M; ++m) {
        const float off = static_cast<float>(rng.normal() * 3.0);
        for (int64_t n = 0; n < p_.N; ++n)
          x.host.set(static_cast<size_t>(m * p_.N + n), x.host.get(static_cast<size_t>(m * p_.N + n)) + off);
      }
    d.slots.push_back(std::move(x));
    d.slots.push_back(random_input("w", p_.dtype, {p_.N}, rng, 1.0, perf));
    d.slots.push_back(p_.flag ? random_input("b", p_.dtype, {p_.N}, rng, 1.0, perf) : Slot::none("b"));
    d.slots.push_back(Slot::output("y", p_.dtype, {p_.M, p_.N}, row_out(p_.dtype)));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::LayerNormArgs a;
    a.x = t("x");
    a.w = t("w");
    a.b = t("b");
    a.y = t("y");
    return make_launch(dev, op(), a, &ops::layer_norm);
  }
};

// rope: x [M][H][N]; flag = in place.
class RopeCase : public RowCase {
 public:
  using RowCase::RowCase;
  hal::OpId op() const override { return hal::OpId::rope; }
  std::string vars() const override {
    return "T=" + std::to_string(p_.M) + " H=" + std::to_string(p_.H) + " D=" + std::to_string(p_.N) +
           " rotary_dim=" + std::to_string(p_.rotary_dim ? p_.rotary_dim : p_.N) +
           " theta=" + std::to_string(static_cast<int64_t>(p_.theta)) + " dtype=" + hal::dtype_name(p_.dtype) +
           (p_.flag ? " in_place" : "");
  }
  double flops() const override { return 3.0 * p_.M * p_.H * (p_.rotary_dim ? p_.rotary_dim : p_.N); }
  double bytes() const override { return 2.0 * p_.M * p_.H * p_.N * es(p_.dtype) + p_.M * 4.0; }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    CaseData d;
    Slot x = random_input("x", p_.dtype, {p_.M, p_.H, p_.N}, rng, 1.0, perf);
    hal::HostTensor pos(hal::DType::i32, {p_.M});
    // Runs of consecutive positions (like chunks of sequences) starting anywhere below 4096.
    int32_t cur = static_cast<int32_t>(rng.below(4096));
    for (int64_t i = 0; i < p_.M; ++i) {
      if (rng.chance(0.1)) cur = static_cast<int32_t>(rng.below(4096));
      pos.data<int32_t>()[i] = cur++;
    }
    const Compare cmp = p_.dtype == hal::DType::f32 ? Compare::nmse(1e-6, 1e-5) : Compare::out(p_.dtype);
    if (p_.flag) {
      x.role = Role::inout;
      x.cmp = cmp;
    }
    d.slots.push_back(std::move(x));
    d.slots.push_back(Slot::input("pos", std::move(pos)));
    if (!p_.flag) d.slots.push_back(Slot::output("y", p_.dtype, {p_.M, p_.H, p_.N}, cmp));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::RopeArgs a;
    a.x = t("x");
    a.pos = t("pos");
    a.rotary_dim = p_.rotary_dim;
    a.theta = p_.theta;
    a.y = p_.flag ? a.x : t("y");
    return make_launch(dev, op(), a, &ops::rope);
  }
};

class SwigluCase : public RowCase {
 public:
  using RowCase::RowCase;
  hal::OpId op() const override { return hal::OpId::swiglu; }
  std::string vars() const override { return dims(p_); }
  double flops() const override { return 5.0 * p_.M * p_.N; }
  double bytes() const override { return 3.0 * p_.M * p_.N * es(p_.dtype); }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    CaseData d;
    d.slots.push_back(random_input("gate", p_.dtype, {p_.M, p_.N}, rng, 3.0, perf));
    d.slots.push_back(random_input("up", p_.dtype, {p_.M, p_.N}, rng, 1.0, perf));
    d.slots.push_back(Slot::output("y", p_.dtype, {p_.M, p_.N}, row_out(p_.dtype)));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::SwigluArgs a;
    a.gate = t("gate");
    a.up = t("up");
    a.y = t("y");
    return make_launch(dev, op(), a, &ops::swiglu);
  }
};

class GeluCase : public RowCase {
 public:
  using RowCase::RowCase;
  hal::OpId op() const override { return hal::OpId::gelu; }
  std::string vars() const override { return dims(p_); }
  double flops() const override { return 8.0 * p_.M * p_.N; }
  double bytes() const override { return 2.0 * p_.M * p_.N * es(p_.dtype); }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    CaseData d;
    d.slots.push_back(random_input("x", p_.dtype, {p_.M, p_.N}, rng, 3.0, perf));
    d.slots.push_back(Slot::output("y", p_.dtype, {p_.M, p_.N}, row_out(p_.dtype)));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::GeluArgs a;
    a.x = t("x");
    a.y = t("y");
    return make_launch(dev, op(), a, &ops::gelu);
  }
};

class AddCase : public RowCase {
 public:
  using RowCase::RowCase;
  hal::OpId op() const override { return hal::OpId::add; }
  std::string vars() const override { return dims(p_); }
  double flops() const override { return 1.0 * p_.M * p_.N; }
  double bytes() const override { return 3.0 * p_.M * p_.N * es(p_.dtype); }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    CaseData d;
    d.slots.push_back(random_input("a", p_.dtype, {p_.M, p_.N}, rng, 1.0, perf));
    d.slots.push_back(random_input("b", p_.dtype, {p_.M, p_.N}, rng, 1.0, perf));
    d.slots.push_back(Slot::output("y", p_.dtype, {p_.M, p_.N}, row_out(p_.dtype)));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::AddArgs a;
    a.a = t("a");
    a.b = t("b");
    a.y = t("y");
    return make_launch(dev, op(), a, &ops::add);
  }
};

// embedding: table [V][N], ids [M]; a pure copy, compared bit for bit.
class EmbeddingCase : public RowCase {
 public:
  using RowCase::RowCase;
  hal::OpId op() const override { return hal::OpId::embedding; }
  std::string vars() const override {
    return "T=" + std::to_string(p_.M) + " V=" + std::to_string(p_.V) + " H=" + std::to_string(p_.N) +
           " dtype=" + hal::dtype_name(p_.dtype);
  }
  double flops() const override { return 0; }
  double bytes() const override { return 2.0 * p_.M * p_.N * es(p_.dtype) + p_.M * 4.0; }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    CaseData d;
    d.slots.push_back(random_input("table", p_.dtype, {p_.V, p_.N}, rng, 1.0, perf));
    hal::HostTensor ids(hal::DType::i32, {p_.M});
    for (int64_t i = 0; i < p_.M; ++i)
      ids.data<int32_t>()[i] = static_cast<int32_t>(i == 0 ? p_.V - 1 : rng.below(p_.V));
    d.slots.push_back(Slot::input("ids", std::move(ids)));
    d.slots.push_back(Slot::output("y", p_.dtype, {p_.M, p_.N}, Compare::exact()));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::EmbeddingArgs a;
    a.table = t("table");
    a.ids = t("ids");
    a.y = t("y");
    return make_launch(dev, op(), a, &ops::embedding);
  }
};

// scatter_visual: x [M][N] in place; about a third of the tokens are placeholders
// (id 7), in runs, and vis holds that many rows.
class ScatterVisualCase : public RowCase {
 public:
  using RowCase::RowCase;
  static constexpr int32_t kPlaceholder = 7;
  hal::OpId op() const override { return hal::OpId::scatter_visual; }
  std::string vars() const override {
    return "T=" + std::to_string(p_.M) + " H=" + std::to_string(p_.N) + " dtype=" + hal::dtype_name(p_.dtype);
  }
  double flops() const override { return 0; }
  double bytes() const override { return (2.0 * p_.M / 3.0) * p_.N * es(p_.dtype) + p_.M * 4.0; }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    CaseData d;
    hal::HostTensor tokens(hal::DType::i32, {p_.M});
    int64_t nv = 0;
    bool in_run = false;
    for (int64_t i = 0; i < p_.M; ++i) {
      if (rng.chance(0.15)) in_run = !in_run;
      const int32_t tok = in_run ? kPlaceholder : static_cast<int32_t>(8 + rng.below(100));
      tokens.data<int32_t>()[i] = tok;
      nv += tok == kPlaceholder;
    }
    d.slots.push_back(Slot::input("tokens", std::move(tokens)));
    d.slots.push_back(random_input("vis", p_.dtype, {nv, p_.N}, rng, 1.0, perf));
    Slot x = random_input("x", p_.dtype, {p_.M, p_.N}, rng, 1.0, perf);
    x.role = Role::inout;
    x.cmp = Compare::exact();
    d.slots.push_back(std::move(x));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::ScatterVisualArgs a;
    a.tokens = t("tokens");
    a.vis = t("vis");
    a.placeholder = kPlaceholder;
    a.x = t("x");
    return make_launch(dev, op(), a, &ops::scatter_visual);
  }
};

// argmax over rows of x [M][N]; flag adds ties (quantised values), NaN entries and an
// all-NaN row.
class ArgmaxCase : public RowCase {
 public:
  using RowCase::RowCase;
  hal::OpId op() const override { return hal::OpId::argmax; }
  std::string vars() const override { return dims(p_) + (p_.flag ? " ties,nan" : ""); }
  double flops() const override { return 1.0 * p_.M * p_.N; }
  double bytes() const override { return p_.M * p_.N * es(p_.dtype) + p_.M * 4.0; }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    CaseData d;
    Slot x = random_input("x", p_.dtype, {p_.M, p_.N}, rng, 1.0, perf);
    if (p_.flag && !x.tiled) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      for (int64_t m = 0; m < p_.M; ++m)
        for (int64_t n = 0; n < p_.N; ++n) {
          const size_t i = static_cast<size_t>(m * p_.N + n);
          if (m == p_.M - 1)
            x.host.set(i, nan);  // the whole row NaN: index 0
          else if (m % 3 == 0)
            x.host.set(i, std::round(x.host.get(i) * 2.0f));  // ties
          else if (rng.chance(0.05))
            x.host.set(i, nan);
        }
    }
    d.slots.push_back(std::move(x));
    d.slots.push_back(Slot::output("idx", hal::DType::i32, {p_.M}, Compare::exact()));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::ArgmaxArgs a;
    a.x = t("x");
    a.idx = t("idx");
    return make_launch(dev, op(), a, &ops::argmax);
  }
};

}  // namespace

std::unique_ptr<Case> matmul_case(const RowParams& p) { return std::make_unique<MatmulCase>(p); }
std::unique_ptr<Case> rms_norm_case(const RowParams& p) { return std::make_unique<RmsNormCase>(p); }
std::unique_ptr<Case> layer_norm_case(const RowParams& p) { return std::make_unique<LayerNormCase>(p); }
std::unique_ptr<Case> rope_case(const RowParams& p) { return std::make_unique<RopeCase>(p); }
std::unique_ptr<Case> swiglu_case(const RowParams& p) { return std::make_unique<SwigluCase>(p); }
std::unique_ptr<Case> gelu_case(const RowParams& p) { return std::make_unique<GeluCase>(p); }
std::unique_ptr<Case> add_case(const RowParams& p) { return std::make_unique<AddCase>(p); }
std::unique_ptr<Case> embedding_case(const RowParams& p) { return std::make_unique<EmbeddingCase>(p); }
std::unique_ptr<Case> scatter_visual_case(const RowParams& p) { return std::make_unique<ScatterVisualCase>(p); }
std::unique_ptr<Case> argmax_case(const RowParams& p) { return std::make_unique<ArgmaxCase>(p); }

}  // namespace msa::cases
