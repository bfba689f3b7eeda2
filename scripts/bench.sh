#!/usr/bin/env bash
# The README's benchmark command: install what is missing, build, run the
# bandwidth benchmarks (AllReduce and AllGather, zero-copy vs buffered vs MPI,
# side by side in each run), a resident-memory run, the training workload,
# plot, and check the results against the project's targets.
# Everything lands in out/ (git-ignored): the tables (*.txt), the CSVs, the PNG
# and targets.txt.
#
# Environment: BUILD (build folder, default build), OUT (default out),
# NPS (rank counts, default "2"; e.g. NPS="2 4"), STRICT=1 (exit non-zero
# when a target is missed; a wrong result always fails).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh gnuplot-nox
BUILD=${BUILD:-build}
OUT=${OUT:-out}
NPS=${NPS:-2}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target all_reduce_perf all_gather_perf train_dp
mkdir -p "$OUT"

# mpirun as root needs these; --oversubscribe lets 4 ranks share 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --bind-to none)
# Sizes 8 B .. 64 MiB by factors of 2; up to 10,000 iterations per size, cut
# so a timed batch lasts about 200 ms (at least 5 iterations).
SWEEP=(-b 8 -e 64M -f 2 -n 10000 -w 5 --budget 200 -c 1 -m 1)

for np in $NPS; do
    for tool in all_reduce_perf all_gather_perf; do
        for z in 1 0; do
            name=${tool%_perf}_np${np}_z${z}
            echo "== $tool np $np -z $z"
            "${MPIRUN[@]}" -np "$np" "$BUILD/benchmarks/$tool" "${SWEEP[@]}" -z "$z" \
                --csv "$OUT/$name.csv" | tee "$OUT/$name.txt"
        done
    done
done

# Resident memory over 10,000 zero-copy ops (the footer's VmRSS line).
echo "== all_reduce_perf np 2, 10,000 ops per size, resident memory"
"${MPIRUN[@]}" -np 2 "$BUILD/benchmarks/all_reduce_perf" -b 8 -e 1M -f 128 -n 10000 -w 10 -c 1 \
    -z 1 --rss | tee "$OUT/rss_np2.txt"

echo "== train_dp np 2"
"${MPIRUN[@]}" -np 2 "$BUILD/benchmarks/train_dp" | tee "$OUT/train_dp_np2.txt"

benchmarks/plot -o "$OUT/busbw.png" "$OUT"/*_np*_z?.csv

# The targets (benchmarks/targets.awk): MET or MISSED, with the numbers.
awk -F, -f benchmarks/targets.awk "$OUT"/*_np*_z?.csv | tee "$OUT/targets.txt" ||
    targets_missed=1
grep -h "VmRSS\|Paths" "$OUT/rss_np2.txt" | tee -a "$OUT/targets.txt"
grep -h "train_dp:" "$OUT/train_dp_np2.txt" | tee -a "$OUT/targets.txt"
echo "bench: tables, CSVs, busbw.png and targets.txt are in $OUT/"
if [ "${STRICT:-0}" = 1 ] && [ "${targets_missed:-0}" = 1 ]; then
    exit 1
fi
BUILD="$BUILD" OUT="$OUT" scripts/bench_torch.sh  # the PyTorch backend: torch_collectives.py and ddp_train.py
