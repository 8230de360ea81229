#!/usr/bin/env bash
# Session 8, third call: the four NVFP4 schedules of the decode indexer
# (MSA_CUDA_FP4_VARIANT 0..3: stream of 2 tiles at 3 blocks/SM, stream of 4 at 2, block by
# block 4 tiles at 2, block by block 2 tiles at 3). Checks the NVFP4 indexer cases in each,
# then per variant the queued layer at B = 8 and B = 1, 1M, and ncu (time, DRAM
# throughput, issue activity, active warps) on the indexer kernel at B = 8, 1M. From the
# repo root there, after source .device-deps/unpack.sh:
#   S=<tree> bash <S>/bench/dec8c_device_run.sh
# The schedule switches it measured (MSA_CUDA_FP4_TILES, MSA_CUDA_FP4_VARIANT) were removed
# after session 8's third call; the kernel keeps the block-by-block 4-tile schedule, and the
# script stays as the record of the measurement (bench/NOTES.md, session 8).
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec8c msa_cli
check_variants "v0:MSA_CUDA_FP4_VARIANT=0 v1:MSA_CUDA_FP4_VARIANT=1 v2:MSA_CUDA_FP4_VARIANT=2 v3:MSA_CUDA_FP4_VARIANT=3" \
  --cases full --op indexer_topk,indexer_score --match fp4
for v in 0 1 2 3; do
  for shape in "8 1048576" "1 1048576"; do
    set -- $shape
    MSA_CUDA_FP4_VARIANT=$v timeout 60 $M layer --backend cuda --batch $1 --context $2 --iters 30 --queued \
      --config ki_dtype=nvfp4 > "$LOG/layer_v${v}_$1_$2.log" 2>&1
    echo "v$v B=$1 ctx=$2: $(grep -E '^(indexer_score|indexer_topk|msa layer|dense_attention) ' "$LOG/layer_v${v}_$1_$2.log" | awk '{printf "%s %s | ", $1, $NF}') $(grep -o 'speed-up [0-9.]*x' "$LOG/layer_v${v}_$1_$2.log")"
  done
  MSA_CUDA_FP4_VARIANT=$v timeout 90 "$NCU" --clock-control none -k "regex:indexer_mma_kernel" --launch-skip 3 --launch-count 2 \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
    $M layer --backend cuda --batch 8 --context 1048576 --iters 5 --config ki_dtype=nvfp4 > "$LOG/ncu_v$v.log" 2>&1
  echo "ncu v$v (B=8 1M): $(grep -E 'gpu__time|dram__|smsp__|sm__' "$LOG/ncu_v$v.log" | tail -5 | awk '{printf "%s %s | ", $1, $3}')"
done
