#!/usr/bin/env bash
# The %ref statement that survives noise: the benchmark tables
# (scripts/bench_tables.sh) RUNS times, into $OUT/run1 .. $OUT/runN, then
# benchmarks/targets_runs.awk judges each row by the median of its runs'
# %ref and each group (tool, ranks, cache, mode) by the geometric mean of
# its rows: every row >= 90 %, every group >= 95 %, and a NOTE for a row
# above 105 % (the reference is not ideal there). The verdicts go to
# $OUT/targets_runs.txt. One run of the defaults takes as long as the
# tables of scripts/bench.sh.
#
# Environment: RUNS (default 3), OUT (default out/runs), STRICT=1 (exit
# non-zero when a target is missed), and the tables' own (BUILD, NPS,
# CACHES, MAXB, MAXB_BLOCKING, BUDGET, REPEAT, NULL_REF: see
# scripts/bench_tables.sh). With NULL_REF=1 the verdicts judge null runs,
# the reference against itself: how often this host's noise alone misses
# the rule.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-out/runs}
RUNS=${RUNS:-3}
PY=$(scripts/venv.sh)
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE="$PY" >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target all_reduce_perf all_gather_perf
mkdir -p "$OUT"
files=()
for ((r = 1; r <= RUNS; r++)); do
    start=$(date +%s)
    rm -rf "$OUT/run$r"
    BUILD="$BUILD" OUT="$OUT/run$r" scripts/bench_tables.sh >"$OUT/run$r.log" 2>&1 || {
        echo "bench_runs: run $r failed ($OUT/run$r.log)"
        exit 1
    }
    echo "bench_runs: run $r of $RUNS took $(($(date +%s) - start)) s"
    files+=("$OUT/run$r"/*.csv)
done
missed=0
path=$([ "${NULL_REF:-0}" = 1 ] && echo null || echo zero-copy)
awk -F, -v path="$path" -f benchmarks/targets_csv.awk -f benchmarks/targets_runs.awk "${files[@]}" \
    >"$OUT/targets_runs.txt" || missed=1
grep -v '^#' "$OUT/targets_runs.txt"
echo "bench_runs: per-row %ref of every run and the verdicts are in $OUT/targets_runs.txt"
if [ "${STRICT:-0}" = 1 ] && [ "$missed" = 1 ]; then
    exit 1
fi
