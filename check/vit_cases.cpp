// patch_attention_3d and rope_3d cases.
#include <algorithm>
#include <cstring>

#include "check/attn_common.h"
#include "check/support_cases.h"
#include "ops/ops.h"

namespace msa::cases {
namespace {

std::string items_str(const VitParams& p) {
  std::string s = "items=[";
  for (size_t i = 0; i < p.items.size(); ++i) {
    if (i == 6) {
      s += ",... (" + std::to_string(p.items.size()) + ")";
      break;
    }
    s += (i ? "," : "") + std::to_string(p.items[i][0]) + "x" + std::to_string(p.items[i][1]) + "x" +
         std::to_string(p.items[i][2]);
  }
  return s + "]";
}

int64_t tokens_of(const VitParams& p) {
  int64_t n = 0;
  for (const auto& it : p.items) n += int64_t{it[0]} * it[1] * it[2];
  return n;
}

// Sum over windows of (tokens in the window)^2.
double window_pairs(const VitParams& p) {
  double s = 0;
  for (const auto& it : p.items) {
    const double hw = double{1} * it[1] * it[2];
    for (int32_t w0 = 0; w0 < it[0]; w0 += p.window) {
      const double n = std::min(p.window, it[0] - w0) * hw;
      s += n * n;
    }
  }
  return s;
}

class PatchAttentionCase : public Case {
 public:
  explicit PatchAttentionCase(const VitParams& p) : p_(p), N_(tokens_of(p)) {}
  hal::OpId op() const override { return hal::OpId::patch_attention_3d; }
  std::string vars() const override {
    std::string s = "N=" + std::to_string(N_) + " " + items_str(p_) + " H=" + std::to_string(p_.H) +
                    " D=" + std::to_string(p_.D) + " window=" + std::to_string(p_.window) +
                    " dtype=" + hal::dtype_name(p_.dtype);
    if (p_.scale != 0.0f) s += " scale=" + std::to_string(p_.scale);
    return s;
  }
  double flops() const override { return 4.0 * p_.D * p_.H * window_pairs(p_); }
  double bytes() const override {
    const double es = static_cast<double>(hal::dtype_size(p_.dtype));
    return 4.0 * N_ * p_.H * p_.D * es + N_ * p_.H * 4.0;
  }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    CaseData d;
    d.slots.push_back(detail::random_input("q", p_.dtype, {N_, p_.H, p_.D}, rng, 2.0, perf));
    d.slots.push_back(detail::random_input("k", p_.dtype, {N_, p_.H, p_.D}, rng, 1.0, perf));
    d.slots.push_back(detail::random_input("v", p_.dtype, {N_, p_.H, p_.D}, rng, 1.0, perf));
    hal::HostTensor items(hal::DType::i32, {static_cast<int64_t>(p_.items.size()), 3});
    if (items.nbytes()) std::memcpy(items.bytes.data(), p_.items.data(), items.nbytes());
    d.slots.push_back(Slot::input("items", std::move(items)));
    d.slots.push_back(Slot::output("out", p_.dtype, {N_, p_.H, p_.D}, Compare::out(p_.dtype)));
    d.slots.push_back(Slot::output("lse", hal::DType::f32, {N_, p_.H}, Compare::lse(p_.dtype)));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::PatchAttention3dArgs a;
    a.q = t("q");
    a.k = t("k");
    a.v = t("v");
    a.items = t("items");
    a.window = p_.window;
    a.scale = p_.scale;
    a.out = t("out");
    a.lse = t("lse");
    return make_launch(dev, op(), a, &ops::patch_attention_3d);
  }

 private:
  VitParams p_;
  int64_t N_;
};

class Rope3dCase : public Case {
 public:
  explicit Rope3dCase(const VitParams& p) : p_(p), N_(tokens_of(p)) {}
  hal::OpId op() const override { return hal::OpId::rope_3d; }
  std::string vars() const override {
    return "N=" + std::to_string(N_) + " " + items_str(p_) + " H=" + std::to_string(p_.H) +
           " D=" + std::to_string(p_.D) + " window=" + std::to_string(p_.window) +
           " dtype=" + hal::dtype_name(p_.dtype) + (p_.in_place ? " in_place" : "");
  }
  double flops() const override { return 3.0 * N_ * p_.H * 6 * (p_.D / 6) * 2; }
  double bytes() const override {
    return 2.0 * N_ * p_.H * p_.D * static_cast<double>(hal::dtype_size(p_.dtype)) + N_ * 12.0;
  }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    CaseData d;
    Slot x = detail::random_input("x", p_.dtype, {N_, p_.H, p_.D}, rng, 1.0, perf);
    // Positions as the model makes them: temporal patch within its window, row, column.
    hal::HostTensor pos(hal::DType::i32, {N_, 3});
    int32_t* ps = pos.data<int32_t>();
    int64_t n = 0;
    for (const auto& it : p_.items)
      for (int32_t t = 0; t < it[0]; ++t)
        for (int32_t r = 0; r < it[1]; ++r)
          for (int32_t c = 0; c < it[2]; ++c, ++n) {
            ps[n * 3] = t % p_.window;
            ps[n * 3 + 1] = r;
            ps[n * 3 + 2] = c;
          }
    if (p_.in_place) {
      x.role = Role::inout;
      x.cmp = rope_tolerance(p_.dtype);
      d.slots.push_back(std::move(x));
      d.slots.push_back(Slot::input("pos", std::move(pos)));
    } else {
      d.slots.push_back(std::move(x));
      d.slots.push_back(Slot::input("pos", std::move(pos)));
      d.slots.push_back(Slot::output("y", p_.dtype, {N_, p_.H, p_.D}, rope_tolerance(p_.dtype)));
    }
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::Rope3dArgs a;
    a.x = t("x");
    a.pos = t("pos");
    a.y = p_.in_place ? a.x : t("y");
    return make_launch(dev, op(), a, &ops::rope_3d);
  }
  // Angles are pos * inv_freq: a backend computing them in f32 is off by ~pos * 6e-8 rad,
  // so f32 gets 1e-6 / 1e-5 (positions here stay below 8192); bf16/f16 the usual bounds.
  static Compare rope_tolerance(hal::DType t) {
    return t == hal::DType::f32 ? Compare::nmse(1e-6, 1e-5) : Compare::out(t);
  }

 private:
  VitParams p_;
  int64_t N_;
};

}  // namespace

std::unique_ptr<Case> patch_attention_3d_case(const VitParams& p) { return std::make_unique<PatchAttentionCase>(p); }
std::unique_ptr<Case> rope_3d_case(const VitParams& p) { return std::make_unique<Rope3dCase>(p); }

}  // namespace msa::cases
