// CUDA graphs over a cuda device's stream (CUDA backend only, header-only so that a
// test or an application linking libmsa plus the CUDA runtime can use it). The MSA
// layer path (kv_append, indexer_score, block_topk, sparse_block_attention) neither
// allocates nor synchronises once warmed up, so it can be captured: run it once
// uncaptured first (that sizes the stream's workspace and sets kernel attributes), then
//   CapturedGraph g(dev); ops...(dev, args); g.end(); g.replay(); ...
// Replays reuse the captured pointers and sizes: change the data, not the tensors.
#pragma once
#include <string>

#include "backends/cuda/check.h"
#include "backends/cuda/device.h"
#include "hal/error.h"

namespace msa::cuda {

// The stream of a cuda device; throws msa::Error for a device of another backend.
inline Stream& stream_of(hal::Device& dev) {
  if (dev.info().backend != "cuda") throw Error("cuda graph: device " + dev.name() + " is not a cuda device");
  auto& st = static_cast<Stream&>(dev.stream());
  st.activate();
  return st;
}

class CapturedGraph {
 public:
  // Starts capturing dev's stream (thread-local mode): work enqueued on it until end()
  // is recorded, not run.
  explicit CapturedGraph(hal::Device& dev) : stream_(stream_of(dev).native()) {
    MSA_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
  }
  ~CapturedGraph() {
    if (capturing_) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(stream_, &g);
      if (g != nullptr) cudaGraphDestroy(g);
      cudaGetLastError();  // the capture may already have been ended (workspace guard)
    }
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Ends the capture and instantiates the graph.
  void end() {
    capturing_ = false;
    MSA_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph_));
    MSA_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  // Enqueues one replay on the stream (asynchronous, like any op).
  void replay() {
    if (exec_ == nullptr) throw Error("cuda graph: replay() before end()");
    MSA_CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
  }
  // Nodes in the captured graph (0 before end()).
  size_t nodes() const {
    size_t n = 0;
    if (graph_ != nullptr) MSA_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &n));
    return n;
  }

 private:
  cudaStream_t stream_ = nullptr;
  bool capturing_ = false;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace msa::cuda
