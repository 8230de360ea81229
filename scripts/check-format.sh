#!/usr/bin/env bash
# Checks the lines changed since a base commit (default HEAD~1; of a merge commit,
# everything the merge brings in) against .clang-format. Only changed lines are checked:
# the tree predates .clang-format. Usage: scripts/check-format.sh [base]
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-HEAD~1}
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "check-format: no commit $base in this clone" >&2
  exit 2
fi
fmt=$(git clang-format --diff --extensions c,cc,cpp,h,hpp,cu,cuh "$base" HEAD)
if [ -n "$fmt" ] && [ "$fmt" != "no modified files to format" ]; then
  echo "$fmt"
  echo "check-format: the lines above do not follow .clang-format (fix: git clang-format $base)" >&2
  exit 1
fi
echo "check-format: the lines changed since $base follow .clang-format"
