#!/usr/bin/env bash
# Session 8, closing call: the final check of the version (gpu_final_run.sh "build check
# test": every CUDA routing, vulkan, the GoogleTest suites, now with the NVFP4 cases),
# memcheck / racecheck / synccheck over the NVFP4 indexer cases, msa-bench of the decode
# indexer per key format at B = 8, 1M (ceilings in the same run), and the queued layer
# with NVFP4 and fp8 keys at the decode shapes. From the repo root there, after
# source .device-deps/unpack.sh:  MSA_SRC=<tree> bash <tree>/bench/dec8d_device_run.sh
set -u
source "${MSA_SRC:-.}/bench/device_variants.sh"
final_check_setup
B=$PWD/build-final
sanitize_checks "memcheck racecheck synccheck" --cases full --op indexer_topk,indexer_score,kv_append --match fp4
bench_cuda idx 'indexer_score/.*T=8 q=.*kv=\[8 x 1048576' 'ceiling|indexer'
layer_keys "nvfp4 fp8_e4m3" "8 1048576" "1 1048576" "8 131072" "1 131072"
