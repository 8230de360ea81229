// dist::Communicator over NCCL: each call enqueues one NCCL operation (or one group of
// sends and receives) on the rank's CUDA stream, so it orders with the ops around it and
// is capturable like them.
#include <nccl.h>

#include <cstdlib>
#include <string>

#include "backends/cuda/check.h"
#include "backends/cuda/device.h"
#include "dist/nccl.h"
#include "hal/error.h"

namespace msa::dist {
namespace {

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    throw Error(std::string("nccl: ") + what + " failed: " + ncclGetErrorString(r) + " (" + std::to_string(r) + ")");
}

ncclDataType_t nccl_type(hal::DType t) {
  switch (t) {
    case hal::DType::f32:
      return ncclFloat32;
    case hal::DType::f16:
      return ncclFloat16;
    case hal::DType::bf16:
      return ncclBfloat16;
    default:
      throw Error(std::string("all_reduce_sum: argument 'buf': dtype must be f32, f16 or bf16, got ") +
                  hal::dtype_name(t));
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int world, cuda::Device& dev)
      : comm_(comm), rank_(rank), world_(world), dev_(dev) {}
  ~NcclCommunicator() override {
    if (comm_ != nullptr) {
      dev_.gpu().activate();
      ncclCommDestroy(comm_);
    }
  }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  hal::Device& device() const override { return dev_; }
  void bind_thread() override { dev_.gpu().activate(); }

  void all_reduce_sum(const hal::Tensor& buf) override {
    const ncclDataType_t t = nccl_type(buf.dtype);
    dev_.gpu().activate();
    nccl_check(ncclAllReduce(buf.data<void>(), buf.data<void>(), static_cast<size_t>(buf.numel()), t, ncclSum, comm_,
                             dev_.gpu().native()),
               "ncclAllReduce");
  }

  void all_gather(const hal::Tensor& in, const hal::Tensor& out) override {
    MSA_CHECK_ARG(out.nbytes() == in.nbytes() * static_cast<size_t>(world_), "all_gather", "out",
                  "must hold world x in = " + std::to_string(in.nbytes() * world_) + " bytes, has " +
                      std::to_string(out.nbytes()));
    dev_.gpu().activate();
    nccl_check(ncclAllGather(in.data<void>(), out.data<void>(), in.nbytes(), ncclUint8, comm_, dev_.gpu().native()),
               "ncclAllGather");
  }

  void all_to_all(std::span<const hal::Tensor> send, std::span<const hal::Tensor> recv) override {
    MSA_CHECK_ARG(send.size() == static_cast<size_t>(world_), "all_to_all", "send", "needs one entry per rank");
    MSA_CHECK_ARG(recv.size() == static_cast<size_t>(world_), "all_to_all", "recv", "needs one entry per rank");
    dev_.gpu().activate();
    cudaStream_t s = dev_.gpu().native();
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (int p = 0; p < world_; ++p) {
      if (p == rank_) continue;
      if (send[p].present() && send[p].nbytes() > 0)
        nccl_check(ncclSend(send[p].data<void>(), send[p].nbytes(), ncclUint8, p, comm_, s), "ncclSend");
      if (recv[p].present() && recv[p].nbytes() > 0)
        nccl_check(ncclRecv(recv[p].data<void>(), recv[p].nbytes(), ncclUint8, p, comm_, s), "ncclRecv");
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
  }

 private:
  ncclComm_t comm_ = nullptr;
  int rank_, world_;
  cuda::Device& dev_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<hal::Device*>& devices) {
  // Multicast objects can take a shared host's GPUs out of service: off unless asked for.
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  const int world = static_cast<int>(devices.size());
  std::vector<cuda::Device*> cd;
  for (hal::Device* d : devices) {
    auto* c = dynamic_cast<cuda::Device*>(d);
    MSA_CHECK_ARG(c != nullptr, "dist", "backend", "device '" + d->name() + "' is not a CUDA device");
    cd.push_back(c);
  }
  ncclUniqueId id;
  nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  std::vector<ncclComm_t> comms(static_cast<size_t>(world), nullptr);
  nccl_check(ncclGroupStart(), "ncclGroupStart");
  for (int r = 0; r < world; ++r) {
    cd[r]->gpu().activate();
    nccl_check(ncclCommInitRank(&comms[r], world, id, r), "ncclCommInitRank");
  }
  nccl_check(ncclGroupEnd(), "ncclGroupEnd (communicator setup)");
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < world; ++r) out.push_back(std::make_unique<NcclCommunicator>(comms[r], r, world, *cd[r]));
  return out;
}

}  // namespace msa::dist
