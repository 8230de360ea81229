#!/usr/bin/env bash
# Session 7, closing call: the final check of the version (gpu_final_run.sh "build check
# test": every CUDA routing, now with fused-topk-off, vulkan, the GoogleTest suites), the
# sanitizers over indexer_topk, msa-bench of indexer_score, block_topk and indexer_topk
# at the decode shapes (ceilings in the same run), and the queued layer at every decode
# shape. From the repo root there, after source .device-deps/unpack.sh:
#   MSA_SRC=<tree> bash <tree>/bench/dec7c_device_run.sh
set -u
source "${MSA_SRC:-.}/bench/device_variants.sh"
final_check_setup
B=$PWD/build-final
sanitize_checks "memcheck racecheck synccheck" --cases full --op indexer_topk
bench_cuda topk '(indexer_score|block_topk|indexer_topk)/.*T=(1|8) q=.*kv=\[(8 x )?(32768|131072|1048576)' \
  'ceiling|^(cuda/)?(indexer|block)'
layer_keys default "1 32768" "1 131072" "8 131072" "1 1048576" "8 1048576"
layer_keys fp8_e4m3 "8 1048576"
