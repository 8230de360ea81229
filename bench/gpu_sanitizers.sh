#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, initcheck, synccheck) over the CUDA quick
# cross-check, native and portable tiers. Run on the GPU machine from the repo root
# after `source .device-deps/unpack.sh`. Prints one line per (tool, tier).
set -u
B=build-san
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
  -DMSA_VULKAN=OFF -DMSA_HIP=OFF -DMSA_CPU_SIMD=OFF -DMSA_BUILD_TESTS=OFF -DMSA_BUILD_BENCH=OFF >/dev/null &&
  cmake --build $B -j16 --target msa_cli >/dev/null 2>&1 || { echo "build failed"; exit 1; }
for tier in native portable; do
  for tool in memcheck racecheck initcheck synccheck; do
    extra=""
    [ $tool = memcheck ] && extra="--leak-check full"
    log=${OUT:-/tmp}/san_${tool}_${tier}.log
    env $([ $tier = portable ] && echo MSA_CUDA_TIER=portable) timeout 100 compute-sanitizer --tool $tool $extra \
      --error-exitcode 3 $B/tools/msa check --backend cuda --cases quick > "$log" 2>&1
    rc=$?
    echo "$tool $tier rc=$rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^total' "$log" | tr '\n' ' ' | tr -s ' ')"
  done
done
