#!/usr/bin/env bash
# Session 6: the bulk-copy stages of the sparse decode kernel (MSA_CUDA_DECODE_CLUSTER_BULK,
# measured 2.5x slower and not kept: bench/NOTES.md) against the cp.async stages and the
# two-CTA geometry. Checks (sparse full cases in each mode, memcheck, racecheck), then per
# variant queued layer op times and ncu kernel times at B = 8, 1M and B = 1, 128K. From
# the repo root there, after source .device-deps/unpack.sh:
#   S=<tree> bash <S>/bench/dec6c_device_run.sh
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec6c msa_cli
VARIANTS="bulk: cpasync:MSA_CUDA_DECODE_CLUSTER_BULK=0 bulk-cluster:MSA_CUDA_DECODE_CLUSTER_MERGE=1
  bulk-global:MSA_CUDA_DECODE_CLUSTER_MERGE=2 occ2-c8:MSA_CUDA_DECODE_CLUSTER_OCC=2,MSA_CUDA_DECODE_CLUSTER_SIZE=8
  bulk-c8:MSA_CUDA_DECODE_CLUSTER_SIZE=8,MSA_CUDA_DECODE_CLUSTER_MERGE=2"
pids=()
for m in 1 2; do
  (MSA_CUDA_DECODE_CLUSTER_MERGE=$m timeout 200 "$SAN" --tool memcheck --error-exitcode 3 $M check --backend cuda \
     --cases full --op sparse_block_attention > "$LOG/memcheck_m$m.log" 2>&1; echo "rc $?" >> "$LOG/memcheck_m$m.log") & pids+=($!)
  (MSA_CUDA_DECODE_CLUSTER_MERGE=$m timeout 200 "$SAN" --tool racecheck --error-exitcode 3 $M check --backend cuda \
     --cases full --op sparse_block_attention --match 'Hq=64' > "$LOG/racecheck_m$m.log" 2>&1; echo "rc $?" >> "$LOG/racecheck_m$m.log") & pids+=($!)
done
check_variants "$VARIANTS" --cases full --op sparse_block_attention
wait "${pids[@]}"
for t in memcheck_m1 memcheck_m2 racecheck_m1 racecheck_m2; do
  echo "$t: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^total|^rc' "$LOG/$t.log" | tr -s ' ' | tr '\n' ' ')"; done
measure_variants "$VARIANTS" "8 1048576" "1 131072"
