#!/usr/bin/env bash
# Installs the Debian 12 packages msa builds against. Idempotent: packages already
# present are skipped; safe to run again. Needs root (or sudo).
set -euo pipefail
pkgs=(build-essential cmake ninja-build git pkg-config
      nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
      libhwy-dev libtbb-dev
      libvulkan-dev glslang-tools spirv-tools mesa-vulkan-drivers
      hipcc libamdhip64-dev
      clang libclang-rt-14-dev clang-format clang-tidy
      python3-dev pybind11-dev libdlpack-dev python3-numpy python3-torch python3-pytest)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
