#!/usr/bin/env bash
# Session 8, fifth call: the NVFP4 decode indexer with a shared-memory byte -> f16x2 table
# (MSA_CUDA_FP4_LUT=1) against shifts and masks (default). Checks the indexer cases in
# both, the graph tests, memcheck / racecheck over the NVFP4 cases with the table, then the
# queued layer at B = 8 and 1, 1M, and ncu (time, instructions, issue activity) on the
# indexer kernel at B = 8, 1M. From the repo root there, after
# source .device-deps/unpack.sh:  S=<tree> bash <S>/bench/dec8e_device_run.sh
# The table variant it measured (MSA_CUDA_FP4_LUT) was removed after the call: more
# instructions (145.6M vs 126.7M) and slower (246 vs 234 us); bench/NOTES.md, session 8.
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec8e msa_cli msa_tests_cuda
check_variants "shift: lut:MSA_CUDA_FP4_LUT=1 lut-unfused:MSA_CUDA_FP4_LUT=1,MSA_CUDA_FUSED_TOPK=0" \
  --cases full --op indexer_topk,indexer_score
MSA_CUDA_FP4_LUT=1 timeout 120 $B/tests/cuda/msa_tests_cuda --gtest_filter='CudaGraph*' > "$LOG/tests_cuda.log" 2>&1
echo "msa_tests_cuda (lut) rc $?: $(grep -E 'PASSED|FAILED' "$LOG/tests_cuda.log" | tr '\n' ' ')"
for tool in memcheck racecheck; do
  MSA_CUDA_FP4_LUT=1 timeout 60 "$SAN" --tool $tool --error-exitcode 3 $M check --backend cuda --cases full \
    --op indexer_topk,indexer_score --match fp4 > "$LOG/$tool.log" 2>&1
  echo "$tool (lut) rc $?: $(grep -E 'SUMMARY|^total' "$LOG/$tool.log" | tr -s ' ' | tr '\n' ' ')"
done
for v in 0 1; do
  for shape in "8 1048576" "1 1048576" "1 131072"; do
    set -- $shape
    MSA_CUDA_FP4_LUT=$v timeout 60 $M layer --backend cuda --batch $1 --context $2 --iters 30 --queued \
      --config ki_dtype=nvfp4 > "$LOG/layer_lut${v}_$1_$2.log" 2>&1
    echo "lut=$v B=$1 ctx=$2: $(grep -E '^(indexer_score|indexer_topk|msa layer|dense_attention) ' "$LOG/layer_lut${v}_$1_$2.log" | awk '{printf "%s %s | ", $1, $NF}') $(grep -o 'speed-up [0-9.]*x' "$LOG/layer_lut${v}_$1_$2.log")"
  done
  MSA_CUDA_FP4_LUT=$v timeout 90 "$NCU" --clock-control none -k "regex:indexer_mma_kernel" --launch-skip 3 --launch-count 1 \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
    $M layer --backend cuda --batch 8 --context 1048576 --iters 5 --config ki_dtype=nvfp4 > "$LOG/ncu_lut$v.log" 2>&1
  echo "ncu lut=$v (B=8 1M): $(grep -E 'gpu__time|dram__|smsp__' "$LOG/ncu_lut$v.log" | awk '{printf "%s %s | ", $1, $3}')"
done
