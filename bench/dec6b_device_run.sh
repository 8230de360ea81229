#!/usr/bin/env bash
# Session 6: the sparse decode kernel after the profile of dec6a (q requested before the
# slabs, one-warp batch locate, one-pass global merge). Checks (sparse full cases in each
# merge mode, memcheck and racecheck), queued layer op times, ncu kernel times and a
# sampled profile per SASS instruction. From the repo root there, after
# source .device-deps/unpack.sh:  S=<tree> bash <S>/bench/dec6b_device_run.sh
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec6b msa_cli
VARIANTS="auto: cluster:MSA_CUDA_DECODE_CLUSTER_MERGE=1 global:MSA_CUDA_DECODE_CLUSTER_MERGE=2
  occ2:MSA_CUDA_DECODE_CLUSTER_OCC=2"
(MSA_CUDA_DECODE_CLUSTER_MERGE=2 timeout 200 "$SAN" --tool memcheck --error-exitcode 3 $M check --backend cuda \
   --cases full --op sparse_block_attention > "$LOG/memcheck.log" 2>&1; echo "rc $?" >> "$LOG/memcheck.log") & san1=$!
(MSA_CUDA_DECODE_CLUSTER_MERGE=2 timeout 200 "$SAN" --tool racecheck --error-exitcode 3 $M check --backend cuda \
   --cases full --op sparse_block_attention --match 'Hq=64' > "$LOG/racecheck.log" 2>&1; echo "rc $?" >> "$LOG/racecheck.log") & san2=$!
check_variants "$VARIANTS" --cases full --op sparse_block_attention
wait $san1 $san2
for t in memcheck racecheck; do echo "$t: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^total|^rc' "$LOG/$t.log" | tr '\n' ' ')"; done
measure_variants "auto:" "8 1048576" "1 131072" "8 131072" "1 1048576"
timeout 120 "$NCU" --clock-control none -k 'regex:cluster_decode' --launch-skip 3 --launch-count 1 --set full \
  --import-source no -o "$LOG/decode_b8_1m" -f $M layer --backend cuda --iters 5 --batch 8 --context 1048576 > "$LOG/ncu_full.log" 2>&1
"$NCU" --import "$LOG/decode_b8_1m.ncu-rep" --page source --csv --print-source sass > "$LOG/source_decode_b8_1m.csv" 2>&1
echo "profile rows $(wc -l < "$LOG/source_decode_b8_1m.csv")"
