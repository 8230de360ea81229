#!/usr/bin/env bash
# Session 6, closing call: the final check of the version (gpu_final_run.sh "build check
# test"; the session ran it with the TMA stages as the default, the other as a routing),
# the TMA stages of the sparse decode against the cp.async ones (queued layer op ms, ncu
# kernel us), then memcheck and racecheck over the sparse cases with the TMA stages. From
# the repo root there, after source .device-deps/unpack.sh:
#   MSA_SRC=<tree> bash <tree>/bench/dec6f_device_run.sh
set -u
source "${MSA_SRC:-.}/bench/device_variants.sh"
final_check_setup
MSA_CUDA_DECODE_CLUSTER_TMA=1 MSA_CUDA_DECODE_CLUSTER_LOG=1 $M layer --backend cuda --batch 8 --context 1048576 --iters 2 2>&1 | grep decode_cluster: | head -2
measure_variants "tma:MSA_CUDA_DECODE_CLUSTER_TMA=1 cpasync:MSA_CUDA_DECODE_CLUSTER_TMA=0" "8 1048576" "1 131072" "8 131072"
MSA_CUDA_DECODE_CLUSTER_TMA=1 timeout 60 "$SAN" --tool memcheck --error-exitcode 3 $M check --backend cuda --cases full --op sparse_block_attention \
  > "$LOG/memcheck_tma.log" 2>&1
echo "memcheck (TMA stages) rc $?: $(grep -E 'ERROR SUMMARY|^total' "$LOG/memcheck_tma.log" | tr -s ' ' | tr '\n' ' ')"
MSA_CUDA_DECODE_CLUSTER_TMA=1 timeout 60 "$SAN" --tool racecheck --error-exitcode 3 $M check --backend cuda --cases full --op sparse_block_attention \
  --match 'Hq=64' > "$LOG/racecheck_tma.log" 2>&1
echo "racecheck (TMA stages) rc $?: $(grep -E 'RACECHECK SUMMARY|^total' "$LOG/racecheck_tma.log" | tr -s ' ' | tr '\n' ' ')"
grep -m3 -A3 "Race reported" "$LOG/racecheck_tma.log"
