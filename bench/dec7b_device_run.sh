#!/usr/bin/env bash
# Session 7, second call: the fused select (select blocks after the indexer blocks; the
# first and second versions, one warp per row in the last indexer block, were slow). Checks
# indexer_topk (fused and not), memcheck / racecheck, the queued layer at the decode
# shapes, ncu kernel times fused against unfused, and a per-SASS profile of the fused
# kernel at B = 1, 128K. From the repo root there, after source .device-deps/unpack.sh:
#   S=<tree> bash <S>/bench/dec7b_device_run.sh
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec7b msa_cli
check_variants "default: unfused:MSA_CUDA_FUSED_TOPK=0" --cases full --op indexer_topk,block_topk
timeout 90 "$SAN" --tool memcheck --error-exitcode 3 $M check --backend cuda --cases full --op indexer_topk > "$LOG/memcheck.log" 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY|^total' "$LOG/memcheck.log" | tr -s ' ' | tr '\n' ' ')"
timeout 90 "$SAN" --tool racecheck --error-exitcode 3 $M check --backend cuda --cases full --op indexer_topk > "$LOG/racecheck.log" 2>&1
echo "racecheck rc $?: $(grep -E 'RACECHECK SUMMARY|^total' "$LOG/racecheck.log" | tr -s ' ' | tr '\n' ' ')"
for shape in "1 131072" "8 131072" "1 32768" "1 262144"; do
  set -- $shape
  timeout 60 $M layer --backend cuda --batch $1 --context $2 --iters 30 --queued > "$LOG/layer_$1_$2.log" 2>&1
  echo "== B=$1 ctx=$2 (queued)"; grep -E '^(indexer_score|block_topk|indexer_topk|sparse_block_attention|msa layer) |share|select inside' "$LOG/layer_$1_$2.log"
done
for shape in "1 131072" "8 131072"; do
  set -- $shape
  timeout 60 "$NCU" --clock-control none -k "regex:indexer_mma|topk" --launch-skip 6 --launch-count 6 \
    --metrics gpu__time_duration.sum $M layer --backend cuda --batch $1 --context $2 --iters 3 > "$LOG/ncu_$1_$2.log" 2>&1
  echo "ncu B=$1 ctx=$2 (indexer, topk, fused order): $(grep -E 'gpu__time_duration' "$LOG/ncu_$1_$2.log" | awk '{printf "%s ", $3}')"
done
# Per-SASS samples of the fused kernel (indexer launches alternate fused (even), unfused (odd)).
timeout 120 "$NCU" --clock-control none -k "regex:indexer_mma" --launch-skip 4 --launch-count 1 --set full \
  --import-source no -o "$LOG/fused" -f $M layer --backend cuda --batch 1 --context 131072 --iters 3 > "$LOG/ncu_prof.log" 2>&1
"$NCU" --import "$LOG/fused.ncu-rep" --page source --csv --print-source sass > "$LOG/fused_sass.csv" 2>&1
"$NCU" --import "$LOG/fused.ncu-rep" --page details --csv > "$LOG/fused_details.csv" 2>&1
grep -E '"Duration"' "$LOG/fused_details.csv" | head -2
