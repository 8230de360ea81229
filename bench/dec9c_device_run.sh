#!/usr/bin/env bash
# Session 9, third call: the block table read one block ahead in the decode indexer
# (MSA_CUDA_PAGE_PREFETCH, every key format) and the NVFP4 scale broadcast as an HMUL2
# operand swizzle (MSA_CUDA_FP4_DECODE=4) against decoder 2: checks of every indexer case
# per variant, the CUDA tests, the queued layer (NVFP4 and fp8 keys, B = 8, 1M), ncu time
# and instructions, and the SASS of the swizzle kernel. From the repo root there, after
# source .device-deps/unpack.sh:  S=<tree> bash <S>/bench/dec9c_device_run.sh
# After the call: the swizzle was kept as the only NVFP4 decoder; the page prefetch (no
# gain) was removed with MSA_CUDA_PAGE_PREFETCH and MSA_CUDA_FP4_DECODE; bench/NOTES.md.
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec9c msa_cli msa_tests_cuda
check_variants "lop: nopf:MSA_CUDA_PAGE_PREFETCH=0 swz:MSA_CUDA_FP4_DECODE=4 swz-unfused:MSA_CUDA_FP4_DECODE=4,MSA_CUDA_FUSED_TOPK=0" \
  --cases full --op indexer_topk,indexer_score
for v in lop nopf swz swz-unfused; do grep -E "FAIL" "$LOG/check_$v.log" | head -3; done
timeout 60 $B/tests/cuda/msa_tests_cuda > "$LOG/tests_cuda.log" 2>&1; echo "msa_tests_cuda rc $?: $(grep -E 'PASSED|FAILED' "$LOG/tests_cuda.log" | tr '\n' ' ')"
for v in "nopf:MSA_CUDA_PAGE_PREFETCH=0" "lop:" "swz:MSA_CUDA_FP4_DECODE=4"; do
  name=$(variant_name "$v") envv=$(variant_env "$v")
  for kd in nvfp4 fp8_e4m3; do
    [ "$name" = swz ] && [ "$kd" = fp8_e4m3 ] && continue
    env $envv timeout 40 $M layer --backend cuda --batch 8 --context 1048576 --iters 30 --queued \
      --config ki_dtype=$kd > "$LOG/layer_${name}_$kd.log" 2>&1
    echo "$name $kd B=8 1M: $(grep -E '^(indexer_score|block_topk|indexer_topk|sparse_block_attention|msa layer|dense_attention) ' "$LOG/layer_${name}_$kd.log" | awk '{printf "%s %s | ", $1, $2}') $(grep -o 'speed-up [0-9.]*x' "$LOG/layer_${name}_$kd.log")"
    ncu_indexer "${name}_$kd" "$envv" $kd gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,launch__registers_per_thread
  done
done
sass_of "indexer_mma_kernelILi6ELi128" swz
echo "swz HMUL2 $(grep -c HMUL2 "$LOG/sass_swz.txt"), PRMT $(grep -c PRMT "$LOG/sass_swz.txt")"
