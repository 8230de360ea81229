// The inputs the fuzzers (fuzz/) once crashed on, as plain tests so the regular and
// sanitizer CI runs keep them fixed: each must now be an msa::Error naming the argument.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <string>

#include "hal/error.h"
#include "hal/host_tensor.h"
#include "hal/registry.h"
#include "ops/ops.h"
#include "tests/common/error_of.h"

namespace {

using msa::hal::DType;
using msa::hal::HostTensor;
using msa::hal::Tensor;

using msa::test::error_of;

class FuzzFindings : public ::testing::Test {
 protected:
  FuzzFindings() : dev(msa::hal::create_device("cpu-ref")) {}
  Tensor up(const HostTensor& h) {
    auto o = msa::hal::to_device(*dev, h);
    keep.push_back(std::move(o.buffer));
    return o.tensor;
  }
  Tensor ints(std::vector<int64_t> shape, std::vector<int32_t> v) {
    HostTensor h(DType::i32, std::move(shape));
    for (size_t i = 0; i < v.size(); ++i) h.data<int32_t>()[i] = v[i];
    return up(h);
  }
  // y = a + b with `a` replaced by `bad`.
  std::string add_with(const Tensor& bad) {
    msa::ops::AddArgs a;
    a.a = bad, a.b = up(HostTensor(DType::f32, {4, 4})), a.y = up(HostTensor(DType::f32, {4, 4}));
    return error_of([&] { msa::ops::add(*dev, a); });
  }
  std::unique_ptr<msa::hal::Device> dev;
  std::vector<msa::hal::BufferPtr> keep;
};

TEST_F(FuzzFindings, MisalignedViewIsRejected) {
  Tensor t = up(HostTensor(DType::f32, {5, 4}));
  t.offset = 2;  // inside the buffer, but not on a float boundary
  t.shape = {4, 4, 0, 0};
  const std::string msg = add_with(t);
  EXPECT_NE(msg.find("argument 'a'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a multiple of the element size"), std::string::npos) << msg;
}

TEST_F(FuzzFindings, NegativeOrOverflowingDimsAreRejected) {
  for (auto dims : {std::array<int64_t, 2>{-4, -4}, std::array<int64_t, 2>{std::numeric_limits<int64_t>::min(), 6},
                    std::array<int64_t, 2>{int64_t{1} << 40, int64_t{1} << 40}, std::array<int64_t, 2>{0, -1}}) {
    Tensor t = up(HostTensor(DType::f32, {4, 4}));
    t.shape = {dims[0], dims[1], 0, 0};
    const std::string msg = add_with(t);
    EXPECT_NE(msg.find("argument 'a'"), std::string::npos) << dims[0] << "x" << dims[1] << ": " << msg;
  }
}

TEST_F(FuzzFindings, BlockTopkWithHugeNLocalIsRejected) {
  msa::ops::BlockTopkArgs a;
  a.block_score = up(HostTensor(DType::f32, {1, 1, 2}));
  a.kv_len = ints({1}, {10});
  a.cu_q = ints({2}, {0, 1});
  a.NQ = 1, a.Bs = 8, a.k = 4, a.Qb = 1;
  a.n_local = std::numeric_limits<int32_t>::max();
  a.block_idx = up(HostTensor(DType::i32, {1, 1, 4}));
  a.block_cnt = up(HostTensor(DType::i32, {1, 1}));
  const std::string msg = error_of([&] { msa::ops::block_topk(*dev, a); });
  EXPECT_NE(msg.find("argument 'k'"), std::string::npos) << msg;
}

TEST_F(FuzzFindings, PatchItemsWhoseProductOverflowsAreRejected) {
  msa::ops::PatchAttention3dArgs a;
  a.q = up(HostTensor(DType::f32, {6, 1, 4}));
  a.k = up(HostTensor(DType::f32, {6, 1, 4}));
  a.v = up(HostTensor(DType::f32, {6, 1, 4}));
  const int32_t big = std::numeric_limits<int32_t>::max();
  a.items = ints({2, 3}, {1, 2, 3, big, big, big});
  a.out = up(HostTensor(DType::f32, {6, 1, 4}));
  a.lse = up(HostTensor(DType::f32, {6, 1}));
  const std::string msg = error_of([&] { msa::ops::patch_attention_3d(*dev, a); });
  EXPECT_NE(msg.find("argument 'items'"), std::string::npos) << msg;
}

}  // namespace
