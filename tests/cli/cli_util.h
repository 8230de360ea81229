// Helpers of the CLI tests: run the msa binary with arguments (stdout and stderr
// captured), a per-process temp folder, and small input tensors written as safetensors.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hal/host_tensor.h"
#include "hal/safetensors.h"

namespace msa::test::cli {

namespace fs = std::filesystem;
using msa::hal::DType;
using msa::hal::HostTensor;
using Tensors = std::map<std::string, HostTensor>;

struct Result {
  int code;
  std::string output;
};

inline fs::path temp_dir() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("msa_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Runs `msa <args>` through the shell, after the shell commands `prefix` (e.g. a ulimit).
inline Result run_cli(const std::string& args, const std::string& prefix = "") {
  const fs::path log = temp_dir() / "out.txt";
  const std::string cmd = prefix + std::string(MSA_CLI_PATH) + " " + args + " > " + log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream f(log);
  std::stringstream s;
  s << f.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, s.str()};
}

inline HostTensor rnd(DType t, std::vector<int64_t> shape, uint64_t seed) {
  HostTensor h(t, std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < h.numel(); ++i) h.set(i, u(rng));
  return h;
}

inline HostTensor ints(std::vector<int64_t> shape, std::vector<int32_t> v) {
  HostTensor h(DType::i32, std::move(shape));
  std::copy(v.begin(), v.end(), h.data<int32_t>());
  return h;
}

// Paged batch: B=2, Hkv=2, Bs=8, D=16, kv_len {13, 9}, one query each (decode).
inline Tensors paged_inputs(DType t) {
  Tensors m;
  m["q"] = rnd(t, {2, 4, 16}, 1);
  m["k_cache"] = rnd(t, {4, 2, 8, 16}, 2);
  m["v_cache"] = rnd(t, {4, 2, 8, 16}, 3);
  m["block_table"] = ints({2, 2}, {3, 0, 2, 1});
  m["kv_len"] = ints({2}, {13, 9});
  m["cu_q"] = ints({3}, {0, 1, 2});
  return m;
}

inline std::string write(const std::string& name, const Tensors& m) {
  const std::string p = (temp_dir() / name).string();
  msa::hal::write_safetensors(p, m);
  return p;
}

}  // namespace msa::test::cli
