#!/usr/bin/env bash
# One device call for the CUDA backend: build, cross-check (native and portable tier),
# GoogleTest suites, compute-sanitizer (memcheck, racecheck) on the quick cases, the
# decode benchmarks and the PyTorch SDPA baseline. Logs under $OUT; a summary last.
#   run from the repo root on the GPU machine: bash bench/cuda_device_run.sh [phases]
# phases (default all, in this order): build check test bench sdpa checkp sanitize
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
PHASES=${1:-"build check test bench sdpa checkp sanitize"}
LOG=$OUT/run.log
start=$(date +%s)
say() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$LOG"; }
has() { [[ " $PHASES " == *" $1 "* ]]; }
SUMMARY=()

source .device-deps/unpack.sh >/dev/null 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv,noheader | tee -a "$LOG"

if has build; then
  say "configure + build"
  { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
      -DMSA_VULKAN=OFF -DMSA_HIP=OFF -DMSA_CPU_SIMD=OFF -DMSA_CUDA=ON \
      -DCMAKE_CXX_FLAGS="-include cstdint" &&
    cmake --build build-gpu -j16 --target msa_cli msa-bench msa_tests_cuda; } > "$OUT/build.log" 2>&1
  rc=$?
  grep -E "error|warning: .*spill" "$OUT/build.log" | head -20 | tee -a "$LOG"
  SUMMARY+=("build rc=$rc")
  if [ $rc -ne 0 ]; then tail -40 "$OUT/build.log"; exit 1; fi
fi
MSA=build-gpu/tools/msa

if has check; then
  say "msa check full (native tier)"
  timeout 150 $MSA check --backend cuda --cases full > "$OUT/check_native.log" 2>&1
  SUMMARY+=("check native rc=$? $(grep -cE '^FAILED' "$OUT/check_native.log") failed cases")
  grep -vE "^(skipped|FAILED)" "$OUT/check_native.log" | tail -25 | tee -a "$LOG"
  grep -E "^FAILED" "$OUT/check_native.log" | cut -c1-300 | head -30 | tee -a "$LOG"
fi

if has test; then
  say "gtest: cuda + crosscheck"
  timeout 40 build-gpu/tests/msa_tests_cuda 2>&1 | tail -30 >> "$LOG"
  SUMMARY+=("gtest cuda rc=${PIPESTATUS[0]}")
fi

if has checkp; then
  say "msa check full (MSA_CUDA_TIER=portable)"
  MSA_CUDA_TIER=portable timeout 120 $MSA check --backend cuda --cases full > "$OUT/check_portable.log" 2>&1
  SUMMARY+=("check portable rc=$? $(grep -cE '^FAILED' "$OUT/check_portable.log") failed cases")
  grep -E "FAIL|total" "$OUT/check_portable.log" | cut -c1-300 | head -15 | tee -a "$LOG"
fi

if has sanitize; then
  say "compute-sanitizer memcheck / racecheck on quick cases"
  { timeout 90 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 $MSA check --backend cuda --cases quick 2>&1 | tail -15
    echo "memcheck rc=${PIPESTATUS[0]}"
    timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 $MSA check --backend cuda --cases quick \
      --op indexer_score,block_topk,sparse_block_attention,dense_attention,patch_attention_3d,argmax,scatter_visual,rms_norm 2>&1 | tail -15
    echo "racecheck rc=${PIPESTATUS[0]}"; } > "$OUT/sanitizer.log" 2>&1
  SUMMARY+=("$(grep -E '^(memcheck|racecheck) rc' "$OUT/sanitizer.log" | tr '\n' ' ')")
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$OUT/sanitizer.log" | tee -a "$LOG"
fi

if has bench; then
  say "msa-bench decode (L = 32K, 128K, 1M; batch 1, 8)"
  FILTER=${MSA_BENCH_FILTER:-'T=(1|8) q=.*kv=\[(8 x )?(32768|131072|1048576)|q=\[8192] kv=\[32768]'}
  timeout 150 build-gpu/bench/msa-bench --backend=cuda --benchmark_filter="$FILTER" \
    --benchmark_min_time=0.05 --benchmark_out="$OUT/bench.json" --benchmark_out_format=json > "$OUT/bench.log" 2>&1
  SUMMARY+=("bench rc=$?")
  grep -vE "^\s*$" "$OUT/bench.log" | cut -c1-230 | tail -60 >> "$LOG"
fi

if has sdpa; then
  say "PyTorch SDPA decode baseline"
  PYTHONUNBUFFERED=1 timeout 60 python3 bench/sdpa_baseline.py --out "$OUT/sdpa.json" 2>&1 | tee -a "$LOG" | grep -E "best|ceiling"
  SUMMARY+=("sdpa rc=${PIPESTATUS[0]}")
fi

say "done"
printf '%s\n' "${SUMMARY[@]}"
