# Sourced by the bench/*_device_run.sh scripts on the GPU machine: configures and builds the
# CUDA-only tree $S (sm_90a) in $B with the given targets, logging to $LOG/build.log; on a
# failure prints the first errors and exits. Extra cmake arguments in $CMAKE_EXTRA.
#   S=<source> B=<build dir> LOG=<log dir> source bench/device_cuda_build.sh <targets...>
cmake -S "$S" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DMSA_CUDA=ON \
  -DMSA_VULKAN=OFF -DMSA_HIP=OFF -DMSA_CPU_SIMD=OFF ${CMAKE_EXTRA:-} > "$LOG/build.log" 2>&1 &&
  cmake --build "$B" -j16 --target "$@" >> "$LOG/build.log" 2>&1 ||
  { grep -m5 error "$LOG/build.log"; tail -20 "$LOG/build.log"; exit 1; }
