# The %ref target over several runs of the tables (scripts/bench_runs.sh:
# awk -F, -f benchmarks/targets_csv.awk -f benchmarks/targets_runs.awk
# run1/*.csv run2/*.csv ...). A row (op, ranks, cache, mode, size) is judged
# by the median of its runs' %ref, a group (op, ranks, cache, mode) by the
# geometric mean of its rows' medians, over AllReduce and AllGather from
# 1 MiB to 256 MiB (zero-copy, out of place; each dtype of AllReduce its own
# groups). Targets: every row >= 90 %,
# every group's geometric mean >= 95 %. A row above 105 % says the
# reference is not ideal there (bench_ref.c): a NOTE names it. Prints the
# rows (each run's %ref and the median), then MET or MISSED per group, and
# exits 1 when any was missed. With -v path=null it judges null runs
# (NULL_REF=1: the reference against itself, what the host's noise alone
# prints) by the same rule.

function median(list, n,    a, i, j, x) {
    for (i = 1; i <= n; i++) {
        a[i] = list[i]
    }
    for (i = 2; i <= n; i++) { # insertion sort: a handful of runs
        x = a[i]
        for (j = i - 1; j >= 1 && a[j] > x; j--) {
            a[j + 1] = a[j]
        }
        a[j + 1] = x
    }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}

v("path") == (path != "" ? path : "zero-copy") && v("inplace") == 0 && v("ref_pct") != "" &&
(v("op") == "AllReduce" || v("op") == "AllGather") &&
v("size") >= 1048576 && v("size") <= 268435456 {
    g = opname() "," v("nranks") "," v("cache") "," v("mode")
    k = g "," v("size")
    if (!(k in n)) {
        rows[++nrows] = k
    }
    n[k]++
    runs[k, n[k]] = v("ref_pct") + 0
}

END {
    if (path == "null") {
        printf "# NULL RUNS: the zccl column timed the reference's leading variant, not zccl\n"
    }
    printf "# %%ref per row: each run's, then their median\n"
    for (r = 1; r <= nrows; r++) {
        k = rows[r]
        delete list
        line = ""
        for (i = 1; i <= n[k]; i++) {
            list[i] = runs[k, i]
            line = line sprintf(" %6.1f", runs[k, i])
        }
        med[k] = median(list, n[k])
        split(k, p, ",")
        g = p[1] "," p[2] "," p[3] "," p[4]
        printf "# %-9s np %-2d %-5s %-8s %10d B:%s -> %6.1f %%\n", p[1], p[2], p[3], p[4], p[5],
               line, med[k]
        if (!(g in cnt)) {
            groups[++ngroups] = g
        }
        cnt[g]++
        logsum[g] += log(med[k] / 100)
        if (!(g in worst) || med[k] < worst[g]) {
            worst[g] = med[k]; wsize[g] = p[5]; wruns[g] = n[k]
        }
        if (med[k] > 105) {
            high[++nhigh] = sprintf("NOTE   %s np %d %s %s %d B: median %.1f %% of the reference: " \
                                    "the reference is not ideal there (bench_ref.c)",
                                    p[1], p[2], p[3], p[4], p[5], med[k])
        }
    }
    for (i = 1; i <= ngroups; i++) {
        g = groups[i]
        split(g, p, ",")
        gm = 100 * exp(logsum[g] / cnt[g])
        verdict(worst[g] >= 90,
                sprintf("%s np %d %s %s: every row >= 90 %% of the reference from 1 MiB up " \
                        "(median of %d runs; worst %.1f %% at %d B)",
                        p[1], p[2], p[3], p[4], wruns[g], worst[g], wsize[g]))
        verdict(gm >= 95,
                sprintf("%s np %d %s %s: geometric mean >= 95 %% of the reference over %d rows " \
                        "(%.1f %%)", p[1], p[2], p[3], p[4], cnt[g], gm))
    }
    for (i = 1; i <= nhigh; i++) {
        print high[i]
    }
    printf "%d target(s) missed\n", missed
    exit missed > 0 ? 1 : 0
}
