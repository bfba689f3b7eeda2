#!/usr/bin/env bash
# Install what zccl needs to build, test and benchmark, only when missing.
# Debian/Ubuntu: apt-get update once, then one apt-get install of the missing
# packages. Usage: scripts/deps.sh [extra packages...]
set -euo pipefail

# The PyTorch backend (zccl_torch) builds against PyTorch 2.x from pip in .venv
# (scripts/venv.sh: python3.11 -m venv, torch==2.13.0, numpy, scikit-build-core;
# the wheel carries torch's and pybind11's headers); python3-venv makes the venv.
# clang-format is the formatting check of scripts/test.sh (scripts/format.sh); libucx-dev
# is the inter-host tier (UCX headers; libucp is opened at run time).
pkgs=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev libhwloc-dev libcmocka-dev
      libjson-c-dev python3-venv clang-format libucx-dev "$@")
missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
