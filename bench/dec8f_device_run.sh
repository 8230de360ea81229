#!/usr/bin/env bash
# Session 8, last call: the select-key rule moved into topk_row.cuh (block_topk.cu and the
# fused select now share it), and the NVFP4 decode indexer with its >> 3 as a multiply-high
# on the FMA pipe (MSA_CUDA_FP4_HI=1) against shifts (default). Checks block_topk,
# indexer_topk and indexer_score in the routings that reach the changed code, the CUDA
# GoogleTest suite, then the queued NVFP4 layer at B = 8, 1M and ncu on the indexer kernel
# in both variants. From the repo root there, after source .device-deps/unpack.sh:
#   S=<tree> bash <S>/bench/dec8f_device_run.sh
# The multiply-high variant it measured (MSA_CUDA_FP4_HI) was removed after the call: the ALU
# pipe fell from 67% to 46% busy but the kernel took 259 us against 234; bench/NOTES.md.
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec8f msa_cli msa_tests_cuda
check_variants "native: hi:MSA_CUDA_FP4_HI=1 portable:MSA_CUDA_TIER=portable unfused:MSA_CUDA_FUSED_TOPK=0 split-off:MSA_TOPK_SPLIT=0 one-block-off:MSA_TOPK_ONE_BLOCK=0" \
  --cases full --op block_topk,indexer_topk,indexer_score
timeout 60 $B/tests/cuda/msa_tests_cuda > "$LOG/tests_cuda.log" 2>&1; echo "msa_tests_cuda rc $?: $(grep -E 'PASSED|FAILED' "$LOG/tests_cuda.log" | tr '\n' ' ')"
for v in 0 1; do
  MSA_CUDA_FP4_HI=$v timeout 40 $M layer --backend cuda --batch 8 --context 1048576 --iters 30 --queued \
    --config ki_dtype=nvfp4 > "$LOG/layer_hi$v.log" 2>&1
  echo "hi=$v B=8 1M: $(grep -E '^(indexer_score|indexer_topk|msa layer|dense_attention) ' "$LOG/layer_hi$v.log" | awk '{printf "%s %s | ", $1, $NF}') $(grep -o 'speed-up [0-9.]*x' "$LOG/layer_hi$v.log")"
  MSA_CUDA_FP4_HI=$v timeout 60 "$NCU" --clock-control none -k "regex:indexer_mma_kernel" --launch-skip 3 --launch-count 1 \
    --metrics gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active \
    $M layer --backend cuda --batch 8 --context 1048576 --iters 5 --config ki_dtype=nvfp4 > "$LOG/ncu_hi$v.log" 2>&1
  echo "ncu hi=$v: $(grep -E 'gpu__time|smsp__|sm__' "$LOG/ncu_hi$v.log" | awk '{printf "%s %s | ", $1, $3}')"
done
