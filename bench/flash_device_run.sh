#!/usr/bin/env bash
# The flash prefill kernels (kernels/cuda_only/flash_prefill.cu) on the GPU machine, from
# the repo root after `source .device-deps/unpack.sh`: correctness under three routings
# (default; everything through the flash kernels; forced split-KV), then prefill timings
# of dense and sparse attention (msa layer, new vs MSA_CUDA_FLASH=0) and PyTorch SDPA on
# the same shapes. Logs go to $OUT (default ./out).
#   MSA_BIN=<build>/tools/msa: a binary built elsewhere (else it builds MSA_SRC into MSA_BUILD)
#   FLASH_PERF=0: correctness only; FLASH_OLD=0: no wmma timing; FLASH_SDPA=0: no SDPA
set -u
S=${MSA_SRC:-.}
B=${MSA_BUILD:-build-fa}
OUT=${OUT:-out}
mkdir -p "$OUT"
M=${MSA_BIN:-$B/tools/msa}
if ! "$M" --help >/dev/null 2>&1; then
  echo "building $S into $B"
  cmake -S "$S" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
    -DMSA_VULKAN=OFF -DMSA_HIP=OFF -DMSA_CPU_SIMD=OFF >/dev/null &&
    cmake --build "$B" -j"$(nproc)" --target msa_cli >"$OUT/build.log" 2>&1 || {
    grep -m10 error "$OUT/build.log"
    exit 1
  }
  M=$B/tools/msa
fi
ops=dense_attention,sparse_block_attention,patch_attention_3d
check() {  # name, env...
  local name=$1
  shift
  echo "== check ($name)" | tee -a "$OUT/check.log"
  env "$@" timeout 150 "$M" check --backend cuda --cases full --op $ops >/tmp/flash_check.log 2>&1
  echo "rc $?" >>/tmp/flash_check.log
  cat /tmp/flash_check.log >>"$OUT/check.log"
  grep -E "^(total|dense|sparse|patch)|FAIL|rc |rror" /tmp/flash_check.log | head -14
}
check default MSA_CUDA_FLASH=1
check "all through flash" MSA_CUDA_DECODE=0
check "flash, 3 splits" MSA_CUDA_DECODE=0 MSA_CUDA_FLASH_SPLITS=3
check "flash, 16 rows per warp" MSA_CUDA_DECODE=0 MSA_CUDA_FLASH_MT=1
[ "${FLASH_PERF:-1}" = 0 ] && exit 0

layer() {  # label, env, msa layer args...
  local label=$1 e=$2
  shift 2
  echo "== layer $label: $*" | tee -a "$OUT/layer.log"
  env $e timeout 120 "$M" layer --backend cuda --batch 1 "$@" >>"$OUT/layer.log" 2>&1
  tail -n 12 "$OUT/layer.log" | grep -E "sparse_block|dense_att|indexer|error|Error" | sed 's/^/   /'
}
layer new MSA_CUDA_FLASH=1 --context 1048576 --q-len 8192 --iters 2
layer new MSA_CUDA_FLASH=1 --context 131072 --q-len 8192 --iters 3
layer "new, 16 rows per warp" MSA_CUDA_FLASH_MT=1 --context 131072 --q-len 8192 --iters 3
[ "${FLASH_OLD:-1}" = 1 ] && layer old MSA_CUDA_FLASH=0 --context 131072 --q-len 8192 --iters 2
layer new MSA_CUDA_FLASH=1 --context 32768 --q-len 32768 --iters 3
layer new,Qb=64 MSA_CUDA_FLASH=1 --context 131072 --q-len 8192 --iters 3 --config Qb=64
[ "${FLASH_SDPA:-1}" = 0 ] && exit 0
PYTHONUNBUFFERED=1 timeout 150 python3 - <<'EOF' 2>&1 | tee "$OUT/sdpa.log"
# PyTorch SDPA (flash and cuDNN backends; bottom-right causal) on the same prefill shapes.
import statistics, torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right
HQ, HKV, D = 64, 4, 128
for L, q_len in [(131072, 8192), (32768, 32768), (1048576, 8192)]:
    q = torch.randn(1, HQ, q_len, D, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(1, HKV, L, D, dtype=torch.bfloat16, device="cuda").repeat_interleave(HQ // HKV, dim=1)
    v = torch.randn(1, HKV, L, D, dtype=torch.bfloat16, device="cuda").repeat_interleave(HQ // HKV, dim=1)
    flop = 4.0 * HQ * D * (q_len * (L - q_len) + q_len * (q_len + 1) / 2)
    for name, be in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]:
        def call():
            with sdpa_kernel([be]):
                if q_len == L:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
                return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(q_len, L))
        try:
            call(); torch.cuda.synchronize()
            ts = []
            for _ in range(2 if L > 200000 else 3):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); call(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
            ms = statistics.median(ts)
            print(f"SDPA {name} L={L} q={q_len}: {ms:.2f} ms, {flop / ms / 1e9:.0f} TFLOP/s", flush=True)
        except Exception as ex:
            print(f"SDPA {name} L={L} q={q_len}: unavailable {str(ex).splitlines()[0][:100]}", flush=True)
    del q, k, v
    torch.cuda.empty_cache()
EOF
