/*
 * topo_cost: the bytes one collective moves across each level of a host,
 * counted from the schedule (hccl/src/topo/hccl_sched.c), not timed.
 *
 *   topo_cost -t TOPOLOGY -n RANKS [-b BYTES] [-r ROOT]
 *
 * TOPOLOGY is an hwloc synthetic description ("pack:2 numa:1 core:32 pu:1")
 * or an XML file hwloc exported (a path that exists); it is handed to hwloc
 * as HWLOC_SYNTHETIC or HWLOC_XMLFILE. RANKS ranks are packed one per core
 * (rank r on core r), the levels built as a communicator builds them
 * (hccl/src/topo/hccl_levels.c), and for AllReduce, AllGather,
 * ReduceScatter, Broadcast and Reduce of BYTES per rank (default 64 MiB;
 * AllGather's output, ReduceScatter's input) the flat schedule of today's
 * direct algorithms and the hierarchical one over the innermost level are
 * counted: a markdown table of the bytes per op crossing each level below
 * the host, and all bytes moved between ranks, each also as a multiple of
 * BYTES. Exit status 2 on bad arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo/hccl_topo.h"
#include "zccl/vmm_ext.h"

static int tc_usage(const char *msg)
{
    fprintf(stderr, "topo_cost: %s\nusage: topo_cost -t TOPOLOGY -n RANKS [-b BYTES] [-r ROOT]\n",
            msg);
    return 2;
}

static void tc_cell(uint64_t bytes, uint64_t s)
{
    printf(" %llu (%.2f S) |", (unsigned long long)bytes, (double)bytes / (double)s);
}

static void tc_table(const zh_levels_t *lv, uint64_t s, int root)
{
    static const int kinds[] = {ZH_OP_ALLREDUCE, ZH_OP_ALLGATHER, ZH_OP_REDUCESCATTER,
                                ZH_OP_BROADCAST, ZH_OP_REDUCE};
    static const char *const names[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast",
                                        "Reduce"};
    printf("| collective | schedule |");
    for (int i = 1; i < lv->n; i++) {
        printf(" across %s |", zh_level_kind_name(lv->level[i].kind));
    }
    printf(" all moved |\n|---|---|");
    for (int i = 1; i <= lv->n; i++) {
        printf("---|");
    }
    printf("\n");
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        for (int algo = ZH_SCHED_FLAT; algo <= ZH_SCHED_HIER; algo++) {
            uint64_t cross[ZH_KINDS + 1];
            if (zh_sched_cost(lv, algo, kinds[k], s, root, cross) != ZC_OK) {
                continue;
            }
            printf("| %s | %s |", names[k], algo == ZH_SCHED_FLAT ? "flat" : "hierarchical");
            for (int i = 1; i < lv->n; i++) {
                tc_cell(cross[i], s);
            }
            tc_cell(cross[ZH_KINDS], s);
            printf("\n");
        }
    }
}

int main(int argc, char **argv)
{
    const char *topo = NULL;
    long n = 0, root = 0;
    unsigned long long s = 64ull << 20;
    int opt;
    while ((opt = getopt(argc, argv, "t:n:b:r:")) != -1) {
        char *end = NULL;
        if (opt == 't') {
            topo = optarg;
        } else if (opt == 'n') {
            n = strtol(optarg, &end, 10);
        } else if (opt == 'b') {
            s = strtoull(optarg, &end, 10);
        } else if (opt == 'r') {
            root = strtol(optarg, &end, 10);
        } else {
            return tc_usage("unknown option");
        }
        if (end != NULL && (*end != '\0' || end == optarg)) {
            return tc_usage("-n, -b and -r take a number");
        }
    }
    if (topo == NULL || n < 1 || n > 65536 || s == 0 || root < 0 || root >= n) {
        return tc_usage("need -t, -n in 1..65536, -b > 0 and -r in 0..n-1");
    }
    setenv(access(topo, R_OK) == 0 ? "HWLOC_XMLFILE" : "HWLOC_SYNTHETIC", topo, 1);
    if (zccl_topo_cores() < n) {
        fprintf(stderr, "topo_cost: %s has %d cores, fewer than %ld ranks\n", topo,
                zccl_topo_cores(), n);
        return 2;
    }
    zh_boot_entry_t *t = calloc((size_t)n, sizeof(*t));
    zh_levels_t *lv = NULL;
    for (int r = 0; t != NULL && r < n; r++) {
        zccl_place_t p;
        if (zccl_topo_core_place(r, &p) != ZC_OK) {
            free(t);
            return 2;
        }
        t[r] = (zh_boot_entry_t){.pid = r + 1,
                                 .host_id = 1,
                                 .numa = p.numa,
                                 .package = p.package,
                                 .l3 = p.l3,
                                 .place_rule = p.rule};
    }
    if (t == NULL || zh_levels_build(t, (int)n, 0, &lv) != ZC_OK) {
        fprintf(stderr, "topo_cost: out of memory\n");
        free(t);
        return 1;
    }
    printf("%s, %ld ranks packed one per core, %llu bytes, root %ld; levels:", topo, n, s, root);
    for (int i = 0; i < lv->n; i++) {
        printf(" %s (%d groups)", zh_level_kind_name(lv->level[i].kind), lv->level[i].ngroups);
    }
    printf("\n\n");
    tc_table(lv, s, (int)root);
    zh_levels_free(lv);
    free(t);
    return 0;
}
