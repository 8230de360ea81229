// Stream and Event of the CUDA backend: async copies on one non-blocking stream, the
// device-side validation flag, and the stream-ordered workspace.
#include "backends/cuda/stream.h"

#include <algorithm>
#include <mutex>
#include <string>

#include "backends/cuda/check.h"
#include "backends/cuda/counter_slots.h"
#include "backends/cuda/error_flags.h"
#include "hal/op_id.h"

namespace msa::MSA_GPU_NS {

void throw_gpu_error(cudaError_t err, const char* what, const char* file, int line) {
  std::string f = file;
  if (auto slash = f.rfind('/'); slash != std::string::npos) f = f.substr(slash + 1);
  throw Error(std::string(MSA_VENDOR_NAME) + ": " + what + " failed: " + cudaGetErrorString(err) + " (error " +
              std::to_string(static_cast<int>(err)) + ", " + f + ":" + std::to_string(line) + ")");
}

namespace {

// Counter slots per device (see counter_slots.h).
gpu_common::CounterSlotPool<64>& counter_slots() {
  static gpu_common::CounterSlotPool<64> pool;
  return pool;
}

}  // namespace

Event::Event(int device_index) {
  MSA_CUDA_CHECK(cudaSetDevice(device_index));
  MSA_CUDA_CHECK(cudaEventCreate(&event_));
}

Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

double Event::elapsed_ms(const hal::Event& start) const {
  const auto* s = dynamic_cast<const Event*>(&start);
  if (s == nullptr)
    throw Error(std::string(MSA_VENDOR_NAME) + ": Event::elapsed_ms: start event is not from this backend");
  float ms = 0.0f;
  MSA_CUDA_CHECK(cudaEventElapsedTime(&ms, s->event_, event_));
  return ms;
}

Stream::Stream(std::string device_name, const DeviceProps& props, cudaStream_t external, int* flag_pool,
               int* host_flag_pool)
    : name_(std::move(device_name)), props_(props) {
  MSA_CUDA_CHECK(cudaSetDevice(props_.index));
  if (external != nullptr) {
    stream_ = external;
    owns_stream_ = false;
  } else {
    MSA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  counter_slot_ = counter_slots().acquire(props_.index);
  if (flag_pool != nullptr && host_flag_pool != nullptr && counter_slot_ >= 0 && counter_slot_ < kFlagSlots) {
    flag_ = flag_pool + 2 * counter_slot_;
    host_flag_ = host_flag_pool + 2 * counter_slot_;
    owns_flags_ = false;
    return;
  }
  MSA_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&flag_), 2 * sizeof(int)));
  MSA_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_flag_), 2 * sizeof(int)));
  MSA_CUDA_CHECK(cudaMemsetAsync(flag_, 0, 2 * sizeof(int), stream_));
  MSA_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

Stream::~Stream() {
  // No throwing from here: best effort.
  cudaSetDevice(props_.index);
  if (ws_ != nullptr && !provider_) {
    if (owns_stream_)
      cudaFreeAsync(ws_, stream_);
    else
      cudaFree(ws_);  // the caller's stream may be gone; cudaFree waits for the device
  }
  for (auto& e : ext_) e.reset();
  // A caller's stream may already be gone: the device synchronizes before dropping
  // wrapped streams (Device::~Device), so only an owned stream is waited for here.
  if (owns_stream_ && stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (owns_flags_ && flag_ != nullptr) cudaFree(flag_);
  if (owns_flags_ && host_flag_ != nullptr) cudaFreeHost(host_flag_);
  if (owns_stream_ && stream_ != nullptr) cudaStreamDestroy(stream_);
  // The stream is idle (synchronized above) and every launch leaves its counters at zero,
  // so the next stream can take the slot over.
  counter_slots().release(props_.index, counter_slot_);
}

void Stream::activate() const {
  int cur = -1;
  MSA_CUDA_CHECK(cudaGetDevice(&cur));
  if (cur != props_.index) MSA_CUDA_CHECK(cudaSetDevice(props_.index));
}

void Stream::upload(const hal::Tensor& dst, const void* src) {
  const size_t n = dst.nbytes();
  if (n == 0) return;
  activate();
  // From pageable memory this returns once `src` has been staged: src is reusable.
  MSA_CUDA_CHECK(cudaMemcpyAsync(dst.data<char>(), src, n, cudaMemcpyHostToDevice, stream_));
}

void Stream::download(void* dst, const hal::Tensor& src) {
  const size_t n = src.nbytes();
  activate();
  if (n != 0) MSA_CUDA_CHECK(cudaMemcpyAsync(dst, src.data<char>(), n, cudaMemcpyDeviceToHost, stream_));
  MSA_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void Stream::copy(const hal::Tensor& dst, const hal::Tensor& src) {
  if (!hal::check_copy(name_, dst, src)) return;
  activate();
  MSA_CUDA_CHECK(cudaMemcpyAsync(dst.data<char>(), src.data<char>(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream_));
}

void Stream::fill_bytes(const hal::Tensor& dst, uint8_t byte) {
  if (dst.nbytes() == 0) return;
  activate();
  MSA_CUDA_CHECK(cudaMemsetAsync(dst.data<char>(), byte, dst.nbytes(), stream_));
}

void Stream::record(hal::Event& event) {
  auto* e = dynamic_cast<Event*>(&event);
  if (e == nullptr) throw Error(name_ + ": record: event is not from this backend");
  activate();
  MSA_CUDA_CHECK(cudaEventRecord(e->native(), stream_));
}

void Stream::synchronize() {
  activate();
  MSA_CUDA_CHECK(cudaMemcpyAsync(host_flag_, flag_, 2 * sizeof(int), cudaMemcpyDeviceToHost, stream_));
  MSA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const unsigned bits = static_cast<unsigned>(host_flag_[0]);
  if (bits == 0) return;
  const int op = host_flag_[1] - 1;
  MSA_CUDA_CHECK(cudaMemsetAsync(flag_, 0, 2 * sizeof(int), stream_));
  MSA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  host_flag_[0] = host_flag_[1] = 0;
  std::string msg = name_ + ": invalid index data found on the device";
  if (op >= 0 && op < hal::kOpCount) msg += std::string(" by ") + hal::op_name(static_cast<hal::OpId>(op));
  msg += ":";
  for (unsigned b = 1; b != 0; b <<= 1)
    if (bits & b) msg += std::string(" ") + error_bit_text(b) + ";";
  msg += " (the bad entries were skipped)";
  throw Error(msg);
}

void* Stream::provided_workspace(size_t bytes) {
  const auto provide = [&](size_t want) {
    void* p = provider_(want);
    if (p == nullptr && want != 0)
      throw Error(name_ + ": the workspace provider returned no memory for " + std::to_string(want) + " bytes");
    return p;
  };
  const size_t want = std::max<size_t>((bytes + 4095) & ~size_t{4095}, 4096);
#if !(defined(__HIP_PLATFORM_AMD__) || defined(MSA_VENDOR_HIP))
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  MSA_CUDA_CHECK(cudaStreamGetCaptureInfo(stream_, &cap, &id));
  if (cap == cudaStreamCaptureStatusActive) {
    // Scratch baked into a graph must not be shared with eager work or other graphs.
    if (id != capture_id_ || bytes > capture_ws_bytes_) {
      capture_ws_ = provide(want);
      capture_ws_bytes_ = want;
      capture_id_ = id;
    }
    return capture_ws_;
  }
#endif
  if (bytes > ws_bytes_) {
    const size_t grown = std::max(want, ws_bytes_ + ws_bytes_ / 2);
    ws_ = provide(grown);
    ws_bytes_ = grown;
  }
  return ws_;
}

void Stream::set_workspace_provider(WorkspaceProvider provider) {
  // Scratch from the device pool goes back to it; the provider's is the provider's.
  if (ws_ != nullptr && !provider_) {
    activate();
    MSA_CUDA_CHECK(cudaFreeAsync(ws_, stream_));
  }
  ws_ = nullptr;
  ws_bytes_ = 0;
  capture_ws_ = nullptr;
  capture_ws_bytes_ = 0;
  provider_ = std::move(provider);
}

void* Stream::workspace(size_t bytes) {
  if (provider_) return provided_workspace(bytes);
  if (bytes <= ws_bytes_) return ws_;
  activate();
#if !(defined(__HIP_PLATFORM_AMD__) || defined(MSA_VENDOR_HIP))
  // Growing inside a graph capture would hand later uncaptured ops memory that only
  // exists once the graph has run: end the capture cleanly and say what to do instead.
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  MSA_CUDA_CHECK(cudaStreamIsCapturing(stream_, &cap));
  if (cap != cudaStreamCaptureStatusNone) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(stream_, &g);
    if (g != nullptr) cudaGraphDestroy(g);
    cudaGetLastError();
    throw Error(name_ + ": an op needs a larger workspace (" + std::to_string(bytes) +
                " bytes) while the stream is being captured into a graph: run the captured ops "
                "once uncaptured first (the capture was ended)");
  }
#endif
  size_t want = ws_bytes_ == 0 ? bytes : std::max(bytes, ws_bytes_ + ws_bytes_ / 2);
  want = (want + 4095) & ~size_t{4095};
  if (ws_ != nullptr) MSA_CUDA_CHECK(cudaFreeAsync(ws_, stream_));
  ws_ = nullptr;
  ws_bytes_ = 0;
  cudaError_t err = cudaMallocAsync(&ws_, want, stream_);
  if (err != cudaSuccess) {
    cudaGetLastError();
    ws_ = nullptr;
    throw Error(name_ + ": out of device memory for a workspace of " + std::to_string(want) +
                " bytes: " + cudaGetErrorString(err));
  }
  ws_bytes_ = want;
  return ws_;
}

}  // namespace msa::MSA_GPU_NS
