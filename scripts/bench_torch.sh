#!/usr/bin/env bash
# The PyTorch benchmarks (scripts/bench.sh runs this last): builds the zccl_torch
# extension, then
#   benchmarks/torch_collectives.py  every collective, 8 B .. 64 MiB, fp32 and bf16, zccl (activated
#                                    tensors) against Gloo in the same run, timed rounds
#                                    alternating between them, with the floor (a backend whose
#                                    ops complete at once: PyTorch's own cost): table, CSV, PNG
#     again for all_reduce 8 B .. 4 KiB, sync and async_op + wait(), with the C-level op
#                                    (all_reduce_perf, blocking) for the floor targets
#     again for all_reduce 8 B .. 1 MiB with two busy-loop processes pinned one per core
#   benchmarks/ddp_train.py          DDP training of an MLP on Gloo and on zccl in one
#                                    run, steps interleaved: step time, all-reduce time,
#                                    bytes staged, loss curves against a one-process run,
#                                    weights identical on every rank; with the script's
#                                    small buckets, then PyTorch's default 25 MiB
# and appends the targets (MET / MISSED with the numbers) to $OUT/targets_torch.txt.
# Sizes and iteration counts are kept so this finishes in a few minutes on 2 cores.
# On a machine shared with other work the ratios are the figures, not the times.
#
# Environment: BUILD (default build), OUT (default out), NP (ranks, default 2),
# SIZES (torch_collectives --sizes list), STRICT=1 (fail on a missed target; a wrong
# result always fails).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh gnuplot-nox
BUILD=${BUILD:-build}
OUT=${OUT:-out}
NP=${NP:-2}
SIZES=${SIZES:-8,64,512,4K,64K,1M,16M,64M}
PY=$(scripts/venv.sh) # PyTorch 2.13.0 (CPU) in .venv
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE="$PY" >/dev/null
if [ ! -f "$BUILD/torch/Makefile" ] && [ ! -d "$BUILD/torch/CMakeFiles" ]; then
    echo "bench_torch: the extension is not configured (no torch 2.x for $PY)"
    exit 1
fi
cmake --build "$BUILD" -j"$(nproc)" --target zccl_torch_ext all_reduce_perf
mkdir -p "$OUT"
export PYTHONPATH="$BUILD/torch/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1

echo "== torch_collectives np $NP"
rc=0
"$PY" benchmarks/torch_collectives.py -n "$NP" --sizes "$SIZES" --csv "$OUT/torch_colls.csv" \
    --png "$OUT/torch_colls.png" | tee "$OUT/torch_colls.txt" || rc=1
echo "== torch_collectives np $NP: all_reduce at its floor (sync, async)"
"$PY" benchmarks/torch_collectives.py -n "$NP" --ops all_reduce --sizes 8,64,512,4K \
    --modes sync,async --repeat 5 --c-bench "$BUILD/benchmarks/all_reduce_perf" \
    --csv "$OUT/torch_floor.csv" | tee "$OUT/torch_floor.txt" || rc=1
echo "== torch_collectives np $NP: all_reduce on busy cores"
"$PY" benchmarks/torch_collectives.py -n "$NP" --ops all_reduce --sizes 8,512,4K,64K,1M \
    --busy 2 --csv "$OUT/torch_busy.csv" | tee "$OUT/torch_busy.txt" || rc=1
echo "== ddp_train np $NP"
"$PY" benchmarks/ddp_train.py -n "$NP" --backend both | tee "$OUT/torch_ddp.txt" || rc=1
echo "== ddp_train np $NP, PyTorch's default bucket (25 MiB)"
"$PY" benchmarks/ddp_train.py -n "$NP" --backend both --bucket-mb 25 |
    tee "$OUT/torch_ddp25.txt" || rc=1

grep -h "^target\|^results\|^ddp_train:" "$OUT/torch_colls.txt" "$OUT/torch_floor.txt" \
    "$OUT/torch_busy.txt" "$OUT/torch_ddp.txt" "$OUT/torch_ddp25.txt" |
    tee "$OUT/targets_torch.txt"
if [ "$rc" -ne 0 ]; then
    echo "bench_torch: a benchmark failed (wrong results or a crash)"
    exit 1
fi
if [ "${STRICT:-0}" = 1 ] && grep -q MISSED "$OUT/targets_torch.txt"; then
    exit 1
fi
echo "bench_torch: torch_colls.txt, torch_colls.png, torch_floor.txt, torch_busy.txt, torch_ddp.txt in $OUT/"
