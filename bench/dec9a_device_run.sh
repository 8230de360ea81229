#!/usr/bin/env bash
# Session 9, first call: (1) the session-8 review fixes on the GPU (dec8g's NVFP4 cases in
# the native, portable and mma-off routings); (2) the NVFP4 decode indexer with a
# high-byte decoder (MSA_CUDA_FP4_DECODE=1, ~11 integer instructions per 8 codes against
# ~15) and max pooling of the raw products (MSA_CUDA_RAW_MAX=1) against session 8's
# decoder: checks, queued layer at B = 8, 1M, ncu (time, instructions, issue, pipes), the
# warp-state profile and the SASS of the new kernel. From the repo root there, after
# source .device-deps/unpack.sh:  S=<tree> bash <S>/bench/dec9a_device_run.sh
# After the call: the high-byte decoder was refined (dec9b); MSA_CUDA_FP4_DECODE and
# MSA_CUDA_RAW_MAX were removed (raw max pooling is always on where it applies);
# bench/NOTES.md, session 9.
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec9a msa_cli msa_tests_cuda
check_variants "native: portable:MSA_CUDA_TIER=portable mma-off:MSA_CUDA_MMA_INDEXER=0" --cases full --match fp4
check_variants "shift:MSA_CUDA_FP4_DECODE=0 rawmax-off:MSA_CUDA_RAW_MAX=0 shift-unfused:MSA_CUDA_FP4_DECODE=0,MSA_CUDA_FUSED_TOPK=0 unfused:MSA_CUDA_FUSED_TOPK=0" \
  --cases full --op indexer_topk,indexer_score
for v in native portable mma-off shift rawmax-off; do grep -E "FAIL" "$LOG/check_$v.log" | head -3; done
timeout 60 $B/tests/cuda/msa_tests_cuda > "$LOG/tests_cuda.log" 2>&1; echo "msa_tests_cuda rc $?: $(grep -E 'PASSED|FAILED' "$LOG/tests_cuda.log" | tr '\n' ' ')"
for v in "shift:MSA_CUDA_FP4_DECODE=0,MSA_CUDA_RAW_MAX=0" "bytes:MSA_CUDA_RAW_MAX=0" "bytes-raw:"; do
  name=$(variant_name "$v") envv=$(variant_env "$v")
  env $envv timeout 40 $M layer --backend cuda --batch 8 --context 1048576 --iters 30 --queued \
    --config ki_dtype=nvfp4 > "$LOG/layer_$name.log" 2>&1
  echo "$name B=8 1M: $(grep -E '^(indexer_score|indexer_topk|msa layer|dense_attention) ' "$LOG/layer_$name.log" | awk '{printf "%s %s | ", $1, $NF}') $(grep -o 'speed-up [0-9.]*x' "$LOG/layer_$name.log")"
  ncu_indexer "$name" "$envv" nvfp4 gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
done
timeout 120 "$NCU" --clock-control none -k "regex:indexer_mma_kernel" --launch-skip 3 --launch-count 1 \
  --section WarpStateStats --section SchedulerStats --section InstructionStats \
  $M layer --backend cuda --batch 8 --context 1048576 --iters 5 --config ki_dtype=nvfp4 > "$LOG/ncu_stalls.log" 2>&1
grep -E "Stall|Warp Cycles|Eligible|Issued Warp|Active Warps|No Eligible" "$LOG/ncu_stalls.log" | head -30
sass_of "indexer_mma_kernelILi[23]ELi128" fp4
