#!/usr/bin/env bash
# The benchmark tables: all_reduce_perf and all_gather_perf at each rank
# count, in each cache mode (reuse, cold buffers) and op mode (queued,
# blocking), each run with MPI and the measured reference side by side;
# AllReduce also in each of AR_DTYPES beyond float (bf16 by default: MPI
# has no such type, so its tables have zccl and the reference only).
# Writes $OUT/<op>[_<dtype>]_np<N>_<cache>_<mode>.txt and .csv.
# scripts/bench.sh and scripts/bench_runs.sh run it; it builds nothing.
#
# Environment: BUILD (build folder, default build), OUT (default out),
# NPS (rank counts, default "2 4"), CACHES (0 reuse, 1 cold; default "0 1"),
# MAXB (largest size, default 256M; blocking runs stop at MAXB_BLOCKING,
# default 16M, past which the per-op synchronize is a vanishing part of the
# op), BUDGET (ms per timed batch, default 15), REPEAT (interleaved timed
# rounds per size, best kept and %ref the median of the rounds' ratios,
# default 15), AR_DTYPES (AllReduce's types, the tools' -d names, default
# "float bfloat16"), NULL_REF=1 (null tables: the zccl column times the
# reference's leading variant, so %ref shows what the host's noise alone
# prints; the tools' --null 1).
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
AR_DTYPES=${AR_DTYPES:-float bfloat16}
mkdir -p "$OUT"

# mpirun as root needs these; --oversubscribe lets more ranks than cores run.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --bind-to none)
# Sizes 8 B .. MAXB by factors of 2; up to 10,000 iterations per batch, cut
# so a timed batch lasts about BUDGET ms (at least 3 iterations); REPEAT
# rounds of zccl, the reference and MPI, interleaved, the best of each kept
# and %ref the median of the rounds' paired ratios.
SWEEP=(-b 8 -f 2 -n 10000 -w 3 --budget "$BUDGET" --repeat "$REPEAT" -c 1 -m 1 -z 1
    --null "${NULL_REF:-0}")

# One table: tool, dtype, np, cache (0 reuse, 1 cold), blocking (0 or 1).
table() {
    local tool=$1 dtype=$2 np=$3 cold=$4 blocking=$5
    local cache mode name maxb tag
    cache=$([ "$cold" = 1 ] && echo cold || echo reuse)
    mode=$([ "$blocking" = 1 ] && echo blocking || echo queued)
    tag=$([ "$dtype" = float ] && echo "" || echo "_$dtype")
    name=${tool%_perf}${tag}_np${np}_${cache}_${mode}
    maxb=$([ "$blocking" = 1 ] && echo "$MAXB_BLOCKING" || echo "$MAXB")
    echo "== $tool $dtype np $np, $cache buffers, $mode"
    "${MPIRUN[@]}" -np "$np" "$BUILD/benchmarks/$tool" "${SWEEP[@]}" -d "$dtype" -e "$maxb" \
        --cold "$cold" --blocking "$blocking" --csv "$OUT/$name.csv" | tee "$OUT/$name.txt"
}

for np in $NPS; do
    for cold in $CACHES; do
        for blocking in 0 1; do
            for dtype in $AR_DTYPES; do
                table all_reduce_perf "$dtype" "$np" "$cold" "$blocking"
            done
            table all_gather_perf float "$np" "$cold" "$blocking"
        done
    done
done
