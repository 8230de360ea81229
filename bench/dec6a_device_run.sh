#!/usr/bin/env bash
# Session 6, first profile: where the sparse decode kernel (B = 8, 1M) and the block_topk
# kernel (B = 1, 128K) spend their time. ncu with warp-state sampling per SASS instruction
# (source page printed as CSV), and the SASS size of every kernel (cuobjdump). From the
# repo root there, after source .device-deps/unpack.sh:  S=<tree> bash <S>/bench/dec6a_device_run.sh
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec6a msa_cli
CUOBJDUMP=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null | head -1)
LIB=$(find "$B" -name 'libmsa*.so*' -type f | head -1)
echo "lib $LIB"
# SASS instructions per kernel.
"$CUOBJDUMP" -sass "$LIB" > "$LOG/sass.txt" 2>&1
awk '/Function :/ {name=$3} /\/\*[0-9a-f]+\*\// {n[name]++} END {for (k in n) print n[k], k}' "$LOG/sass.txt" |
  sort -rn > "$LOG/sass_sizes.txt"
head -30 "$LOG/sass_sizes.txt"
prof() {  # name kernel-regex layer-args...
  local name=$1 kre=$2; shift 2
  timeout 120 "$NCU" --clock-control none -k "regex:$kre" --launch-skip 3 --launch-count 1 --set full \
    --import-source no -o "$LOG/$name" -f $M layer --backend cuda --iters 5 "$@" > "$LOG/ncu_$name.log" 2>&1
  echo "ncu $name rc $?"
  "$NCU" --import "$LOG/$name.ncu-rep" --page details > "$LOG/details_$name.txt" 2>&1
  "$NCU" --import "$LOG/$name.ncu-rep" --page source --csv --print-source sass > "$LOG/source_$name.csv" 2>&1
  echo "source rows $(wc -l < "$LOG/source_$name.csv")"
  grep -E "Duration|Registers Per|Achieved Occupancy|Stall|Warp Cycles Per Issued|Executed Ipc|Instruction Cache" \
    "$LOG/details_$name.txt" | head -30
}
prof decode_b8_1m cluster_decode --batch 8 --context 1048576
prof topk_b1_128k topk --batch 1 --context 131072
prof decode_b1_128k cluster_decode --batch 1 --context 131072
