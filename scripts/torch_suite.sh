#!/usr/bin/env bash
# PyTorch's own distributed suite (torch.testing._internal.distributed.
# distributed_test.DistributedTest, spawn-based, as torch's
# test/distributed/test_distributed_spawn.py builds it) from the installed torch,
# on Gloo and on zccl, by tests/torch/suite/run_suite.py:
#   gloo          the reference (BACKEND=gloo)
#   zccl          zccl as a CPU backend (BACKEND=zccl, in the "ddp", "subgroup"
#                 and "plugin" feature sets)
#   zccl-as-gloo  zccl standing in for Gloo (BACKEND=gloo; every group the suite
#                 makes is zccl's, so the tests gated on the name "gloo" run too)
# Prints one table (passed / failed / skipped / not run per mode and world size)
# and every test that passes on Gloo but not on zccl, with the first line of its
# error; writes $OUT/<mode>_np<N>.csv, .log and table.txt. Exit status 1 when
# such a test exists (or, without a gloo run, when a zccl test fails).
#
# Environment:
#   PYTHON       interpreter with torch (default .venv/bin/python); zccl_torch is
#                its installed package, else BUILD's (default build, built here)
#   WORLD_SIZES  default "2 3"
#   MODES        default "gloo zccl zccl-as-gloo"
#   TESTS        -k style filter: space-separated substrings or globs, -X excludes
#   SUBSET       "ci": a fixed subset (every collective, DDP, a timeout case)
#   OUT          default out/torch_suite
#   TEST_TIMEOUT seconds per test (default 120; torch's own is 300)
#   INIT         file (default: INIT_METHOD=file://, as PyTorch's CI, so the
#                barrier timeout tests run) or env
#   STANDIN_PROFILER  off: zccl-as-gloo does not check the profiler events the
#                suite expects of Gloo (by default it looks for zccl's names)
#   LOCK         a file to flock around each test (e.g. the lock CPU-heavy
#                benchmarks take): other work takes turns with the suite
#   TIME_LIMIT   seconds for the whole run (default 14400); tests not started by
#                then are reported "notrun"
#   FOLLOW_GLOO  1: run a test in the zccl modes only when Gloo did not skip it
#                (the others are "notrun"): the comparison with Gloo in about
#                half the time
# Each test spawns its ranks, each importing torch: on 2 cores, FOLLOW_GLOO=1
# with the three modes took 20 min at world size 2 and 36 min at 3 (285 tests).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
WORLD_SIZES=${WORLD_SIZES:-2 3}
MODES=${MODES:-gloo zccl zccl-as-gloo}
OUT=${OUT:-out/torch_suite}
TIME_LIMIT=${TIME_LIMIT:-14400}
args=(all --out "$OUT" --world-sizes $WORLD_SIZES --modes $MODES
      --test-timeout "${TEST_TIMEOUT:-120}" --time-limit "$TIME_LIMIT" --init "${INIT:-file}")
[ -n "${TESTS:-}" ] && args+=(--tests "$TESTS")
[ -n "${SUBSET:-}" ] && args+=(--subset "$SUBSET")
[ -n "${LOCK:-}" ] && args+=(--lock "$LOCK")
[ "${FOLLOW_GLOO:-0}" = 1 ] && args+=(--follow-gloo)
# The zccl modes import zccl_torch: the installed package, or else this tree's
# build (BUILD, default build), built here when the import fails.
if [[ " $MODES " == *" zccl"* ]] && ! "$PYTHON" -c "import zccl_torch" 2>/dev/null; then
    BUILD=$(realpath -m "${BUILD:-build}")
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DPython3_EXECUTABLE="$(realpath -s "$PYTHON")" >/dev/null
    cmake --build "$BUILD" -j"$(nproc)" --target zccl_torch_ext zccl_torch_py >/dev/null
    export PYTHONPATH="$BUILD/torch/python${PYTHONPATH:+:$PYTHONPATH}"
    "$PYTHON" -c "import zccl_torch" || { echo "torch_suite: zccl_torch does not import" >&2; exit 1; }
fi
# torch's test modules import expecttest (a small pure-Python test dependency of
# PyTorch's, not a dependency of the wheel).
"$PYTHON" -c "import expecttest" 2>/dev/null || "$PYTHON" -m pip install -q expecttest
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# Each test runs in every mode in turn, so a run cut short by TIME_LIMIT has the
# same tests in every mode. The driver stops starting tests at TIME_LIMIT; this
# bounds the rest.
exec timeout -k 30 "$((TIME_LIMIT + 600))" "$PYTHON" tests/torch/suite/run_suite.py "${args[@]}"
