#!/usr/bin/env bash
# The README's benchmark command: install what is missing, build, run the
# AllReduce and AllGather benchmarks at each rank count in the four modes —
# reuse and cold buffers, queued and blocking ops — each run with MPI and the
# measured reference side by side, a resident-memory run, the training
# workload, plot, and check the results against the project's targets.
# Everything lands in out/ (git-ignored): the tables (*.txt), the CSVs, the PNG
# and targets.txt. Last, the PyTorch benchmarks (scripts/bench_torch.sh) and
# zccl against its peers (scripts/bench_peers.sh: peers.csv, peers.txt, peers.png).
#
# Environment: BUILD (build folder, default build), OUT (default out),
# NPS (rank counts, default "2 4"), MAXB (largest size, default 256M;
# blocking runs stop at MAXB_BLOCKING, default 16M, past which the per-op
# synchronize is a vanishing part of the op), BUDGET (ms per timed batch,
# default 15), REPEAT (interleaved timed rounds per size, best kept and %ref
# the median of the rounds' ratios, default 15), STRICT=1 (exit non-zero when
# a target is missed; a wrong result always fails).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh gnuplot-nox
BUILD=${BUILD:-build}
OUT=${OUT:-out}
NPS=${NPS:-2 4}
MAXB=${MAXB:-256M}
MAXB_BLOCKING=${MAXB_BLOCKING:-16M}
BUDGET=${BUDGET:-15}
REPEAT=${REPEAT:-15}
PY=$(scripts/venv.sh) # PyTorch 2.13 for the backend's benchmarks
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE="$PY" >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target all_reduce_perf all_gather_perf train_dp
mkdir -p "$OUT"

# mpirun as root needs these; --oversubscribe lets 4 ranks share 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --bind-to none)
# Sizes 8 B .. MAXB by factors of 2; up to 10,000 iterations per batch, cut
# so a timed batch lasts about BUDGET ms (at least 3 iterations); REPEAT
# rounds of zccl, the reference and MPI, interleaved, the best of each kept
# and %ref the median of the rounds' paired ratios.
SWEEP=(-b 8 -f 2 -n 10000 -w 3 --budget "$BUDGET" --repeat "$REPEAT" -c 1 -m 1 -z 1)

for np in $NPS; do
    for tool in all_reduce_perf all_gather_perf; do
        for cold in 0 1; do
            for blocking in 0 1; do
                cache=$([ $cold = 1 ] && echo cold || echo reuse)
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

# Resident memory over 100,000 small zero-copy ops (the footer's "Resident
# memory" line), measured after a warm-up of as many, so first-use costs
# (code pages, the control segment's lines) come before it. The stream
# worker's stack is touched when the worker starts (vmm_stream_worker.c):
# an smaps diff had put an 8 kB step in it, in the first batch whose op the
# worker rather than the caller's thread finished. Open MPI's shared memory
# (its transport's segments, which the batch's barrier and agreed time touch)
# is left out of the figure and shown beside it.
echo "== all_reduce_perf np 2, 100,000 ops of 8 B after 100,000 warm-up ops, resident memory"
"${MPIRUN[@]}" -np 2 "$BUILD/benchmarks/all_reduce_perf" -b 8 -e 8 -n 100000 -w 100000 -c 1 \
    -z 1 --rss | tee "$OUT/rss_np2.txt"

echo "== train_dp np 2"
"${MPIRUN[@]}" -np 2 "$BUILD/benchmarks/train_dp" | tee "$OUT/train_dp_np2.txt"

benchmarks/plot -o "$OUT/busbw.png" "$OUT"/*_np*_queued.csv

# The targets (benchmarks/targets.awk): MET or MISSED, with the numbers.
awk -F, -f benchmarks/targets.awk "$OUT"/*_np*_*.csv | tee "$OUT/targets.txt" ||
    targets_missed=1
# One size: the growth over its timed batch (after the warm-up) is the
# footer's "over the first" figure.
rss=$(sed -n 's/^# Resident memory *: [-+0-9]* kB over [^,]*, \([-+0-9]*\) kB over the first.*/\1/p' \
    "$OUT/rss_np2.txt")
if [ "${rss:-x}" != x ] && [ "$rss" -le 0 ]; then
    echo "MET    AllReduce np 2: resident memory flat over 100,000 ops of 8 B ($rss kB)" |
        tee -a "$OUT/targets.txt"
else
    echo "MISSED AllReduce np 2: resident memory flat over 100,000 ops of 8 B (${rss:-?} kB)" |
        tee -a "$OUT/targets.txt"
    targets_missed=1
fi
grep -h "Resident memory\|Paths" "$OUT/rss_np2.txt" | tee -a "$OUT/targets.txt"
grep -h "train_dp:" "$OUT/train_dp_np2.txt" | tee -a "$OUT/targets.txt"
# Across hosts on one machine (network namespaces; root only, else skipped with a note).
if BUILD="$BUILD" OUT="$OUT" BUDGET="$BUDGET" REPEAT="$REPEAT" scripts/bench_multihost.sh; then
    cat "$OUT/multihost_targets.txt" 2>/dev/null | tee -a "$OUT/targets.txt" || true
    grep -q '^MISSED' "$OUT/multihost_targets.txt" 2>/dev/null && targets_missed=1
else
    echo "MISSED multihost benchmark: a run failed ($OUT/multihost_*.log)" |
        tee -a "$OUT/targets.txt"
    targets_missed=1
fi
echo "bench: tables, CSVs, busbw.png and targets.txt are in $OUT/"
if [ "${STRICT:-0}" = 1 ] && [ "${targets_missed:-0}" = 1 ]; then
    exit 1
fi
BUILD="$BUILD" OUT="$OUT" scripts/bench_torch.sh  # the PyTorch backend: torch_collectives.py and ddp_train.py
BUILD="$BUILD" OUT="$OUT" scripts/bench_peers.sh # zccl against DeepSpeed, oneCCL, Gloo, MPIs
