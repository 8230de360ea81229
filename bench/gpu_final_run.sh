#!/usr/bin/env bash
# One call on the H200 machine that checks and measures every GPU path of a version:
# build (CUDA sm_90a + Vulkan + CPU SIMD), the GoogleTest suites with the GPU present,
# msa check --cases full for CUDA (both tiers) and Vulkan, compute-sanitizer on the CUDA
# quick cases, decode benchmarks for CUDA and Vulkan side by side, PyTorch SDPA, and the
# MSA layer at 1M context. Logs under $OUT; a summary last. Each step is time-boxed.
#   from the repo root there: source .device-deps/unpack.sh; bash bench/gpu_final_run.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/run.log
start=$(date +%s)
say() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$LOG"; }
SUMMARY=()
B=build-gpu
MSA=$B/tools/msa
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader | tee -a "$LOG"

say "configure + build"
{ cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
    -DMSA_VULKAN=ON -DMSA_HIP=OFF -DMSA_CPU_SIMD=ON && cmake --build $B -j16; } > "$OUT/build.log" 2>&1
rc=$?
SUMMARY+=("build rc=$rc")
if [ $rc -ne 0 ]; then grep -E "error" "$OUT/build.log" | head -20; tail -30 "$OUT/build.log"; exit 1; fi
$MSA devices | tee -a "$LOG"

say "ctest (all suites, GPU present)"
(cd $B && timeout 170 ctest -j8 --timeout 120 > "$OUT/ctest.log" 2>&1)
SUMMARY+=("ctest rc=$? $(grep -E 'tests passed' "$OUT/ctest.log")")
grep -E "tests passed|FAILED|\(Failed\)|SEGFAULT|Timeout" "$OUT/ctest.log" | head -20 | tee -a "$LOG"

for tier in native portable; do
  say "msa check cuda full ($tier)"
  env $([ $tier = portable ] && echo MSA_CUDA_TIER=portable) timeout 100 $MSA check --backend cuda --cases full \
    > "$OUT/check_cuda_$tier.log" 2>&1
  SUMMARY+=("check cuda $tier rc=$? $(grep -E '^total' "$OUT/check_cuda_$tier.log")")
done
say "msa check vulkan full (NVIDIA driver)"
timeout 80 $MSA check --backend vulkan:0 --cases full > "$OUT/check_vulkan.log" 2>&1
SUMMARY+=("check vulkan rc=$? $(grep -E '^total' "$OUT/check_vulkan.log")")
grep -hE "FAIL" "$OUT"/check_*.log | cut -c1-250 | head -20 | tee -a "$LOG"

say "compute-sanitizer memcheck / racecheck (cuda quick)"
{ timeout 80 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 $MSA check --backend cuda --cases quick 2>&1 | tail -6
  echo "memcheck rc=${PIPESTATUS[0]}"
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 $MSA check --backend cuda --cases quick \
    --op indexer_score,block_topk,sparse_block_attention,dense_attention,patch_attention_3d 2>&1 | tail -6
  echo "racecheck rc=${PIPESTATUS[0]}"; } > "$OUT/sanitizer.log" 2>&1
SUMMARY+=("$(grep -E '^(memcheck|racecheck) rc' "$OUT/sanitizer.log" | tr '\n' ' ')")

say "msa-bench decode: cuda and vulkan side by side"
FILTER='(indexer_score|block_topk|sparse_block_attention|dense_attention|msa_layer).*T=(1|8) q=.*kv=\[(8 x )?(32768|131072|1048576)'
timeout 120 $B/bench/msa-bench --backend=cuda --benchmark_filter="$FILTER" --benchmark_min_time=0.05 \
  --benchmark_out="$OUT/bench_cuda.json" --benchmark_out_format=json > "$OUT/bench_cuda.log" 2>&1
SUMMARY+=("bench cuda rc=$?")
VFILTER='(indexer_score|sparse_block_attention|msa_layer).*T=(1|8) q=.*kv=\[(8 x )?32768'
timeout 60 $B/bench/msa-bench --backend=vulkan:0 --benchmark_filter="$VFILTER" --benchmark_min_time=0.05 \
  --benchmark_out="$OUT/bench_vulkan.json" --benchmark_out_format=json > "$OUT/bench_vulkan.log" 2>&1
SUMMARY+=("bench vulkan rc=$?")

say "PyTorch SDPA decode baseline"
PYTHONUNBUFFERED=1 timeout 60 python3 bench/sdpa_baseline.py --out "$OUT/sdpa.json" > "$OUT/sdpa.log" 2>&1
SUMMARY+=("sdpa rc=$?")

say "msa layer: decode B=8 at 1M, bf16 and fp8 indexer keys"
{ timeout 60 $MSA layer --backend cuda --batch 8 --context 1048576 --iters 20
  timeout 60 $MSA layer --backend cuda --batch 8 --context 1048576 --iters 20 --config ki_dtype=fp8_e4m3
  timeout 40 $MSA layer --backend cuda --batch 1 --context 1048576 --iters 20 --config ki_dtype=fp8_e4m3; } \
  > "$OUT/layer.log" 2>&1
SUMMARY+=("layer rc=$?")

say "msa run m3-attn (32K prompt, cuda, --check on tiny)"
{ timeout 60 $MSA run --backend cuda --model m3-attn --prompt-tokens 32768 --gen 8 --max-chunk 8192
  timeout 30 $MSA run --backend cuda --model tiny --video 8,56,56 --batch 2 --check --quiet; } > "$OUT/run.log2" 2>&1
SUMMARY+=("run rc=$?")

say "done"
printf '%s\n' "${SUMMARY[@]}" | tee -a "$LOG"
