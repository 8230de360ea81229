#!/usr/bin/env bash
# One GPU call for the decode work of bench/NOTES.md ("CUDA v5"): cross-check, sanitizers
# and the decode timings, with A/B switches in the same call. From the repository root on
# the GPU machine, after `source .device-deps/unpack.sh`:
#   S=<exported source tree> bash $S/bench/dec_device_run.sh
# Uses $S/prebuilt/{msa,msa-bench,libmsa.so.0} when they load there (built from the same
# tree on the development machine), else builds in build-dec. Logs go to $OUT.
set -u
S=${S:-.}
OUT=${OUT:-/tmp/dec-out}
mkdir -p "$OUT"
M="" BENCH=""
if [ -x "$S/prebuilt/msa" ]; then
  export LD_LIBRARY_PATH="$S/prebuilt:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if ! ldd "$S/prebuilt/msa" "$S/prebuilt/libmsa.so.0" "$S/prebuilt/msa-bench" | grep -q "not found" &&
     "$S/prebuilt/msa" devices > "$OUT/devices.log" 2>&1; then
    M=$S/prebuilt/msa BENCH=$S/prebuilt/msa-bench
    echo "== prebuilt binaries load"
  else
    echo "== prebuilt binaries do not load here:"; ldd "$S/prebuilt/msa" | grep "not found"; tail -3 "$OUT/devices.log"
  fi
fi
if [ -z "$M" ]; then
  B=build-dec
  cmake -S "$S" -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
    -DMSA_VULKAN=OFF -DMSA_HIP=OFF -DMSA_CPU_SIMD=OFF > "$OUT/build.log" 2>&1 &&
    cmake --build $B -j16 --target msa_cli msa-bench >> "$OUT/build.log" 2>&1 || { grep -m5 error "$OUT/build.log"; exit 1; }
  M=$B/tools/msa BENCH=$B/bench/msa-bench
  echo "== built in $B"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader

# Cases that reach the new kernels (regex over the printed case parameters): the B = 8
# mixed-length sparse cases, k = 12 / 20, and the long block_topk rows.
NEW='kv=\[8 x 1\.\.4100\]|kv=\[3000,2000\]|kv=\[140000'
echo "== check, full cases, default kernels"
timeout 150 $M check --backend cuda --cases full 2>&1 | grep -vE "^(patch|rope|kv_append|matmul|rms|layer|swiglu|gelu|add|embedding|scatter|argmax)"

echo "== decode benchmarks (cluster sparse kernel, split top-k)"
F='(sparse_block_attention|block_topk)/B=(1|8) T=(1|8) .*kv=\[(8 x )?1048576'
timeout 60 $BENCH --backend=cuda --op=sparse_block_attention,block_topk --benchmark_filter="$F" \
  --benchmark_min_time=0.05 --benchmark_out="$OUT/bench_new.json" --benchmark_out_format=json 2>&1 | grep -E "^cuda/|ceiling"

for tool in memcheck racecheck; do
  echo "== compute-sanitizer $tool on the new kernels' cases"
  timeout 60 compute-sanitizer --tool $tool --print-limit 5 $M check --backend cuda --cases full \
    --op sparse_block_attention,block_topk --match "$NEW" 2>&1 | grep -E "^total|FAIL|ERROR SUMMARY|RACECHECK SUMMARY|Error|Hazard" | head -12
done

echo "== sparse cluster kernel at every cluster size (forced), reference-shape cases"
for c in 1 2 8 16; do
  printf "C=%-2s " $c
  MSA_CUDA_DECODE_CLUSTER_SIZE=$c timeout 30 $M check --backend cuda --cases full --op sparse_block_attention \
    --match 'Hq=64' 2>&1 | grep -E "^total|FAILED" | head -4
done
echo "== tensor-core decode indexer (MSA_CUDA_MMA_INDEXER=1), fp8 path changed"
MSA_CUDA_MMA_INDEXER=1 timeout 40 $M check --backend cuda --cases full --op indexer_score 2>&1 | grep -E "^total|FAILED" | head -6
MSA_CUDA_MMA_INDEXER=1 timeout 40 compute-sanitizer --tool memcheck --print-limit 5 $M check --backend cuda \
  --cases full --op indexer_score --match 'kv=\[2500,1900\]' 2>&1 | grep -E "^total|FAIL|ERROR SUMMARY" | head -4

echo "== A/B: old split-KV sparse kernel (MSA_CUDA_DECODE_CLUSTER=0), one-CTA-per-row top-k (MSA_TOPK_SPLIT=0)"
MSA_CUDA_DECODE_CLUSTER=0 MSA_TOPK_SPLIT=0 timeout 60 $BENCH --backend=cuda --op=sparse_block_attention,block_topk \
  --benchmark_filter="$F" --benchmark_min_time=0.05 --benchmark_out="$OUT/bench_old.json" \
  --benchmark_out_format=json 2>&1 | grep -E "^cuda/"

echo "== indexer_score decode B=8 1M, tensor-core kernel (MSA_CUDA_MMA_INDEXER=1): fp8 and bf16 keys"
MSA_CUDA_MMA_INDEXER=1 timeout 60 $BENCH --backend=cuda --op=indexer_score \
  --benchmark_filter='indexer_score/B=8 T=8 .*kv=\[8 x 1048576' --benchmark_min_time=0.05 \
  --benchmark_out="$OUT/bench_idx.json" --benchmark_out_format=json 2>&1 | grep -E "^cuda/"

echo "== msa layer B=1 1M (top-k share), new then MSA_TOPK_SPLIT=0"
timeout 40 $M layer --backend cuda --batch 1 --context 1048576 --iters 20 2>&1 | tail -8
MSA_TOPK_SPLIT=0 timeout 40 $M layer --backend cuda --batch 1 --context 1048576 --iters 20 2>&1 | grep -iE "top|layer|sparse" | head -6
