#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy's checks; any finding fails) over the C++ sources changed
# since a base commit (default HEAD~1; of a merge commit, everything the merge brings in).
# The compile database comes from a configure-only, non-unity CPU build in $TIDY_BUILD
# (default /tmp/msa-tidy): a unity build's database names the unity sources, not the
# files. CUDA and HIP sources (.cu) are left out: clang-tidy does not parse them with
# nvcc's flags. Usage: scripts/check-tidy.sh [base]
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-HEAD~1}
dir=${TIDY_BUILD:-/tmp/msa-tidy}
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "check-tidy: no commit $base in this clone" >&2
  exit 2
fi
mapfile -t files < <(git diff --name-only --diff-filter=AM "$base" HEAD -- '*.cpp' | grep -v '^examples/' || true)
if [ ${#files[@]} -eq 0 ]; then
  echo "check-tidy: no C++ source changed since $base"
  exit 0
fi
cmake -S . -B "$dir" -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_UNITY_BUILD=OFF -DMSA_CUDA=OFF -DMSA_HIP=OFF \
  -DMSA_PYTHON=OFF >"$dir.configure.log" 2>&1 || { tail -20 "$dir.configure.log"; exit 2; }
# Only the files the CPU configuration compiles (a HIP-only host file has no entry).
mapfile -t listed < <(for f in "${files[@]}"; do grep -q "\"file\": \"$PWD/$f\"" "$dir/compile_commands.json" && echo "$f"; done)
echo "check-tidy: ${#listed[@]} of ${#files[@]} changed sources since $base"
[ ${#listed[@]} -eq 0 ] && exit 0
printf '%s\n' "${listed[@]}" | xargs -P "$(nproc)" -n 4 clang-tidy -p "$dir" --quiet
echo "check-tidy: clean"
