#!/usr/bin/env bash
# Across hosts on one machine: zccl and Open MPI over the same veth links,
# side by side in one run. Two network namespaces x 2 ranks
# (scripts/netns.sh; root only, skipped with a note otherwise), UCX_TLS=tcp
# for zccl's inter-host tier, Open MPI with pml ob1 and btl tcp (vader
# between the two ranks of a host, as zccl uses its zero-copy path there);
# all_reduce_perf, all_gather_perf and reduce_scatter_perf on activated
# memory, results checked.
#
# Prints per size zccl's and MPI's time (us) and busbw (GB/s), the busbw
# ratio, the bytes zccl sent between hosts per op (all ranks) and their ratio
# to the least any algorithm must send (from the tools' CSV; the tools' own
# %ref column is the shared-memory bound of one machine, which a network
# between hosts cannot reach, so it is left out), and the tools' "Paths"
# line (the communicator's counters over the whole run). Writes
# OUT/multihost_*.txt, .csv and .log, and OUT/multihost_targets.txt: MET or
# MISSED for "zccl's AllReduce busbw above Open MPI's at every size from
# 1 MiB up". Exits non-zero when a run fails (a wrong result included).
#
# Environment: BUILD (default build), OUT (default out), MAXB (largest size,
# default 16M), BUDGET (ms per timed batch, default 60), REPEAT (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-out}
MAXB=${MAXB:-16M}
BUDGET=${BUDGET:-60}
REPEAT=${REPEAT:-3}
if ! scripts/netns.sh check; then
    echo "== multihost benchmark skipped (needs root and network namespaces)"
    exit 0
fi
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target all_reduce_perf all_gather_perf reduce_scatter_perf
mkdir -p "$OUT"
rm -f "$OUT"/multihost_*
scripts/netns.sh gc
tag=$(scripts/netns.sh up 2)
trap 'scripts/netns.sh down "$tag"' EXIT

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export UCX_TLS=tcp UCX_NET_DEVICES=zcnet0 HCCL_SOCKET_IFNAME=zcnet0
echo "== multihost: 2 hosts x 2 ranks ($tag: veth pairs to a bridge, 10.231.0.0/24)," \
    "UCX_TLS=$UCX_TLS, MPI: pml ob1, btl self,vader,tcp"
for tool in all_reduce_perf all_gather_perf reduce_scatter_perf; do
    name=multihost_${tool%_perf}_2x2
    echo "== $tool, 2 hosts x 2 ranks"
    scripts/netns.sh mpirun "$tag" --oversubscribe --bind-to none -H h1:2,h2:2 \
        --mca pml ob1 --mca btl self,vader,tcp -x UCX_TLS -x UCX_NET_DEVICES \
        -x HCCL_SOCKET_IFNAME "$BUILD/benchmarks/$tool" -b 8 -e "$MAXB" -f 4 -n 1000 -w 3 \
        --budget "$BUDGET" --repeat "$REPEAT" -c 1 -m 1 -z 1 --csv "$OUT/$name.csv" \
        >"$OUT/$name.log"
    {
        grep -E '^# (Paths|Across hosts|Out of bounds|Avg bus)' "$OUT/$name.log"
        # The least that must cross per op between 2 hosts: AllReduce, each host needs
        # the other's partial of every element (size bytes each way); AllGather, each
        # host needs the other host's half of the output (size / 2 each way);
        # ReduceScatter (size = each rank's input), each host needs the other's
        # partial of its half of the blocks (size / 2 each way).
        awk -F, -v must="$([ $tool = all_reduce_perf ] && echo 2 || echo 1)" '
            NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
            NR == 2 { printf "%10s %10s %9s %10s %9s %8s %12s %8s\n", "size(B)", "zccl us",
                      "busbw", "MPI us", "busbw", "zccl/MPI", "net B/op", "net/must" }
            { z = $col["busbw"]; m = $col["mpi_busbw"]; nb = $col["net_bytes"]
              r = m > 0 ? sprintf("%.2f", z / m) : "-"
              q = $col["size"] > 0 ? sprintf("%.2f", nb / (must * $col["size"])) : "-"
              printf "%10d %10.1f %9.4f %10.1f %9.4f %8s %12d %8s\n", $col["size"],
                     $col["time_us"], z, $col["mpi_time_us"], m, r, nb, q }' "$OUT/$name.csv"
    } | tee "$OUT/$name.txt"
done

# The target: AllReduce, from 1 MiB up, zccl faster than flat Open MPI at every size.
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $col["size"] >= 1048576 { n++; z = $col["busbw"]; m = $col["mpi_busbw"];
        if (z <= m) { bad++; worst = worst sprintf(" %d B: %.3f vs %.3f;", $col["size"], z, m) } }
    END { if (n > 0 && bad == 0) {
              printf "MET    multihost AllReduce 2x2: zccl busbw above Open MPI at all %d sizes " \
                     "from 1 MiB\n", n
          } else {
              printf "MISSED multihost AllReduce 2x2: zccl busbw not above Open MPI at %d of %d " \
                     "sizes from 1 MiB:%s\n", bad, n, worst
          } }' "$OUT/multihost_all_reduce_2x2.csv" | tee "$OUT/multihost_targets.txt"
