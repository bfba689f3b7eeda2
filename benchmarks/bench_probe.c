/*
 * Probes: the resident memory and the clock. (The limit each row is held
 * to is the measured reference of bench_ref.c, not a model.)
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

/*
 * Open MPI's own shared memory: its shared-memory transport's segments
 * (vader_segment in Open MPI 4, sm_segment in 5) and the files of its
 * session directory (ompi.*, PMIx's stores). The benchmarks' barriers and
 * agreed times run through them, and the transport's rings touch a page the
 * first time a message lands on it: a 4 kB step over a timed batch that an
 * smaps diff put in a vader segment, which is Open MPI's and not per op.
 */
static int bench_probe_is_mpi(const char *path)
{
    return strstr(path, "vader_segment") != NULL || strstr(path, "sm_segment") != NULL ||
           strstr(path, "/ompi.") != NULL || strstr(path, "pmix") != NULL;
}

long bench_probe_rss_kb(long *mpi_kb)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (f == NULL) {
        return -1;
    }
    char line[512];
    long own = 0;
    long mpi = 0;
    int in_mpi = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "Rss:", 4) == 0) {
            long kb = strtol(line + 4, NULL, 10);
            *(in_mpi ? &mpi : &own) += kb;
        } else {
            /* A mapping's first line: "start-end perms offset dev inode path"
               (lower-case hex; the fields' keys start upper-case). */
            size_t hex = strspn(line, "0123456789abcdef");
            if (hex > 0 && line[hex] == '-') {
                in_mpi = bench_probe_is_mpi(line);
            }
        }
    }
    fclose(f);
    if (mpi_kb != NULL) {
        *mpi_kb = mpi;
    }
    return own;
}
