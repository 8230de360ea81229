#!/usr/bin/env bash
# Session 6: the sparse decode kernel after the profile of dec6a (q requested before the
# slabs, one-warp batch locate, one-pass global merge). Checks (sparse full cases in each
# merge mode, memcheck and racecheck), queued layer op times, ncu kernel times and a
# sampled profile per SASS instruction. From the repo root there, after
# source .device-deps/unpack.sh:  S=<tree> bash <S>/bench/dec6b_device_run.sh
set -u
S=$(cd "${S:-.}" && pwd)
LOG=${LOGS:-/tmp/dec6b-logs}
mkdir -p "$LOG"
B=/tmp/build-dec6b
LOG=$LOG source "$S/bench/device_cuda_build.sh" msa_cli msa-bench
M=$B/tools/msa
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
VARIANTS="auto: cluster:MSA_CUDA_DECODE_CLUSTER_MERGE=1 global:MSA_CUDA_DECODE_CLUSTER_MERGE=2
  occ2:MSA_CUDA_DECODE_CLUSTER_OCC=2"
pids=()
for v in $VARIANTS; do
  name=${v%%:*}; envv=${v#*:}
  (env $envv timeout 90 $M check --backend cuda --cases full --op sparse_block_attention > "$LOG/check_$name.log" 2>&1
   echo "rc $?" >> "$LOG/check_$name.log") & pids+=($!)
done
(MSA_CUDA_DECODE_CLUSTER_MERGE=2 timeout 200 "$SAN" --tool memcheck --error-exitcode 3 $M check --backend cuda \
   --cases full --op sparse_block_attention > "$LOG/memcheck.log" 2>&1; echo "rc $?" >> "$LOG/memcheck.log") & pids+=($!)
(MSA_CUDA_DECODE_CLUSTER_MERGE=2 timeout 200 "$SAN" --tool racecheck --error-exitcode 3 $M check --backend cuda \
   --cases full --op sparse_block_attention --match 'Hq=64' > "$LOG/racecheck.log" 2>&1; echo "rc $?" >> "$LOG/racecheck.log") & pids+=($!)
wait "${pids[@]}"
for v in $VARIANTS; do echo "check ${v%%:*}: $(grep -E '^total|^rc' "$LOG/check_${v%%:*}.log" | tr -s ' ' | tr '\n' ' ')"; done
for t in memcheck racecheck; do echo "$t: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^total|^rc' "$LOG/$t.log" | tr '\n' ' ')"; done
for shape in "8 1048576" "1 131072" "8 131072" "1 1048576"; do
  set -- $shape
  timeout 60 $M layer --backend cuda --batch $1 --context $2 --iters 30 --queued > "$LOG/layer_$1_$2.log" 2>&1
  echo "layer B=$1 ctx=$2 queued: $(grep -E '^(indexer_score|block_topk|sparse_block_attention|msa layer|dense_attention) ' "$LOG/layer_$1_$2.log" | awk '{printf "%s %s | ", $1, $NF}')"
done
for shape in "8 1048576" "1 131072"; do
  set -- $shape
  timeout 60 "$NCU" --clock-control none -k 'regex:cluster_decode' --launch-skip 3 --launch-count 3 \
    --metrics gpu__time_duration.sum $M layer --backend cuda --batch $1 --context $2 --iters 5 > "$LOG/ncu_$1_$2.log" 2>&1
  echo "ncu decode B=$1 ctx=$2: $(grep -E 'gpu__time_duration' "$LOG/ncu_$1_$2.log" | awk '{printf "%s ", $3}') us"
done
timeout 120 "$NCU" --clock-control none -k 'regex:cluster_decode' --launch-skip 3 --launch-count 1 --set full \
  --import-source no -o "$LOG/decode_b8_1m" -f $M layer --backend cuda --iters 5 --batch 8 --context 1048576 > "$LOG/ncu_full.log" 2>&1
"$NCU" --import "$LOG/decode_b8_1m.ncu-rep" --page source --csv --print-source sass > "$LOG/source_decode_b8_1m.csv" 2>&1
echo "profile rows $(wc -l < "$LOG/source_decode_b8_1m.csv")"
