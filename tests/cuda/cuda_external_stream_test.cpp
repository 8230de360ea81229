// The C++ side of framework interop: an op on caller-owned device memory
// (Device::wrap_memory) enqueued on the caller's stream (Device::use_native_stream), its
// scratch from the caller's allocator (set_workspace_provider), device-side index errors
// raised by that stream's synchronize. Skips without a CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "hal/error.h"
#include "hal/registry.h"
#include "ops/ops.h"
#include "tests/common/no_cuda_device.h"

namespace msa {
namespace {

#define CHECK_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

struct DeviceArray {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceArray(size_t n) : bytes(n) { cudaMalloc(&ptr, n); }
  ~DeviceArray() { cudaFree(ptr); }
};

hal::Tensor view(hal::Buffer& b, hal::DType t, std::initializer_list<int64_t> shape) {
  return hal::Tensor(&b, t, shape);
}

class ExternalStream : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = test::no_cuda_device(); !why.empty()) GTEST_SKIP() << why;
    dev_ = hal::create_device("cuda:0");
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (dev_) dev_->use_native_stream(nullptr);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  std::unique_ptr<hal::Device> dev_;
  cudaStream_t stream_ = nullptr;
};

TEST_F(ExternalStream, OpOnCallerMemoryRunsInTheCallersStreamOrder) {
  constexpr int n = 1 << 20;
  DeviceArray a(n * 4), b(n * 4), y(n * 4);
  std::vector<float> ha(n), hb(n), hy(n, NAN);
  for (int i = 0; i < n; ++i) ha[i] = 0.5f * i, hb[i] = 1.0f - i;
  auto ba = dev_->wrap_memory(a.ptr, a.bytes), bb = dev_->wrap_memory(b.ptr, b.bytes),
       by = dev_->wrap_memory(y.ptr, y.bytes);
  // Inputs copied, the op, the result copied back: all on the caller's stream, one wait.
  CHECK_CUDA(cudaMemcpyAsync(a.ptr, ha.data(), a.bytes, cudaMemcpyHostToDevice, stream_));
  CHECK_CUDA(cudaMemcpyAsync(b.ptr, hb.data(), b.bytes, cudaMemcpyHostToDevice, stream_));
  dev_->use_native_stream(stream_);
  ops::add(*dev_, {view(*ba, hal::DType::f32, {n}), view(*bb, hal::DType::f32, {n}), view(*by, hal::DType::f32, {n})});
  dev_->use_native_stream(nullptr);
  CHECK_CUDA(cudaMemcpyAsync(hy.data(), y.ptr, y.bytes, cudaMemcpyDeviceToHost, stream_));
  CHECK_CUDA(cudaStreamSynchronize(stream_));
  for (int i = 0; i < n; i += 4099) ASSERT_EQ(hy[i], ha[i] + hb[i]) << i;
}

TEST_F(ExternalStream, OpIsCapturedFromTheCallersStream) {
  // If the op ran on msa's own stream it would not be part of the caller's capture.
  DeviceArray a(256 * 4), y(256 * 4);
  CHECK_CUDA(cudaMemset(a.ptr, 0, a.bytes));
  CHECK_CUDA(cudaMemset(y.ptr, 0xFF, y.bytes));
  auto ba = dev_->wrap_memory(a.ptr, a.bytes), by = dev_->wrap_memory(y.ptr, y.bytes);
  CHECK_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  dev_->use_native_stream(stream_);
  ops::gelu(*dev_, {view(*ba, hal::DType::f32, {256}), view(*by, hal::DType::f32, {256})});
  dev_->use_native_stream(nullptr);
  cudaGraph_t graph = nullptr;
  CHECK_CUDA(cudaStreamEndCapture(stream_, &graph));
  size_t nodes = 0;
  CHECK_CUDA(cudaGraphGetNodes(graph, nullptr, &nodes));
  EXPECT_GE(nodes, 1u);
  std::vector<float> hy(256);
  CHECK_CUDA(cudaMemcpy(hy.data(), y.ptr, y.bytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::isnan(hy[0])) << "the op ran outside the capture";
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphLaunch(exec, stream_));
  CHECK_CUDA(cudaStreamSynchronize(stream_));
  CHECK_CUDA(cudaMemcpy(hy.data(), y.ptr, y.bytes, cudaMemcpyDeviceToHost));
  EXPECT_EQ(hy[0], 0.0f);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_F(ExternalStream, ScratchComesFromTheProvider) {
  // block_topk over long rows splits them into chunks merged through its workspace.
  constexpr int NQ = 2, Hs = 1, blocks = 8192, Bs = 128;
  DeviceArray score(NQ * Hs * blocks * 4), cu(12), idx(NQ * Hs * 16 * 4), cnt(NQ * Hs * 4);
  std::vector<float> hs(NQ * Hs * blocks);
  for (size_t i = 0; i < hs.size(); ++i) hs[i] = std::sin(0.37f * static_cast<float>(i));
  const int hlen = blocks * Bs, hcu[3] = {0, 1, 2};
  int hlen2[2] = {hlen, hlen};
  DeviceArray len2(8);
  CHECK_CUDA(cudaMemcpy(score.ptr, hs.data(), score.bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(len2.ptr, hlen2, 8, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(cu.ptr, hcu, 12, cudaMemcpyHostToDevice));
  DeviceArray pool(64 << 20);
  size_t asked = 0;
  dev_->set_workspace_provider([&](size_t bytes) -> void* {
    asked += bytes;
    return bytes <= pool.bytes ? pool.ptr : nullptr;
  });
  auto bs = dev_->wrap_memory(score.ptr, score.bytes), bl = dev_->wrap_memory(len2.ptr, 8),
       bc = dev_->wrap_memory(cu.ptr, 12), bi = dev_->wrap_memory(idx.ptr, idx.bytes),
       bn = dev_->wrap_memory(cnt.ptr, cnt.bytes);
  ops::BlockTopkArgs t;
  t.block_score = view(*bs, hal::DType::f32, {NQ, Hs, blocks});
  t.kv_len = view(*bl, hal::DType::i32, {2});
  t.cu_q = view(*bc, hal::DType::i32, {3});
  t.NQ = NQ;
  t.Bs = Bs;
  t.block_idx = view(*bi, hal::DType::i32, {NQ, Hs, 16});
  t.block_cnt = view(*bn, hal::DType::i32, {NQ, Hs});
  dev_->use_native_stream(stream_);
  ops::block_topk(*dev_, t);
  dev_->stream().synchronize();
  dev_->use_native_stream(nullptr);
  dev_->set_workspace_provider({});
  EXPECT_GT(asked, 0u) << "the split top-k took no scratch from the provider";
  int hcnt[2] = {0, 0};
  CHECK_CUDA(cudaMemcpy(hcnt, cnt.ptr, 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(hcnt[0], 16);
  EXPECT_EQ(hcnt[1], 16);
}

TEST_F(ExternalStream, DeviceSideIndexErrorsRaiseAtThatStreamsSynchronize) {
  // embedding ids out of range are data on the device: flagged, then raised.
  DeviceArray table(4 * 8 * 4), ids(2 * 4), y(2 * 8 * 4);
  const int hids[2] = {1, 99};
  CHECK_CUDA(cudaMemset(table.ptr, 0, table.bytes));
  CHECK_CUDA(cudaMemcpy(ids.ptr, hids, 8, cudaMemcpyHostToDevice));
  auto bt = dev_->wrap_memory(table.ptr, table.bytes), bi = dev_->wrap_memory(ids.ptr, ids.bytes),
       by = dev_->wrap_memory(y.ptr, y.bytes);
  dev_->use_native_stream(stream_);
  ops::embedding(
      *dev_, {view(*bt, hal::DType::f32, {4, 8}), view(*bi, hal::DType::i32, {2}), view(*by, hal::DType::f32, {2, 8})});
  EXPECT_THROW(dev_->stream().synchronize(), Error);
  EXPECT_NO_THROW(dev_->stream().synchronize());  // reported once
  dev_->use_native_stream(nullptr);
}

}  // namespace
}  // namespace msa
