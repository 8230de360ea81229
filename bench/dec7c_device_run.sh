#!/usr/bin/env bash
# Session 7, closing call: the final check of the version (gpu_final_run.sh "build check
# test": every CUDA routing, now with fused-topk-off, vulkan, the GoogleTest suites), the
# sanitizers over indexer_topk, msa-bench of indexer_score, block_topk and indexer_topk
# at the decode shapes (ceilings in the same run), and the queued layer at every decode
# shape. From the repo root there, after source .device-deps/unpack.sh:
#   MSA_SRC=<tree> bash <tree>/bench/dec7c_device_run.sh
set -u
source "${MSA_SRC:-.}/bench/device_variants.sh"
final_check_setup
B=$PWD/build-final
for tool in memcheck racecheck synccheck; do
  timeout 90 "$SAN" --tool $tool --error-exitcode 3 $M check --backend cuda --cases full --op indexer_topk > "$LOG/$tool.log" 2>&1
  echo "$tool rc $?: $(grep -E 'SUMMARY|^total' "$LOG/$tool.log" | tr -s ' ' | tr '\n' ' ')"
done
F='(indexer_score|block_topk|indexer_topk)/.*T=(1|8) q=.*kv=\[(8 x )?(32768|131072|1048576)'
timeout 150 $B/bench/msa-bench --backend=cuda --benchmark_filter="$F" --benchmark_min_time=0.05s --sustain=0.5 \
  --benchmark_out="$LOG/bench_topk.json" --benchmark_out_format=json > "$LOG/bench_topk.log" 2>&1
echo "msa-bench rc $?"; grep -E "ceiling|^(cuda/)?(indexer|block)" "$LOG/bench_topk.log" | cut -c1-200 | head -30
for shape in "1 32768" "1 131072" "8 131072" "1 1048576" "8 1048576"; do
  set -- $shape
  timeout 60 $M layer --backend cuda --batch $1 --context $2 --iters 30 --queued --json "$LOG/layer_$1_$2.json" > "$LOG/layer_$1_$2.log" 2>&1
  echo "== B=$1 ctx=$2 (queued)"; grep -E '^(indexer_score|block_topk|indexer_topk|sparse_block_attention|msa layer|dense_attention) |share|select inside|ratio' "$LOG/layer_$1_$2.log"
done
timeout 60 $M layer --backend cuda --batch 8 --context 1048576 --iters 30 --queued --config ki_dtype=fp8_e4m3 > "$LOG/layer_fp8.log" 2>&1
echo "== B=8 1M fp8 keys (queued)"; grep -E '^(indexer_topk|sparse_block_attention|msa layer|dense_attention) |share|select inside|ratio' "$LOG/layer_fp8.log"
