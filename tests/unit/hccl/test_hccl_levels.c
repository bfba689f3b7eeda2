/*
 * Levels from hwloc (hccl/src/topo/hccl_levels.c, compiled in; places from
 * vmm/src/core/vmm_topo.c) on topologies that are not this machine's: HWLOC_SYNTHETIC "pack:2
 * numa:2 core:2 pu:1" (2 packages x 2 NUMA nodes x 2 cores), "pack:2 numa:4 core:16 pu:1" (2 x 4 x
 * 16), "[numa] pack:2 [numa] [numa] core:2 pu:1" (memory-only nodes beside
 * the packages' own), and an XML topology exported by lstopo from "pack:2
 * numa:1 l3:2 core:2 pu:1" (unit/hccl/topo/pack2_l3x2.xml: two L3 groups
 * per NUMA node).
 *
 * hwloc loads a topology once per process, so each topology runs in a
 * forked child that sets the variable first. A synthetic topology's CPUs
 * are not this machine's: ranks are placed as if bound to a core
 * (zccl_topo_core_place) or to a CPU list (zccl_topo_set_binding, the test
 * hook), and the bootstrap table the levels are built from is made here.
 * Checked: the levels (kinds, groups, members, indices) for ranks packed
 * one per core, round-robin over the NUMA nodes, and on one node (flat:
 * just the host level); an unbound rank placed by its device's node (the
 * memory rule needs this machine's topology: a child on it checks that
 * rule with a binding outside every node); bad input; and the bytes the
 * flat and hierarchical schedules move across each level (coll_hier_cost,
 * the algorithm over the innermost level, counted across each level).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/hccl_levels.c"
#include "zccl/vmm_ext.h"
#include "zt_fork.h"

#define TL_MAX 256

/* A table of n ranks on one host, rank r placed on core core_of(r). */
static int tl_table(zh_boot_entry_t *t, int n, int (*core_of)(int r))
{
    for (int r = 0; r < n; r++) {
        zccl_place_t p;
        if (zccl_topo_core_place(core_of(r), &p) != ZC_OK) {
            return -1;
        }
        t[r] = (zh_boot_entry_t){.pid = r + 1,
                                 .host_id = 42,
                                 .numa = p.numa,
                                 .package = p.package,
                                 .l3 = p.l3,
                                 .place_rule = p.rule};
    }
    return 0;
}

/* Does level lv have kind `kind` and the groups `want` ("0-3|4-7": groups
 * by '|', members as ranges), with me's group and index right? */
static int tl_level_is(const zh_level_t *lv, int kind, const char *want, int me)
{
    char buf[512];
    size_t at = 0;
    for (int g = 0; g < lv->ngroups; g++) {
        at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s", g > 0 ? "|" : "");
        zh_level_group_str(lv, g, buf, sizeof(buf), &at);
    }
    if (lv->kind != kind || strcmp(buf, want) != 0) {
        fprintf(stderr, "level %s: groups %s, want %s %s\n", zh_level_kind_name(lv->kind), buf,
                zh_level_kind_name(kind), want);
        return 0;
    }
    int g = lv->group;
    return lv->group_of[me] == g && zh_level_member(lv, g, lv->index_of[me]) == me;
}

static int tl_packed(int r)
{
    return r;
}
static int tl_rr4(int r) /* round-robin over 4 NUMA nodes of 2 cores */
{
    return (r % 4) * 2 + r / 4;
}
static int tl_rr8(int r) /* round-robin over 8 NUMA nodes of 16 cores */
{
    return (r % 8) * 16 + r / 8;
}

/* Build the levels of n ranks placed by core_of, as rank me. */
static zh_levels_t *tl_build(int n, int (*core_of)(int), int me)
{
    static zh_boot_entry_t t[TL_MAX];
    zh_levels_t *lv = NULL;
    if (tl_table(t, n, core_of) != 0 || zh_levels_build(t, n, me, &lv) != ZC_OK) {
        return NULL;
    }
    return lv;
}

/* ---- 2 packages x 2 NUMA nodes x 2 cores ---------------------------------------------- */

static int tl_kid_2x2x2(int sock, void *arg)
{
    (void)sock;
    (void)arg;
    zccl_place_t p;
    ZT_KCHECK(zccl_topo_cores() == 8);
    ZT_KCHECK(zccl_topo_core_place(5, &p) == ZC_OK);
    ZT_KCHECK(p.numa == 2 && p.package == 1 && p.l3 == -1 && p.rule == ZCCL_PLACE_BOUND);
    ZT_KCHECK(zccl_topo_core_place(8, &p) == ZC_ERR_INVAL);
    ZT_KCHECK(zccl_topo_core_place(-1, &p) == ZC_ERR_INVAL);

    zh_levels_t *lv = tl_build(8, tl_packed, 5); /* packed, one rank per core */
    ZT_KCHECK(lv != NULL && lv->n == 3);
    ZT_KCHECK(tl_level_is(&lv->level[0], ZH_KIND_HOST, "0-7", 5));
    ZT_KCHECK(tl_level_is(&lv->level[1], ZH_KIND_PACKAGE, "0-3|4-7", 5));
    ZT_KCHECK(tl_level_is(&lv->level[2], ZH_KIND_NUMA, "0-1|2-3|4-5|6-7", 5));
    ZT_KCHECK(lv->level[2].group == 2 && lv->level[2].index_of[5] == 1);
    ZT_KCHECK(zh_levels_find(lv, ZH_KIND_L3) == NULL);
    zh_levels_free(lv);

    lv = tl_build(8, tl_rr4, 6); /* round-robin over the nodes */
    ZT_KCHECK(lv != NULL && lv->n == 3);
    ZT_KCHECK(tl_level_is(&lv->level[1], ZH_KIND_PACKAGE, "0-1,4-5|2-3,6-7", 6));
    ZT_KCHECK(tl_level_is(&lv->level[2], ZH_KIND_NUMA, "0,4|1,5|2,6|3,7", 6));
    ZT_KCHECK(lv->level[1].index_of[6] == 2 && lv->level[2].group == 2);
    zh_levels_free(lv);

    lv = tl_build(4, tl_packed, 3); /* one package: its level is dropped */
    ZT_KCHECK(lv != NULL && lv->n == 2);
    ZT_KCHECK(tl_level_is(&lv->level[1], ZH_KIND_NUMA, "0-1|2-3", 3));
    zh_levels_free(lv);

    lv = tl_build(2, tl_packed, 0); /* one node: flat */
    ZT_KCHECK(lv != NULL && lv->n == 1);
    ZT_KCHECK(tl_level_is(&lv->level[0], ZH_KIND_HOST, "0-1", 0));
    zh_levels_free(lv);

    /* Bound by the hook within one node; unbound (all CPUs): by the device. */
    ZT_KCHECK(zccl_topo_set_binding("2-3") == ZC_OK);
    ZT_KCHECK(zccl_topo_place(NULL, 0, 0, &p) == ZC_OK);
    ZT_KCHECK(p.numa == 1 && p.package == 0 && p.rule == ZCCL_PLACE_BOUND);
    ZT_KCHECK(zccl_topo_set_binding("0-7") == ZC_OK);
    ZT_KCHECK(zccl_topo_place(&p, sizeof(p), 3, &p) == ZC_OK);
    ZT_KCHECK(p.numa == 3 && p.package == 1 && p.rule == ZCCL_PLACE_DEVICE);
    ZT_KCHECK(zccl_topo_place(&p, sizeof(p), 6, &p) == ZC_OK); /* 6 mod 4 nodes */
    ZT_KCHECK(p.numa == 2 && p.package == 1 && p.rule == ZCCL_PLACE_DEVICE);
    ZT_KCHECK(zccl_topo_place(NULL, 0, -1, &p) == ZC_OK);
    ZT_KCHECK(p.numa == -1 && p.package == -1 && p.rule == ZCCL_PLACE_NONE);
    ZT_KCHECK(zccl_topo_set_binding(NULL) == ZC_OK); /* no binding known here: device */
    ZT_KCHECK(zccl_topo_place(NULL, 0, 1, &p) == ZC_OK);
    ZT_KCHECK(p.numa == 1 && p.rule == ZCCL_PLACE_DEVICE);
    ZT_KCHECK(zccl_topo_set_binding("x") == ZC_ERR_INVAL);
    ZT_KCHECK(zccl_topo_set_binding("") == ZC_ERR_INVAL);
    return 0;
}

/* ---- 2 packages x 4 NUMA nodes x 16 cores --------------------------------------------- */

static int tl_kid_2x4x16(int sock, void *arg)
{
    (void)sock;
    (void)arg;
    ZT_KCHECK(zccl_topo_cores() == 128);
    zh_levels_t *lv = tl_build(128, tl_packed, 77);
    ZT_KCHECK(lv != NULL && lv->n == 3);
    ZT_KCHECK(tl_level_is(&lv->level[1], ZH_KIND_PACKAGE, "0-63|64-127", 77));
    ZT_KCHECK(tl_level_is(&lv->level[2], ZH_KIND_NUMA,
                          "0-15|16-31|32-47|48-63|64-79|80-95|96-111|112-127", 77));
    ZT_KCHECK(lv->level[2].group == 4 && lv->level[2].index_of[77] == 13);
    zh_levels_free(lv);

    lv = tl_build(64, tl_packed, 0); /* one package */
    ZT_KCHECK(lv != NULL && lv->n == 2 && lv->level[1].kind == ZH_KIND_NUMA);
    ZT_KCHECK(lv->level[1].ngroups == 4);
    zh_levels_free(lv);

    lv = tl_build(16, tl_rr8, 9); /* one rank per node, then again */
    ZT_KCHECK(lv != NULL && lv->n == 3);
    ZT_KCHECK(tl_level_is(&lv->level[1], ZH_KIND_PACKAGE, "0-3,8-11|4-7,12-15", 9));
    ZT_KCHECK(tl_level_is(&lv->level[2], ZH_KIND_NUMA, "0,8|1,9|2,10|3,11|4,12|5,13|6,14|7,15", 9));
    ZT_KCHECK(lv->level[2].index_of[9] == 1);
    zh_levels_free(lv);

    lv = tl_build(16, tl_packed, 15); /* one node */
    ZT_KCHECK(lv != NULL && lv->n == 1);
    zh_levels_free(lv);
    return 0;
}

/* ---- XML: 2 packages, one NUMA node each, 2 L3 groups per node ------------------------ */

static int tl_kid_xml(int sock, void *arg)
{
    (void)sock;
    (void)arg;
    zccl_place_t p;
    ZT_KCHECK(zccl_topo_cores() == 8);
    ZT_KCHECK(zccl_topo_core_place(6, &p) == ZC_OK);
    ZT_KCHECK(p.numa == 1 && p.package == 1 && p.l3 == 3);
    zh_levels_t *lv = tl_build(8, tl_packed, 2);
    ZT_KCHECK(lv != NULL && lv->n == 3); /* the NUMA level is the package's: dropped */
    ZT_KCHECK(tl_level_is(&lv->level[1], ZH_KIND_PACKAGE, "0-3|4-7", 2));
    ZT_KCHECK(tl_level_is(&lv->level[2], ZH_KIND_L3, "0-1|2-3|4-5|6-7", 2));
    zh_levels_free(lv);
    lv = tl_build(4, tl_packed, 0); /* one node, split by its L3 groups */
    ZT_KCHECK(lv != NULL && lv->n == 2);
    ZT_KCHECK(tl_level_is(&lv->level[1], ZH_KIND_L3, "0-1|2-3", 0));
    zh_levels_free(lv);
    ZT_KCHECK(zccl_topo_set_binding("4-5") == ZC_OK);
    ZT_KCHECK(zccl_topo_place(NULL, 0, 0, &p) == ZC_OK);
    ZT_KCHECK(p.numa == 1 && p.package == 1 && p.l3 == 2 && p.rule == ZCCL_PLACE_BOUND);
    ZT_KCHECK(zccl_topo_set_binding("2-5") == ZC_OK); /* two nodes: by the device */
    ZT_KCHECK(zccl_topo_place(NULL, 0, 0, &p) == ZC_OK);
    ZT_KCHECK(p.numa == 0 && p.l3 == -1 && p.rule == ZCCL_PLACE_DEVICE);
    return 0;
}

/* ---- bytes across each level ---------------------------------------------------------- */

/* Bytes (read + written) of kind's flat and hierarchical schedules, the
 * algorithm over the innermost level, counted across level `at`. */
static int tl_cross(const zh_levels_t *lv, int at, int kind, int root, size_t count, uint64_t *flat,
                    uint64_t *hier)
{
    coll_groups_t algo = zh_level_groups(&lv->level[lv->n - 1]);
    coll_groups_t across = zh_level_groups(&lv->level[at]);
    coll_hier_cost_t c;
    int st = coll_hier_cost(kind, &algo, &across, root, count, COLL_UINT8, &c);
    *flat = c.flat.read + c.flat.written;
    *hier = c.hier.read + c.hier.written;
    return st;
}

/* Per-level counting (what benchmarks/topo_cost prints) on 2 packages x 2
 * nodes x 2 cores, the algorithm over the 4 nodes: each level's crossing
 * as the figures of coll_hier.h's schedules give it. */
static int tl_kid_cost(int sock, void *arg)
{
    (void)sock;
    (void)arg;
    const uint64_t s = 8 << 10;
    uint64_t f[3], h[3];
    zh_levels_t *lv = tl_build(8, tl_packed, 0); /* host, package, numa */
    ZT_KCHECK(lv != NULL && lv->n == 3);
    for (int i = 0; i < 3; i++) {
        ZT_KCHECK(tl_cross(lv, i, COLL_HIER_ALLREDUCE, 0, s, &f[i], &h[i]) == ZC_OK);
    }
    /* AllReduce: flat 2·S/n per pair, 4 others in the other package, 6 on
     * other nodes; hierarchical 2·S·(nodes - 1) across nodes. */
    ZT_KCHECK(f[0] == 0 && f[1] == 8 * s && f[2] == 12 * s);
    ZT_KCHECK(h[0] == 0 && h[1] == 4 * s && h[2] == 6 * s);
    for (int i = 1; i < 3; i++) { /* Broadcast from 0 */
        ZT_KCHECK(tl_cross(lv, i, COLL_HIER_BROADCAST, 0, s, &f[i], &h[i]) == ZC_OK);
    }
    ZT_KCHECK(f[1] == 4 * s && f[2] == 6 * s && h[1] == 2 * s && h[2] == 3 * s);
    for (int i = 1; i < 3; i++) { /* AllGather: S/n per rank, S gathered */
        ZT_KCHECK(tl_cross(lv, i, COLL_HIER_ALLGATHER, 0, s / 8, &f[i], &h[i]) == ZC_OK);
    }
    ZT_KCHECK(f[1] == 4 * s && f[2] == 6 * s && h[1] == 2 * s && h[2] == 3 * s);
    zh_levels_free(lv);
    return 0;
}

/* ---- memory-only nodes ---------------------------------------------------------------- */

/* "[numa] pack:2 [numa] [numa] core:2": a node under the machine (CXL-like)
 * and two per package (DDR and HBM-like), all with their parent's CPUs. A
 * core's node is its package's first; ranks on both packages split by
 * package, and the NUMA level (the same groups) is dropped. */
static int tl_kid_memnodes(int sock, void *arg)
{
    (void)sock;
    (void)arg;
    zccl_place_t p;
    ZT_KCHECK(zccl_topo_core_place(1, &p) == ZC_OK);
    ZT_KCHECK(p.numa == 0 && p.package == 0 && p.rule == ZCCL_PLACE_BOUND);
    ZT_KCHECK(zccl_topo_core_place(2, &p) == ZC_OK);
    ZT_KCHECK(p.numa == 2 && p.package == 1);
    zh_levels_t *lv = tl_build(4, tl_packed, 0);
    ZT_KCHECK(lv != NULL && lv->n == 2);
    ZT_KCHECK(tl_level_is(&lv->level[1], ZH_KIND_PACKAGE, "0-1|2-3", 0));
    zh_levels_free(lv);
    /* A binding over both packages lies in no one node: the memory rule. */
    static char page[1 << 16];
    memset(page, 1, sizeof(page));
    ZT_KCHECK(zccl_topo_set_binding("1-2") == ZC_OK);
    ZT_KCHECK(zccl_topo_place(page, sizeof(page), 0, &p) == ZC_OK);
    ZT_KCHECK(p.rule != ZCCL_PLACE_BOUND);
    return 0;
}

/* ---- this machine's topology: the memory rule ----------------------------------------- */

/* A binding with no CPU of any node (CPU 4000, which no test machine has)
 * leaves the rank to the memory rule: the node its touched pages lie on. */
static int tl_kid_memory(int sock, void *arg)
{
    (void)sock;
    (void)arg;
    static char page[1 << 16];
    zccl_place_t p;
    memset(page, 1, sizeof(page));
    ZT_KCHECK(zccl_topo_cores() > 0);
    ZT_KCHECK(zccl_topo_set_binding("4000") == ZC_OK);
    ZT_KCHECK(zccl_topo_place(page, sizeof(page), 0, &p) == ZC_OK);
    ZT_KCHECK(p.rule == ZCCL_PLACE_MEMORY && p.numa >= 0 && p.package >= 0);
    ZT_KCHECK(zccl_topo_place(NULL, 0, 0, &p) == ZC_OK); /* no memory named: the device */
    ZT_KCHECK(p.rule == ZCCL_PLACE_DEVICE && p.numa == 0);
    ZT_KCHECK(zccl_topo_set_binding(NULL) == ZC_OK); /* the real binding: one node or more */
    ZT_KCHECK(zccl_topo_place(page, sizeof(page), 0, &p) == ZC_OK);
    ZT_KCHECK(p.rule == ZCCL_PLACE_BOUND || p.rule == ZCCL_PLACE_MEMORY);
    return 0;
}

/* Run kid with HWLOC_SYNTHETIC or HWLOC_XMLFILE set to `topo` (only in the kid). */
static void tl_run(const char *var, const char *topo, zt_kid_fn kid)
{
    setenv(var, topo, 1);
    zt_kid_t k = zt_kid_start(kid, NULL);
    unsetenv(var);
    assert_int_equal(zt_kid_wait(k), 0);
}

static void test_levels_2x2x2(void **state)
{
    (void)state;
    tl_run("HWLOC_SYNTHETIC", "pack:2 numa:2 core:2 pu:1", tl_kid_2x2x2);
}

static void test_levels_2x4x16(void **state)
{
    (void)state;
    tl_run("HWLOC_SYNTHETIC", "pack:2 numa:4 core:16 pu:1", tl_kid_2x4x16);
}

static void test_levels_xml(void **state)
{
    (void)state;
    tl_run("HWLOC_XMLFILE", ZT_TOPO_DIR "/pack2_l3x2.xml", tl_kid_xml);
}

static void test_levels_memory_nodes(void **state)
{
    (void)state;
    tl_run("HWLOC_SYNTHETIC", "[numa] pack:2 [numa] [numa] core:2 pu:1", tl_kid_memnodes);
}

static void test_place_memory(void **state)
{
    (void)state;
    zt_kid_t k = zt_kid_start(tl_kid_memory, NULL);
    assert_int_equal(zt_kid_wait(k), 0);
}

static void test_sched_cost(void **state)
{
    (void)state;
    tl_run("HWLOC_SYNTHETIC", "pack:2 numa:2 core:2 pu:1", tl_kid_cost);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_2x2x2), cmocka_unit_test(test_levels_2x4x16),
        cmocka_unit_test(test_levels_xml),   cmocka_unit_test(test_levels_memory_nodes),
        cmocka_unit_test(test_place_memory), cmocka_unit_test(test_sched_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
