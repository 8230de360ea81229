#!/usr/bin/env bash
# Session 6: two switches of the sparse decode kernel measured side by side: the rescale
# slack of the online softmax (MSA_CUDA_DECODE_RESCALE_SLACK, no gain, not kept) and
# programmatic launch behind block_topk (MSA_CUDA_DECODE_CLUSTER_PDL, griddepcontrol.wait
# now after the parameter math). Checks of each (sparse full cases), then queued layer op
# times and ncu kernel times at three shapes. From the repo root there, after
# source .device-deps/unpack.sh:  S=<tree> bash <S>/bench/dec6d_device_run.sh
set -u
source "${S:-.}/bench/device_variants.sh"
device_setup dec6d msa_cli
VARIANTS="base: slack8:MSA_CUDA_DECODE_RESCALE_SLACK=8 pdl:MSA_CUDA_DECODE_CLUSTER_PDL=1
  slack8-pdl:MSA_CUDA_DECODE_RESCALE_SLACK=8,MSA_CUDA_DECODE_CLUSTER_PDL=1
  slack8-cluster:MSA_CUDA_DECODE_RESCALE_SLACK=8,MSA_CUDA_DECODE_CLUSTER_MERGE=1
  slack8-occ2:MSA_CUDA_DECODE_RESCALE_SLACK=8,MSA_CUDA_DECODE_CLUSTER_OCC=2"
check_variants "$VARIANTS" --cases full --op sparse_block_attention
measure_variants "$VARIANTS" "8 1048576" "1 131072" "8 131072"
