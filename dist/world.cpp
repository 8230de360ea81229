#include "dist/world.h"

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include "dist/host_group.h"
#include "hal/error.h"
#include "hal/module_loader.h"
#include "hal/registry.h"

namespace msa::dist {

int world_size_from(int flag) {
  if (flag != 0) {
    MSA_CHECK_ARG(flag >= 1 && flag <= kMaxWorld, "dist", "--gpus",
                  "must be in [1, " + std::to_string(kMaxWorld) + "], got " + std::to_string(flag));
    return flag;
  }
  const char* env = std::getenv("MSA_WORLD_SIZE");
  if (env == nullptr || *env == '\0') return 1;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < 1 || v > kMaxWorld)
    throw Error("dist: MSA_WORLD_SIZE='" + clip(env) + "' is not a world size in [1, " + std::to_string(kMaxWorld) +
                "]");
  return static_cast<int>(v);
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

World::World(const std::string& backend_in, int world) : backend_(lower(backend_in)) {
  MSA_CHECK_ARG(world >= 1, "dist", "--gpus", "must be >= 1, got " + std::to_string(world));
  MSA_CHECK_ARG(backend_.find(':') == std::string::npos, "dist", "--backend",
                "'" + backend_in + "': name a backend, not one device, with --gpus (rank r uses device r)");
  if (backend_ == "cuda") {
    const hal::BackendStatus st = [&] {
      for (const auto& s : hal::list_backends())
        if (s.name == "cuda") return s;
      return hal::BackendStatus{};
    }();
    MSA_CHECK_ARG(static_cast<int>(st.devices.size()) >= world, "dist", "--gpus",
                  std::to_string(world) + " ranks need " + std::to_string(world) + " CUDA devices, found " +
                      std::to_string(st.devices.size()));
    for (int r = 0; r < world; ++r) devices_.push_back(hal::create_device("cuda:" + std::to_string(r)));
    // The devices opened, so the module is loaded; its NCCL communicators, if built with NCCL.
    const hal::ModuleLoad& m = hal::backend_module("cuda");
    if (m.module == nullptr || m.module->make_communicators == nullptr)
      throw Error("dist: argument '--backend': this build has no NCCL; multi-rank CUDA needs it");
    std::vector<hal::Device*> d;
    for (auto& p : devices_) d.push_back(p.get());
    comms_ = m.module->make_communicators(d);
  } else if (backend_ == "cpu" || backend_ == "cpu-ref") {
    for (int r = 0; r < world; ++r) devices_.push_back(hal::create_device(backend_));
    std::vector<hal::Device*> d;
    for (auto& p : devices_) d.push_back(p.get());
    comms_ = make_host_communicators(d);
  } else {
    throw Error("dist: argument '--backend': '" + backend_in + "' has no multi-rank transport (cuda, cpu, cpu-ref)");
  }
}

World::~World() {
  comms_.clear();  // communicators before their devices
  devices_.clear();
}

void World::run(const std::function<void(Communicator&)>& fn) {
  std::mutex m;
  std::condition_variable started;
  enum class Start { waiting, go, cancel } start = Start::waiting;
  std::exception_ptr first;
  auto body = [&](int r) {
    try {
      comms_[r]->bind_thread();
      fn(*comms_[r]);
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(m);
        if (!first) first = std::current_exception();
      }
      // Host groups wake their waiting ranks with an error; NCCL ranks on a failed
      // collective cannot be woken from here (documented in docs/distributed.md).
      for (auto& c : comms_) c->abort();
    }
  };
  // Every rank's thread exists before any rank runs: a thread that cannot be created
  // (too many ranks for the host's limits) cancels the run before a collective waits
  // for a rank that never starts.
  auto ranked = [&](int r) {
    {
      std::unique_lock<std::mutex> lock(m);
      started.wait(lock, [&] { return start != Start::waiting; });
      if (start == Start::cancel) return;
    }
    body(r);
  };
  std::vector<std::thread> threads;
  auto release = [&](Start s) {
    {
      std::lock_guard<std::mutex> lock(m);
      start = s;
    }
    started.notify_all();
  };
  try {
    for (int r = 1; r < size(); ++r) threads.emplace_back(ranked, r);
  } catch (const std::system_error& e) {
    release(Start::cancel);
    for (auto& t : threads) t.join();
    throw Error("dist: argument '--gpus': cannot start the thread of rank " + std::to_string(threads.size() + 1) +
                " of " + std::to_string(size()) + ": " + e.what());
  }
  release(Start::go);
  body(0);
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace msa::dist
