#!/usr/bin/env bash
# Session 5, last call: geometries of the global-merge sparse decode at B = 8, 1M (checks of
# each, queued layer op time, ncu kernel time with caches flushed). From the repo root
# there, after source .device-deps/unpack.sh:  S=<source tree> bash <S>/bench/dec5d_device_run.sh
set -u
S=$(cd "${S:-.}" && pwd)
LOG=${LOGS:-/tmp/dec5d-logs}
mkdir -p "$LOG"
B=/tmp/build-dec5d
LOG=$LOG source "$S/bench/device_cuda_build.sh" msa_cli msa-bench
M=$B/tools/msa BENCH=$B/bench/msa-bench
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
F8='sparse_block_attention/B=8 T=8 .*kv=.8 x 1048576\.\.'
VARIANTS="global-c4:MSA_CUDA_DECODE_CLUSTER_MERGE=2
  global-occ2-c4:MSA_CUDA_DECODE_CLUSTER_MERGE=2,MSA_CUDA_DECODE_CLUSTER_OCC=2
  global-occ2-c8:MSA_CUDA_DECODE_CLUSTER_MERGE=2,MSA_CUDA_DECODE_CLUSTER_OCC=2,MSA_CUDA_DECODE_CLUSTER_SIZE=8
  global-occ2-c16:MSA_CUDA_DECODE_CLUSTER_MERGE=2,MSA_CUDA_DECODE_CLUSTER_OCC=2,MSA_CUDA_DECODE_CLUSTER_SIZE=16
  global-c8:MSA_CUDA_DECODE_CLUSTER_MERGE=2,MSA_CUDA_DECODE_CLUSTER_SIZE=8"
pids=()
for v in $VARIANTS; do
  name=${v%%:*}; envv=${v#*:}; envv=${envv//,/ }
  (env $envv timeout 60 $M check --backend cuda --cases full --op sparse_block_attention > "$LOG/check_$name.log" 2>&1
   echo "rc $?" >> "$LOG/check_$name.log") & pids+=($!)
done
wait "${pids[@]}"
for v in $VARIANTS; do
  name=${v%%:*}; envv=${v#*:}; envv=${envv//,/ }
  printf -- "-- %-16s check: %s | " "$name" "$(grep -E '^total|^rc' "$LOG/check_$name.log" | tr -s ' ' | tr '\n' ' ')"
  env $envv timeout 30 $M layer --backend cuda --batch 8 --context 1048576 --iters 30 --queued > "$LOG/layer_$name.log" 2>&1
  grep -E '^sparse_block_attention ' "$LOG/layer_$name.log" | awk '{printf "queued %s ms | ", $NF}'
  env $envv timeout 30 "$NCU" --clock-control none -k 'regex:decode' --launch-skip 6 --launch-count 3 \
    --metrics gpu__time_duration.sum $BENCH --backend=cuda --op=sparse_block_attention --benchmark_filter="$F8" \
    --benchmark_min_time=0.01s > "$LOG/ncu_$name.log" 2>&1
  grep -E "gpu__time_duration" "$LOG/ncu_$name.log" | awk '{printf "%s ", $3}'; echo "us (ncu)"
done
