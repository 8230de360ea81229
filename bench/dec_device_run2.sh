#!/usr/bin/env bash
# Second GPU call of the v5 decode work (bench/NOTES.md): where the sparse cluster kernel's
# time goes at B = 8 (kernel durations under ncu, the launch geometry and host launch time
# from MSA_CUDA_DECODE_CLUSTER_LOG=1) and the variants side by side: one CTA per SM
# (default) or two (MSA_CUDA_DECODE_CLUSTER_OCC=2), forced cluster sizes, PDL off, the v4
# split-KV kernel. Same invocation as dec_device_run.sh:
#   S=<exported source tree> bash $S/bench/dec_device_run2.sh
set -u
S=${S:-.}
OUT=${OUT:-/tmp/dec-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$S/prebuilt:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
M=$S/prebuilt/msa BENCH=$S/prebuilt/msa-bench
if ldd $M $BENCH "$S/prebuilt/libmsa.so.0" | grep -q "not found" || ! $M devices > /dev/null 2>&1; then
  B=build-dec
  cmake -S "$S" -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
    -DMSA_VULKAN=OFF -DMSA_HIP=OFF -DMSA_CPU_SIMD=OFF > "$OUT/build.log" 2>&1 &&
    cmake --build $B -j16 --target msa_cli msa-bench >> "$OUT/build.log" 2>&1 || { grep -m5 error "$OUT/build.log"; exit 1; }
  M=$B/tools/msa BENCH=$B/bench/msa-bench
fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
NEW='kv=\[8 x 1\.\.4100\]|kv=\[3000,2000\]|kv=\[140000'
F8='sparse_block_attention/B=8 T=8 .*kv=\[8 x 1048576'
F='sparse_block_attention/B=(1|8) T=(1|8) .*kv=\[(8 x )?1048576'
bench() {  # label, env..., filter
  local label=$1; shift
  echo "-- $label"
  env "$@" timeout 25 $BENCH --backend=cuda --op=sparse_block_attention --benchmark_filter="$F" \
    --benchmark_min_time=0.05 2>&1 | grep -E "^cuda/|decode_cluster" |
    sed -E 's/(sparse_block_attention\/B=[18]) .*manual_time/\1/; s/ (dev_MiB|rss_MiB|TFLOP\/s|flop_frac)=[^ ]*//g'
}

echo "== check, full cases, default kernels (one CTA per SM)"
timeout 40 $M check --backend cuda --cases full 2>&1 | grep -E "^(sparse|dense|indexer|block_topk|total)|FAILED"
echo "== two CTAs per SM (MSA_CUDA_DECODE_CLUSTER_OCC=2): sparse cases, forced cluster sizes, sanitizers"
export MSA_CUDA_DECODE_CLUSTER_OCC=2
timeout 30 $M check --backend cuda --cases full --op sparse_block_attention 2>&1 | grep -E "^total|FAILED" | head -4
for c in 4 8 16; do
  printf "C=%-2s " $c
  MSA_CUDA_DECODE_CLUSTER_SIZE=$c timeout 20 $M check --backend cuda --cases full --op sparse_block_attention \
    --match 'Hq=64' 2>&1 | grep -E "^total|FAILED" | head -3
done
for tool in memcheck racecheck; do
  timeout 40 compute-sanitizer --tool $tool --print-limit 5 $M check --backend cuda --cases full \
    --op sparse_block_attention --match "$NEW" 2>&1 | grep -E "^total|FAIL|ERROR SUMMARY|RACECHECK SUMMARY" | head -4
done
unset MSA_CUDA_DECODE_CLUSTER_OCC

echo "== sparse decode at 1M: variants (median_ms = one call on an idle GPU, queued_ms = per call of 16 back to back)"
bench "cluster, 1 CTA/SM (default)" MSA_CUDA_DECODE_CLUSTER_LOG=1
bench "cluster, 2 CTA/SM" MSA_CUDA_DECODE_CLUSTER_OCC=2 MSA_CUDA_DECODE_CLUSTER_LOG=1
bench "v4 split-KV kernel" MSA_CUDA_DECODE_CLUSTER=0
bench "cluster, 1 CTA/SM, PDL off" MSA_CUDA_DECODE_PDL=0
bench "cluster, 2 CTA/SM, PDL off" MSA_CUDA_DECODE_CLUSTER_OCC=2 MSA_CUDA_DECODE_PDL=0
bench "cluster, 1 CTA/SM, C=4 forced" MSA_CUDA_DECODE_CLUSTER_SIZE=4 MSA_CUDA_DECODE_CLUSTER_LOG=1
bench "cluster, 2 CTA/SM, C=8 forced" MSA_CUDA_DECODE_CLUSTER_OCC=2 MSA_CUDA_DECODE_CLUSTER_SIZE=8 MSA_CUDA_DECODE_CLUSTER_LOG=1

echo "== kernel durations under ncu (cold L2 per launch, clocks not locked), B=8 1M"
for v in "MSA_CUDA_DECODE_CLUSTER_OCC=1" "MSA_CUDA_DECODE_CLUSTER_OCC=2" "MSA_CUDA_DECODE_CLUSTER=0"; do
  echo "-- $v"
  env $v timeout 40 "$NCU" --clock-control none -k 'regex:cluster_decode|decode_attn' --launch-skip 20 --launch-count 3 \
    --metrics gpu__time_duration.sum $BENCH --backend=cuda --op=sparse_block_attention --benchmark_filter="$F8" \
    --benchmark_min_time=0.01 2>&1 | grep -E "decode_attn_kernel|cluster_decode_kernel|gpu__time_duration|ERR" |
    sed -E 's/.*(cluster_decode_kernel|decode_attn_kernel)<[^>]*>/\1/' | head -8
done
