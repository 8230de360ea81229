#!/usr/bin/env bash
# Session 5, third call: the cluster decode kernel's global merge (all SMs at B = 8) and the
# smaller top-k kernels: checks, sanitizers, queued layer times, ncu kernel times. From the
# repo root there, after source .device-deps/unpack.sh:
#   S=<source tree> bash <S>/bench/dec5c_device_run.sh     (logs in $LOGS)
set -u
S=$(cd "${S:-.}" && pwd)
LOG=${LOGS:-/tmp/dec5c-logs}
mkdir -p "$LOG"
B=/tmp/build-dec5c
LOG=$LOG source "$S/bench/device_cuda_build.sh" msa_cli msa-bench msa_tests_cuda
M=$B/tools/msa BENCH=$B/bench/msa-bench
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "== checks, full cases, side by side"
pids=()
chk() {  # name, op, env...
  local name=$1 op=$2; shift 2
  (env "$@" timeout 120 $M check --backend cuda --cases full ${op:+--op $op} > "$LOG/check_$name.log" 2>&1
   echo "rc $?" >> "$LOG/check_$name.log") & pids+=($!)
}
chk sparse sparse_block_attention
chk sparse_cluster sparse_block_attention MSA_CUDA_DECODE_CLUSTER_MERGE=1
chk sparse_global sparse_block_attention MSA_CUDA_DECODE_CLUSTER_MERGE=2
chk sparse_global_occ2 sparse_block_attention MSA_CUDA_DECODE_CLUSTER_MERGE=2 MSA_CUDA_DECODE_CLUSTER_OCC=2
chk topk block_topk
chk topk_radix block_topk MSA_TOPK_ADAPTIVE=0
chk topk_nosplit block_topk MSA_TOPK_SPLIT=0 MSA_TOPK_ONE_BLOCK=0
chk all_native ""
chk all_portable "" MSA_CUDA_TIER=portable
chk all_decode_off "" MSA_CUDA_DECODE_CLUSTER=0
wait "${pids[@]}"
for f in "$LOG"/check_*.log; do
  printf "%-28s " "$(basename $f .log)"; grep -E "^total|^rc " "$f" | tr -s ' ' | tr '\n' ' '; echo; grep -m3 FAIL "$f" | cut -c1-200
done
echo "-- memcheck / racecheck on the reference-shape sparse cases (global merge forced) and top-k"
MSA_CUDA_DECODE_CLUSTER_MERGE=2 timeout -k 5 90 compute-sanitizer --tool memcheck $M check --backend cuda --cases full \
  --op sparse_block_attention,block_topk > "$LOG/memcheck.log" 2>&1
grep -E "^total|ERROR SUMMARY" "$LOG/memcheck.log" | head -3
MSA_CUDA_DECODE_CLUSTER_MERGE=2 timeout -k 5 90 compute-sanitizer --tool racecheck $M check --backend cuda --cases full \
  --op sparse_block_attention --match 'Hq=64' > "$LOG/racecheck.log" 2>&1
grep -E "^total|RACECHECK SUMMARY" "$LOG/racecheck.log" | head -3
timeout 60 $B/tests/cuda/msa_tests_cuda > "$LOG/tests_cuda.log" 2>&1; echo "msa_tests_cuda rc $? $(grep -E '^\[  (PASSED|FAILED)' "$LOG/tests_cuda.log" | tr '\n' ' ')"

LAY='^(block_topk|indexer_score|sparse_block_attention|msa layer \(sum\)) '
layer() {  # label, batch, context, extra flags, env...
  local label=$1 b=$2 ctx=$3 fl=$4; shift 4
  printf -- "-- layer B=%s %-8s %-30s " "$b" "$ctx" "$label"
  env "$@" MSA_CUDA_DECODE_CLUSTER_LOG=1 timeout 40 $M layer --backend cuda --batch "$b" --context "$ctx" --iters 30 $fl \
    > "$LOG/layer_${b}_${ctx}_${label// /_}.log" 2>&1
  grep -E "$LAY" "$LOG/layer_${b}_${ctx}_${label// /_}.log" | awk '{printf "%s=%s ", $1, $NF}'
  grep -m1 -o "merge [a-z]*" "$LOG/layer_${b}_${ctx}_${label// /_}.log"; echo
}
echo "== layer op times, queued (median ms)"
for rep in 1 2; do layer "queued" 1 131072 "--queued"; done
layer "queued" 8 131072 "--queued"
layer "queued, cluster merge" 8 131072 "--queued" MSA_CUDA_DECODE_CLUSTER_MERGE=1
layer "queued" 1 1048576 "--queued"
layer "queued" 8 1048576 "--queued"
layer "queued, cluster merge" 8 1048576 "--queued" MSA_CUDA_DECODE_CLUSTER_MERGE=1
layer "queued fp8" 8 1048576 "--queued --config ki_dtype=fp8_e4m3"
layer "single" 1 131072 ""
layer "single" 8 1048576 ""

F8='sparse_block_attention/B=8 T=8 .*kv=.8 x 1048576\.\.'
if [ -n "$NCU" ]; then
  echo "== ncu kernel time (caches flushed), sparse B=8 1M"
  for v in "global:" "cluster:MSA_CUDA_DECODE_CLUSTER_MERGE=1"; do
    name=${v%%:*}; envv=${v#*:}
    printf -- "-- %-8s " "$name"
    env $envv timeout 40 "$NCU" --clock-control none -k 'regex:decode' --launch-skip 6 --launch-count 3 \
      --metrics gpu__time_duration.sum,sm__cycles_active.avg,dram__throughput.avg.pct_of_peak_sustained_elapsed \
      $BENCH --backend=cuda --op=sparse_block_attention --benchmark_filter="$F8" --benchmark_min_time=0.01 > "$LOG/ncu_$name.log" 2>&1
    grep -E "gpu__time_duration|dram__thr" "$LOG/ncu_$name.log" | awk '{printf "%s %s; ", $1, $3}'; echo
  done
  echo "== ncu: kernels of the B=1 128K layer (caches as in the step, clocks free)"
  timeout 60 "$NCU" --clock-control none --cache-control none --launch-skip 8 --launch-count 8 \
    --metrics gpu__time_duration.sum,sm__cycles_active.max \
    $M layer --backend cuda --batch 1 --context 131072 --iters 2 > "$LOG/ncu_layer128k.log" 2>&1
  grep -E "^  [a-zA-Z_].*\(|gpu__time_duration|sm__cycles_active" "$LOG/ncu_layer128k.log" | sed -E 's/ +/ /g; s/\(unnamed[^)]*\)//g' | cut -c1-120 | head -40
fi
echo "== sparse bench B=8 1M (bw_frac vs the copy ceiling of this run)"
timeout 60 $BENCH --backend=cuda --op=sparse_block_attention --benchmark_filter="$F8" --benchmark_min_time=0.1s 2>&1 |
  grep -E "ceiling|^cuda/" | sed -E 's/ (dev_MiB|rss_MiB|TFLOP\/s|flop_frac)=[^ ]*//g'
