/*
 * Probes: the STREAM-like copy bandwidth that bounds every collective, the
 * resident set size, and the clock.
 *
 * The bound model. On one host a collective is a set of memory copies and
 * reductions, so it cannot finish faster than the memory system can move the
 * bytes it must touch. We measure B, the aggregate copy bandwidth of the
 * machine: every rank copies `bytes` with memcpy at the same time (a barrier
 * starts them together), the round lasts from the first start to the last
 * end, the best of
 * `reps` rounds is kept (as STREAM does), and B counts bytes read plus bytes
 * written: B = N * 2 * bytes / t. Each tool states the least traffic T(S, N)
 * one op of size S must cause over all ranks (AllReduce direct: every rank
 * reads its S input bytes once and writes its S output bytes once, T = 2*N*S).
 * The bound time is T / B, and the bound bus bandwidth is the busbw that time
 * would give: S / (T / B) * bus_factor(N). zccl's fraction of the bound is its
 * busbw over the bound's. memcpy is what user code gets for a plain copy on
 * this machine (it switches to non-temporal stores for large sizes, as zccl's
 * copies do), so the bound is an achievable one, not a datasheet figure.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bench_probe_copy_bw(MPI_Comm comm, size_t bytes, int reps)
{
    int nranks = 1;
    MPI_Comm_size(comm, &nranks);
    char *src = malloc(bytes);
    char *dst = malloc(bytes);
    int ok = src != NULL && dst != NULL;
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (!all_ok) {
        fprintf(stderr, "bench: copy probe could not allocate 2 x %zu bytes\n", bytes);
        free(src);
        free(dst);
        return 0.0;
    }
    /* Touch both arrays first so page faults are not timed. */
    memset(src, 1, bytes);
    memset(dst, 2, bytes);
    double best = 0.0;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(comm);
        /* The round runs from the first rank's start to the last rank's end
           (one clock for every process of the host): with more ranks than
           cores, ranks that copy one after the other are not counted as if
           they had copied together. */
        double span[2] = {-bench_now(), 0.0};
        memcpy(dst, src, bytes);
        span[1] = bench_now();
        double all[2] = {0.0, 0.0};
        MPI_Allreduce(span, all, 2, MPI_DOUBLE, MPI_MAX, comm);
        double t = all[1] + all[0]; /* max(end) - min(start) */
        double bw = t > 0.0 ? (double)nranks * 2.0 * (double)bytes / t : 0.0;
        if (bw > best) {
            best = bw;
        }
        /* Swap the roles so every round reads what the last one wrote. */
        char *tmp = src;
        src = dst;
        dst = tmp;
    }
    free(src);
    free(dst);
    return best;
}

long bench_probe_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) {
        return -1;
    }
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = strtol(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}
