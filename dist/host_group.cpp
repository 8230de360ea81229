#include "dist/host_group.h"

#include <cstring>
#include <string>

#include "hal/dtype.h"
#include "hal/error.h"

namespace msa::dist {

HostGroup::HostGroup(int world) : slots(static_cast<size_t>(world)), world_(world) {}

void HostGroup::barrier() {
  std::unique_lock<std::mutex> lock(m_);
  if (aborted_) throw Error("dist: another rank failed; collective abandoned");
  const uint64_t gen = generation_;
  if (++arrived_ == world_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
  if (generation_ == gen) throw Error("dist: another rank failed; collective abandoned");
}

void HostGroup::abort() {
  std::lock_guard<std::mutex> lock(m_);
  aborted_ = true;
  cv_.notify_all();
}

namespace {

void check_host(const hal::Tensor& t, const char* what) {
  if (t.present() && t.buffer->handle() == nullptr && t.nbytes() > 0)
    throw Error(std::string("dist: ") + what + " has no host address");
}

class HostCommunicator final : public Communicator {
 public:
  HostCommunicator(std::shared_ptr<HostGroup> g, int rank, hal::Device& dev)
      : g_(std::move(g)), rank_(rank), dev_(dev) {}
  int rank() const override { return rank_; }
  int world() const override { return g_->world(); }
  hal::Device& device() const override { return dev_; }
  void abort() override { g_->abort(); }

  void all_reduce_sum(const hal::Tensor& buf) override {
    const hal::DType t = buf.dtype;
    MSA_CHECK_ARG(t == hal::DType::f32 || t == hal::DType::f16 || t == hal::DType::bf16, "all_reduce_sum", "buf",
                  std::string("dtype must be f32, f16 or bf16, got ") + hal::dtype_name(t));
    check_host(buf, "all_reduce_sum buf");
    dev_.stream().synchronize();  // the buffer's producers are done
    g_->slots[rank_].in = buf;
    g_->barrier();
    const int64_t n = buf.numel();
    for (int r = 0; r < world(); ++r)
      if (g_->slots[r].in.numel() != n || g_->slots[r].in.dtype != t)
        throw Error("all_reduce_sum: argument 'buf': rank " + std::to_string(r) + " has " + g_->slots[r].in.str() +
                    ", rank " + std::to_string(rank_) + " has " + buf.str());
    std::vector<float> sum(static_cast<size_t>(n), 0.0f);
    for (int r = 0; r < world(); ++r) {
      const void* src = g_->slots[r].in.data<const void>();
      for (int64_t i = 0; i < n; ++i) sum[i] += hal::load_as_f32(t, src, static_cast<size_t>(i));
    }
    g_->barrier();  // every rank has read every buffer
    void* dst = buf.data<void>();
    for (int64_t i = 0; i < n; ++i) hal::store_from_f32(t, dst, static_cast<size_t>(i), sum[i]);
  }

  void all_gather(const hal::Tensor& in, const hal::Tensor& out) override {
    MSA_CHECK_ARG(out.nbytes() == in.nbytes() * static_cast<size_t>(world()), "all_gather", "out",
                  "must hold world x in = " + std::to_string(in.nbytes() * world()) + " bytes, has " +
                      std::to_string(out.nbytes()));
    check_host(in, "all_gather in");
    check_host(out, "all_gather out");
    dev_.stream().synchronize();
    g_->slots[rank_].in = in;
    g_->barrier();
    for (int r = 0; r < world(); ++r)
      if (g_->slots[r].in.nbytes() != in.nbytes())
        throw Error("all_gather: argument 'in': rank " + std::to_string(r) + " sends " +
                    std::to_string(g_->slots[r].in.nbytes()) + " bytes, rank " + std::to_string(rank_) + " " +
                    std::to_string(in.nbytes()));
    for (int r = 0; r < world(); ++r)
      if (in.nbytes() > 0)
        std::memcpy(out.data<char>() + r * in.nbytes(), g_->slots[r].in.data<const char>(), in.nbytes());
    g_->barrier();
  }

  void all_to_all(std::span<const hal::Tensor> send, std::span<const hal::Tensor> recv) override {
    MSA_CHECK_ARG(send.size() == static_cast<size_t>(world()), "all_to_all", "send", "needs one entry per rank");
    MSA_CHECK_ARG(recv.size() == static_cast<size_t>(world()), "all_to_all", "recv", "needs one entry per rank");
    for (const auto& t : send) check_host(t, "all_to_all send");
    for (const auto& t : recv) check_host(t, "all_to_all recv");
    dev_.stream().synchronize();
    g_->slots[rank_].send.assign(send.begin(), send.end());
    g_->barrier();
    std::string err;
    for (int p = 0; p < world(); ++p) {
      if (p == rank_) continue;
      const hal::Tensor& src = g_->slots[p].send[rank_];
      const size_t sb = src.present() ? src.nbytes() : 0, rb = recv[p].present() ? recv[p].nbytes() : 0;
      if (sb != rb) {
        err = "all_to_all: argument 'recv': rank " + std::to_string(p) + " sends " + std::to_string(sb) +
              " bytes to rank " + std::to_string(rank_) + ", which expects " + std::to_string(rb);
        break;
      }
      if (sb > 0) std::memcpy(recv[p].data<char>(), src.data<const char>(), sb);
    }
    g_->barrier();  // nobody reuses a send buffer before every peer has copied it
    if (!err.empty()) throw Error(err);
  }

 private:
  std::shared_ptr<HostGroup> g_;
  int rank_;
  hal::Device& dev_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_host_communicators(const std::vector<hal::Device*>& devices) {
  const int world = static_cast<int>(devices.size());
  auto g = std::make_shared<HostGroup>(world);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < world; ++r) {
    MSA_CHECK_ARG(
        devices[r]->host_accessible(), "dist", "backend",
        "device '" + devices[r]->name() + "' is not host-accessible; CPU backends use the host group, CUDA uses NCCL");
    out.push_back(std::make_unique<HostCommunicator>(g, r, *devices[r]));
  }
  return out;
}

}  // namespace msa::dist
