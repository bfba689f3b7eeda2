#!/usr/bin/env bash
# The whole test suite: install what is missing, check the formatting of every
# C/C++ file (scripts/format.sh: clang-format --dry-run -Werror), build with
# -Werror, run ctest (unit, mp, mpi, fault labels), then the sanitizer tier (scripts/sanitize.sh:
# the suite under ASan+UBSan, the threaded tests under TSan, a multi-process
# test under valgrind). Extra arguments go to ctest (e.g. -L '^unit$') and skip
# the sanitizer tier, as does ZCCL_SKIP_SANITIZERS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/format.sh
PY=$(scripts/venv.sh) # PyTorch 2.13 for the backend (label torch)
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZCCL_WERROR=ON \
    -DPython3_EXECUTABLE="$PY" >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
# mpirun as root needs these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -f "$BUILD/Testing/Temporary/LastTestsFailed.log"
if ! (cd "$BUILD" && ctest --output-on-failure --timeout 900 "$@"); then
    scripts/ctest_failed.sh "$BUILD" # again at the end, for logs cut to their tail
    exit 1
fi
if [ $# -eq 0 ] && [ "${ZCCL_SKIP_SANITIZERS:-0}" != 1 ]; then
    scripts/sanitize.sh
fi
