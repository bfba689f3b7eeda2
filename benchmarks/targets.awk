# The project's performance targets, checked against the tools' CSV rows
# (scripts/bench.sh runs it: awk -F, -f benchmarks/targets_csv.awk
# -f benchmarks/targets.awk FILE.csv...). Prints one line per target, MET or
# MISSED with the measured numbers, and exits 1 when any was missed. Targets
# not measured (no such rows) are skipped.
#
# The targets (zero-copy path, fp32 sum, out of place):
#  - 8 B AllReduce, op + synchronize (blocking, reuse): no slower than MPI's
#    blocking MPI_Allreduce at np 2 and np 4; aim <= 0.25 us at np 2.
#  - 8 B AllReduce queued (reuse): <= 0.25 us per op at np 2.
#  - 8 B AllReduce at np 8 (8 ranks on 2 cores, reuse): <= 50 us, queued and
#    blocking.
#  - np 4, 8 and 16 (more ranks than cores): no size slower than MPI, in
#    every mode measured.
# The %ref of AllReduce and AllGather from 1 MiB to 256 MiB is printed here
# (INFO: one run's worst row per group); its target is judged over several
# runs by scripts/bench_runs.sh (benchmarks/targets_runs.awk), one run being
# too noisy to judge a row by.

v("path") == "zero-copy" && v("inplace") == 0 && v("size") > 0 {
    op = opname(); np = v("nranks"); cache = v("cache"); mode = v("mode"); size = v("size") + 0
    k = op "," np "," cache "," mode "," size
    t[k] = v("time_us"); mt[k] = v("mpi_time_us"); pct[k] = v("ref_pct")
    variant[k] = v("ref_variant"); streamed[k] = v("zccl_streamed_pct")
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
    split("queued blocking", modes, " ")
    for (m = 1; m <= 2; m++) {
        k = "AllReduce,8,reuse," modes[m] ",8"
        if (k in t) {
            verdict(t[k] + 0 <= 50,
                    sprintf("AllReduce np 8, 8 B %s: %.2f us <= 50 us", modes[m], t[k]))
        }
    }
    # %ref from 1 MiB to 256 MiB, and MPI from np 4 up: worst row per group.
    for (k in t) {
        split(k, p, ",")
        g = p[1] "," p[2] "," p[3] "," p[4]
        s = p[5] + 0
        if (p[1] ~ /^All(Reduce|Gather)/ &&
            s >= mib && s <= 256 * mib && pct[k] != "") {
            if (!(g in worst) || pct[k] + 0 < worst[g]) {
                worst[g] = pct[k] + 0; wsize[g] = s
            }
        }
        if (p[2] >= 4 && mt[k] != "" && t[k] > 0) {
            r = mt[k] / t[k]
            if (!(g in mworst) || r < mworst[g]) {
                mworst[g] = r; msize[g] = s
            }
        }
    }
    for (g in worst) {
        split(g, p, ",")
        # the store kinds behind the worst row, zccl's and the reference's
        k = g "," wsize[g]
        why = ""
        if (worst[g] < 90 && streamed[k] != "") {
            why = sprintf("; there zccl streamed %.0f %% of its large ops, the reference ran %s",
                          streamed[k], variant[k])
        }
        printf "%-6s %s np %d %s %s: lowest %%ref from 1 MiB up %.1f %% at %d B%s (one run; " \
               "judged over several by scripts/bench_runs.sh)\n",
               "INFO", p[1], p[2], p[3], p[4], worst[g], wsize[g], why
    }
    for (g in mworst) {
        split(g, p, ",")
        verdict(mworst[g] >= 1,
                sprintf("%s np %d %s %s: no size slower than MPI (worst MPI time / zccl time %.2f at %d B)",
                        p[1], p[2], p[3], p[4], mworst[g], msize[g]))
    }
    printf "%d target(s) missed\n", missed
    exit missed > 0 ? 1 : 0
}
