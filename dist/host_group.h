// dist::HostGroup: the communicator of ranks that are threads of one process on devices
// whose memory the host can address (the CPU backends). Each collective publishes every
// rank's buffers, meets at a barrier, copies, and meets again before anyone may reuse
// a buffer. Sums run in rank order in f32, so every rank gets the same bits.
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "dist/communicator.h"

namespace msa::dist {

class HostGroup {
 public:
  explicit HostGroup(int world);
  int world() const { return world_; }
  // Waits for every rank; throws msa::Error once the group is aborted.
  void barrier();
  // Wakes every waiting rank with an error (a rank failed; the others must not hang).
  void abort();

  // Published by each rank for the collective in progress.
  struct Slot {
    hal::Tensor in, out;
    std::vector<hal::Tensor> send;
  };
  std::vector<Slot> slots;

 private:
  int world_;
  std::mutex m_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
};

// One communicator per rank of a new group over `devices` (host-accessible devices).
std::vector<std::unique_ptr<Communicator>> make_host_communicators(const std::vector<hal::Device*>& devices);

}  // namespace msa::dist
