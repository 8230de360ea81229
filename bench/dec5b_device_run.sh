#!/usr/bin/env bash
# Session 5, second call: the cluster decode kernel's geometries side by side (queued layer
# B=8 1M and ncu kernel time with caches flushed), and a SASS-level profile of block_topk
# in the B=1 128K layer. From the repo root there, after source .device-deps/unpack.sh:
#   S=<source tree> bash <S>/bench/dec5b_device_run.sh     (logs in $LOGS, packed into $OUT)
set -u
S=$(cd "${S:-.}" && pwd)
LOG=${LOGS:-/tmp/dec5b-logs}
mkdir -p "$LOG"
B=/tmp/build-dec5
CMAKE_EXTRA=-DCMAKE_CUDA_FLAGS=-lineinfo LOG=$LOG source "$S/bench/device_cuda_build.sh" msa_cli msa-bench msa-slab-probe
M=$B/tools/msa BENCH=$B/bench/msa-bench
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
LAY='^(block_topk|indexer_score|sparse_block_attention|msa layer \(sum\)) '
F8='sparse_block_attention/B=8 T=8 .*kv=.8 x 1048576\.\.'
echo "== sparse decode B=8 1M: geometry variants (queued layer ms; ncu kernel us, caches flushed)"
for v in "default:" "occ2:MSA_CUDA_DECODE_CLUSTER_OCC=2" "occ2-c4:MSA_CUDA_DECODE_CLUSTER_OCC=2 MSA_CUDA_DECODE_CLUSTER_SIZE=4" \
         "occ2-c16:MSA_CUDA_DECODE_CLUSTER_OCC=2 MSA_CUDA_DECODE_CLUSTER_SIZE=16" \
         "occ1-c16:MSA_CUDA_DECODE_CLUSTER_SIZE=16" "occ1-c8:MSA_CUDA_DECODE_CLUSTER_SIZE=8" "v4:MSA_CUDA_DECODE_CLUSTER=0"; do
  name=${v%%:*}; envv=${v#*:}
  printf -- "-- %-9s " "$name"
  env $envv MSA_CUDA_DECODE_CLUSTER_LOG=1 timeout 40 $M layer --backend cuda --batch 8 --context 1048576 --iters 20 --queued \
    > "$LOG/layer_$name.log" 2>&1
  grep -E "$LAY" "$LOG/layer_$name.log" | awk '{printf "%s=%s ", $1, $NF}'
  grep -m1 "decode_cluster: groups" "$LOG/layer_$name.log" | sed 's/decode_cluster: //' | tr -d '\n'
  env $envv timeout 40 "$NCU" --clock-control none -k 'regex:decode' --launch-skip 6 --launch-count 2 \
    --metrics gpu__time_duration.sum,sm__cycles_active.avg,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    $BENCH --backend=cuda --op=sparse_block_attention --benchmark_filter="$F8" --benchmark_min_time=0.01 > "$LOG/ncu_$name.log" 2>&1
  echo; grep -E "gpu__time_duration|sm__cycles_active|dram__thr" "$LOG/ncu_$name.log" | awk '{printf "   %s %s %s\n", $1, $2, $3}'
done
echo "== block_topk, B=1 128K layer: SASS-level profile (one launch, caches and clocks as they are)"
timeout 90 "$NCU" --clock-control none --cache-control none -k regex:topk --launch-skip 2 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section SpeedOfLight --page source --print-source sass --csv \
  $M layer --backend cuda --batch 1 --context 131072 --iters 2 > "$LOG/ncu_topk_sass.csv" 2>&1
echo "rc $? lines $(wc -l < "$LOG/ncu_topk_sass.csv")"
timeout 60 "$NCU" --clock-control none --cache-control none -k regex:topk --launch-skip 2 --launch-count 1 \
  --metrics gpu__time_duration.sum,sm__cycles_active.max,smsp__inst_executed.sum,sm__warps_launched.sum,smsp__cycles_active.max \
  $M layer --backend cuda --batch 1 --context 131072 --iters 2 2>&1 | grep -E "^ +[a-z_]+__" | sed -E 's/ +/ /g'
