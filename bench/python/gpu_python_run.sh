#!/usr/bin/env bash
# The Python package on the H200 machine: build msa_python and the msa CLI for the
# machine's python3 (torch 2.11), then the CUDA tests of tests/python, the example, and
# the two Python benchmarks. Logs, JSON and the PNG go to $OUT (at most 8 files).
#   from the repo root there: source .device-deps/unpack.sh; bash bench/python/gpu_python_run.sh [phases]
# phases (default "build test example overhead layer"); LAYER_CASES=name,name limits the
# layer benchmark's cases (bench_layer.py --cases), e.g. the decode ones in one call and
# the prefill ones in the next, each call staying under the 10-minute limit; LAYER_TAG
# (default layer) names that call's layer JSON, PNG and log. Phase `training` (not in the
# default) runs bench_training.py; TRAIN_ARGS adds its options (e.g. --contexts 32768).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
PHASES=${1:-"build test example overhead layer"}
has() { [[ " $PHASES " == *" $1 "* ]]; }
B=$PWD/build-py
LOG=$OUT/run.log
start=$(date +%s)
say() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$LOG"; }
export PYTHONPATH=$B/python
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.device_count())' \
  | tee -a "$LOG"

if has build; then
  say "configure + build msa_python msa_cli"
  { cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
      -DMSA_VULKAN=OFF -DMSA_HIP=OFF -DMSA_PYTHON=ON -DPython3_EXECUTABLE="$(which python3)" \
      -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" &&
    cmake --build "$B" -j16 --target msa_python msa_cli; } > "$OUT/build.log" 2>&1
  rc=$?
  say "build rc=$rc"
  if [ $rc -ne 0 ]; then grep -E "error|Error" "$OUT/build.log" | head -20 | tee -a "$LOG"; exit 1; fi
  python3 -c 'import msa; print(msa.backends())' | tee -a "$LOG"
fi

if has test; then
  say "pytest tests/python"
  timeout 480 python3 -m pytest -q -rs tests/python > "$OUT/pytest.log" 2>&1
  say "pytest rc=$?: $(tail -1 "$OUT/pytest.log")"
  grep -E "FAILED|ERROR|SKIPPED" "$OUT/pytest.log" | head -30 | tee -a "$LOG"
fi

if has example; then
  say "examples/hf_decoder_layer.py --device cuda"
  timeout 120 python3 examples/hf_decoder_layer.py --device cuda 2>&1 | tail -3 | tee -a "$LOG"
fi

if has overhead; then
  say "bench_overhead.py"
  timeout 300 python3 bench/python/bench_overhead.py --json "$OUT/overhead.json" > "$OUT/overhead.log" 2>&1
  say "overhead rc=$?"
  cat "$OUT/overhead.log" >> "$LOG"
fi

if has layer; then
  T=${LAYER_TAG:-layer}
  say "bench_layer.py ${LAYER_CASES:-all cases} -> $T.*"
  timeout 540 python3 bench/python/bench_layer.py --msa-bin "$B/tools/msa" ${LAYER_CASES:+--cases "$LAYER_CASES"} \
    --timeout 240 --json "$OUT/$T.json" --png "$OUT/$T.png" > "$OUT/$T.log" 2>&1
  say "layer rc=$?"
  tail -15 "$OUT/$T.log" | tee -a "$LOG"
fi
if has training; then
  say "bench_training.py ${TRAIN_ARGS:-} -> training.*"
  timeout 540 python3 bench/python/bench_training.py ${TRAIN_ARGS:-} --json "$OUT/training.json" \
    --png "$OUT/training.png" > "$OUT/training.log" 2>&1
  say "training rc=$?"
  tail -40 "$OUT/training.log" | tee -a "$LOG"
fi
say "done"
