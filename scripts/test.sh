#!/usr/bin/env bash
# The whole test suite: install what is missing, build with -Werror, run ctest
# (unit, mp, mpi, fault labels). Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZCCL_WERROR=ON >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
# mpirun as root needs these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$BUILD"
ctest --output-on-failure --timeout 900 "$@"
