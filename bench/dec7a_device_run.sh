#!/usr/bin/env bash
# Session 7, first call: block_topk fused into the decode indexer (ops::indexer_topk).
# Builds the CUDA tree, checks indexer_topk / indexer_score / block_topk / msa_tests_cuda
# in the default routing, the portable tier and with the fusion off, runs memcheck and
# racecheck over the indexer_topk cases, then times the layer queued (indexer, top-k, the
# fused call, sparse) at the decode shapes and the fused kernel under ncu. From the repo
# root there, after source .device-deps/unpack.sh:  S=<tree> bash <S>/bench/dec7a_device_run.sh
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec7a msa_cli msa_tests_cuda msa_tests_crosscheck
check_variants "default: portable:MSA_CUDA_TIER=portable unfused:MSA_CUDA_FUSED_TOPK=0" --cases full \
  --op indexer_topk,indexer_score,block_topk
for v in default portable unfused; do grep -E "FAIL|^indexer|^block" "$LOG/check_$v.log" | head -8; done
timeout 120 $B/tests/cuda/msa_tests_cuda > "$LOG/tests_cuda.log" 2>&1; echo "msa_tests_cuda rc $?: $(tail -3 "$LOG/tests_cuda.log" | tr '\n' ' ')"
MSA_CROSSCHECK_SET=full timeout 120 $B/tests/msa_tests_crosscheck --gtest_filter='*cuda_indexer_topk*' > "$LOG/xcheck.log" 2>&1
echo "crosscheck cuda_indexer_topk (full) rc $?: $(tail -2 "$LOG/xcheck.log" | tr '\n' ' ')"
timeout 90 "$SAN" --tool memcheck --error-exitcode 3 $M check --backend cuda --cases full --op indexer_topk \
  > "$LOG/memcheck.log" 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY|^total' "$LOG/memcheck.log" | tr -s ' ' | tr '\n' ' ')"
timeout 90 "$SAN" --tool racecheck --error-exitcode 3 $M check --backend cuda --cases full --op indexer_topk \
  > "$LOG/racecheck.log" 2>&1
echo "racecheck rc $?: $(grep -E 'RACECHECK SUMMARY|^total' "$LOG/racecheck.log" | tr -s ' ' | tr '\n' ' ')"
timeout 90 "$SAN" --tool synccheck --error-exitcode 3 $M check --backend cuda --cases full --op indexer_topk \
  > "$LOG/synccheck.log" 2>&1
echo "synccheck rc $?: $(grep -E 'ERROR SUMMARY|^total' "$LOG/synccheck.log" | tr -s ' ' | tr '\n' ' ')"
for shape in "1 131072" "8 131072" "1 1048576" "8 1048576" "1 32768"; do
  set -- $shape
  timeout 60 $M layer --backend cuda --batch $1 --context $2 --iters 30 --queued --json "$LOG/layer_$1_$2.json" \
    > "$LOG/layer_$1_$2.log" 2>&1
  echo "== B=$1 ctx=$2 (queued)"; grep -E '^(indexer_score|block_topk|indexer_topk|sparse_block_attention|msa layer|dense_attention) |share|select inside' "$LOG/layer_$1_$2.log"
done
timeout 60 $M layer --backend cuda --batch 8 --context 1048576 --iters 30 --queued --config ki_dtype=fp8_e4m3 > "$LOG/layer_fp8.log" 2>&1
echo "== B=8 1M fp8 keys (queued)"; grep -E '^(indexer_topk|sparse_block_attention|msa layer|dense_attention) |share|select inside' "$LOG/layer_fp8.log"
for shape in "1 131072" "8 131072"; do
  set -- $shape
  for v in fused:MSA_CUDA_FUSED_TOPK=1 unfused:MSA_CUDA_FUSED_TOPK=0; do
    env $(variant_env "$v") timeout 60 "$NCU" --clock-control none -k "regex:indexer_mma|topk" --launch-skip 6 --launch-count 6 \
      --metrics gpu__time_duration.sum $M layer --backend cuda --batch $1 --context $2 --iters 3 > "$LOG/ncu_$(variant_name "$v")_$1_$2.log" 2>&1
    echo "ncu $(variant_name "$v") B=$1 ctx=$2: $(grep -E 'indexer_mma|topk|gpu__time_duration' "$LOG/ncu_$(variant_name "$v")_$1_$2.log" | \
      awk '/indexer_mma|topk/ {k=($0 ~ /topk_split/) ? "topk" : "idx"} /gpu__time_duration/ {printf "%s %s, ", k, $3}')"
  done
done
