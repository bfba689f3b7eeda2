/*
 * topo_cost: the bytes one collective moves across each level of a host,
 * counted from the schedule by coll_hier_cost (the algorithms' own code
 * run in counting mode, collectives/include/coll/coll_hier.h), not timed.
 *
 *   topo_cost -t TOPOLOGY -n RANKS [-b BYTES] [-r ROOT]
 *
 * TOPOLOGY is an hwloc synthetic description ("pack:2 numa:1 core:32 pu:1")
 * or an XML file hwloc exported (a path that exists); it is handed to hwloc
 * as HWLOC_SYNTHETIC or HWLOC_XMLFILE. RANKS ranks are packed one per core
 * (rank r on core r), the levels built as a communicator builds them
 * (hccl/src/topo/hccl_levels.c), and for AllReduce, AllGather,
 * ReduceScatter, Broadcast and Reduce of BYTES per rank (default 64 MiB;
 * AllGather's output, ReduceScatter's input; counted as 1-byte elements)
 * the flat direct algorithms and the hierarchical ones over the innermost
 * level are counted: a markdown table of the bytes per op crossing each
 * level below the host, and all bytes moved between ranks (counted across
 * one-rank groups), each also as a multiple of BYTES. With only the host
 * level there is no hierarchy: the flat rows alone. Exit status 2 on bad
 * arguments, 1 when counting fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll/coll_hier.h"
#include "topo/hccl_topo.h"
#include "zccl/vmm_ext.h"

static int tc_usage(const char *msg)
{
    fprintf(stderr, "topo_cost: %s\nusage: topo_cost -t TOPOLOGY -n RANKS [-b BYTES] [-r ROOT]\n",
            msg);
    return 2;
}

static void tc_cell(const coll_cross_t *c, uint64_t s)
{
    uint64_t bytes = c->read + c->written;
    printf(" %llu (%.2f S) |", (unsigned long long)bytes, (double)bytes / (double)s);
}

/* One group per rank: counted across it, every byte moved between ranks.
 * One allocation (free it): ranks 0..n-1 (group_of and members), first
 * 0..n, then n zeros (index_of). */
static int *tc_singles(int n, coll_groups_t *g)
{
    int *a = calloc((size_t)n * 3 + 1, sizeof(*a));
    if (a == NULL) {
        return NULL;
    }
    for (int r = 0; r <= 2 * n; r++) {
        a[r] = r < n ? r : r - n;
    }
    *g = (coll_groups_t){n, a, a + 2 * n + 1, a + n, a};
    return a;
}

/* The rows of collective kind: flat, and hierarchical over the innermost
 * level when there is one below the host. 0, or -1 when counting failed. */
static int tc_rows(const zh_levels_t *lv, const coll_groups_t *all, int kind, uint64_t s, int root)
{
    static const char *const names[COLL_HIER_KINDS] = {"AllReduce", "AllGather", "ReduceScatter",
                                                       "Broadcast", "Reduce"};
    coll_groups_t algo = zh_level_groups(&lv->level[lv->n - 1]);
    size_t count = kind == COLL_HIER_ALLGATHER || kind == COLL_HIER_REDUCESCATTER
                       ? (size_t)(s / (uint64_t)lv->nranks)
                       : (size_t)s;
    coll_hier_cost_t c[ZH_KINDS + 1];
    for (int i = 1; i <= lv->n; i++) {
        coll_groups_t across = i < lv->n ? zh_level_groups(&lv->level[i]) : *all;
        if (coll_hier_cost(kind, &algo, &across, root, count, COLL_UINT8, &c[i]) != ZC_OK) {
            return -1;
        }
    }
    for (int hier = 0; hier <= (lv->n > 1); hier++) {
        printf("| %s | %s |", names[kind], hier ? "hierarchical" : "flat");
        for (int i = 1; i <= lv->n; i++) {
            tc_cell(hier ? &c[i].hier : &c[i].flat, s);
        }
        printf("\n");
    }
    return 0;
}

static int tc_table(const zh_levels_t *lv, uint64_t s, int root)
{
    coll_groups_t all;
    int *singles = tc_singles(lv->nranks, &all);
    if (singles == NULL) {
        return -1;
    }
    printf("| collective | schedule |");
    for (int i = 1; i < lv->n; i++) {
        printf(" across %s |", zh_level_kind_name(lv->level[i].kind));
    }
    printf(" all moved |\n|---|---|");
    for (int i = 1; i <= lv->n; i++) {
        printf("---|");
    }
    printf("\n");
    int st = 0;
    for (int k = 0; k < COLL_HIER_KINDS && st == 0; k++) {
        st = tc_rows(lv, &all, k, s, root);
    }
    free(singles);
    return st;
}

/* The levels of n ranks packed one per core of the loaded topology;
 * 0, or 1 / 2 after a line on stderr. */
static int tc_levels(long n, zh_levels_t **lv)
{
    zh_boot_entry_t *t = calloc((size_t)n, sizeof(*t));
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
    int st = t == NULL || zh_levels_build(t, (int)n, 0, lv) != ZC_OK;
    if (st != 0) {
        fprintf(stderr, "topo_cost: out of memory\n");
    }
    free(t);
    return st;
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
    zh_levels_t *lv = NULL;
    int st = tc_levels(n, &lv);
    if (st != 0) {
        return st;
    }
    printf("%s, %ld ranks packed one per core, %llu bytes, root %ld; levels:", topo, n, s, root);
    for (int i = 0; i < lv->n; i++) {
        printf(" %s (%d groups)", zh_level_kind_name(lv->level[i].kind), lv->level[i].ngroups);
    }
    printf("\n\n");
    st = tc_table(lv, s, (int)root);
    zh_levels_free(lv);
    if (st != 0) {
        fprintf(stderr, "topo_cost: counting failed\n");
        return 1;
    }
    return 0;
}
