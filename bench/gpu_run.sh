#!/usr/bin/env bash
# The GPU machine's run script: builds the tree with CUDA (sm_90a) and Vulkan, then runs
# the phases asked for, each time-boxed so that a call of a few phases stays under the
# device's 10-minute limit. Logs go to $LOGS; after every phase they are packed into
# $OUT/logs.tgz (the device tool returns few files), with run.log, the summary and the
# JSON/PNG results beside it.
#
#   from the repo root there:  source .device-deps/unpack.sh   (done here when present)
#                              bash bench/gpu_run.sh "build check test"
#
# Phases (default "build check test sanitize bench sweep"; run in this order):
#   build         configure + build msa, msa-bench and the test suites the phases need
#   check         msa check --cases full: CUDA in every routing of $ROUTINGS (both tiers
#                 and each kernel switch flipped), Vulkan, Vulkan through device addresses,
#                 Vulkan dense attention on its fallback shader
#   test          msa_tests_cuda, msa_tests_vulkan
#   sanitize      compute-sanitizer memcheck over the full cases of the attention, indexer
#                 and top-k ops, racecheck over their quick cases ($SAN_OPS)
#   sanitize-all  memcheck (leak check), racecheck, initcheck, synccheck over every quick
#                 case, native and portable tier
#   bench         msa-bench decode cases, CUDA and Vulkan side by side ($BENCH_FILTER,
#                 $VK_BENCH_FILTER)
#   prefill       token-level sparse prefill (Qb = 1, 8K chunk): the KV-block-outer kernel, the
#                 wmma kernel and the flash kernel's union walk, on random and correlated
#                 (walk) selections
#   topk          block_topk on an 8K prefill chunk's rows (128K, 1M): the register paths
#                 (default) against the row kernel (MSA_TOPK_REGISTER=0), then the 8K-chunk
#                 MSA layer at 1M with each
#   sdpa          PyTorch SDPA decode baseline (bench/sdpa_baseline.py)
#   sweep         MSA layer against msa's dense and PyTorch SDPA, 32K..1M (bench/layer_sweep.py;
#                 $SWEEP_ARGS)
#   layer         msa layer --queued per key format ($KEY_FORMATS: bf16 fp8_e4m3 nvfp4) at
#                 $LAYER_SHAPES ("B context [q_len] [tuning]|..."), each also with $LAYER_TUNING
#   probe         msa-slab-probe: the best any loader reads a B = 8 decode call's slabs at
#   variants      A/B of kernel variants: for each "name:ENV=1,ENV2=2" of $VARIANTS,
#                 msa check $CHECK_ARGS, the queued layer at $LAYER_SHAPES and, with ncu,
#                 the kernels matching $KERNEL_RE ($NCU_METRICS)
#   sass          the SASS of libmsa's kernels whose name matches $SASS_RE
#   dist          (2 or more GPUs) msa_tests_dist and the other multi-device suites,
#                 msa layer --gpus (heads, heads-sharded-ki, context) and msa run --gpus
#   py-build py-test py-example py-overhead py-layer py-training
#                 the Python package for the machine's python3: build msa_python, pytest
#                 tests/python, examples/hf_decoder_layer.py, bench/python/bench_overhead.py,
#                 bench_layer.py ($LAYER_CASES, $LAYER_TAG) and bench_training.py ($TRAIN_ARGS)
#
# Settings (environment):
#   MSA_SRC=<dir>    source tree to build (default: the current directory; e.g. a
#                    `git archive HEAD` export, to leave work in progress out)
#   BUILD=<dir>      build directory (default $PWD/build-gpu); CMAKE_EXTRA: more cmake
#                    arguments (e.g. -DCMAKE_CUDA_FLAGS=-lineinfo)
#   EXTRA_ROUTINGS   more "name:knob=1,knob2=2" routings (--tuning) for the check phase
set -u
RESULT=${OUT:-/tmp/out}
LOG_DIR=${LOGS:-/tmp/msa-gpu-logs}
mkdir -p "$RESULT" "$LOG_DIR"
PHASES=${1:-"build check test sanitize bench sweep"}
has() { [[ " $PHASES " == *" $1 "* ]]; }
LOG=$LOG_DIR/run.log
start=$(date +%s)
say() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$LOG"; }
SUMMARY=()
note() { SUMMARY+=("$*"); }
pack() {
  tar -czf "$RESULT/logs.tgz" -C "$LOG_DIR" . 2>/dev/null
  cp "$LOG" "$RESULT/" 2>/dev/null
  cp "$LOG_DIR"/sweep/layer_sweep.* "$LOG_DIR"/py/*.json "$LOG_DIR"/py/*.png "$RESULT/" 2>/dev/null
  true
}
# "name:A=1,B=2" -> name, and -> "A=1 B=2" (an environment), or "A=1,B=2" (--tuning)
routing_name() { echo "${1%%:*}"; }
routing_env() { local e=${1#*:}; echo "${e//,/ }"; }
routing_tuning() { echo "${1#*:}"; }
# The executable of a test suite (tests/<name>/ or tests/).
suite() { local exe=$B/tests/$1/msa_tests_$1; [ -x "$exe" ] || exe=$B/tests/msa_tests_$1; echo "$exe"; }
passed() { grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$1" | tr '\n' ' '; }
# The op rows of an `msa layer` log.
layer_rows() {
  grep -E '^(indexer_score|block_topk|indexer_topk|sparse_block_attention|msa layer|dense_attention) |share|ratio' "$1"
}

# shellcheck disable=SC1091  # the device machine's toolchain (absent elsewhere)
[ -f .device-deps/unpack.sh ] && source .device-deps/unpack.sh > /dev/null 2>&1
SRC=$(cd "${MSA_SRC:-.}" && pwd)
B=${BUILD:-$PWD/build-gpu}
MSA=$B/tools/msa
BENCH=$B/bench/msa-bench
cuda_tool() { command -v "$1" || { [ -x "/usr/local/cuda/bin/$1" ] && echo "/usr/local/cuda/bin/$1"; }; }
NCU=$(cuda_tool ncu)
SAN=$(cuda_tool compute-sanitizer)
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used --format=csv,noheader | tee -a "$LOG"

if has build; then
  targets="msa_cli msa-bench msa_tests_cuda msa_tests_vulkan"
  has probe && targets+=" msa-slab-probe"
  has dist && targets+=" msa_tests_dist msa_tests_determinism msa_tests_resources msa_tests_model"
  say "configure + build ($SRC: $targets)"
  # shellcheck disable=SC2086  # CMAKE_EXTRA and targets are word lists
  { cmake -S "$SRC" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
      -DMSA_VULKAN=ON -DMSA_HIP=OFF -DMSA_CPU_SIMD=OFF -DMSA_PYTHON=OFF ${CMAKE_EXTRA:-} &&
    cmake --build "$B" -j"$(nproc)" --target $targets; } > "$LOG_DIR/build.log" 2>&1
  rc=$?
  note "build rc=$rc"
  if [ $rc -ne 0 ]; then grep -E "error" "$LOG_DIR/build.log" | head -20; tail -30 "$LOG_DIR/build.log"; pack; exit 1; fi
  "$MSA" devices | tee -a "$LOG"
  pack
fi

if has check; then
  # Every CUDA routing: the default, the portable tier, each knob value that is not the
  # default, and the test hooks (docs/tuning.md), as `msa check --tuning`. They run side
  # by side (correctness only; the cpu-ref side of each uses the host's cores).
  ROUTINGS=${ROUTINGS:-"native: portable:tier=portable decode-split:decode=1 decode-off:decode=0
    flash-fa2:flash=1 flash-off:flash=0 flash-sparse-on:flash_sparse=1 flash-sparse-off:flash_sparse=0
    indexer-mma:indexer=1 indexer-portable:indexer=0 fused-topk-off:fused_topk=0
    training-mma-off:training_mma=0 topk-row:topk_register=0 indexer-groups-off:indexer_groups=0
    kv-outer-on:kv_outer=1 kv-outer-off:kv_outer=0 union-walk:flash_union_pct=100
    hooks:flash_splits=2,cluster_merge=1,pdl=0,bwd_item_tokens=3,kl_item_tokens=3"}
  say "msa check --cases full: cuda in every routing, vulkan (plain and through device addresses)"
  pids=()
  for r in $ROUTINGS ${EXTRA_ROUTINGS:-}; do
    name=$(routing_name "$r")
    { timeout 240 "$MSA" check --backend cuda --cases full --tuning "$(routing_tuning "$r")" \
        > "$LOG_DIR/check_cuda_$name.log" 2>&1
      echo "rc $?" >> "$LOG_DIR/check_cuda_$name.log"; } & pids+=($!)
  done
  { timeout 240 "$MSA" check --backend vulkan:0 --cases full > "$LOG_DIR/check_vulkan.log" 2>&1
    echo "rc $?" >> "$LOG_DIR/check_vulkan.log"; } & pids+=($!)
  { timeout 240 "$MSA" check --backend vulkan:0 --cases full --tuning force_bda=1 \
      --op sparse_block_attention,dense_attention,indexer_score,kv_append > "$LOG_DIR/check_vulkan_bda.log" 2>&1
    echo "rc $?" >> "$LOG_DIR/check_vulkan_bda.log"; } & pids+=($!)
  { timeout 150 "$MSA" check --backend vulkan:0 --cases full --tuning gqa_dense=0 --op dense_attention \
      > "$LOG_DIR/check_vulkan_dense_fallback.log" 2>&1
    echo "rc $?" >> "$LOG_DIR/check_vulkan_dense_fallback.log"; } & pids+=($!)
  wait "${pids[@]}"
  for f in "$LOG_DIR"/check_*.log; do
    note "$(basename "$f" .log): $(grep -E '^total|^rc ' "$f" | tr -s ' ' | tr '\n' ' ')"
  done
  grep -hE "^FAIL" "$LOG_DIR"/check_*.log | cut -c1-250 | head -20 | tee -a "$LOG"
  pack
fi

if has test; then
  for t in cuda vulkan; do
    say "msa_tests_$t"
    timeout 240 "$(suite $t)" > "$LOG_DIR/test_$t.log" 2>&1
    note "msa_tests_$t rc=$? $(passed "$LOG_DIR/test_$t.log")"
  done
  pack
fi

if has sanitize; then
  # memcheck over every full case that reaches the attention, indexer and top-k kernels
  # (the prefill kernels need the full set's T > 512 shapes); racecheck over the quick cases.
  ops=${SAN_OPS:-indexer_score,block_topk,indexer_topk,sparse_block_attention,dense_attention,patch_attention_3d}
  say "compute-sanitizer memcheck (full cases) / racecheck (quick) over $ops"
  { timeout 120 "$SAN" --tool memcheck --leak-check no --error-exitcode 3 "$MSA" check --backend cuda --cases full --op "$ops" 2>&1 | tail -4
    echo "memcheck rc=${PIPESTATUS[0]}"
    timeout 90 "$SAN" --tool racecheck --error-exitcode 3 "$MSA" check --backend cuda --cases quick --op "$ops" 2>&1 | tail -4
    echo "racecheck rc=${PIPESTATUS[0]}"; } > "$LOG_DIR/sanitize.log" 2>&1
  note "$(grep -E '^(memcheck|racecheck) rc' "$LOG_DIR/sanitize.log" | tr '\n' ' ')"
  pack
fi

if has sanitize-all; then
  say "compute-sanitizer, four tools x two tiers, every quick case"
  for tier in native portable; do
    for tool in memcheck racecheck initcheck synccheck; do
      extra=()
      [ $tool = memcheck ] && extra=(--leak-check full)
      f=$LOG_DIR/sanitize_${tool}_$tier.log
      # shellcheck disable=SC2046
      env $([ $tier = portable ] && echo MSA_CUDA_TIER=portable) timeout 100 "$SAN" --tool $tool "${extra[@]}" \
        --error-exitcode 3 "$MSA" check --backend cuda --cases quick > "$f" 2>&1
      note "$tool $tier rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^total' "$f" | tr -s ' ' | tr '\n' ' ')"
    done
  done
  pack
fi

if has bench; then
  say "msa-bench decode: cuda and vulkan side by side"
  F=${BENCH_FILTER:-'(indexer_score|block_topk|indexer_topk|sparse_block_attention|dense_attention|msa_layer).*T=(1|8) q=.*kv=\[(8 x )?(32768|131072|1048576)'}
  timeout 150 "$BENCH" --backend=cuda --benchmark_filter="$F" --benchmark_min_time=0.05s --sustain=0.5 \
    --benchmark_out="$LOG_DIR/bench_cuda.json" --benchmark_out_format=json > "$LOG_DIR/bench_cuda.log" 2>&1
  note "bench cuda rc=$?"
  VF=${VK_BENCH_FILTER:-'(indexer_score|sparse_block_attention|msa_layer).*T=(1|8) q=.*kv=\[(8 x )?(32768|1048576)'}
  timeout 120 "$BENCH" --backend=vulkan:0 --benchmark_filter="$VF" --benchmark_min_time=0.05s --sustain=0.5 \
    --benchmark_out="$LOG_DIR/bench_vulkan.json" --benchmark_out_format=json > "$LOG_DIR/bench_vulkan.log" 2>&1
  note "bench vulkan rc=$?"
  pack
fi

if has prefill; then
  # Sparse prefill of an 8K chunk at token-level selection (Qb = 1): the KV-block-outer
  # kernel (default), the wmma kernel (MSA_CUDA_KV_OUTER=0) and the flash kernel's union
  # walk (MSA_CUDA_FLASH_SPARSE=1), on independent random selections and on correlated
  # ones (select=walk).
  say "sparse prefill Qb=1: kv-outer vs wmma vs flash union walk, random and walk selections"
  PF='sparse_block_attention/B=1 T=8192 q=.8192. kv=.(131072|1048576). .*Qb=1 '  # (no \]: std::regex)
  for v in default:MSA_CUDA_KV_OUTER=-1 kv-outer:MSA_CUDA_KV_OUTER=1 wmma:MSA_CUDA_KV_OUTER=0 flash-union:MSA_CUDA_FLASH_SPARSE=1; do
    name=$(routing_name "$v")
    env $(routing_env "$v") timeout 60 "$BENCH" --backend=cuda --benchmark_filter="$PF" \
      --benchmark_min_time=0.05s > "$LOG_DIR/bench_sparse_prefill_$name.log" 2>&1
    note "sparse prefill $name rc=$?"
    grep -E "^cuda/sparse" "$LOG_DIR/bench_sparse_prefill_$name.log" | cut -c1-200 | sed "s|^|$name |" | tee -a "$LOG"
  done
  pack
fi

if has topk; then
  say "block_topk prefill rows: register paths vs the row kernel; the 8K-chunk layer at 1M"
  TF='block_topk/B=1 T=8192 q=.8192. kv=.(131072|1048576).'
  for v in default:MSA_TOPK_REGISTER=1 row:MSA_TOPK_REGISTER=0; do
    name=$(routing_name "$v")
    env $(routing_env "$v") timeout 60 "$BENCH" --backend=cuda --benchmark_filter="$TF" \
      --benchmark_min_time=0.05s > "$LOG_DIR/bench_topk_prefill_$name.log" 2>&1
    note "topk prefill $name rc=$?"
    grep -E "^cuda/block_topk" "$LOG_DIR/bench_topk_prefill_$name.log" | cut -c1-220 | sed "s|^|$name |" | tee -a "$LOG"
    env $(routing_env "$v") timeout 90 "$MSA" layer --backend cuda --batch 1 --context 1048576 --q-len 8192 --iters 5 \
      > "$LOG_DIR/layer_prefill_topk_$name.log" 2>&1
    note "layer 8K chunk 1M $name rc=$?"
    layer_rows "$LOG_DIR/layer_prefill_topk_$name.log" | sed "s|^|$name |" | tee -a "$LOG"
  done
  pack
fi

if has sdpa; then
  say "PyTorch SDPA decode baseline"
  PYTHONUNBUFFERED=1 timeout 60 python3 "$SRC/bench/sdpa_baseline.py" --out "$LOG_DIR/sdpa.json" > "$LOG_DIR/sdpa.log" 2>&1
  note "sdpa rc=$?"
  grep -E "best|ceiling" "$LOG_DIR/sdpa.log" | tee -a "$LOG"
  pack
fi

if has sweep; then
  say "layer sweep: msa layer vs msa's dense and PyTorch SDPA"
  # shellcheck disable=SC2086  # SWEEP_ARGS is a word list
  PYTHONUNBUFFERED=1 timeout 220 python3 "$SRC/bench/layer_sweep.py" --msa "$MSA" --out "$LOG_DIR/sweep" \
    ${SWEEP_ARGS:-} > "$LOG_DIR/sweep.log" 2>&1
  note "sweep rc=$?"
  grep -E "speed-up" "$LOG_DIR/sweep.log" | tee -a "$LOG"
  pack
fi

# msa layer --queued at "B context" shapes, one run per key format (or per variant).
LAYER_SHAPES=${LAYER_SHAPES:-"8 1048576|1 1048576|8 131072|1 131072"}
if has layer; then
  say "msa layer --queued per key format at $LAYER_SHAPES"
  IFS='|' read -ra shapes <<< "$LAYER_SHAPES"
  for kd in ${KEY_FORMATS:-bf16 fp8_e4m3 nvfp4}; do
    for shape in "${shapes[@]}"; do
      read -r nb ctx ql tun <<< "$shape"
      for tuning in "${tun:-}" ${LAYER_TUNING:-}; do
        f=$LOG_DIR/layer_${kd}_${nb}_${ctx}_${ql:-1}${tuning:+_${tuning//[=,]/_}}
        timeout 60 "$MSA" layer --backend cuda --batch "$nb" --context "$ctx" --q-len "${ql:-1}" --iters 30 --queued \
          --config ki_dtype="$kd" ${tuning:+--tuning "$tuning"} --json "$f.json" > "$f.log" 2>&1
        echo "== $kd keys B=$nb ctx=$ctx q_len=${ql:-1} ${tuning:-} (queued) rc $?" | tee -a "$LOG"
        layer_rows "$f.log" | tee -a "$LOG"
        pack  # each run's figures come back even if a later one runs past the call's limit
      done
    done
  done
fi

if has probe; then
  say "msa-slab-probe: 1024 slabs of 32 KiB (a B = 8 decode call's K/V) in a 16 GiB pool"
  timeout 120 "$B/bench/msa-slab-probe" --pool-gib 16 > "$LOG_DIR/probe.log" 2>&1
  note "probe rc=$?"
  tail -25 "$LOG_DIR/probe.log" | tee -a "$LOG"
  pack
fi

if has variants; then
  # VARIANTS="default: tma:MSA_CUDA_DECODE_CLUSTER_TMA=1"; CHECK_ARGS: the check's
  # arguments (default: the full sparse, indexer and top-k cases); KERNEL_RE: the kernels
  # ncu times (default the cluster decode kernel).
  VARIANTS=${VARIANTS:-"default:"}
  say "variants: $VARIANTS"
  IFS='|' read -ra shapes <<< "$LAYER_SHAPES"
  read -ra check_args <<< "${CHECK_ARGS:---cases full --op sparse_block_attention,indexer_topk,block_topk}"
  pids=()
  for v in $VARIANTS; do
    name=$(routing_name "$v")
    # shellcheck disable=SC2046
    { env $(routing_env "$v") timeout 120 "$MSA" check --backend cuda "${check_args[@]}" > "$LOG_DIR/variant_check_$name.log" 2>&1
      echo "rc $?" >> "$LOG_DIR/variant_check_$name.log"; } & pids+=($!)
  done
  wait "${pids[@]}"
  for v in $VARIANTS; do
    name=$(routing_name "$v")
    note "check $name: $(grep -E '^total|^rc' "$LOG_DIR/variant_check_$name.log" | tr -s ' ' | tr '\n' ' ')"
    for shape in "${shapes[@]}"; do
      read -r nb ctx <<< "$shape"
      f=$LOG_DIR/variant_${name}_${nb}_$ctx
      # shellcheck disable=SC2046
      env $(routing_env "$v") timeout 60 "$MSA" layer --backend cuda --batch "$nb" --context "$ctx" --iters 30 \
        --queued ${LAYER_CONFIG:+--config "$LAYER_CONFIG"} > "$f.log" 2>&1
      if [ -n "$NCU" ]; then
        # shellcheck disable=SC2046
        env $(routing_env "$v") timeout 90 "$NCU" --clock-control none -k "regex:${KERNEL_RE:-cluster_decode}" \
          --launch-skip 3 --launch-count 3 --metrics "${NCU_METRICS:-gpu__time_duration.sum}" \
          "$MSA" layer --backend cuda --batch "$nb" --context "$ctx" --iters 5 \
          ${LAYER_CONFIG:+--config "$LAYER_CONFIG"} > "$f.ncu.log" 2>&1
      fi
      echo "$name B=$nb ctx=$ctx: $(layer_rows "$f.log" | awk '{printf "%s %s | ", $1, $NF}')" \
        "ncu $(grep -hE 'gpu__|dram__|smsp__|sm__|launch__' "$f.ncu.log" 2>/dev/null | awk '{printf "%s %s ", $1, $3}')" | tee -a "$LOG"
    done
  done
  pack
fi

if has sass; then
  dump=$(cuda_tool cuobjdump)
  lib=$(find "$B" -name 'libmsa*.so*' -type f | head -1)
  "$dump" -sass "$lib" | awk -v re="${SASS_RE:-indexer_mma_kernel}" '/Function :/ {keep = ($3 ~ re)} keep' \
    > "$LOG_DIR/sass.txt"
  note "sass ${SASS_RE:-indexer_mma_kernel}: $(wc -l < "$LOG_DIR/sass.txt") lines"
  pack
fi

if has dist && [ "$NGPU" -lt 2 ]; then note "dist skipped: $NGPU GPU(s)"; fi
if has dist && [ "$NGPU" -ge 2 ]; then
  export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared hosts
  say "multi-GPU ($NGPU): test suites, msa layer --gpus, msa run --gpus"
  for t in dist cuda determinism resources model; do
    timeout 200 "$(suite $t)" > "$LOG_DIR/test_${t}_dist.log" 2>&1
    note "msa_tests_$t rc=$? $(passed "$LOG_DIR/test_${t}_dist.log")"
  done
  for g in $(seq 1 "$NGPU"); do
    timeout 120 "$MSA" layer --backend cuda --batch 8 --context 1048576 --iters 10 --gpus "$g" --parallel heads
    timeout 120 "$MSA" layer --backend cuda --batch 8 --context 1048576 --iters 10 --gpus "$g" --parallel heads-sharded-ki
    timeout 120 "$MSA" layer --backend cuda --batch 8 --context 1048576 --iters 10 --gpus "$g" --parallel heads-sharded-ki \
      --config ki_dtype=fp8_e4m3
    timeout 120 "$MSA" layer --backend cuda --batch 1 --context 32768 --q-len 32768 --iters 3 --gpus "$g" --parallel context
    timeout 120 "$MSA" layer --backend cuda --batch 1 --context 131072 --q-len 8192 --iters 3 --gpus "$g" --parallel heads
  done > "$LOG_DIR/layer_dist.log" 2>&1
  grep -E "^msa layer|layer step|single device|check vs|fetched" "$LOG_DIR/layer_dist.log" | tee -a "$LOG"
  for g in $(seq 1 "$NGPU"); do
    timeout 120 "$MSA" run --backend cuda --model m3-attn --prompt-tokens 32768 --gen 8 --gpus "$g" --quiet
    timeout 60 "$MSA" run --backend cuda --model tiny --video 8,56,56 --batch 2 --gpus "$g" --check --quiet
  done > "$LOG_DIR/run_dist.log" 2>&1
  grep -E "^msa run|^prefill |^decode |check|seq 0" "$LOG_DIR/run_dist.log" | tee -a "$LOG"
  pack
fi

# The Python package, built for the machine's python3 (its own torch) in its own tree.
PYB=$PWD/build-py
PYOUT=$LOG_DIR/py
if [[ " $PHASES " == *" py-"* ]]; then mkdir -p "$PYOUT"; export PYTHONPATH=$PYB/python; fi
if has py-build; then
  say "python: configure + build msa_python msa_cli"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.device_count())' \
    | tee -a "$LOG"
  { cmake -S "$SRC" -B "$PYB" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
      -DMSA_VULKAN=OFF -DMSA_HIP=OFF -DMSA_PYTHON=ON -DPython3_EXECUTABLE="$(command -v python3)" \
      -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" &&
    cmake --build "$PYB" -j"$(nproc)" --target msa_python msa_cli; } > "$PYOUT/build.log" 2>&1
  rc=$?
  note "py-build rc=$rc"
  if [ $rc -ne 0 ]; then grep -E "error|Error" "$PYOUT/build.log" | head -20 | tee -a "$LOG"; pack; exit 1; fi
  python3 -c 'import msa; print(msa.backends())' | tee -a "$LOG"
  pack
fi
if has py-test; then
  say "pytest tests/python"
  timeout 480 python3 -m pytest -q -rs "$SRC/tests/python" > "$PYOUT/pytest.log" 2>&1
  note "pytest rc=$?: $(tail -1 "$PYOUT/pytest.log")"
  grep -E "FAILED|ERROR|SKIPPED" "$PYOUT/pytest.log" | head -30 | tee -a "$LOG"
  pack
fi
if has py-example; then
  say "examples/hf_decoder_layer.py --device cuda"
  timeout 120 python3 "$SRC/examples/hf_decoder_layer.py" --device cuda > "$PYOUT/example.log" 2>&1
  note "example rc=$?"
  tail -3 "$PYOUT/example.log" | tee -a "$LOG"
  pack
fi
if has py-overhead; then
  say "bench_overhead.py"
  timeout 300 python3 "$SRC/bench/python/bench_overhead.py" --json "$PYOUT/python_overhead.json" > "$PYOUT/overhead.log" 2>&1
  note "overhead rc=$?"
  cat "$PYOUT/overhead.log" >> "$LOG"
  pack
fi
if has py-layer; then
  # LAYER_CASES=name,name limits the cases (e.g. the decode ones in one call, the prefill
  # ones in the next); LAYER_TAG (default python_layer) names the JSON, PNG and log.
  T=${LAYER_TAG:-python_layer}
  say "bench_layer.py ${LAYER_CASES:-all cases} -> $T.*"
  timeout 540 python3 "$SRC/bench/python/bench_layer.py" --msa-bin "$PYB/tools/msa" ${LAYER_CASES:+--cases "$LAYER_CASES"} \
    --timeout 240 --json "$PYOUT/$T.json" --png "$PYOUT/$T.png" > "$PYOUT/$T.log" 2>&1
  note "py-layer rc=$?"
  tail -15 "$PYOUT/$T.log" | tee -a "$LOG"
  pack
fi
if has py-training; then
  say "bench_training.py ${TRAIN_ARGS:-} -> training_bench.*"
  # shellcheck disable=SC2086  # TRAIN_ARGS is a word list
  timeout 540 python3 "$SRC/bench/python/bench_training.py" ${TRAIN_ARGS:-} --json "$PYOUT/training_bench.json" \
    --png "$PYOUT/training_bench.png" > "$PYOUT/training.log" 2>&1
  note "py-training rc=$?"
  tail -40 "$PYOUT/training.log" | tee -a "$LOG"
  pack
fi

say "done"
printf '%s\n' "${SUMMARY[@]}" | tee -a "$LOG"
pack
