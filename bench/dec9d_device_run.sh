#!/usr/bin/env bash
# Session 9, closing call: the final check of the version (gpu_final_run.sh "build check
# test": every CUDA routing, vulkan, the GoogleTest suites), memcheck / racecheck /
# synccheck over the NVFP4 indexer cases (the decode kernel no longer loads past `lim`),
# msa-bench of the decode indexer per key format at B = 8, 1M (ceilings in the same run),
# and the queued layer with NVFP4 and fp8 keys at the decode shapes. From the repo root
# there, after source .device-deps/unpack.sh:  MSA_SRC=<tree> bash <tree>/bench/dec9d_device_run.sh
set -u
source "${MSA_SRC:-.}/bench/device_variants.sh"
final_check_setup
B=$PWD/build-final
for tool in memcheck racecheck synccheck; do
  timeout 60 "$SAN" --tool $tool --error-exitcode 3 $M check --backend cuda --cases full \
    --op indexer_topk,indexer_score --match fp4 > "$LOG/$tool.log" 2>&1
  echo "$tool rc $?: $(grep -E 'SUMMARY|^total' "$LOG/$tool.log" | tr -s ' ' | tr '\n' ' ')"
done
F='indexer_score/.*T=8 q=.*kv=\[8 x 1048576'
timeout 90 $B/bench/msa-bench --backend=cuda --benchmark_filter="$F" --benchmark_min_time=0.05s --sustain=0.5 \
  --benchmark_out="$LOG/bench_idx.json" --benchmark_out_format=json > "$LOG/bench_idx.log" 2>&1
echo "msa-bench rc $?"; grep -E "ceiling|indexer" "$LOG/bench_idx.log" | cut -c1-200 | head -10
for kd in nvfp4 fp8_e4m3; do
  for shape in "8 1048576" "1 1048576" "8 131072" "1 131072"; do
    set -- $shape
    timeout 60 $M layer --backend cuda --batch $1 --context $2 --iters 30 --queued --config ki_dtype=$kd \
      --json "$LOG/layer_${kd}_$1_$2.json" > "$LOG/layer_${kd}_$1_$2.log" 2>&1
    echo "== $kd B=$1 ctx=$2 (queued) rc $?"; grep -E '^(indexer_score|indexer_topk|sparse_block_attention|msa layer|dense_attention) |select inside|ratio' "$LOG/layer_${kd}_$1_$2.log"
  done
done
