#!/usr/bin/env bash
# One device call for the Vulkan backend on the GPU machine (NVIDIA driver's Vulkan):
# build, `msa check --cases full`, the Vulkan GoogleTests, and a short decode benchmark.
# Logs under $OUT; run from the repo root after `source .device-deps/unpack.sh`:
#   bash backends/vulkan/device_run.sh [phases]     (default: build check test bench)
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
PHASES=${1:-"build check test bench"}
LOG=$OUT/run.log
start=$(date +%s)
say() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$LOG"; }
has() { [[ " $PHASES " == *" $1 "* ]]; }
B=build-vkgpu
MSA=$B/tools/msa

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}" | tee -a "$LOG"
if has build; then
  say "configure + build"
  { cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DMSA_CUDA=OFF -DMSA_HIP=OFF \
      -DMSA_CPU_SIMD=OFF -DMSA_VULKAN=ON -DCMAKE_CXX_FLAGS="${MSA_EXTRA_CXX_FLAGS:-}" &&
    cmake --build $B -j16 --target msa_cli msa_tests_vulkan msa-bench; } > "$OUT/build.log" 2>&1
  rc=$?
  say "build rc=$rc"
  if [ $rc -ne 0 ]; then grep -E "error" "$OUT/build.log" | head -20 | tee -a "$LOG"; tail -30 "$OUT/build.log"; exit 1; fi
fi
$MSA devices 2>&1 | tee -a "$LOG"
if has check; then
  say "msa check --backend vulkan --cases full"
  timeout 150 $MSA check --backend vulkan --cases full > "$OUT/check_full.log" 2>&1
  say "check rc=$?"
  tail -25 "$OUT/check_full.log" | tee -a "$LOG"
  grep -E "FAIL" "$OUT/check_full.log" | head -30 | tee -a "$LOG"
fi
if has test; then
  say "msa_tests_vulkan"
  timeout 60 $B/tests/msa_tests_vulkan > "$OUT/gtest.log" 2>&1
  say "gtest rc=$?"
  grep -E "FAILED|PASSED|Failure" "$OUT/gtest.log" | head -20 | tee -a "$LOG"
fi
if has bench; then
  say "msa-bench decode (batch 1, 8; L = 32K)"
  FILTER=${MSA_BENCH_FILTER:-'T=(1|8) q=.*kv=\[(8 x )?32768'}
  timeout 80 $B/bench/msa-bench --backend=vulkan --benchmark_filter="$FILTER" \
    --benchmark_min_time=0.05 --benchmark_out="$OUT/bench.json" --benchmark_out_format=json > "$OUT/bench.log" 2>&1
  say "bench rc=$?"
  grep -vE "^\s*$" "$OUT/bench.log" | cut -c1-230 | tail -40 >> "$LOG"
fi
say "done"
