#!/usr/bin/env bash
# Session 9, last call: a short run of the shared helpers of device_variants.sh
# (sanitize_checks, bench_cuda, layer_keys, ncu_indexer, sass_of) that the session's
# scripts now use in place of their own copies. From the repo root there, after
# source .device-deps/unpack.sh:  S=<tree> bash <S>/bench/dec9f_device_run.sh
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec9f msa_cli msa-bench
sanitize_checks "memcheck" --cases full --op indexer_score --match fp4
bench_cuda idx 'indexer_score/.*T=8 q=.*kv=\[8 x 131072' 'ceiling|indexer'
layer_keys "default nvfp4" "1 131072"
ncu_indexer fp4 "" nvfp4 gpu__time_duration.sum,smsp__inst_executed.sum
sass_of "indexer_mma_kernelILi2ELi128" fp4
