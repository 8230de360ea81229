// NCCL communicators for ranks on CUDA devices (built when the CUDA backend and NCCL are).
#pragma once
#include <memory>
#include <vector>

#include "dist/communicator.h"

namespace msa::dist {

// One communicator per device ("cuda:N", distinct), rank r on devices[r]. Rank 0 makes
// the unique id; every rank joins with ncclCommInitRank inside one group. NVLink
// multicast (NVLS) is switched off unless NCCL_NVLS_ENABLE is set already.
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<hal::Device*>& devices);

}  // namespace msa::dist
