#!/usr/bin/env bash
# Session 9, second call: the NVFP4 decode indexer's decoders side by side
# (MSA_CUDA_FP4_DECODE: 1 high bytes, 2 the same with fused lop3 masks and no zero fill of
# skipped tiles, 3 = 2 at three blocks per SM), all with raw max pooling: checks, the
# queued layer at B = 8 and 1, 1M, ncu time / instructions / pipes / stall reasons, and
# the SASS of decoder 2. From the repo root there, after source .device-deps/unpack.sh:
#   S=<tree> bash <S>/bench/dec9b_device_run.sh
# After the call: decoder 2 was kept (with dec9c's swizzle), 1 and 3 removed with the
# MSA_CUDA_FP4_DECODE switch; bench/NOTES.md, session 9.
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec9b msa_cli msa_tests_cuda
check_variants "lop: lop3:MSA_CUDA_FP4_DECODE=3 bytes:MSA_CUDA_FP4_DECODE=1 lop-rawoff:MSA_CUDA_RAW_MAX=0 lop-unfused:MSA_CUDA_FUSED_TOPK=0" \
  --cases full --op indexer_topk,indexer_score
for v in lop lop3 bytes lop-rawoff lop-unfused; do grep -E "FAIL" "$LOG/check_$v.log" | head -3; done
timeout 60 $B/tests/cuda/msa_tests_cuda > "$LOG/tests_cuda.log" 2>&1; echo "msa_tests_cuda rc $?: $(grep -E 'PASSED|FAILED' "$LOG/tests_cuda.log" | tr '\n' ' ')"
for v in "bytes:MSA_CUDA_FP4_DECODE=1" "lop:" "lop3:MSA_CUDA_FP4_DECODE=3"; do
  name=$(variant_name "$v") envv=$(variant_env "$v")
  for bsz in 8 1; do
    env $envv timeout 40 $M layer --backend cuda --batch $bsz --context 1048576 --iters 30 --queued \
      --config ki_dtype=nvfp4 > "$LOG/layer_${name}_$bsz.log" 2>&1
    echo "$name B=$bsz 1M: $(grep -E '^(indexer_score|block_topk|indexer_topk|sparse_block_attention|msa layer|dense_attention) ' "$LOG/layer_${name}_$bsz.log" | awk '{printf "%s %s | ", $1, $2}') $(grep -o 'speed-up [0-9.]*x' "$LOG/layer_${name}_$bsz.log")"
  done
  ncu_indexer "$name" "$envv" nvfp4 gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,smsp__warps_active.avg.per_cycle_active,launch__registers_per_thread
  env $envv timeout 60 "$NCU" --clock-control none -k "regex:indexer_mma_kernel" --launch-skip 3 --launch-count 1 \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    $M layer --backend cuda --batch 8 --context 1048576 --iters 5 --config ki_dtype=nvfp4 > "$LOG/stalls_$name.log" 2>&1
  echo "stalls $name: $(grep -E 'smsp__average' "$LOG/stalls_$name.log" | awk '$3 > 0.05 {sub("smsp__average_warps_issue_stalled_", "", $1); sub("_per_issue_active.ratio", "", $1); printf "%s %s | ", $1, $3}')"
done
sass_of "indexer_mma_kernelILi4ELi128" lop
