// dist::Communicator: the transfers between the ranks of a world, one device per rank.
// Every rank makes the same calls in the same order (collective semantics). On CUDA
// devices the calls are NCCL operations enqueued on the device's stream; on the CPU
// backends (host memory) an in-process group of threads does the copies at once.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "hal/device.h"
#include "hal/export.h"
#include "hal/tensor.h"

namespace msa::dist {

class MSA_API Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // The device this rank's transfers run on.
  virtual hal::Device& device() const = 0;
  // Makes this rank's device current on the calling thread (CUDA); a no-op elsewhere.
  virtual void bind_thread() {}
  // Called when some rank failed: wakes this rank if it waits in a collective (host
  // groups). NCCL collectives already enqueued are not cancelled.
  virtual void abort() {}

  // In place: buf = the element-wise sum of every rank's buf (f32, f16 or bf16; the same
  // shape on every rank).
  virtual void all_reduce_sum(const hal::Tensor& buf) = 0;
  // out = the bytes of every rank's `in`, concatenated in rank order; out.nbytes() must be
  // world * in.nbytes(), and `in` the same size on every rank.
  virtual void all_gather(const hal::Tensor& in, const hal::Tensor& out) = 0;
  // Point to point: send[p] goes to rank p and arrives in that rank's recv[this rank].
  // Both spans have world entries; an absent tensor (or the own rank's entry) moves
  // nothing. send[p].nbytes() on this rank must equal recv[this rank].nbytes() on rank p.
  virtual void all_to_all(std::span<const hal::Tensor> send, std::span<const hal::Tensor> recv) = 0;
};

// Every rank's `values` (the same count on every rank), concatenated in rank order.
// Moves through the device (an all_gather of an i32 tensor); values must fit in int32.
MSA_API std::vector<int32_t> all_gather_ints(Communicator& comm, std::span<const int32_t> values);

}  // namespace msa::dist
