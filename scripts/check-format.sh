#!/usr/bin/env bash
# Checks every tracked C, C++ and CUDA source against .clang-format (no file is changed).
# Fix: clang-format -i <file>, or `git clang-format` for the lines a change touches.
# Usage: scripts/check-format.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh')
if ! printf '%s\n' "${files[@]}" | xargs clang-format --dry-run --Werror 2>/tmp/msa-format.log; then
  grep -E "^[^ ].*: (error|warning):" /tmp/msa-format.log | cut -d: -f1 | sort -u | head -40
  echo "check-format: the files above do not follow .clang-format (fix: clang-format -i <file>)" >&2
  exit 1
fi
echo "check-format: ${#files[@]} sources follow .clang-format"
