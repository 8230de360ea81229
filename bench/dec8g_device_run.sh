#!/usr/bin/env bash
# Session 8, after the review fixes (a7aca16): the NVFP4 cases (new: Di 16 and 48 with
# Bs 40, on the portable kernel) in the native, portable and mma-off routings. Short: the
# session's device time was nearly spent. From the repo root there, after
# source .device-deps/unpack.sh:  S=<tree> bash <S>/bench/dec8g_device_run.sh
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec8g msa_cli
check_variants "native: portable:MSA_CUDA_TIER=portable mma-off:MSA_CUDA_MMA_INDEXER=0" --cases full --match fp4
for v in native portable mma-off; do grep -E "FAIL" "$LOG/check_$v.log" | head -3; done
