#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install packages, build every backend whose
# toolchain is present, and run the main job (the tiny multimodal model, synthetic video)
# on the default backend (auto: the best device found).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
./build/tools/msa devices
./build/tools/msa run --model tiny --video 8,56,56 --prompt-tokens 64 --gen 8
