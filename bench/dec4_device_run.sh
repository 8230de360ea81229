#!/usr/bin/env bash
# One GPU call (session 4, issue 4's two decode targets; bench/NOTES.md "Session 4: decode
# floor"): where the sparse decode's 20-23 us floor comes from (the same 32 MiB of selected
# slabs from a 512 MiB cache at 32K vs a 16 GiB cache at 1M, ncu memory counters at both,
# host enqueue time per call) and the L2 bulk-prefetch variant of the cluster kernel
# (MSA_CUDA_DECODE_CLUSTER_PREFETCH); block_topk's one-block register path and adaptive
# select (MSA_TOPK_ONE_BLOCK, MSA_TOPK_ADAPTIVE) checked and timed in the B = 1 layer.
# From the repository root on the GPU machine, after `source .device-deps/unpack.sh`:
#   S=<exported source tree> OUT=<log dir> bash $S/bench/dec4_device_run.sh
# Builds msa and msa-bench first. Every step is time-boxed; the whole run stays
# under BUDGET seconds (default 200): steps that would not fit are skipped and say so.
set -u
S=${S:-.}
OUT=${OUT:-/tmp/dec4-out}
BUDGET=${BUDGET:-200}
LOG=/tmp/dec4-logs  # logs, packed into $OUT/logs.tgz after every step (few files come back)
mkdir -p "$OUT" "$LOG"
pack() { tar czf "$OUT/logs.tgz" -C "$LOG" . 2>/dev/null; }
exec > >(tee -a "$LOG/stdout.log") 2>&1  # the run tool returns only the tail of stdout
T0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - T0))); }
fits() { [ "$(left)" -ge "$1" ] || { echo "-- skipped (time): $2"; return 1; }; }
# Built here: binaries built on the development machine need a newer libstdc++ than this
# machine has (first call of session 4: ios_base::Init::_S_refcount missing); ~30 s.
B=/tmp/build-dec4
cmake -S "$S" -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
  -DMSA_VULKAN=OFF -DMSA_HIP=OFF -DMSA_CPU_SIMD=OFF > "$LOG/build.log" 2>&1 &&
  cmake --build $B -j16 --target msa_cli msa-bench >> "$LOG/build.log" 2>&1 || { grep -m5 error "$LOG/build.log"; pack; exit 1; }
M=$B/tools/msa BENCH=$B/bench/msa-bench
echo "== built in $B ($(( $(date +%s) - T0 )) s)"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}"

NEWTK='ONE_BLOCK=1 ADAPTIVE=1'
tk() { env MSA_TOPK_ONE_BLOCK=1 MSA_TOPK_ADAPTIVE=1 "$@"; }

echo "== checks, full cases (run side by side; correctness only)"
(MSA_TOPK_ONE_BLOCK=0 MSA_TOPK_ADAPTIVE=0 timeout 60 $M check --backend cuda --cases full --op block_topk > "$LOG/check_topk_default.log" 2>&1; echo "rc $?" >> "$LOG/check_topk_default.log") &
(tk timeout 60 $M check --backend cuda --cases full --op block_topk > "$LOG/check_topk_new.log" 2>&1; echo "rc $?" >> "$LOG/check_topk_new.log") &
(MSA_TOPK_ADAPTIVE=1 timeout 60 $M check --backend cuda --cases full --op block_topk > "$LOG/check_topk_adaptive.log" 2>&1; echo "rc $?" >> "$LOG/check_topk_adaptive.log") &
(MSA_CUDA_DECODE_CLUSTER_PREFETCH=1 timeout 60 $M check --backend cuda --cases full --op sparse_block_attention > "$LOG/check_sparse_pf1.log" 2>&1; echo "rc $?" >> "$LOG/check_sparse_pf1.log") &
(MSA_CUDA_DECODE_CLUSTER_PREFETCH=2 timeout 60 $M check --backend cuda --cases full --op sparse_block_attention > "$LOG/check_sparse_pf2.log" 2>&1; echo "rc $?" >> "$LOG/check_sparse_pf2.log") &
(MSA_CUDA_DECODE_CLUSTER_PREFETCH=3 timeout 60 $M check --backend cuda --cases full --op sparse_block_attention --match 'Hq=64' > "$LOG/check_sparse_pf3.log" 2>&1; echo "rc $?" >> "$LOG/check_sparse_pf3.log") &
wait
for f in topk_default topk_new topk_adaptive sparse_pf1 sparse_pf2 sparse_pf3; do
  printf "%-16s " $f; grep -E "^total|rc " "$LOG/check_$f.log" | tr '\n' ' '; echo; grep -m3 FAIL "$LOG/check_$f.log"
done
echo "-- racecheck, quick top-k cases, $NEWTK"
tk timeout 25 compute-sanitizer --tool racecheck --print-limit 5 $M check --backend cuda --cases quick --op block_topk \
  2>&1 | grep -E "^total|FAIL|RACECHECK SUMMARY|Hazard" | head -4

pack
LAY='^(block_topk|indexer_score|sparse_block_attention|msa layer \(sum\)) '
layer() {  # label, context, env...
  local label=$1 ctx=$2; shift 2
  printf -- "-- layer B=1 %-8s %-28s " "$ctx" "$label"
  env "$@" timeout 30 $M layer --backend cuda --batch 1 --context "$ctx" --iters 20 2>&1 | grep -E "$LAY" |
    awk '{printf "%s=%s ", $1, $NF}'; echo
}
BCOLS='s/ (dev_MiB|rss_MiB|TFLOP\/s|flop_frac|distinct_blocks_per_64)=[^ ]*//g; s/manual_time//'
bench() {  # label, op, filter, env...
  local label=$1 op=$2 f=$3; shift 3
  echo "-- $label"
  env "$@" timeout 45 $BENCH --backend=cuda --op=$op --benchmark_filter="$f" --benchmark_min_time=0.05 \
    --sustain=0.5 2>&1 | grep -E "^cuda/|ceiling|decode_cluster" | sed -E "$BCOLS"
}
ncu_run() {  # label, filter, metrics, env...
  local label=$1 f=$2 met=$3; shift 3
  echo "-- ncu $label"
  env "$@" timeout 40 "$NCU" --clock-control none -k 'regex:cluster_decode' --launch-skip 10 --launch-count 2 \
    --metrics "$met" $BENCH --backend=cuda --op=sparse_block_attention --benchmark_filter="$f" \
    --benchmark_min_time=0.01 > "$LOG/ncu_${label// /_}.log" 2>&1
  grep -E "^ +[a-z_]+__|ERR|rror" "$LOG/ncu_${label// /_}.log" | sed -E 's/ +/ /g' | head -24
}
layer128() {
  layer "row kernel (old default)" 131072 MSA_TOPK_ONE_BLOCK=0 MSA_TOPK_ADAPTIVE=0
  layer "one block, radix" 131072 MSA_TOPK_ONE_BLOCK=1 MSA_TOPK_ADAPTIVE=0
  layer "one block, adaptive" 131072 MSA_TOPK_ONE_BLOCK=1 MSA_TOPK_ADAPTIVE=1
}

echo "== block_topk in the B=1 layer (single-call op times, ms), old then new"
fits 25 "layer 128K" && layer128
fits 25 "layer 1M" && {
  layer "split, radix (old default)" 1048576 MSA_TOPK_ADAPTIVE=0
  layer "split, adaptive" 1048576 MSA_TOPK_ADAPTIVE=1
}
pack

FSP='sparse_block_attention/B=8 T=8 .*kv=\[8 x (32768|131072|1048576)\.\.|sparse_block_attention/B=1 T=1 .*kv=\[1048576]'
fits 30 "sparse bench" && {
  echo "== sparse decode: same 32 MiB of slabs (B=8) from caches of 512 MiB (32K), 2 GiB (128K), 16 GiB (1M)"
  bench "sparse default (cluster kernel)" sparse_block_attention "$FSP" MSA_CUDA_DECODE_CLUSTER_LOG=1
}
FSPV='sparse_block_attention/B=8 T=8 .*kv=\[8 x (32768|1048576)\.\.'
fits 30 "sparse bench PF1/PF2" && {
  bench "sparse, L2 bulk prefetch of later slabs (PREFETCH=1)" sparse_block_attention "$FSPV" MSA_CUDA_DECODE_CLUSTER_PREFETCH=1
  bench "sparse, L2 bulk prefetch of all slabs before the batch scan (PREFETCH=2)" sparse_block_attention "$FSPV" MSA_CUDA_DECODE_CLUSTER_PREFETCH=2
}
pack

F8_1M='sparse_block_attention/B=8 T=8 .*kv=\[8 x 1048576\.\.'
F8_32K='sparse_block_attention/B=8 T=8 .*kv=\[8 x 32768\.\.'
MET=gpu__time_duration.sum,dram__bytes_read.sum,l1tex__m_xbar2l1tex_read_bytes.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,sm__cycles_active.avg,smsp__cycles_active.avg
if [ -n "$NCU" ]; then
  echo "== ncu, cluster kernel, B=8 (caches flushed before each profiled launch)"
  fits 30 "ncu 1M" && ncu_run "1M default" "$F8_1M" "$MET"
  fits 25 "ncu 32K" && ncu_run "32K default" "$F8_32K" "$MET"
  fits 30 "ncu 1M PF1" && ncu_run "1M prefetch1" "$F8_1M" "$MET" MSA_CUDA_DECODE_CLUSTER_PREFETCH=1
  fits 30 "ncu 1M PF2" && ncu_run "1M prefetch2" "$F8_1M" "$MET" MSA_CUDA_DECODE_CLUSTER_PREFETCH=2
fi
pack

FTK='block_topk/B=(1|8) T=(1|8) .*kv=\[(8 x )?(131072|1048576)(]|\.\.)'
fits 25 "topk bench" && {
  echo "== block_topk benches (median = one call, queued/sustained = back to back)"
  bench "topk old default" block_topk "$FTK" MSA_TOPK_ONE_BLOCK=0 MSA_TOPK_ADAPTIVE=0
  bench "topk $NEWTK" block_topk "$FTK" MSA_TOPK_ONE_BLOCK=1 MSA_TOPK_ADAPTIVE=1
}
fits 15 "layer 128K rep 2" && { echo "== layer 128K again"; layer128; }
pack
if [ -n "$NCU" ] && fits 20 "ncu top-k"; then
  echo "== ncu: top-k kernel durations in the B=1 128K layer (default, then $NEWTK)"
  for v in "MSA_TOPK_ONE_BLOCK=0 MSA_TOPK_ADAPTIVE=0" "MSA_TOPK_ONE_BLOCK=1 MSA_TOPK_ADAPTIVE=1"; do
    env $v timeout 25 "$NCU" --clock-control none -k 'regex:topk' --launch-skip 2 --launch-count 3 \
      --metrics gpu__time_duration.sum,sm__cycles_active.max $M layer --backend cuda --batch 1 --context 131072 \
      --iters 8 > "$LOG/ncu_topk_${v// /_}.log" 2>&1
    echo "-- $v"; grep -E "topk|gpu__time|sm__cycles|rror" "$LOG/ncu_topk_${v// /_}.log" | sed -E 's/ +/ /g; s/\(TopkParams.*//' | head -9
  done
fi

fits 40 "racecheck" && {
  echo "== compute-sanitizer, full cases: racecheck on the new top-k path ($NEWTK), memcheck with PREFETCH=1"
  tk timeout 40 compute-sanitizer --tool racecheck --print-limit 5 $M check --backend cuda --cases full --op block_topk \
    2>&1 | grep -E "^total|FAIL|RACECHECK SUMMARY|Hazard" | head -6
  MSA_CUDA_DECODE_CLUSTER_PREFETCH=1 timeout 25 compute-sanitizer --tool memcheck --print-limit 5 $M check --backend cuda \
    --cases full --op sparse_block_attention --match 'Hq=64' 2>&1 | grep -E "^total|FAIL|ERROR SUMMARY" | head -4
}
pack
if [ -n "$NCU" ]; then
  fits 35 "ncu 1M PF3" && ncu_run "1M prefetch3" "$F8_1M" gpu__time_duration.sum,dram__bytes_read.sum MSA_CUDA_DECODE_CLUSTER_PREFETCH=3
fi
fits 60 "layer B=8 1M" && {
  echo "== B=8 1M layer (sparse after the indexer streamed 1 GiB: cold slabs), PREFETCH=0, 1, 2"
  for v in 0 1 2; do
    printf -- "-- PREFETCH=%s " $v
    MSA_CUDA_DECODE_CLUSTER_PREFETCH=$v timeout 22 $M layer --backend cuda --batch 8 --context 1048576 --iters 20 2>&1 |
      grep -E "$LAY" | awk '{printf "%s=%s ", $1, $NF}'; echo
  done
}
echo "== done in $(( $(date +%s) - T0 )) s"
pack
