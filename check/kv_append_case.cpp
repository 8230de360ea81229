// kv_append case: this step's keys and values (and indexer keys) written into a paged
// cache with shuffled pages whose slack slots hold NaN. The caches are in/out tensors
// compared whole, so a write to any other slot fails.
#include "check/attn_common.h"
#include "check/support_cases.h"
#include "ops/ops.h"

namespace msa::cases {
namespace {

class KvAppendCase : public Case {
 public:
  KvAppendCase(const AttnParams& p, bool with_ki) : p_(p), with_ki_(with_ki), batch_(p.q_len, p.kv_len, 1) {}
  hal::OpId op() const override { return hal::OpId::kv_append; }
  std::string vars() const override {
    std::string s = "B=" + std::to_string(batch_.B()) + " T=" + std::to_string(batch_.T()) + " " + batch_.lens() +
                    " Hkv=" + std::to_string(p_.Hkv) + " D=" + std::to_string(p_.D) + " Bs=" + std::to_string(p_.Bs) +
                    " dtype=" + hal::dtype_name(p_.dtype);
    if (with_ki_) {
      s += " Di=" + std::to_string(p_.Di) + " ki=" + hal::dtype_name(p_.ki_dtype) +
           (p_.ki_scale && p_.ki_dtype != hal::DType::fp4_e2m1x2 ? "+scale" : "");
    }
    return s;
  }
  double flops() const override { return 0; }
  double bytes() const override {
    const double T = static_cast<double>(batch_.T());
    double b = 4.0 * T * p_.Hkv * p_.D * static_cast<double>(hal::dtype_size(p_.dtype));
    if (with_ki_) {
      b += T * (p_.Di * static_cast<double>(hal::dtype_size(p_.dtype)) + detail::indexer_key_bytes(p_));
    }
    return b;
  }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    const Pages pages = make_pages(batch_, p_.Bs, rng, p_.shuffle);
    const int64_t T = batch_.T();
    CaseData d;
    d.slots.push_back(detail::random_input("k", p_.dtype, {T, p_.Hkv, p_.D}, rng, 1.0, perf));
    d.slots.push_back(detail::random_input("v", p_.dtype, {T, p_.Hkv, p_.D}, rng, 1.0, perf));
    d.slots.push_back(with_ki_ ? detail::random_input("ki", p_.dtype, {T, p_.Di}, rng, 1.0, perf) : Slot::none("ki"));
    detail::push_index_slots(d, batch_, pages);
    auto cache = [&](const char* name, int heads, int D, hal::DType t, Compare c) {
      Slot s = detail::cache_input(name, batch_, pages, heads, D, t, rng, 1.0, perf);
      s.role = Role::inout;
      s.cmp = c;
      d.slots.push_back(std::move(s));
    };
    cache("k_cache", p_.Hkv, p_.D, p_.dtype, Compare::exact());
    cache("v_cache", p_.Hkv, p_.D, p_.dtype, Compare::exact());
    if (with_ki_ && p_.ki_dtype == hal::DType::fp4_e2m1x2) {  // NVFP4: codes and scales bit-exact
      cache("ki_cache", 0, p_.Di / 2, p_.ki_dtype, Compare::exact());
      Slot s = detail::nvfp4_scale_input(batch_, pages, p_.Di, rng, perf);
      s.role = Role::inout;
      s.cmp = Compare::exact();
      d.slots.push_back(std::move(s));
    } else if (with_ki_) {
      // x / (amax/448) may round differently from x * (448/amax): one e4m3 step apart.
      const bool scaled = p_.ki_scale && p_.ki_dtype == hal::DType::fp8_e4m3;
      cache("ki_cache", 0, p_.Di, p_.ki_dtype, scaled ? Compare::nmse(1e-3, 5e-3) : Compare::exact());
      if (p_.ki_scale) {
        Slot s = detail::ki_scale_input(batch_, pages, rng, perf);
        s.role = Role::inout;
        s.cmp = Compare::nmse(1e-12, 1e-10);
        d.slots.push_back(std::move(s));
      } else {
        d.slots.push_back(Slot::none("ki_scale"));
      }
    } else {
      d.slots.push_back(Slot::none("ki_cache"));
      d.slots.push_back(Slot::none("ki_scale"));
    }
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::KvAppendArgs a;
    a.k = t("k");
    a.v = t("v");
    a.ki = t("ki");
    a.block_table = t("block_table");
    a.kv_len = t("kv_len");
    a.cu_q = t("cu_q");
    a.k_cache = t("k_cache");
    a.v_cache = t("v_cache");
    a.ki_cache = t("ki_cache");
    a.ki_scale = t("ki_scale");
    return make_launch(dev, op(), a, &ops::kv_append);
  }

 private:
  AttnParams p_;
  bool with_ki_;
  Batch batch_;
};

}  // namespace

std::unique_ptr<Case> kv_append_case(const AttnParams& p, bool with_ki) {
  return std::make_unique<KvAppendCase>(p, with_ki);
}

}  // namespace msa::cases
