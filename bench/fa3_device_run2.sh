#!/usr/bin/env bash
# Second H200 call for the wgmma prefill kernel: build, `msa check` of dense_attention with
# the ping-pong variant (MSA_CUDA_FLASH_WGMMA=2: default splits, 1, 3) and the default
# lock-step one, memcheck of the variant on the small D = 128 case, prefill timings of both
# (msa layer) and an ncu look (speed of light, warp states) at 8K from empty. Logs in $OUT.
set -u
OUT=${OUT:-out}
B=${MSA_BUILD:-/tmp/b}
mkdir -p "$OUT"
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
stamp build
timeout 170 bash -c "cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
  -DMSA_VULKAN=OFF -DMSA_HIP=OFF -DMSA_CPU_SIMD=OFF >$OUT/build.log 2>&1 && cmake --build $B -j16 --target msa_cli >>$OUT/build.log 2>&1" || {
  echo "BUILD FAILED"
  grep -m20 -E "error|Error" "$OUT/build.log"
  exit 1
}
M=$B/tools/msa
stamp checks
check() {  # name, env...
  local name=$1
  shift
  echo "== check ($name)" >>"$OUT/check.log"
  env "$@" timeout 30 "$M" check --backend cuda --cases full --op dense_attention >/tmp/fa3_check.log 2>&1
  echo "rc $?" >>/tmp/fa3_check.log
  cat /tmp/fa3_check.log >>"$OUT/check.log"
  echo "check ($name): $(grep -cE 'FAIL' /tmp/fa3_check.log) FAIL lines; $(grep -E '^dense|^total|rc ' /tmp/fa3_check.log | tr -s ' ' | tr '\n' ' ')"
  grep -E "FAIL" /tmp/fa3_check.log | head -4
}
check "ping-pong" MSA_CUDA_FLASH_WGMMA=2
check "ping-pong, one split" MSA_CUDA_FLASH_WGMMA=2 MSA_CUDA_FLASH_SPLITS=1
check "ping-pong, 3 splits" MSA_CUDA_FLASH_WGMMA=2 MSA_CUDA_FLASH_SPLITS=3
check default
stamp memcheck
MSA_CUDA_FLASH_WGMMA=2 timeout 30 /usr/local/cuda/bin/compute-sanitizer --tool memcheck "$M" check --backend cuda \
  --cases full --op dense_attention --match "D=128 Bs=(128|256)" >"$OUT/memcheck.log" 2>&1
echo "memcheck (ping-pong) rc $?: $(grep -E 'ERROR SUMMARY|^total' "$OUT/memcheck.log" | tr -s ' ' | tr '\n' ' ')"
stamp layers
layer() {  # label, env, msa layer args...
  local label=$1 e=$2
  shift 2
  echo "== layer $label: $*" >>"$OUT/layer.log"
  env $e timeout 45 "$M" layer --backend cuda --batch 1 "$@" >/tmp/fa3_layer.log 2>&1
  cat /tmp/fa3_layer.log >>"$OUT/layer.log"
  echo "layer $label $*: $(grep -E 'dense_att' /tmp/fa3_layer.log | head -2 | tr -s ' ' | tr '\n' ' ')"
  grep -m3 -iE "error" /tmp/fa3_layer.log
}
layer ping-pong MSA_CUDA_FLASH_WGMMA=2 --context 32768 --q-len 32768 --iters 2
layer lock-step MSA_CUDA_FLASH_WGMMA=1 --context 32768 --q-len 32768 --iters 2
layer ping-pong MSA_CUDA_FLASH_WGMMA=2 --context 131072 --q-len 8192 --iters 2
layer ping-pong MSA_CUDA_FLASH_WGMMA=2 --context 131072 --q-len 131072 --iters 1
stamp ncu
for mode in 1 2; do
  MSA_CUDA_FLASH_WGMMA=$mode timeout 40 /usr/local/cuda/bin/ncu --kernel-name regex:flash_wgmma --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
    "$M" layer --backend cuda --batch 1 --context 8192 --q-len 8192 --iters 1 >"$OUT/ncu$mode.log" 2>&1
  echo "ncu mode $mode: $(grep -E 'Duration|Compute \(SM\) Throughput|Memory Throughput|Stall|Issue Slots Busy' "$OUT/ncu$mode.log" | tr -s ' ' | head -8 | tr '\n' ';')"
done
stamp done
