#!/usr/bin/env bash
# The benchmark tables: all_reduce_perf and all_gather_perf at each rank
# count, in each cache mode (reuse, cold buffers) and op mode (queued,
# blocking), each run with MPI and the measured reference side by side.
# Writes $OUT/<op>_np<N>_<cache>_<mode>.txt and .csv. scripts/bench.sh and
# scripts/bench_runs.sh run it; it builds nothing.
#
# Environment: BUILD (build folder, default build), OUT (default out),
# NPS (rank counts, default "2 4"), CACHES (0 reuse, 1 cold; default "0 1"),
# MAXB (largest size, default 256M; blocking runs stop at MAXB_BLOCKING,
# default 16M, past which the per-op synchronize is a vanishing part of the
# op), BUDGET (ms per timed batch, default 15), REPEAT (interleaved timed
# rounds per size, best kept and %ref the median of the rounds' ratios,
# default 15).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-out}
NPS=${NPS:-2 4}
CACHES=${CACHES:-0 1}
MAXB=${MAXB:-256M}
MAXB_BLOCKING=${MAXB_BLOCKING:-16M}
BUDGET=${BUDGET:-15}
REPEAT=${REPEAT:-15}
mkdir -p "$OUT"

# mpirun as root needs these; --oversubscribe lets more ranks than cores run.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --bind-to none)
# Sizes 8 B .. MAXB by factors of 2; up to 10,000 iterations per batch, cut
# so a timed batch lasts about BUDGET ms (at least 3 iterations); REPEAT
# rounds of zccl, the reference and MPI, interleaved, the best of each kept
# and %ref the median of the rounds' paired ratios.
SWEEP=(-b 8 -f 2 -n 10000 -w 3 --budget "$BUDGET" --repeat "$REPEAT" -c 1 -m 1 -z 1)

for np in $NPS; do
    for tool in all_reduce_perf all_gather_perf; do
        for cold in $CACHES; do
            for blocking in 0 1; do
                cache=$([ "$cold" = 1 ] && echo cold || echo reuse)
                mode=$([ $blocking = 1 ] && echo blocking || echo queued)
                name=${tool%_perf}_np${np}_${cache}_${mode}
                maxb=$([ $blocking = 1 ] && echo "$MAXB_BLOCKING" || echo "$MAXB")
                echo "== $tool np $np, $cache buffers, $mode"
                "${MPIRUN[@]}" -np "$np" "$BUILD/benchmarks/$tool" "${SWEEP[@]}" -e "$maxb" \
                    --cold "$cold" --blocking "$blocking" --csv "$OUT/$name.csv" |
                    tee "$OUT/$name.txt"
            done
        done
    done
done
