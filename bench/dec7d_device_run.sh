#!/usr/bin/env bash
# Session 7, fourth call: two experiments on the decode indexer. (1) bf16 keys two 16-key
# tiles per step (8 KiB per warp in flight, as fp8 already did) against one
# (MSA_CUDA_MMA_INDEXER_TILES=1); (2) the fused select with 4 scores per thread for rows
# of <= 1024 blocks against 8 (MSA_CUDA_FUSED_TOPK_PER8=1). Checks each routing, then the
# queued layer, ncu kernel times and msa-bench's indexer bandwidth fraction. From the
# repo root there, after source .device-deps/unpack.sh:  S=<tree> bash <S>/bench/dec7d_device_run.sh
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec7d msa_cli msa-bench
V="default: tiles1:MSA_CUDA_MMA_INDEXER_TILES=1 per8:MSA_CUDA_FUSED_TOPK_PER8=1"
check_variants "$V" --cases full --op indexer_topk,indexer_score,msa_layer
timeout 90 "$SAN" --tool racecheck --error-exitcode 3 $M check --backend cuda --cases full --op indexer_topk > "$LOG/racecheck.log" 2>&1
echo "racecheck rc $?: $(grep -E 'RACECHECK SUMMARY|^total' "$LOG/racecheck.log" | tr -s ' ' | tr '\n' ' ')"
for v in $V; do
  for shape in "1 32768" "1 131072" "8 131072" "1 1048576" "8 1048576"; do
    set -- $shape
    env $(variant_env "$v") timeout 60 $M layer --backend cuda --batch $1 --context $2 --iters 30 --queued > "$LOG/layer_$(variant_name "$v")_$1_$2.log" 2>&1
    echo "$(variant_name "$v") B=$1 ctx=$2: $(grep -E '^(indexer_score|block_topk|indexer_topk|sparse_block_attention|msa layer) ' \
      "$LOG/layer_$(variant_name "$v")_$1_$2.log" | awk '{printf "%s %s | ", $1, ($1=="msa") ? $3 : $2}') $(grep -E 'select inside' "$LOG/layer_$(variant_name "$v")_$1_$2.log" | sed 's/.*alone, //')"
  done
done
for v in default: tiles1:MSA_CUDA_MMA_INDEXER_TILES=1; do
  for shape in "1 131072" "8 1048576"; do
    set -- $shape
    env $(variant_env "$v") timeout 60 "$NCU" --clock-control none -k "regex:indexer_mma|topk" --launch-skip 6 --launch-count 6 \
      --metrics gpu__time_duration.sum $M layer --backend cuda --batch $1 --context $2 --iters 3 > "$LOG/ncu_$(variant_name "$v")_$1_$2.log" 2>&1
    echo "ncu $(variant_name "$v") B=$1 ctx=$2 (fused, indexer, topk order): $(grep -E 'gpu__time_duration' "$LOG/ncu_$(variant_name "$v")_$1_$2.log" | awk '{printf "%s ", $3}')"
  done
  env $(variant_env "$v") timeout 90 $B/bench/msa-bench --backend=cuda --benchmark_filter='cuda/indexer_score/B=(1|8) T=(1|8) q=.*kv=\[(8 x )?(131072|1048576)' \
    --benchmark_min_time=0.05s > "$LOG/bench_$(variant_name "$v").log" 2>&1
  echo "bench $(variant_name "$v"):"; grep -E "^cuda/" "$LOG/bench_$(variant_name "$v").log" | sed -E 's/ Hi=4 Di=128//; s/ pool=max Bs=128 Qb=1 dtype=bf16 mode=per_kv_head//' | awk '{for(i=1;i<=NF;i++) if ($i ~ /^bw_frac=/) f=$i; print $1, $2, $3, $4, $5, $6, f}'
done
