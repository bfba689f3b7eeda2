# The project's performance targets, checked against the tools' CSV rows
# (scripts/bench.sh runs it: awk -F, -f benchmarks/targets.awk FILE.csv...).
# Prints one line per target, MET or MISSED with the measured numbers, and
# exits 1 when any was missed. Targets not measured (no such rows) are
# skipped. Columns are found by their header names (the tools' --csv).
#
# The targets (zero-copy path, fp32 sum, out of place):
#  - 8 B AllReduce, op + synchronize (blocking, reuse): no slower than MPI's
#    blocking MPI_Allreduce at np 2 and np 4; aim <= 0.25 us at np 2.
#  - 8 B AllReduce queued (reuse): <= 0.25 us per op at np 2.
#  - AllReduce and AllGather from 1 MiB to 256 MiB: >= 90 % of the in-run
#    reference (%ref), reuse and cold, queued and blocking (the blocking
#    tables stop where scripts/bench.sh's MAXB_BLOCKING says).
#  - np 4 (4 ranks on 2 cores): no size slower than MPI, reuse and cold,
#    queued and blocking.

function verdict(ok, text) {
    printf "%-6s %s\n", ok ? "MET" : "MISSED", text
    if (!ok) {
        missed++
    }
}

FNR == 1 {
    delete col
    for (i = 1; i <= NF; i++) {
        col[$i] = i
    }
    next
}

function v(name) {
    return (name in col) ? $(col[name]) : ""
}

v("path") == "zero-copy" && v("inplace") == 0 && v("size") > 0 {
    op = v("op"); np = v("nranks"); cache = v("cache"); mode = v("mode"); size = v("size") + 0
    k = op "," np "," cache "," mode "," size
    t[k] = v("time_us"); mt[k] = v("mpi_time_us"); pct[k] = v("ref_pct")
    variant[k] = v("ref_variant"); streamed[k] = v("zccl_streamed_pct")
    groups[op "," np "," cache "," mode] = 1
    sizes[k] = size
}

END {
    mib = 1048576
    # 8 B AllReduce latency.
    for (np = 2; np <= 4; np += 2) {
        k = "AllReduce," np ",reuse,blocking,8"
        if (k in t && mt[k] != "") {
            verdict(t[k] + 0 <= mt[k] + 0,
                    sprintf("AllReduce np %d, 8 B op + synchronize: %.2f us <= MPI's %.2f us",
                            np, t[k], mt[k]))
        }
    }
    k = "AllReduce,2,reuse,blocking,8"
    if (k in t) {
        verdict(t[k] + 0 <= 0.25,
                sprintf("AllReduce np 2, 8 B op + synchronize: %.2f us <= 0.25 us (aim)", t[k]))
    }
    k = "AllReduce,2,reuse,queued,8"
    if (k in t) {
        verdict(t[k] + 0 <= 0.25, sprintf("AllReduce np 2, 8 B queued: %.3f us <= 0.25 us", t[k]))
    }
    # %ref from 1 MiB to 256 MiB, and MPI at np 4: worst row per group.
    for (k in t) {
        split(k, p, ",")
        g = p[1] "," p[2] "," p[3] "," p[4]
        s = p[5] + 0
        if ((p[1] == "AllReduce" || p[1] == "AllGather") &&
            s >= mib && s <= 256 * mib && pct[k] != "") {
            if (!(g in worst) || pct[k] + 0 < worst[g]) {
                worst[g] = pct[k] + 0; wsize[g] = s
            }
        }
        if (p[2] == 4 && mt[k] != "" && t[k] > 0) {
            r = mt[k] / t[k]
            if (!(g in mworst) || r < mworst[g]) {
                mworst[g] = r; msize[g] = s
            }
        }
    }
    for (g in worst) {
        split(g, p, ",")
        # where missed: the store kinds behind the worst row, zccl's and the reference's
        k = g "," wsize[g]
        why = ""
        if (worst[g] < 90 && streamed[k] != "") {
            why = sprintf("; there zccl streamed %.0f %% of its large ops, the reference ran %s",
                          streamed[k], variant[k])
        }
        verdict(worst[g] >= 90,
                sprintf("%s np %d %s %s: >= 90 %% of the reference from 1 MiB up (worst %.1f %% at %d B%s)",
                        p[1], p[2], p[3], p[4], worst[g], wsize[g], why))
    }
    for (g in mworst) {
        split(g, p, ",")
        verdict(mworst[g] >= 1,
                sprintf("%s np 4 %s %s: no size slower than MPI (worst MPI time / zccl time %.2f at %d B)",
                        p[1], p[3], p[4], mworst[g], msize[g]))
    }
    printf "%d target(s) missed\n", missed
    exit missed > 0 ? 1 : 0
}
