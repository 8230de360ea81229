#!/usr/bin/env bash
# Session 9, after the review: Pool::max_raw / scale instead of direct writes, raw max
# pooling only on the NVFP4 path. Checks the indexer cases in the routings that reach the
# decode kernel, the CUDA tests, and the queued NVFP4 layer at B = 8, 1M. From the repo
# root there, after source .device-deps/unpack.sh:  S=<tree> bash <S>/bench/dec9e_device_run.sh
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec9e msa_cli msa_tests_cuda
check_variants "native: portable:MSA_CUDA_TIER=portable mma-off:MSA_CUDA_MMA_INDEXER=0 unfused:MSA_CUDA_FUSED_TOPK=0" \
  --cases full --op indexer_topk,indexer_score
for v in native portable mma-off unfused; do grep -E "FAIL" "$LOG/check_$v.log" | head -3; done
timeout 60 $B/tests/cuda/msa_tests_cuda > "$LOG/tests_cuda.log" 2>&1; echo "msa_tests_cuda rc $?: $(grep -E 'PASSED|FAILED' "$LOG/tests_cuda.log" | tr '\n' ' ')"
timeout 40 $M layer --backend cuda --batch 8 --context 1048576 --iters 30 --queued --config ki_dtype=nvfp4 > "$LOG/layer.log" 2>&1
echo "B=8 1M nvfp4: $(grep -E '^(indexer_score|indexer_topk|sparse_block_attention|msa layer|dense_attention) ' "$LOG/layer.log" | awk '{printf "%s %s | ", $1, $2}') $(grep -o 'speed-up [0-9.]*x' "$LOG/layer.log")"
