#!/usr/bin/env bash
# Session 8, first call: NVFP4 indexer keys (fp4_e2m1x2 codes + e4m3 group scales).
# Builds the CUDA tree; checks indexer_score / indexer_topk / kv_append (every key format)
# in the default routing, the portable tier, with the tensor-core decode indexer off and
# with the fusion off; the CUDA GoogleTest suite; memcheck and racecheck over the NVFP4
# cases; then msa-bench of the decode indexer per key format (ceilings in the same run),
# the queued layer per key format at the decode shapes, and ncu on the NVFP4 indexer
# kernel. From the repo root there, after source .device-deps/unpack.sh:
#   S=<tree> bash <S>/bench/dec8a_device_run.sh
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec8a msa_cli msa-bench msa_tests_cuda
check_variants "default: portable:MSA_CUDA_TIER=portable mma-off:MSA_CUDA_MMA_INDEXER=0 unfused:MSA_CUDA_FUSED_TOPK=0" \
  --cases full --op indexer_topk,indexer_score,kv_append
for v in default portable mma-off unfused; do grep -E "FAIL" "$LOG/check_$v.log" | head -5; done
timeout 120 $B/tests/cuda/msa_tests_cuda > "$LOG/tests_cuda.log" 2>&1; echo "msa_tests_cuda rc $?: $(grep -E 'PASSED|FAILED|SKIPPED' "$LOG/tests_cuda.log" | tr '\n' ' ')"
sanitize_checks "memcheck racecheck" --cases full --op indexer_topk,indexer_score,kv_append --match fp4
bench_cuda idx '(indexer_score|indexer_topk|msa_layer)/.*T=(1|8) q=.*kv=\[(8 x )?(131072|1048576)' 'ceiling|fp4|fp8'
layer_keys "nvfp4 fp8_e4m3 bf16" "8 1048576" "1 1048576" "1 131072"
timeout 90 "$NCU" --clock-control none -k "regex:indexer_mma_kernel" --launch-skip 3 --launch-count 3 \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum $M layer --backend cuda --batch 8 --context 1048576 --iters 5 \
  --config ki_dtype=nvfp4 > "$LOG/ncu_fp4.log" 2>&1
echo "ncu nvfp4 indexer (B=8 1M): $(grep -E 'gpu__time_duration|dram__bytes_read' "$LOG/ncu_fp4.log" | awk '{printf "%s %s %s | ", $1, $2, $3}')"
