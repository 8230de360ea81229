# Sourced by the bench/dec6*_device_run.sh scripts on the GPU machine: builds the CUDA tree
# and runs an op's checks and measurements once per "variant" (name:ENV=1,ENV2=2; an empty
# environment is the default routing).
#   device_setup <log name> <targets...>   S, LOG, B, M, NCU, SAN; builds (device_cuda_build.sh)
#   final_check_setup   gpu_final_run.sh "build check test" of $MSA_SRC, then M, LOG, NCU,
#     SAN for its build
#   check_variants "<variants>" <msa check args...>   in parallel; prints one line each
#   measure_variants "<variants>" "<B ctx>"...   queued layer op ms and ncu kernel us
#     of the kernels matching $KERNEL_RE (default cluster_decode)
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
