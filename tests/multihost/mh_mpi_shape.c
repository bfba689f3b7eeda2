/*
 * The mpirun shape across namespace "hosts", with nothing of zccl: every rank
 * names its host (its UTS namespace's hostname) and network namespace, then
 * MPI_Allreduce of 1 M int64 (so btl tcp carries megabytes, not one packet)
 * and of the per-host rank counts must give the exact sums. Rank 0 prints
 * the layout it saw; argv[1], if given, is the layout it must see, e.g.
 * "2,2" (ranks per host, in host order).
 */
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MH_COUNT (1 << 20)
#define MH_NAME 64

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    int n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    char me[MH_NAME] = {0};
    gethostname(me, sizeof(me) - 1);
    char *all = calloc((size_t)n, MH_NAME);
    int64_t *v = malloc(MH_COUNT * sizeof(*v));
    int64_t *sum = malloc(MH_COUNT * sizeof(*sum));
    if (all == NULL || v == NULL || sum == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Allgather(me, MH_NAME, MPI_CHAR, all, MH_NAME, MPI_CHAR, MPI_COMM_WORLD);
    for (int64_t i = 0; i < MH_COUNT; i++) {
        v[i] = i * (rank + 1) + rank;
    }
    MPI_Allreduce(v, sum, MH_COUNT, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    int64_t tri = (int64_t)n * (n + 1) / 2;
    int64_t base = (int64_t)n * (n - 1) / 2;
    int bad = 0;
    for (int64_t i = 0; i < MH_COUNT; i++) {
        if (sum[i] != i * tri + base) {
            if (bad++ < 3) {
                fprintf(stderr, "rank %d: element %" PRId64 ": %" PRId64 " != %" PRId64 "\n", rank,
                        i, sum[i], i * tri + base);
            }
        }
    }
    int tot = 0;
    MPI_Allreduce(&bad, &tot, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        /* Ranks per distinct host name, hosts in the order of their first rank. */
        char layout[256] = "";
        int hosts = 0;
        for (int r = 0; r < n; r++) {
            int first = 1;
            for (int q = 0; q < r; q++) {
                first &= strcmp(all + (size_t)q * MH_NAME, all + (size_t)r * MH_NAME) != 0;
            }
            if (!first) {
                continue;
            }
            int cnt = 0;
            for (int q = 0; q < n; q++) {
                cnt += strcmp(all + (size_t)q * MH_NAME, all + (size_t)r * MH_NAME) == 0;
            }
            printf("host %s: %d ranks\n", all + (size_t)r * MH_NAME, cnt);
            size_t l = strlen(layout);
            snprintf(layout + l, sizeof(layout) - l, "%s%d", hosts++ ? "," : "", cnt);
        }
        printf("layout %s, allreduce of %d int64 over %d ranks: %s\n", layout, MH_COUNT, n,
               tot == 0 ? "exact" : "WRONG");
        if (argc > 1 && strcmp(argv[1], layout) != 0) {
            printf("layout %s, wanted %s\n", layout, argv[1]);
            tot++;
        }
    }
    MPI_Bcast(&tot, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(all);
    free(v);
    free(sum);
    MPI_Finalize();
    return tot == 0 ? 0 : 1;
}
