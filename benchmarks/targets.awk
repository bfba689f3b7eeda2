# The project's performance targets, checked against the tools' CSV rows
# (scripts/bench.sh runs it: awk -F, -f benchmarks/targets.awk FILE.csv...).
# Prints one line per target, MET or MISSED with the measured numbers, and
# exits 1 when any was missed. Targets not measured (no such rows) are skipped.
#
# CSV columns: 1 tool, 2 op, 3 nranks, 4 path, 5 inplace, 6 size, 7 count,
# 8 type, 9 redop, 10 root, 11 iters, 12 time_us, 13 algbw, 14 busbw, 15 wrong,
# 16 bound_busbw, 17 mpi_iters, 18 mpi_time_us, 19 mpi_algbw, 20 mpi_busbw.

function verdict(ok, text) {
    printf "%-6s %s\n", ok ? "MET" : "MISSED", text
    if (!ok) {
        missed++
    }
}

function have(k) {
    return k in t
}

FNR == 1 { next }
$5 == 0 && $6 > 0 {
    k = $2 "," $3 "," $4 "," $6
    t[k] = $12; bw[k] = $14; bound[k] = $16; mt[k] = $18; mbw[k] = $20
    if ($4 == "zero-copy") {
        zsizes[$2 "," $3 "," $6] = 1
    }
}

# Worst zero-copy / buffered busbw ratio from 1 MiB up, and worst MPI / zccl
# time ratio at np 4, per collective.
function ratios(   sk, p, zc, bf, r, key) {
    for (sk in zsizes) {
        split(sk, p, ",")
        zc = p[1] "," p[2] ",zero-copy," p[3]
        bf = p[1] "," p[2] ",buffered," p[3]
        key = p[1] " np " p[2]
        if (p[3] + 0 >= 1048576 && have(bf) && bw[bf] > 0) {
            r = bw[zc] / bw[bf]
            if (!(key in zb) || r < zb[key]) {
                zb[key] = r; zbsize[key] = p[3]
            }
        }
        if (p[2] == 4 && mt[zc] != "" && t[zc] > 0) {
            r = mt[zc] / t[zc]
            if (!(key in zm) || r < zm[key]) {
                zm[key] = r; zmsize[key] = p[3]
            }
        }
    }
}

END {
    s8 = 8; s1m = 1048576; s64m = 67108864
    k = "AllReduce,2,zero-copy,"
    if (have(k s8)) {
        verdict(t[k s8] <= 0.5,
                sprintf("AllReduce np 2, 8 B: %.3f us per op <= 0.5 us", t[k s8]))
        verdict(t[k s8] <= mt[k s8] / 2,
                sprintf("AllReduce np 2, 8 B: %.3f us <= half of MPI's %.3f us", t[k s8],
                        mt[k s8]))
    }
    if (have(k s1m)) {
        verdict(bw[k s1m] >= 15,
                sprintf("AllReduce np 2, 1 MiB: busbw %.2f GB/s >= 15", bw[k s1m]))
    }
    if (have(k s64m)) {
        verdict(bw[k s64m] >= 8,
                sprintf("AllReduce np 2, 64 MiB: busbw %.2f GB/s >= 8", bw[k s64m]))
        verdict(bw[k s64m] >= 8 * mbw[k s64m],
                sprintf("AllReduce np 2, 64 MiB: busbw %.2f >= 8 x MPI's %.2f", bw[k s64m],
                        mbw[k s64m]))
        verdict(bw[k s64m] >= 0.75 * bound[k s64m],
                sprintf("AllReduce np 2, 64 MiB: busbw %.2f >= 75%% of the bound %.2f",
                        bw[k s64m], bound[k s64m]))
    }
    k = "AllGather,2,zero-copy,"
    if (have(k s64m)) {
        verdict(bw[k s64m] >= 4,
                sprintf("AllGather np 2, 64 MiB: busbw %.2f GB/s >= 4", bw[k s64m]))
        verdict(bw[k s64m] >= 2 * mbw[k s64m],
                sprintf("AllGather np 2, 64 MiB: busbw %.2f >= 2 x MPI's %.2f", bw[k s64m],
                        mbw[k s64m]))
    }
    ratios()
    for (key in zb) {
        verdict(zb[key] >= 2,
                sprintf("%s: zero-copy >= 2 x buffered from 1 MiB up (worst %.2f x at %s B)",
                        key, zb[key], zbsize[key]))
    }
    for (key in zm) {
        verdict(zm[key] >= 1,
                sprintf("%s: no size slower than MPI (worst: MPI time / zccl time %.2f at %s B)",
                        key, zm[key], zmsize[key]))
    }
    printf "%d target(s) missed\n", missed
    exit missed > 0 ? 1 : 0
}
