#!/usr/bin/env bash
# Session 6, sixth call: the check of the version (gpu_final_run.sh "build check
# test"), then the B = 1 sparse decode with the global merge and smaller C against the
# cluster merge (queued layer op ms, ncu kernel us). From the repo root there, after
# source .device-deps/unpack.sh:  MSA_SRC=<tree> bash <tree>/bench/dec6e_device_run.sh
set -u
source "${MSA_SRC:-.}/bench/device_variants.sh"
final_check_setup
measure_variants "auto: global:MSA_CUDA_DECODE_CLUSTER_MERGE=2
  global-c8:MSA_CUDA_DECODE_CLUSTER_MERGE=2,MSA_CUDA_DECODE_CLUSTER_SIZE=8
  global-c4:MSA_CUDA_DECODE_CLUSTER_MERGE=2,MSA_CUDA_DECODE_CLUSTER_SIZE=4
  cluster-c8:MSA_CUDA_DECODE_CLUSTER_SIZE=8" "1 131072" "1 1048576"
