#!/usr/bin/env bash
# The sm_90a wgmma prefill indexer (kernels/cuda_only/indexer_wgmma.cu) on the GPU machine,
# from the source root after `source .device-deps/unpack.sh`: build, `msa check` of
# indexer_score with the kernel on (default) and off (MSA_CUDA_WGMMA_INDEXER=0: indexer_tc),
# msa-bench's prefill indexer cases (8192 queries, Hi=4, Di=128, Bs=128, bf16) with the
# bf16 matmul ceiling measured in the same run, msa layer per-op times on/off, and
# compute-sanitizer memcheck on the new kernel's check cases; both tile heights
# (MSA_CUDA_WGMMA_INDEXER_ROWS=128 and 256). Every step is time-boxed and
# skipped when the whole run would pass BUDGET seconds (default 185). Logs go to $OUT.
set -u
OUT=${OUT:-out}
B=${MSA_BUILD:-/tmp/b-idx}
BUDGET=${BUDGET:-185}
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - T0))); }
step() {  # name, timeout, command...: runs when the budget allows, logs to $OUT/<name>.log
  local name=$1 t=$2
  shift 2
  if [ "$(left)" -lt "$t" ]; then
    echo "== $name: skipped ($(left) s left)" | tee -a "$OUT/summary.log"
    return 1
  fi
  echo "== $name ($(($(date +%s) - T0)) s)" >>"$OUT/summary.log"
  timeout "$t" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "   rc $rc" >>"$OUT/summary.log"
  return $rc
}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
  -DMSA_VULKAN=OFF -DMSA_HIP=OFF -DMSA_CPU_SIMD=OFF >"$OUT/cmake.log" 2>&1
step build 120 cmake --build "$B" -j16 --target msa_cli msa-bench || {
  grep -m20 -E "error|warning.*(spill|C75)" "$OUT/build.log"
  cat "$OUT/summary.log"
  exit 1
}
grep -E "C75|spill" "$OUT/build.log" | grep -i wgmma | head -5
M=$B/tools/msa
MB=$B/bench/msa-bench
R=MSA_CUDA_WGMMA_INDEXER_ROWS
step check_on 40 "$M" check --backend cuda --cases full --op indexer_score
step check_256 40 env $R=256 "$M" check --backend cuda --cases full --op indexer_score
step check_off 40 env MSA_CUDA_WGMMA_INDEXER=0 "$M" check --backend cuda --cases full --op indexer_score
F='indexer_score/B=1 T=8192 .*ki=bf16'
step bench_128 40 "$MB" --backend=cuda --op=indexer_score --benchmark_min_time=0.05s "--benchmark_filter=$F"
step bench_256 40 env $R=256 "$MB" --backend=cuda --op=indexer_score --benchmark_min_time=0.05s "--benchmark_filter=$F"
step bench_off 30 env MSA_CUDA_WGMMA_INDEXER=0 "$MB" --backend=cuda --op=indexer_score --benchmark_min_time=0.05s \
  "--benchmark_filter=indexer_score/B=1 T=8192 .*kv=.(32768|131072).*ki=bf16"
L128="layer --backend cuda --batch 1 --context 131072 --q-len 8192 --iters 3"
step layer128_128 20 "$M" $L128
step layer128_256 20 env $R=256 "$M" $L128
step layer128_off 20 env MSA_CUDA_WGMMA_INDEXER=0 "$M" $L128
step layer128_256_qb64 20 env $R=256 "$M" $L128 --config Qb=64
step layer128_off_qb64 20 env MSA_CUDA_WGMMA_INDEXER=0 "$M" $L128 --config Qb=64
step memcheck_256 30 env $R=256 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 "$M" check --backend cuda \
  --cases full --op indexer_score --match "Hi=(4|8) Di=(64|128) ki=bf16 pool=(max|lse) Bs=(128|256) Qb=(1|4|16|64)"
step layer1m_256 30 env $R=256 "$M" layer --backend cuda --batch 1 --context 1048576 --q-len 8192 --iters 2
step layer1m_128 30 "$M" layer --backend cuda --batch 1 --context 1048576 --q-len 8192 --iters 2

{
  echo "== summary"
  cat "$OUT/summary.log"
  for f in check_on check_256 check_off; do
    [ -f "$OUT/$f.log" ] && { echo "-- $f"; grep -E "^indexer_score|^total|FAIL|rror" "$OUT/$f.log" | head -12; }
  done
  for f in bench_128 bench_256 bench_off; do
    [ -f "$OUT/$f.log" ] && { echo "-- $f"; grep -E "ceiling|indexer_score" "$OUT/$f.log" | sed 's/  */ /g' | cut -c1-260; }
  done
  for f in layer128_128 layer128_256 layer128_off layer128_256_qb64 layer128_off_qb64 layer1m_256 layer1m_128; do
    [ -f "$OUT/$f.log" ] && { echo "-- $f"; grep -E "^indexer_score|^msa layer|^dense|rror" "$OUT/$f.log" | head -8; }
  done
  [ -f "$OUT/memcheck_256.log" ] && { echo "-- memcheck_256"; grep -E "ERROR SUMMARY|^total|FAIL" "$OUT/memcheck_256.log" | head -5; }
} 2>&1 | tee "$OUT/result.txt"
