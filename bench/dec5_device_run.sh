#!/usr/bin/env bash
# Session 5, decode floors (issue 4), one call on the H200: what the best loader reaches on
# a decode call's selected K/V slabs (msa-slab-probe, events and ncu), the forced-block-
# aware adaptive top-k (checks, racecheck), and the layer's op times single-call vs queued
# behind device work (msa layer --queued), with ncu on the top-k kernel.
#   from the repo root there: source .device-deps/unpack.sh; S=<source tree> bash <S>/bench/dec5_device_run.sh
set -u
S=$(cd "${S:-.}" && pwd)
RESULT=${OUT:-/tmp/out}
LOG=${LOGS:-/tmp/dec5-logs}
mkdir -p "$RESULT" "$LOG"
pack() { tar -czf "$RESULT/logs.tgz" -C "$LOG" . 2>/dev/null; true; }
# (no `exec > >(tee ...)`: a bare `wait` below would wait for the tee as well, forever)
BUDGET=${BUDGET:-540}
T0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - T0))); }
fits() { [ "$(left)" -ge "$1" ] || { echo "-- skipped (time): $2"; return 1; }; }
B=/tmp/build-dec5
LOG=$LOG source "$S/bench/device_cuda_build.sh" msa_cli msa-bench msa-slab-probe
M=$B/tools/msa BENCH=$B/bench/msa-bench PROBE=$B/bench/msa-slab-probe
echo "== built in $B ($(( $(date +%s) - T0 )) s)"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}"

echo "== checks (full cases): block_topk default and old select; sparse decode"
pids=()
(timeout 60 $M check --backend cuda --cases full --op block_topk > "$LOG/check_topk.log" 2>&1; echo "rc $?" >> "$LOG/check_topk.log") & pids+=($!)
(MSA_TOPK_ADAPTIVE=0 timeout 60 $M check --backend cuda --cases full --op block_topk > "$LOG/check_topk_radix.log" 2>&1; echo "rc $?" >> "$LOG/check_topk_radix.log") & pids+=($!)
(MSA_TOPK_ONE_BLOCK=0 timeout 60 $M check --backend cuda --cases full --op block_topk > "$LOG/check_topk_rowk.log" 2>&1; echo "rc $?" >> "$LOG/check_topk_rowk.log") & pids+=($!)
(timeout 90 $M check --backend cuda --cases full --op sparse_block_attention > "$LOG/check_sparse.log" 2>&1; echo "rc $?" >> "$LOG/check_sparse.log") & pids+=($!)
wait "${pids[@]}"
for f in topk topk_radix topk_rowk sparse; do
  printf "%-12s " $f; grep -E "^total|rc " "$LOG/check_$f.log" | tr '\n' ' '; echo; grep -m3 FAIL "$LOG/check_$f.log"
done
echo "-- racecheck, full top-k cases"
timeout -k 5 60 compute-sanitizer --tool racecheck --print-limit 5 $M check --backend cuda --cases full --op block_topk \
  > "$LOG/racecheck_topk.log" 2>&1
grep -E "^total|FAIL|RACECHECK SUMMARY|Hazard" "$LOG/racecheck_topk.log" | head -4
pack

echo "== slab probe: 1024 slabs of 32 KiB (B=8 decode's selected K/V), 16 GiB pool"
timeout 90 $PROBE --pool-gib 16 2>&1 | tee "$LOG/probe.log"
pack
if [ -n "$NCU" ] && fits 60 "ncu probe"; then
  echo "== ncu on the probe's loaders (kernel time, caches flushed, clocks not locked)"
  for l in "ldg E=1" "ldg E=4" "cpasync E=2" "bulk E=1" "bulk E=6"; do
    printf -- "-- %-12s " "$l"
    timeout 30 "$NCU" --clock-control none --launch-skip 1 --launch-count 3 \
      --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg \
      $PROBE --pool-gib 4 --only "$l" > "$LOG/ncu_probe_${l// /_}.log" 2>&1
    grep -E "gpu__time_duration|dram__throughput" "$LOG/ncu_probe_${l// /_}.log" | awk '{printf "%s %s %s; ", $1, $2, $3}'; echo
  done
fi
pack

LAY='^(block_topk|indexer_score|sparse_block_attention|msa layer \(sum\)) '
layer() {  # label, batch, context, extra flags, env...
  local label=$1 b=$2 ctx=$3 fl=$4; shift 4
  printf -- "-- layer B=%s %-8s %-34s " "$b" "$ctx" "$label"
  env "$@" timeout 40 $M layer --backend cuda --batch "$b" --context "$ctx" --iters 20 $fl 2>&1 | grep -E "$LAY" |
    awk '{printf "%s=%s ", $1, $NF}'; echo
}
echo "== layer op times (median ms): single calls vs queued behind a device fill"
for rep in 1 2; do
  layer "single" 1 131072 ""
  layer "queued" 1 131072 "--queued"
done
layer "queued, radix select" 1 131072 "--queued" MSA_TOPK_ADAPTIVE=0
layer "queued, row kernel" 1 131072 "--queued" MSA_TOPK_ONE_BLOCK=0
layer "queued" 8 131072 "--queued"
fits 60 "1M layers" && {
  layer "queued" 1 1048576 "--queued"
  layer "queued" 8 1048576 "--queued"
  layer "queued fp8 keys" 8 1048576 "--queued --config ki_dtype=fp8_e4m3"
}
pack

if [ -n "$NCU" ] && fits 60 "ncu layer"; then
  echo "== ncu: kernels of the B=1 128K layer (caches not flushed, clocks not locked: as in the step)"
  timeout 60 "$NCU" --clock-control none --cache-control none --launch-skip 8 --launch-count 8 \
    --metrics gpu__time_duration.sum,sm__cycles_active.avg,launch__grid_size,launch__registers_per_thread \
    $M layer --backend cuda --batch 1 --context 131072 --iters 2 > "$LOG/ncu_layer128k.log" 2>&1
  grep -E "^  [a-zA-Z_].*\(|gpu__time_duration|launch__grid_size" "$LOG/ncu_layer128k.log" | sed -E 's/ +/ /g' | head -40
  echo "-- top-k kernel, full sections"
  timeout 60 "$NCU" --clock-control none --cache-control none -k regex:topk --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section WarpStateStats --section Occupancy \
    $M layer --backend cuda --batch 1 --context 131072 --iters 2 > "$LOG/ncu_topk128k.log" 2>&1
  grep -vE "^==PROF==|^msa|^ *$" "$LOG/ncu_topk128k.log" | head -70
fi
pack
echo "== done in $(( $(date +%s) - T0 )) s"
