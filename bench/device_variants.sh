# Sourced by the bench/dec6*_device_run.sh scripts on the GPU machine: builds the CUDA tree
# and runs an op's checks and measurements once per "variant" (name:ENV=1,ENV2=2; an empty
# environment is the default routing).
#   device_setup <log name> <targets...>   S, LOG, B, M, NCU, SAN; builds (device_cuda_build.sh)
#   final_check_setup   gpu_final_run.sh "build check test" of $MSA_SRC, then M, LOG, NCU,
#     SAN for its build
#   check_variants "<variants>" <msa check args...>   in parallel; prints one line each
#   measure_variants "<variants>" "<B ctx>"...   queued layer op ms and ncu kernel us
#     of the kernels matching $KERNEL_RE (default cluster_decode)
#   sanitize_checks, bench_cuda, layer_keys, ncu_indexer, sass_of: see below
device_setup() {
  local name=$1
  shift
  S=$(cd "${S:-.}" && pwd)
  LOG=${LOGS:-/tmp/$name-logs}
  mkdir -p "$LOG"
  B=/tmp/build-$name
  LOG=$LOG source "$S/bench/device_cuda_build.sh" "$@"
  M=$B/tools/msa
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
}

final_check_setup() {
  S=$(cd "${MSA_SRC:-.}" && pwd)
  bash "$S/bench/gpu_final_run.sh" "build check test"
  M=$PWD/build-final/tools/msa
  LOG=${LOGS:-/tmp/msa-final-logs}
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
}

# Variant name and its environment as "A=1 B=2".
variant_name() { echo "${1%%:*}"; }
variant_env() { local e=${1#*:}; echo "${e//,/ }"; }

check_variants() {
  local variants=$1 v pids=()
  shift
  for v in $variants; do
    (env $(variant_env "$v") timeout 90 $M check --backend cuda "$@" > "$LOG/check_$(variant_name "$v").log" 2>&1
     echo "rc $?" >> "$LOG/check_$(variant_name "$v").log") & pids+=($!)
  done
  wait "${pids[@]}"
  for v in $variants; do
    echo "check $(variant_name "$v"): $(grep -E '^total|^rc' "$LOG/check_$(variant_name "$v").log" | tr -s ' ' | tr '\n' ' ')"
  done
}

measure_variants() {
  local variants=$1 v shape name envv
  shift
  local shapes=("$@")  # "$@" is reused below for the shape's two numbers
  for v in $variants; do
    name=$(variant_name "$v") envv=$(variant_env "$v")
    for shape in "${shapes[@]}"; do
      set -- $shape
      env $envv timeout 60 $M layer --backend cuda --batch $1 --context $2 --iters 30 --queued \
        > "$LOG/layer_${name}_$1_$2.log" 2>&1
      env $envv timeout 60 "$NCU" --clock-control none -k "regex:${KERNEL_RE:-cluster_decode}" --launch-skip 3 \
        --launch-count 3 --metrics gpu__time_duration.sum $M layer --backend cuda --batch $1 --context $2 --iters 5 \
        > "$LOG/ncu_${name}_$1_$2.log" 2>&1
      echo "$name B=$1 ctx=$2: $(grep -E '^(indexer_score|block_topk|sparse_block_attention|msa layer|dense_attention) ' \
        "$LOG/layer_${name}_$1_$2.log" | awk '{printf "%s %s | ", $1, $NF}') ncu $(grep -E 'gpu__time_duration' \
        "$LOG/ncu_${name}_$1_$2.log" | awk '{printf "%s ", $3}') us"
    done
  done
}

# compute-sanitizer tools over `msa check --backend cuda <args...>`, one line each.
#   sanitize_checks "memcheck racecheck" --cases full --op indexer_topk --match fp4
sanitize_checks() {
  local tools=$1 tool
  shift
  for tool in $tools; do
    timeout 90 "$SAN" --tool $tool --error-exitcode 3 $M check --backend cuda "$@" > "$LOG/$tool.log" 2>&1
    echo "$tool rc $?: $(grep -E 'SUMMARY|^total' "$LOG/$tool.log" | tr -s ' ' | tr '\n' ' ')"
  done
}

# msa-bench (cuda) of the benchmarks matching <filter>, JSON and log as $LOG/bench_<name>.*;
# prints the ceiling and the lines matching <grep>.
#   bench_cuda idx 'indexer_score/.*T=8' 'ceiling|indexer'
bench_cuda() {
  local name=$1 filter=$2 show=$3
  timeout 150 $B/bench/msa-bench --backend=cuda --benchmark_filter="$filter" --benchmark_min_time=0.05s --sustain=0.5 \
    --benchmark_out="$LOG/bench_$name.json" --benchmark_out_format=json > "$LOG/bench_$name.log" 2>&1
  echo "msa-bench rc $?"; grep -E "$show" "$LOG/bench_$name.log" | cut -c1-220 | head -40
}

# The queued layer per key format and shape ("B ctx"), JSON and log per run; prints its
# per-op lines. Key format "default": the layer's own (no --config).
#   layer_keys "nvfp4 fp8_e4m3" "8 1048576" "1 131072"
layer_keys() {
  local kds=$1 kd shape
  shift
  local shapes=("$@")  # "$@" is reused below for the shape's two numbers
  for kd in $kds; do
    for shape in "${shapes[@]}"; do
      set -- $shape
      local cfg=() tag=$1_$2
      [ "$kd" != default ] && cfg=(--config ki_dtype=$kd) tag=${kd}_$1_$2
      timeout 60 $M layer --backend cuda --batch $1 --context $2 --iters 30 --queued "${cfg[@]}" \
        --json "$LOG/layer_$tag.json" > "$LOG/layer_$tag.log" 2>&1
      echo "== $kd keys B=$1 ctx=$2 (queued) rc $?"
      grep -E '^(indexer_score|block_topk|indexer_topk|sparse_block_attention|msa layer|dense_attention) |share|select inside|ratio' \
        "$LOG/layer_$tag.log"
    done
  done
}

# ncu metrics of the decode indexer kernel at B = 8, 1M with <key format> keys, under an
# environment ("A=1 B=2"), one line; log as $LOG/ncu_<name>.log.
#   ncu_indexer lop "MSA_X=1" nvfp4 gpu__time_duration.sum,smsp__inst_executed.sum
ncu_indexer() {
  local name=$1 envv=$2 kd=$3 metrics=$4
  env $envv timeout 60 "$NCU" --clock-control none -k "regex:indexer_mma_kernel" --launch-skip 3 --launch-count 1 \
    --metrics "$metrics" $M layer --backend cuda --batch 8 --context 1048576 --iters 5 --config ki_dtype=$kd \
    > "$LOG/ncu_$name.log" 2>&1
  echo "ncu $name: $(grep -E 'gpu__time|dram__|smsp__|sm__|launch__' "$LOG/ncu_$name.log" | awk '{printf "%s %s | ", $1, $3}')"
}

# The SASS of the kernels of libmsa whose mangled name matches <regex>, as $LOG/sass_<name>.txt.
sass_of() {
  local re=$1 name=$2 dump lib
  dump=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null | head -1)
  lib=$(find "$B" -name 'libmsa*.so*' -type f | head -1)
  "$dump" -sass "$lib" | awk -v re="$re" '/Function :/ {keep = ($3 ~ re)} keep' > "$LOG/sass_$name.txt"
  echo "sass $name: $(wc -l < "$LOG/sass_$name.txt") lines"
}
