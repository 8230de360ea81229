#!/usr/bin/env bash
# One call on the H200 machine that checks and measures every GPU path of a version:
# build (CUDA sm_90a + Vulkan), msa check --cases full for CUDA (both tiers, and each
# kernel switch off) and Vulkan, the CUDA GoogleTest suite, compute-sanitizer on the CUDA
# quick cases, decode benchmarks for CUDA and Vulkan side by side, and the MSA layer
# sweep against our dense attention and PyTorch SDPA. Logs under $OUT; a summary last.
# Each step is time-boxed so that the whole call stays under 10 minutes.
#   from the repo root there: source .device-deps/unpack.sh; bash bench/gpu_final_run.sh [phases]
# phases (default all, in this order of importance): build check sweep bench prefill test
#   sanitize dist (dist runs only where there are 2 or more GPUs)
#   MSA_SRC=<dir>  source tree to build (default: the current directory)
set -u
# Logs go to $LOGS; after every phase they are packed into $OUT/logs.tgz (the device tool
# returns at most 8 files), with run.log and the sweep's JSON and PNG beside it.
RESULT=${OUT:-/tmp/out}
OUT=${LOGS:-/tmp/msa-final-logs}
mkdir -p "$RESULT" "$OUT"
pack() { tar -czf "$RESULT/logs.tgz" -C "$OUT" . 2>/dev/null; cp "$OUT/run.log" "$RESULT/" 2>/dev/null
         cp "$OUT"/sweep/layer_sweep.* "$RESULT/" 2>/dev/null; true; }
PHASES=${1:-"build check sweep bench prefill test sanitize dist"}
has() { [[ " $PHASES " == *" $1 "* ]]; }
LOG=$OUT/run.log
start=$(date +%s)
say() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$LOG"; }
SUMMARY=()
SRC=$(cd "${MSA_SRC:-.}" && pwd)
B=$PWD/build-final
MSA=$B/tools/msa
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader | tee -a "$LOG"

if has build; then
  say "configure + build ($SRC)"
  { cmake -S "$SRC" -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
      -DMSA_VULKAN=ON -DMSA_HIP=OFF -DMSA_CPU_SIMD=OFF &&
    cmake --build $B -j16 --target msa_cli msa-bench msa_tests_cuda msa_tests_vulkan msa_tests_dist; } > "$OUT/build.log" 2>&1
  rc=$?
  SUMMARY+=("build rc=$rc")
  if [ $rc -ne 0 ]; then grep -E "error" "$OUT/build.log" | head -20; tail -30 "$OUT/build.log"; exit 1; fi
  $MSA devices | tee -a "$LOG"
  pack
fi

if has check; then
  # name:environment; every CUDA kernel switch is checked off as well as on. The routings
  # run side by side (correctness only; 16 cores for the cpu-ref side).
  say "msa check --cases full: cuda in every routing, vulkan (plain and through device addresses)"
  RUNS="native: portable:MSA_CUDA_TIER=portable decode-off:MSA_CUDA_DECODE=0
        cluster-off:MSA_CUDA_DECODE_CLUSTER=0 mma-indexer-off:MSA_CUDA_MMA_INDEXER=0
        flash-off:MSA_CUDA_FLASH=0 topk-split-off:MSA_TOPK_SPLIT=0
        wgmma-indexer-off:MSA_CUDA_WGMMA_INDEXER=0 wgmma-indexer-128:MSA_CUDA_WGMMA_INDEXER_ROWS=128
        topk-one-block-off:MSA_TOPK_ONE_BLOCK=0 topk-adaptive-off:MSA_TOPK_ADAPTIVE=0
        flash-wgmma-off:MSA_CUDA_FLASH_WGMMA=0 flash-wgmma-lockstep:MSA_CUDA_FLASH_WGMMA=1
        cluster-merge-dsmem:MSA_CUDA_DECODE_CLUSTER_MERGE=1 cluster-merge-global:MSA_CUDA_DECODE_CLUSTER_MERGE=2
        cluster-tma:MSA_CUDA_DECODE_CLUSTER_TMA=1 fused-topk-off:MSA_CUDA_FUSED_TOPK=0
        ${EXTRA_ROUTINGS:-}"
  for run in $RUNS; do
    name=${run%%:*}; envv=${run#*:}
    { env $envv timeout 150 $MSA check --backend cuda --cases full > "$OUT/check_cuda_$name.log" 2>&1
      echo "rc $?" >> "$OUT/check_cuda_$name.log"; } &
  done
  { timeout 150 $MSA check --backend vulkan:0 --cases full > "$OUT/check_vulkan.log" 2>&1
    echo "rc $?" >> "$OUT/check_vulkan.log"; } &
  { MSA_VK_FORCE_BDA=1 timeout 150 $MSA check --backend vulkan:0 --cases full \
      --op sparse_block_attention,indexer_score,kv_append > "$OUT/check_vulkan_bda.log" 2>&1
    echo "rc $?" >> "$OUT/check_vulkan_bda.log"; } &
  wait
  for f in "$OUT"/check_*.log; do
    SUMMARY+=("$(basename $f .log): $(grep -E '^total|^rc ' "$f" | tr -s ' ' | tr '\n' ' ')")
  done
  grep -hE "^FAIL" "$OUT"/check_*.log | cut -c1-250 | head -20 | tee -a "$LOG"
  pack
fi

if has sweep; then
  say "layer sweep: msa layer vs our dense and PyTorch SDPA"
  PYTHONUNBUFFERED=1 timeout 220 python3 "$SRC/bench/layer_sweep.py" --msa $MSA --out "$OUT/sweep" \
    ${SWEEP_ARGS:-} > "$OUT/sweep.log" 2>&1
  SUMMARY+=("sweep rc=$?")
  grep -E "speed-up" "$OUT/sweep.log" | tee -a "$LOG"
  pack
fi

if has bench; then
  say "msa-bench decode: cuda and vulkan side by side"
  F='(indexer_score|block_topk|indexer_topk|sparse_block_attention|dense_attention|msa_layer).*T=(1|8) q=.*kv=\[(8 x )?(32768|131072|1048576)'
  timeout 150 $B/bench/msa-bench --backend=cuda --benchmark_filter="$F" --benchmark_min_time=0.05s --sustain=0.5 \
    --benchmark_out="$OUT/bench_cuda.json" --benchmark_out_format=json > "$OUT/bench_cuda.log" 2>&1
  SUMMARY+=("bench cuda rc=$?")
  VF='(indexer_score|sparse_block_attention|msa_layer).*T=(1|8) q=.*kv=\[(8 x )?(32768|1048576)'
  timeout 120 $B/bench/msa-bench --backend=vulkan:0 --benchmark_filter="$VF" --benchmark_min_time=0.05s --sustain=0.5 \
    --benchmark_out="$OUT/bench_vulkan.json" --benchmark_out_format=json > "$OUT/bench_vulkan.log" 2>&1
  SUMMARY+=("bench vulkan rc=$?")
  pack
fi

if has prefill; then
  # Sparse prefill of an 8K chunk at token-level selection (Qb = 1): the wmma kernel
  # (default) against the flash kernel's union walk (MSA_CUDA_FLASH_SPARSE=1), on
  # independent random selections and on correlated ones (select=walk).
  say "sparse prefill Qb=1: wmma vs flash union walk, random and walk selections"
  PF='sparse_block_attention/B=1 T=8192 q=.8192. kv=.(131072|1048576). .*Qb=1 '  # (no \]: std::regex)
  for fs in 0 1; do
    MSA_CUDA_FLASH_SPARSE=$fs timeout 60 $B/bench/msa-bench --backend=cuda --benchmark_filter="$PF" \
      --benchmark_min_time=0.05s > "$OUT/bench_sparse_prefill_flash$fs.log" 2>&1
    SUMMARY+=("sparse prefill flash_sparse=$fs rc=$?")
    grep -E "^cuda/sparse" "$OUT/bench_sparse_prefill_flash$fs.log" | cut -c1-200 | tee -a "$LOG"
  done
  pack
fi

if has test; then
  for t in cuda vulkan; do
    exe=$B/tests/$t/msa_tests_$t; [ -x $exe ] || exe=$B/tests/msa_tests_$t
    say "msa_tests_$t"
    timeout 60 $exe > "$OUT/test_$t.log" 2>&1
    SUMMARY+=("msa_tests_$t rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/test_$t.log" | tr '\n' ' ')")
  done
  pack
fi

if has sanitize; then
  # memcheck over every case that reaches the attention, indexer and top-k kernels (the
  # prefill kernels need the full set's T > 512 shapes); racecheck over the quick cases.
  say "compute-sanitizer memcheck (full attention cases) / racecheck (quick)"
  ops=indexer_score,block_topk,sparse_block_attention,dense_attention,patch_attention_3d
  { timeout 90 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 3 $MSA check --backend cuda --cases full --op $ops 2>&1 | tail -4
    echo "memcheck rc=${PIPESTATUS[0]}"
    timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 $MSA check --backend cuda --cases quick --op $ops 2>&1 | tail -4
    echo "racecheck rc=${PIPESTATUS[0]}"; } > "$OUT/sanitizer.log" 2>&1
  SUMMARY+=("$(grep -E '^(memcheck|racecheck) rc' "$OUT/sanitizer.log" | tr '\n' ' ')")
  pack
fi

if has dist && [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared hosts
  say "msa_tests_dist and msa layer --gpus 2 (heads-sharded-ki) on 2 GPUs"
  exe=$B/tests/dist/msa_tests_dist; [ -x $exe ] || exe=$B/tests/msa_tests_dist
  timeout 120 $exe > "$OUT/test_dist.log" 2>&1
  SUMMARY+=("msa_tests_dist rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/test_dist.log" | tr '\n' ' ')")
  for g in 1 2; do
    timeout 60 $MSA layer --backend cuda --batch 8 --context 1048576 --iters 10 --gpus $g --parallel heads-sharded-ki
  done > "$OUT/layer_dist.log" 2>&1
  SUMMARY+=("layer heads-sharded-ki rc=$?")
  grep -E "^msa layer|layer step|single device|check vs" "$OUT/layer_dist.log" | tee -a "$LOG"
  pack
fi

say "done"
printf '%s\n' "${SUMMARY[@]}" | tee -a "$LOG"
pack
