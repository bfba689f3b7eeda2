#!/usr/bin/env bash
# Before/after benchmark figures: run two builds' all_reduce_perf and
# all_gather_perf alternately (A B A B ...) in one window, so that the noise
# of the machine shows as spread between the two runs of each side.
#
# usage: scripts/bench_ab.sh BUILD_A BUILD_B [ROUNDS]
# Environment: NP (ranks, default 2), BUDGET (ms per timed batch, default 60),
# REPEAT (interleaved timed rounds per size, best kept, default 3).
# Prints one table per tool and mode (queued, --blocking 1): per size the
# zccl time (us) of every run, in the order they ran.
set -euo pipefail
a=${1:?usage: bench_ab.sh BUILD_A BUILD_B [ROUNDS]}
b=${2:?usage: bench_ab.sh BUILD_A BUILD_B [ROUNDS]}
rounds=${3:-2}
NP=${NP:-2}
BUDGET=${BUDGET:-60}
REPEAT=${REPEAT:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --bind-to none -np "$NP")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One run: sizes 8 B, then 64 KiB, 1 MiB, 16 MiB; prints "size time_us".
run() {
    local bin=$1 blocking=$2
    for range in "-b 8 -e 8" "-b 64K -e 16M -f 16"; do
        # shellcheck disable=SC2086
        "${MPIRUN[@]}" "$bin" $range -n 10000 -w 3 --budget "$BUDGET" --repeat "$REPEAT" \
            -c 1 -z 1 --blocking "$blocking" --csv "$tmp/row.csv" >/dev/null
        # The CSV's header names the columns; a wrong result fails the run.
        awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
                 $col["wrong"] != 0 { print "wrong results at " $col["size"] > "/dev/stderr"; exit 1 }
                 { print $col["size"], $col["time_us"] }' "$tmp/row.csv"
    done
}

for tool in all_reduce_perf all_gather_perf; do
    for blocking in 0 1; do
        order=()
        for ((r = 1; r <= rounds; r++)); do
            run "$a/benchmarks/$tool" "$blocking" >"$tmp/A$r"
            run "$b/benchmarks/$tool" "$blocking" >"$tmp/B$r"
            order+=("A$r" "B$r")
        done
        mode=queued
        [ "$blocking" = 1 ] && mode=blocking
        echo "## $tool, np $NP, $mode: zccl time (us) per run, in run order"
        printf "%10s" bytes
        for k in "${order[@]}"; do printf " %9s" "$k"; done
        echo
        while read -r size _; do
            printf "%10s" "$size"
            for k in "${order[@]}"; do
                printf " %9s" "$(awk -v s="$size" '$1 == s { print $2 }' "$tmp/$k")"
            done
            echo
        done <"$tmp/A1"
        echo
    done
done
