// The CUDA backend's device layer: probe/open without a driver (runs everywhere), and on
// a GPU: copies, events, the allocator's out-of-memory message, the device-side error
// flag (raised by invalid index data, reported and cleared by synchronize), and bitwise
// run-to-run reproducibility of the split-KV decode path. Op results themselves are
// cross-checked against cpu-ref by tests/crosscheck and `msa check --backend cuda`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "hal/error.h"
#include "hal/host_tensor.h"
#include "hal/registry.h"
#include "ops/ops.h"
#include "tests/common/no_cuda_device.h"

namespace msa {
namespace {

const hal::BackendStatus* cuda_status(std::vector<hal::BackendStatus>& all) {
  for (auto& s : all)
    if (s.name == "cuda") return &s;
  return nullptr;
}

TEST(CudaProbe, ReportsDevicesOrACleanReason) {
  auto all = hal::list_backends();
  const auto* s = cuda_status(all);
  ASSERT_NE(s, nullptr);
  if (!s->compiled) GTEST_SKIP() << "cuda backend not compiled in";
  if (s->devices.empty()) {
    EXPECT_EQ(s->unavailable_reason.rfind("no CUDA driver/device: ", 0), 0u) << s->unavailable_reason;
    EXPECT_THROW(hal::create_device("cuda:0"), Error);
  } else {
    EXPECT_EQ(s->devices[0], "cuda:0");
    EXPECT_EQ(s->devices.size(), s->descriptions.size());
    EXPECT_THROW(hal::create_device("cuda:" + std::to_string(s->devices.size())), Error);
  }
}

class CudaDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = test::no_cuda_device(); !why.empty()) GTEST_SKIP() << why;
    dev = hal::create_device("cuda:0");
  }
  std::unique_ptr<hal::Device> dev;
};

TEST_F(CudaDevice, UploadFillCopyDownload) {
  auto a = dev->alloc_tensor(hal::DType::i32, {1000});
  auto b = dev->alloc_tensor(hal::DType::i32, {1000});
  std::vector<int32_t> in(1000), out(1000, 0);
  std::iota(in.begin(), in.end(), 7);
  dev->stream().upload(a.tensor, in.data());
  dev->stream().copy(b.tensor, a.tensor);
  dev->stream().download(out.data(), b.tensor);
  EXPECT_EQ(in, out);
  dev->stream().fill_bytes(b.tensor, 0xFF);
  dev->stream().download(out.data(), b.tensor);
  for (int32_t v : out) ASSERT_EQ(v, -1);
  auto c = dev->alloc_tensor(hal::DType::i32, {999});
  EXPECT_THROW(dev->stream().copy(c.tensor, a.tensor), Error);
  dev->stream().synchronize();
}

TEST_F(CudaDevice, OutOfMemoryNamesTheRequest) {
  const size_t huge = size_t{1} << 50;  // 1 PiB
  try {
    auto b = dev->alloc(huge);
    FAIL() << "a 1 PiB allocation succeeded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("out of device memory"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(huge)), std::string::npos) << m;
  }
  auto ok = dev->alloc(1 << 20);  // the device still works
  EXPECT_EQ(ok->bytes(), size_t{1} << 20);
  dev->stream().synchronize();
}

TEST_F(CudaDevice, EventsTime) {
  auto e0 = dev->create_event(), e1 = dev->create_event();
  auto a = dev->alloc_tensor(hal::DType::f32, {1 << 20});
  dev->stream().record(*e0);
  dev->stream().fill_bytes(a.tensor, 1);
  dev->stream().record(*e1);
  dev->stream().synchronize();
  EXPECT_GE(e1->elapsed_ms(*e0), 0.0);
}

// A tiny decode batch: B sequences of kv tokens each, one query each.
struct Decode {
  int B = 2, Hq = 8, Hkv = 2, D = 64, Bs = 64, P = 8, MB = 4, k = 2, kv = 200;
  std::vector<hal::Device::Owned> keep;
  ops::SparseAttentionArgs args;

  hal::Tensor up(hal::Device& dev, const hal::HostTensor& h) {
    keep.push_back(hal::to_device(dev, h));
    return keep.back().tensor;
  }
  void build(hal::Device& dev, int bad_page) {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1, 1);
    auto rnd = [&](hal::DType t, std::vector<int64_t> shape) {
      hal::HostTensor h(t, shape);
      for (int64_t i = 0; i < h.numel(); ++i) h.set(static_cast<size_t>(i), u(rng));
      return h;
    };
    hal::HostTensor bt(hal::DType::i32, {B, MB}), kvl(hal::DType::i32, {B}), cu(hal::DType::i32, {B + 1});
    for (int b = 0; b < B; ++b) {
      for (int c = 0; c < MB; ++c) bt.data<int32_t>()[b * MB + c] = b * MB + c;
      kvl.data<int32_t>()[b] = kv;
      cu.data<int32_t>()[b] = b;
    }
    cu.data<int32_t>()[B] = B;
    if (bad_page >= 0) bt.data<int32_t>()[1] = bad_page;
    hal::HostTensor idx(hal::DType::i32, {B, Hkv, k});
    for (int i = 0; i < B * Hkv; ++i) {
      idx.data<int32_t>()[i * k] = 1;
      idx.data<int32_t>()[i * k + 1] = 3;
    }
    args.q = up(dev, rnd(hal::DType::bf16, {B, Hq, D}));
    args.k_cache = up(dev, rnd(hal::DType::bf16, {P, Hkv, Bs, D}));
    args.v_cache = up(dev, rnd(hal::DType::bf16, {P, Hkv, Bs, D}));
    args.block_table = up(dev, bt);
    args.kv_len = up(dev, kvl);
    args.cu_q = up(dev, cu);
    args.Qb = 1;
    args.NQ = B;
    args.block_idx = up(dev, idx);
    keep.push_back(dev.alloc_tensor(hal::DType::bf16, {B, Hq, D}));
    args.out = keep.back().tensor;
    keep.push_back(dev.alloc_tensor(hal::DType::f32, {B, Hq}));
    args.lse = keep.back().tensor;
  }
};

TEST_F(CudaDevice, BadPageIdIsReportedAtSynchronizeAndCleared) {
  Decode d;
  d.build(*dev, /*bad_page=*/1000);
  ops::sparse_block_attention(*dev, d.args);
  try {
    dev->stream().synchronize();
    FAIL() << "no error for a page id past P";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("block_table"), std::string::npos) << m;
    EXPECT_NE(m.find("sparse_block_attention"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(dev->stream().synchronize());  // the flag was cleared
}

TEST_F(CudaDevice, BadKvLenIsReported) {
  Decode d;
  d.kv = 10000;  // > max_blocks * Bs
  d.build(*dev, -1);
  ops::sparse_block_attention(*dev, d.args);
  try {
    dev->stream().synchronize();
    FAIL() << "no error for kv_len > max_blocks * Bs";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv_len"), std::string::npos) << e.what();
  }
}

TEST_F(CudaDevice, EmbeddingIdOutOfRangeIsReported) {
  hal::HostTensor table(hal::DType::f32, {4, 8}), ids(hal::DType::i32, {3});
  for (int i = 0; i < 32; ++i) table.data<float>()[i] = static_cast<float>(i);
  ids.data<int32_t>()[0] = 1;
  ids.data<int32_t>()[1] = 4;  // V = 4
  ids.data<int32_t>()[2] = 0;
  auto t = hal::to_device(*dev, table), i = hal::to_device(*dev, ids);
  auto y = dev->alloc_tensor(hal::DType::f32, {3, 8});
  ops::EmbeddingArgs a;
  a.table = t.tensor;
  a.ids = i.tensor;
  a.y = y.tensor;
  ops::embedding(*dev, a);
  try {
    dev->stream().synchronize();
    FAIL() << "no error for an id past V";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ids"), std::string::npos) << e.what();
  }
}

TEST_F(CudaDevice, SplitDecodeIsBitwiseReproducible) {
  Decode d;
  d.build(*dev, -1);
  std::vector<uint16_t> o1(d.B * d.Hq * d.D), o2(o1.size());
  std::vector<float> l1(d.B * d.Hq), l2(l1.size());
  ops::sparse_block_attention(*dev, d.args);
  dev->stream().download(o1.data(), d.args.out);
  dev->stream().download(l1.data(), d.args.lse);
  dev->stream().fill_bytes(d.args.out, 0xFF);
  ops::sparse_block_attention(*dev, d.args);
  dev->stream().download(o2.data(), d.args.out);
  dev->stream().download(l2.data(), d.args.lse);
  dev->stream().synchronize();
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(0, std::memcmp(l1.data(), l2.data(), l1.size() * sizeof(float)));
  for (float v : l1) EXPECT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace msa
