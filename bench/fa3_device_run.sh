#!/usr/bin/env bash
# The sm_90 wgmma prefill kernel (kernels/cuda_only/flash_wgmma.cu) on the GPU machine, from
# a source tree after `source .device-deps/unpack.sh`: build, `msa check` of dense_attention
# (default; forced single split; wgmma off), which kernels the D = 128 cases reach (ncu or
# nsys), compute-sanitizer memcheck on the new small case, prefill from empty at 32K and
# 128K (msa layer, wgmma on and off), PyTorch SDPA flash/cuDNN on the same shapes and the
# bf16 matmul ceiling. Logs in $OUT (default ./out); summary on stdout.
set -u
OUT=${OUT:-out}
B=${MSA_BUILD:-/tmp/b}
mkdir -p "$OUT"
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
stamp build
timeout 170 bash -c "cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
  -DMSA_VULKAN=OFF -DMSA_HIP=OFF -DMSA_CPU_SIMD=OFF >$OUT/build.log 2>&1 && cmake --build $B -j16 --target msa_cli >>$OUT/build.log 2>&1" || {
  echo "BUILD FAILED"
  grep -m20 -E "error|Error" "$OUT/build.log"
  exit 1
}
M=$B/tools/msa
stamp checks
check() {  # name, env...
  local name=$1
  shift
  echo "== check ($name)" >>"$OUT/check.log"
  env "$@" timeout 30 "$M" check --backend cuda --cases full --op dense_attention >/tmp/fa3_check.log 2>&1
  echo "rc $?" >>/tmp/fa3_check.log
  cat /tmp/fa3_check.log >>"$OUT/check.log"
  echo "check ($name): $(grep -cE 'FAIL' /tmp/fa3_check.log) FAIL lines; $(grep -E '^total|rc ' /tmp/fa3_check.log | tr '\n' ' ')"
  grep -E "FAIL" /tmp/fa3_check.log | head -4
}
check default MSA_CUDA_FLASH_WGMMA=1
check "one split" MSA_CUDA_FLASH_SPLITS=1
check "3 splits" MSA_CUDA_FLASH_SPLITS=3
check "wgmma off" MSA_CUDA_FLASH_WGMMA=0
stamp "kernels reached"
if command -v ncu >/dev/null || [ -x /usr/local/cuda/bin/ncu ]; then
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  timeout 25 "$NCU" --metrics gpu__time_duration.sum "$M" check --backend cuda --cases full --op dense_attention \
    --match "D=128 Bs=(128|256)" >"$OUT/kernels.log" 2>&1
else
  timeout 25 nsys profile -o /tmp/fa3prof --stats=true "$M" check --backend cuda --cases full --op dense_attention \
    --match "D=128 Bs=(128|256)" >"$OUT/kernels.log" 2>&1
fi
echo "kernel launches: wgmma $(grep -c 'flash_wgmma_kernel' "$OUT/kernels.log"), fa2 $(grep -c 'flash_prefill_kernel' "$OUT/kernels.log")"
stamp layers
layer() {  # label, env, msa layer args...
  local label=$1 e=$2
  shift 2
  echo "== layer $label: $*" >>"$OUT/layer.log"
  env $e timeout 45 "$M" layer --backend cuda --batch 1 "$@" >/tmp/fa3_layer.log 2>&1
  cat /tmp/fa3_layer.log >>"$OUT/layer.log"
  echo "layer $label $*: $(grep -E 'dense_att' /tmp/fa3_layer.log | head -2 | tr -s ' ' | tr '\n' ' ')"
  grep -m3 -iE "error" /tmp/fa3_layer.log
}
layer wgmma MSA_CUDA_FLASH_WGMMA=1 --context 32768 --q-len 32768 --iters 2
layer fa2 MSA_CUDA_FLASH_WGMMA=0 --context 32768 --q-len 32768 --iters 2
layer wgmma MSA_CUDA_FLASH_WGMMA=1 --context 131072 --q-len 131072 --iters 1
layer wgmma MSA_CUDA_FLASH_WGMMA=1 --context 131072 --q-len 8192 --iters 2
stamp sdpa
PYTHONUNBUFFERED=1 timeout 50 python3 - <<'EOF' >"$OUT/sdpa.log" 2>&1
# PyTorch SDPA (flash, cuDNN; bottom-right causal) on the prefill shapes, bf16 matmul ceiling.
import statistics, torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right
def time_ms(fn, n):
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    return statistics.median(ts)
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
ms = time_ms(lambda: a @ b, 10)
print(f"matmul bf16 8192^3: {ms:.3f} ms, {2 * 8192**3 / ms / 1e9:.0f} TFLOP/s", flush=True)
del a, b
HQ, HKV, D = 64, 4, 128
for L, q_len in [(32768, 32768), (131072, 131072)]:
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
            ms = time_ms(call, 2 if L * q_len > 2**33 else 3)
            print(f"SDPA {name} L={L} q={q_len}: {ms:.2f} ms, {flop / ms / 1e9:.0f} TFLOP/s", flush=True)
        except Exception as ex:
            print(f"SDPA {name} L={L} q={q_len}: unavailable {str(ex).splitlines()[0][:100]}", flush=True)
    del q, k, v
    torch.cuda.empty_cache()
EOF
cat "$OUT/sdpa.log" | grep -E "matmul|SDPA|Error" | head -12
stamp memcheck
timeout 40 /usr/local/cuda/bin/compute-sanitizer --tool memcheck "$M" check --backend cuda --cases full \
  --op dense_attention --match "D=128 Bs=256" >"$OUT/memcheck.log" 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY|^total' "$OUT/memcheck.log" | tr '\n' ' ')"
stamp "layer check"
timeout 45 "$M" layer --backend cuda --batch 1 --context 1024 --q-len 1024 --iters 1 --check >"$OUT/layer_check.log" 2>&1
echo "layer check rc $?: $(grep -E 'check vs' "$OUT/layer_check.log")"
stamp done
