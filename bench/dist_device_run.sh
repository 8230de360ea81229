#!/usr/bin/env bash
# One call on a GPU machine with 1 or more GPUs for the distributed paths: build the
# committed tree (CUDA sm_90a + NCCL, Vulkan, CPU SIMD), the dist and CUDA test suites,
# then `msa layer --gpus` (heads and context, 1 and N ranks, each against one GPU in the
# same call) and `msa run --gpus` (head-parallel model). Logs under $OUT; a summary last.
#   there: source .device-deps/unpack.sh; bash bench/dist_device_run.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0   # never NVLink multicast on shared hosts
start=$(date +%s)
say() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$OUT/run.log"; }
SRC=${MSA_SRC:-$PWD}   # e.g. a `git archive HEAD` export, to leave work in progress out
SRC=$(cd "$SRC" && pwd)
B=$PWD/build-gpu
NG=$(nvidia-smi -L | wc -l)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/run.log"
say "configure + build ($SRC, $NG GPUs)"
{ cmake -S $SRC -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
    -DMSA_VULKAN=${MSA_VULKAN:-ON} -DMSA_HIP=OFF -DMSA_CPU_SIMD=ON && cmake --build $B -j$(nproc); } > "$OUT/build.log" 2>&1
rc=$?; grep -E "NCCL" "$OUT/build.log" | head -2
if [ $rc -ne 0 ]; then grep -E "error" "$OUT/build.log" | head -20; tail -20 "$OUT/build.log"; exit 1; fi
MSA=$B/tools/msa
say "tests: dist, cuda, determinism, resources, model"
for t in dist cuda determinism resources model; do
  exe=$B/tests/msa_tests_$t; [ -x $exe ] || exe=$B/tests/$t/msa_tests_$t
  timeout 200 $exe > "$OUT/test_$t.log" 2>&1
  echo "msa_tests_$t rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/test_$t.log" | tr '\n' ' ')" | tee -a "$OUT/run.log"
done
grep -hE "^\[  FAILED|Failure|SKIPPED \]" "$OUT"/test_*.log | head -20
say "msa layer --gpus: heads (decode B=8 at 1M, bf16) and context (prefill from empty at 32K)"
for g in $(seq 1 $NG); do
  timeout 120 $MSA layer --backend cuda --batch 8 --context 1048576 --iters 10 --gpus $g --parallel heads
  timeout 120 $MSA layer --backend cuda --batch 8 --context 1048576 --iters 10 --gpus $g --parallel heads-sharded-ki
  timeout 120 $MSA layer --backend cuda --batch 8 --context 1048576 --iters 10 --gpus $g --parallel heads-sharded-ki --config ki_dtype=fp8_e4m3
  timeout 120 $MSA layer --backend cuda --batch 1 --context 32768 --q-len 32768 --iters 3 --gpus $g --parallel context
  timeout 120 $MSA layer --backend cuda --batch 1 --context 131072 --q-len 8192 --iters 3 --gpus $g --parallel heads
done > "$OUT/layer.log" 2>&1
grep -E "^msa layer|layer step|single device|check vs|fetched" "$OUT/layer.log"
say "msa run --gpus: m3-attn 32K prompt, and tiny with --check"
for g in $(seq 1 $NG); do
  timeout 120 $MSA run --backend cuda --model m3-attn --prompt-tokens 32768 --gen 8 --gpus $g --quiet
  timeout 60 $MSA run --backend cuda --model tiny --video 8,56,56 --batch 2 --gpus $g --check --quiet
done > "$OUT/run_model.log" 2>&1
grep -E "^msa run|^prefill |^decode |check|seq 0" "$OUT/run_model.log"
say "done"
