// dist::World: the ranks of one process, one device and one communicator each, and the
// threads that drive them. The world size comes from `--gpus N` (or MSA_WORLD_SIZE);
// rank r runs on device r of the backend: "cuda" -> cuda:0 .. cuda:N-1 joined through
// NCCL; the CPU backends ("cpu", "cpu-ref") -> N devices joined by a host group (for
// tests and CPU-only machines).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "hal/export.h"

namespace msa::dist {

// Most ranks a world may have.
constexpr int kMaxWorld = 1024;

// The world size asked for: `flag` when > 0, else MSA_WORLD_SIZE, else 1. Throws
// msa::Error naming --gpus for a value outside [1, kMaxWorld] or an unparsable
// environment value.
MSA_API int world_size_from(int flag);

class MSA_API World {
 public:
  // Opens `world` devices of `backend` (a bare backend name: "cuda", "cpu", "cpu-ref")
  // and their communicators. Throws msa::Error naming --gpus when the backend has fewer
  // devices than ranks, or naming --backend for a backend with no multi-rank transport.
  World(const std::string& backend, int world);
  ~World();
  int size() const { return static_cast<int>(devices_.size()); }
  hal::Device& device(int rank) { return *devices_[rank]; }
  Communicator& comm(int rank) { return *comms_[rank]; }

  // Runs fn(comm) for every rank on its own thread (rank 0 on the calling thread) and
  // waits. The first exception aborts the other ranks' host collectives and is rethrown.
  void run(const std::function<void(Communicator&)>& fn);

 private:
  std::string backend_;
  std::vector<std::unique_ptr<hal::Device>> devices_;
  std::vector<std::unique_ptr<Communicator>> comms_;
};

}  // namespace msa::dist
