// msa-bench: times every perf case of the case library (check/) on one backend or all,
// with device events around each call (manual time), and reports the median time, the
// bytes and FLOPs that must move / be done, GB/s, TFLOP/s and the fraction of the
// ceiling measured once in this run (bench/ceiling.h). The msa_layer cases also time
// dense attention on the same inputs and report the ratio.
//
//   msa-bench [--backend=NAME|all] [--scale=X] [--op=OP[,OP...]] [--sustain=S] [benchmark flags]
//
// --scale multiplies context and chunk lengths (default: 1 on GPUs, 1/16 on cpu, 1/256
// on cpu-ref, whose scalar f64 kernels would take minutes per call at full size, and on
// software Vulkan drivers). --sustain=S (seconds, default 0 = off): for ops under 1 ms, also
// issue back-to-back calls for S seconds and then time 16 more (`sustained_ms`): clock
// governors that wait for sustained load (the NVIDIA Vulkan driver on the H200 kept the SM
// clock at 345 MHz through single decode calls, 1980 MHz under the same calls from CUDA)
// have ramped by then.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/ceiling.h"
#include "check/case.h"
#include "hal/error.h"
#include "hal/registry.h"
#include "tools/median.h"

namespace msa::bench {
namespace {

struct Options {
  std::string backend = "auto";
  double scale = 0;  // 0 = per-backend default
  std::string ops;
  double sustain = 0;  // seconds of back-to-back calls before `sustained_ms` (0: not measured)
};

// The value of --NAME=V as a finite number >= 0 (the whole of V); otherwise an error
// naming the flag (std::stod alone took "1x" as 1 and said only "stod" for "x").
double number_arg(const char* flag, const char* v) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || v[used] != '\0' || !std::isfinite(x) || x < 0)
    throw std::invalid_argument(std::string(flag) + "='" + v + "' is not a finite number >= 0");
  return x;
}

// Takes --backend=, --scale=, --op= and --sustain= out of argv (before benchmark::Initialize).
Options parse_and_strip(int& argc, char** argv) {
  Options o;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const size_t n = std::strlen(flag);
      if (a.compare(0, n, flag) == 0 && a.size() > n && a[n] == '=') return argv[i] + n + 1;
      return nullptr;
    };
    if (const char* b = value("--backend"))
      o.backend = b;
    else if (const char* s = value("--scale"))
      o.scale = number_arg("--scale", s);
    else if (const char* f = value("--op"))
      o.ops = f;
    else if (const char* u = value("--sustain"))
      o.sustain = number_arg("--sustain", u);
    else
      argv[out++] = argv[i];
  }
  argc = out;
  argv[argc] = nullptr;
  return o;
}

double default_scale(const hal::Device& dev) {
  const hal::DeviceInfo info = dev.info();
  if (info.backend == "cpu-ref") return 1.0 / 256;
  if (info.backend == "cpu") return 1.0 / 16;
  // Software Vulkan drivers (lavapipe) run at CPU speed with small buffer limits.
  for (const char* sw : {"llvmpipe", "lavapipe", "SwiftShader"})
    if (info.model.find(sw) != std::string::npos || info.details.find(sw) != std::string::npos) return 1.0 / 256;
  return 1.0;
}

using cli::median;

// Current resident set (the peak would include the ceiling's memcpy buffers).
double rss_mib() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// One backend under test: its device, its ceiling (measured at first use), its cases.
struct Target {
  std::string backend;
  std::unique_ptr<hal::Device> dev;
  double scale = 1;
  double sustain = 0;
  cases::CaseList cases;
  bool measured = false;
  Ceiling ceiling;

  const Ceiling& ceil() {
    if (!measured) {
      measured = true;
      try {
        ceiling = measure_ceiling(*dev);
      } catch (const std::exception& e) {
        ceiling = {};
        ceiling.how = std::string("not measured: ") + e.what();
      }
      std::fprintf(stderr, "ceiling %s: %.1f GB/s, %.2f TFLOP/s (%s)\n", dev->name().c_str(), ceiling.bytes_per_s / 1e9,
                   ceiling.flops_per_s / 1e12, ceiling.how.c_str());
    }
    return ceiling;
  }
};

// The one case resident on a device at a time (freed when the next benchmark starts).
struct Resident {
  const cases::Case* c = nullptr;
  std::unique_ptr<cases::PreparedCase> prepared;
  std::string error;
} g_resident;

cases::PreparedCase* resident(Target& t, const cases::Case& c) {
  if (g_resident.c == &c) return g_resident.prepared.get();
  g_resident = {};
  g_resident.c = &c;
  try {
    g_resident.prepared = c.prepare(*t.dev, 1);
    // Rotate among three input sets when they are small enough to hold.
    if (g_resident.prepared->device_bytes() < (size_t{256} << 20)) {
      g_resident.prepared.reset();
      g_resident.prepared = c.prepare(*t.dev, 3);
    }
  } catch (const std::exception& e) {
    g_resident.prepared.reset();
    g_resident.error = std::string("prepare failed: ") + e.what();
  }
  return g_resident.prepared.get();
}

// Median seconds of `reps` event-timed calls of fn (after one warm-up call).
template <typename Fn>
double time_calls(hal::Device& dev, int reps, Fn&& fn) {
  auto e0 = dev.create_event(), e1 = dev.create_event();
  fn();
  dev.stream().synchronize();
  std::vector<double> s;
  for (int i = 0; i < reps; ++i) {
    dev.stream().record(*e0);
    fn();
    dev.stream().record(*e1);
    dev.stream().synchronize();
    s.push_back(e1->elapsed_ms(*e0) / 1e3);
  }
  return median(s);
}

// Per-call seconds after `ramp` seconds of back-to-back calls: the median of 5 groups of 16
// calls, each group between two events, queued right behind the ramp (no idle gap).
// *host_s: host seconds per call spent enqueueing the timed groups (when it is close to the
// result, the queue ran dry: the figure is the host's, not the GPU's).
template <typename Fn>
double sustained_seconds(hal::Device& dev, double ramp, Fn&& fn, double* host_s) {
  constexpr int kGroups = 5, kCalls = 16, kBetweenSyncs = 256;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < kBetweenSyncs; ++i) fn();
    dev.stream().synchronize();  // bounds the queue; a short gap every 256 calls
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= ramp) break;
  }
  std::vector<std::unique_ptr<hal::Event>> ev;
  for (int i = 0; i < 2 * kGroups; ++i) ev.push_back(dev.create_event());
  for (int i = 0; i < kBetweenSyncs; ++i) fn();  // busy again before the first event
  const auto h0 = std::chrono::steady_clock::now();
  for (int g = 0; g < kGroups; ++g) {
    dev.stream().record(*ev[2 * g]);
    for (int i = 0; i < kCalls; ++i) fn();
    dev.stream().record(*ev[2 * g + 1]);
  }
  *host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count() / (kGroups * kCalls);
  dev.stream().synchronize();
  std::vector<double> s;
  for (int g = 0; g < kGroups; ++g) s.push_back(ev[2 * g + 1]->elapsed_ms(*ev[2 * g]) / 1e3 / kCalls);
  return median(s);
}

void run_case(benchmark::State& st, Target* t, const cases::Case* c) {
  const Ceiling& ceil = t->ceil();
  cases::PreparedCase* p = resident(*t, *c);
  if (p == nullptr) {
    st.SkipWithError(g_resident.error.c_str());
    return;
  }
  if (std::string why = p->unsupported(); !why.empty()) {
    st.SkipWithError(("unsupported: " + why).c_str());
    return;
  }
  hal::Device& dev = *t->dev;
  auto e0 = dev.create_event(), e1 = dev.create_event();
  std::vector<double> secs;
  try {
    p->run();  // warm-up
    dev.stream().synchronize();
    for (auto _ : st) {
      dev.stream().record(*e0);
      p->run();
      dev.stream().record(*e1);
      dev.stream().synchronize();
      const double s = e1->elapsed_ms(*e0) / 1e3;
      st.SetIterationTime(s);
      secs.push_back(s);
    }
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  const double med = median(secs);
  if (med <= 0) return;
  const double gbs = c->bytes() / med / 1e9, tflops = c->flops() / med / 1e12;
  st.counters["median_ms"] = med * 1e3;
  st.counters["GB/s"] = gbs;
  st.counters["TFLOP/s"] = tflops;
  if (ceil.bytes_per_s > 0) st.counters["bw_frac"] = gbs * 1e9 / ceil.bytes_per_s;
  if (ceil.flops_per_s > 0 && c->flops() > 0) st.counters["flop_frac"] = tflops * 1e12 / ceil.flops_per_s;
  st.counters["dev_MiB"] = static_cast<double>(p->device_bytes()) / (1 << 20);
  st.counters["rss_MiB"] = rss_mib();
  for (const auto& [name, v] : c->counters()) st.counters[name] = v;
  try {
    for (const auto& [name, v] : c->counters_after_run(*p)) st.counters[name] = v;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: reading outputs failed: %s\n", c->name().c_str(), e.what());
  }
  if (c->has_baseline()) {
    try {
      const int reps = static_cast<int>(std::clamp<size_t>(secs.size(), 3, 20));
      const double dense = time_calls(dev, reps, [&] { p->run_baseline(); });
      st.counters["dense_ms"] = dense * 1e3;
      st.counters["speedup_vs_dense"] = dense / med;
    } catch (const std::exception& e) {
      st.counters["dense_ms"] = -1;  // baseline failed; see stderr
      std::fprintf(stderr, "%s: dense baseline failed: %s\n", c->name().c_str(), e.what());
    }
  }
  // Decode-sized ops: also time kQueued back-to-back calls inside one event pair. The
  // single-call bracket above starts on an idle device, so it holds the host's ops::
  // checks, the launch call and the launch latency; queued, the host runs ahead and the
  // figure is device time per call (or host time per call when the host is the limit).
  if (med < 1e-3) {
    try {
      constexpr int kQueued = 16;
      std::vector<double> q;
      for (int r = 0; r < 5; ++r) {
        dev.stream().record(*e0);
        for (int i = 0; i < kQueued; ++i) p->run();
        dev.stream().record(*e1);
        dev.stream().synchronize();
        q.push_back(e1->elapsed_ms(*e0) / 1e3 / kQueued);
      }
      const double qmed = median(q);
      st.counters["queued_ms"] = qmed * 1e3;
      if (qmed > 0) st.counters["queued_GB/s"] = c->bytes() / qmed / 1e9;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: queued timing failed: %s\n", c->name().c_str(), e.what());
    }
    if (t->sustain > 0) {
      try {
        double host = 0;
        const double s = sustained_seconds(
            dev, t->sustain, [&] { p->run(); }, &host);
        st.counters["sustained_ms"] = s * 1e3;
        st.counters["host_ms_per_call"] = host * 1e3;
        if (s > 0) st.counters["sustained_GB/s"] = c->bytes() / s / 1e9;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: sustained timing failed: %s\n", c->name().c_str(), e.what());
      }
    }
  }
}

std::string bench_name(const Target& t, const cases::Case& c) { return t.backend + "/" + c.name() + "/" + c.vars(); }

}  // namespace
}  // namespace msa::bench

int main(int argc, char** argv) {
  using namespace msa;
  using namespace msa::bench;
  Options opt;
  try {
    opt = parse_and_strip(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "msa-bench: bad argument: %s\n", e.what());
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  std::vector<std::string> names;
  if (opt.backend == "all") {
    for (const hal::BackendStatus& s : hal::list_backends()) {
      if (s.compiled && !s.devices.empty())
        names.push_back(s.name);
      else
        std::fprintf(stderr, "skipping backend %s: %s\n", s.name.c_str(), s.unavailable_reason.c_str());
    }
  } else {
    names.push_back(opt.backend);
  }
  std::vector<std::unique_ptr<Target>> targets;
  try {
    for (const std::string& n : names) {
      auto t = std::make_unique<Target>();
      t->dev = hal::create_device(n);
      t->backend = t->dev->info().backend;
      t->scale = opt.scale > 0 ? opt.scale : default_scale(*t->dev);
      t->sustain = opt.sustain;
      t->cases = cases::make_cases("perf", opt.ops, t->scale);
      std::fprintf(stderr, "backend %s (%s): %zu perf cases at scale %g\n", t->backend.c_str(), t->dev->name().c_str(),
                   t->cases.size(), t->scale);
      targets.push_back(std::move(t));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "msa-bench: %s\n", e.what());
    return 2;
  }
  for (auto& t : targets)
    for (const auto& c : t->cases)
      benchmark::RegisterBenchmark(bench_name(*t, *c).c_str(), run_case, t.get(), c.get())
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
  const size_t ran = benchmark::RunSpecifiedBenchmarks();
  g_resident = {};
  benchmark::Shutdown();
  if (ran == 0) std::fprintf(stderr, "msa-bench: no benchmark matched\n");
  return ran == 0 ? 1 : 0;
}
