#!/usr/bin/env bash
# Session 8, second call: the NVFP4 decode indexer as a stream (the next step's keys
# loaded before the current step is computed), 2 tiles per step (default) and 4
# (MSA_CUDA_FP4_TILES=4). Checks the indexer ops in the default routing, with 4 tiles
# and on the portable tier, memcheck / racecheck over the NVFP4 cases, then the queued
# layer per key format at the decode shapes and ncu (time, DRAM bytes and throughput,
# issue activity) on the NVFP4 indexer kernel at B = 8, 1M. From the repo root there,
# after source .device-deps/unpack.sh:  S=<tree> bash <S>/bench/dec8b_device_run.sh
# The schedule switches it measured (MSA_CUDA_FP4_TILES, MSA_CUDA_FP4_VARIANT) were removed
# after session 8's third call; the kernel keeps the block-by-block 4-tile schedule, and the
# script stays as the record of the measurement (bench/NOTES.md, session 8).
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec8b msa_cli msa_tests_cuda
check_variants "default: wide:MSA_CUDA_FP4_TILES=4 portable:MSA_CUDA_TIER=portable unfused:MSA_CUDA_FUSED_TOPK=0" \
  --cases full --op indexer_topk,indexer_score,kv_append
for v in default wide portable unfused; do grep -E "FAIL" "$LOG/check_$v.log" | head -5; done
timeout 120 $B/tests/cuda/msa_tests_cuda > "$LOG/tests_cuda.log" 2>&1; echo "msa_tests_cuda rc $?: $(grep -E 'PASSED|FAILED|SKIPPED' "$LOG/tests_cuda.log" | tr '\n' ' ')"
for tool in memcheck racecheck; do
  timeout 90 "$SAN" --tool $tool --error-exitcode 3 $M check --backend cuda --cases full --op indexer_topk,indexer_score \
    --match fp4 > "$LOG/$tool.log" 2>&1
  echo "$tool rc $?: $(grep -E 'SUMMARY|^total' "$LOG/$tool.log" | tr -s ' ' | tr '\n' ' ')"
done
for v in "default:" "wide:MSA_CUDA_FP4_TILES=4"; do
  name=${v%%:*} envv=${v#*:}
  for shape in "8 1048576" "1 1048576" "8 131072" "1 131072"; do
    set -- $shape
    env $envv timeout 60 $M layer --backend cuda --batch $1 --context $2 --iters 30 --queued --config ki_dtype=nvfp4 \
      --json "$LOG/layer_${name}_$1_$2.json" > "$LOG/layer_${name}_$1_$2.log" 2>&1
    echo "== nvfp4 $name B=$1 ctx=$2 (queued) rc $?"; grep -E '^(indexer_score|indexer_topk|sparse_block_attention|msa layer|dense_attention) |select inside|ratio' "$LOG/layer_${name}_$1_$2.log"
  done
  env $envv timeout 90 "$NCU" --clock-control none -k "regex:indexer_mma_kernel" --launch-skip 3 --launch-count 2 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active \
    $M layer --backend cuda --batch 8 --context 1048576 --iters 5 --config ki_dtype=nvfp4 > "$LOG/ncu_$name.log" 2>&1
  echo "ncu nvfp4 $name (B=8 1M): $(grep -E 'gpu__time|dram__|smsp__|sm__' "$LOG/ncu_$name.log" | awk '{printf "%s %s | ", $1, $3}')"
done
timeout 60 $M layer --backend cuda --batch 8 --context 1048576 --iters 30 --queued --config ki_dtype=fp8_e4m3 > "$LOG/layer_fp8.log" 2>&1
echo "== fp8 B=8 1M (queued)"; grep -E '^(indexer_topk|msa layer|dense_attention) |ratio' "$LOG/layer_fp8.log"
