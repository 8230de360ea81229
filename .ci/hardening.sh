#!/usr/bin/env bash
# CI hardening job (issue 9): libFuzzer targets with ASan + UBSan for a bounded time,
# then ThreadSanitizer over the `cpu` backend's tests and the determinism tests.
# Installs nothing beyond scripts/install-deps.sh (clang + libclang-rt-14-dev are in it).
# Fails on any fuzzer crash, hang (-timeout), leak, sanitizer report or test failure.
#
#   .ci/hardening.sh                 # everything
#   FUZZ_SECONDS=300 .ci/hardening.sh fuzz   # longer fuzzing only
#   .ci/hardening.sh tsan            # ThreadSanitizer only: ~10 min on 2 cores from a
#                                    # clean build-tsan (build 3.6 min, tests ~6 min)
#
# Environment: FUZZ_SECONDS (per target, default 45), JOBS (default nproc),
# FUZZ_WORK (scratch dir for evolving corpora, default a temp dir, removed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - start ))s] $*"; }
jobs=${JOBS:-$(nproc)}
fuzz_seconds=${FUZZ_SECONDS:-45}
what=${1:-all}

bash scripts/install-deps.sh

run_fuzzers() {
  stamp "fuzzers: build (clang, -fsanitize=fuzzer,address,undefined) in build-fuzz"
  # (errexit does not apply inside a function run as `run_fuzzers || rc=1`: check each step)
  cmake -S fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null || { echo "fuzzers: configure failed"; return 1; }
  cmake --build build-fuzz -j "$jobs" || { echo "fuzzers: build failed"; return 1; }
  local work=${FUZZ_WORK:-$(mktemp -d /tmp/msa-fuzz.XXXXXX)}
  mkdir -p "$work"
  export TMPDIR=$work   # the targets write their scratch files here
  # libFuzzer's own leak check is on (detect_leaks=1); every report aborts.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  local failed=0
  for target in safetensors config ops; do
    local bin=build-fuzz/fuzz_$target
    if [ ! -x "$bin" ]; then
      if [ "$target" = config ] && [ ! -f model/config.cpp ]; then echo "fuzz_config: no model/config.cpp: skipped"; continue; fi
      echo "fuzz_$target was not built"; failed=1; continue
    fi
    local dict=()
    [ -f "fuzz/$target.dict" ] && dict=(-dict="fuzz/$target.dict")
    # 1. Every past crash stays fixed.
    if [ -d "fuzz/regressions/$target" ]; then
      stamp "fuzz_$target: replay fuzz/regressions/$target"
      if ! "$bin" fuzz/regressions/$target/* >"$work/$target.replay.log" 2>&1; then
        tail -40 "$work/$target.replay.log"; echo "fuzz_$target: a regression input fails again"; failed=1; continue
      fi
    fi
    # 2. Bounded fuzzing from the seed corpus (copied: the repo corpus is not modified).
    # File parsers get inputs up to 256 KB: deep nesting (100k levels) needs 200 KB.
    local max_len=4096
    [ "$target" != ops ] && max_len=262144
    stamp "fuzz_$target: ${fuzz_seconds}s, inputs up to $max_len bytes"
    mkdir -p "$work/corpus_$target"
    cp -n fuzz/corpus/$target/* "$work/corpus_$target/" 2>/dev/null || true
    if MSA_FUZZ_STATS=1 "$bin" "$work/corpus_$target" "${dict[@]}" -max_total_time="$fuzz_seconds" \
         -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" -print_final_stats=1 \
         -artifact_prefix="$work/$target-" >"$work/$target.log" 2>&1; then
      grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added)|^fuzz_ops:' \
        "$work/$target.log" | sed "s/^/  fuzz_$target /"
    else
      tail -60 "$work/$target.log"
      echo "fuzz_$target FAILED; reproducer(s):"; ls "$work/$target-"* 2>/dev/null || true
      failed=1
    fi
  done
  [ -z "${FUZZ_WORK:-}" ] && [ $failed -eq 0 ] && rm -rf "$work"
  return $failed
}

run_tsan() {
  stamp "ThreadSanitizer: configure build-tsan (preset tsan: CPU backends, MSA_SANITIZE=thread)"
  cmake --preset tsan -DMSA_BUILD_TOOLS=OFF >/dev/null
  # Only the targets this job runs (the cpu backend's tests, the cross-check, determinism).
  local targets=() known
  known=$(ninja -C build-tsan -t targets all 2>/dev/null)
  for t in msa_tests_cpu msa_tests_crosscheck msa_tests_determinism msa_tests_resources; do
    if grep -q "^$t:" <<<"$known"; then targets+=("$t"); fi
  done
  stamp "ThreadSanitizer: build ${targets[*]}"
  cmake --build build-tsan -j "$jobs" --target "${targets[@]}"
  # oneTBB (the system libtbb) is not instrumented; see docs/bad-inputs.md, "Sanitizers".
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=4 suppressions=$root/.ci/tsan.supp"
  local failed=0
  for t in "${targets[@]}"; do
    local filter='*'
    # The cross-check runs every backend compiled in; under TSan only the cpu backend
    # matters (cpu-ref is single-threaded).
    [ "$t" = msa_tests_crosscheck ] && filter='*/cpu_*:-*/cpu_ref_*'
    local bin
    bin=$(find build-tsan/tests -name "$t" -type f -perm -u+x | head -1)
    stamp "ThreadSanitizer: $t --gtest_filter=$filter"
    if ! MSA_CPU_THREADS=${MSA_CPU_THREADS:-4} "$bin" --gtest_filter="$filter" --gtest_brief=1; then
      failed=1
    fi
  done
  return $failed
}

rc=0
case $what in
  all) run_fuzzers || rc=1; run_tsan || rc=1 ;;
  fuzz) run_fuzzers || rc=1 ;;
  tsan) run_tsan || rc=1 ;;
  *) echo "usage: $0 [all|fuzz|tsan]"; exit 2 ;;
esac
if [ $rc -ne 0 ]; then stamp "hardening FAILED"; exit 1; fi
stamp "hardening passed"
