/*
 * The hierarchical collectives on real communicators of forked ranks, each
 * taken as bound to one core of a synthetic or XML topology by the test hook
 * (zccl_topo_set_binding: those CPUs are not this machine's):
 *   - 2 x 2 x 2 ("pack:2 numa:2 core:2"), 4 ranks on 2 NUMA nodes of one
 *     package (levels {host, NUMA}) or on 2 packages ({host, package});
 *   - 2 x 4 x 16, 8 ranks in uneven NUMA groups over both packages;
 *   - the XML topology of test_hccl_levels (an L3 split below each node),
 *     grouped by package;
 * run AllReduce, ReduceScatter and Reduce in every reducible dtype (the 12
 * integer and float types) with SUM, PROD, MAX and MIN, and AllGather and
 * Broadcast in each dtype, 256 KiB per rank (coll_hier_worth's threshold)
 * on activated memory, twice. Inputs are zt_check's exact patterns, so
 * every result is checked bit for bit against its serial reference; each op's
 * checksum must match across ranks (for the results every rank holds
 * alike) and across the two runs; every op must have run hierarchically
 * (zccl_comm_hier_ops). On one node, with ZCCL_HIER=off, and with
 * ZCCL_HIER=off on one rank only (agreed at init), the same ops run flat:
 * the counter stays 0 on every rank.
 * Nothing of the library runs in this parent process: ranks are forked first.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hccl_test_api.h"
#include "zccl/vmm_ext.h"
#include "zt_check.h"
#include "zt_launch.h"

#define TH_BYTES ((size_t)256 << 10) /* per rank and op: coll_hier_worth's threshold */
/* Kinds: 0 AllReduce, 1 AllGather, 2 ReduceScatter, 3 Broadcast, 4 Reduce. */
#define TH_DTYPES 12
#define TH_REDOPS 4
/* Ops of one matrix: 3 reducing kinds x 4 ops, 2 copying kinds, per dtype. */
#define TH_OPS (TH_DTYPES * (3 * TH_REDOPS + 2))
#define TH_BCAST_ROOT 2
#define TH_REDUCE_ROOT 3

#define TH_MAX 8 /* ranks of a case, at most */

typedef struct {
    const char *var;  /* HWLOC_SYNTHETIC or HWLOC_XMLFILE */
    const char *topo; /* its value */
    int n;            /* ranks */
    int core[TH_MAX]; /* rank r's core (the test hook's binding) */
    int hier;         /* 1: every op must run hierarchically, 0: none may */
    int off_rank;     /* this rank alone sets ZCCL_HIER=off; -1: none */
} th_case_t;

static int th_n; /* the ranks of the case this process runs (set in th_rank) */

static const HcclDataType th_dtypes[TH_DTYPES] = {
    HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_UINT8, HCCL_DATA_TYPE_INT16,  HCCL_DATA_TYPE_UINT16,
    HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_BFP16, HCCL_DATA_TYPE_INT32,  HCCL_DATA_TYPE_UINT32,
    HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_INT64, HCCL_DATA_TYPE_UINT64, HCCL_DATA_TYPE_FP64};
static const HcclReduceOp th_redops[TH_REDOPS] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD,
                                                  HCCL_REDUCE_MAX, HCCL_REDUCE_MIN};

/* One op of the matrix: kind k (0..4 as above), dtype, op (ZT_OP_NONE for
 * the copies), count elements per rank (TH_BYTES of them). */
typedef struct {
    int k;
    int dtype;
    int op;
    size_t count;
    size_t esize;
} th_op_t;

/* Holds every rank its result alike (AllReduce, AllGather, Broadcast)? */
static int th_alike(int k)
{
    return k == 0 || k == 1 || k == 3;
}

static HcclResult th_call(zt_env_t *env, const th_op_t *o, void *in, void *out)
{
    HcclDataType dt = (HcclDataType)o->dtype;
    HcclReduceOp op = (HcclReduceOp)o->op;
    switch (o->k) {
    case 0:
        return HcclAllReduce(in, out, o->count, dt, op, env->comm, env->stream);
    case 1:
        return HcclAllGather(in, out, o->count, dt, env->comm, env->stream);
    case 2:
        return HcclReduceScatter(in, out, o->count, dt, op, env->comm, env->stream);
    case 3:
        return HcclBroadcast(in, o->count, dt, TH_BCAST_ROOT, env->comm, env->stream);
    default:
        return HcclReduce(in, out, o->count, dt, op, TH_REDUCE_ROOT, env->comm, env->stream);
    }
}

static uint32_t th_sum(const unsigned char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 16777619u;
    }
    return h;
}

/* What this rank must hold after o, into want (out_count elements), from
 * every rank's input rebuilt here (zt_fill; ins: th_n buffers of count
 * elements); 0, or 1 when this rank holds nothing to check (Reduce off
 * the root). */
static int th_expect(const th_op_t *o, const zt_pat_t *pat, int rank, void **ins, void *want)
{
    size_t first = o->k == 2 ? (size_t)rank * o->count : 0; /* my slice of each input */
    switch (o->k) {
    case 1:
        for (int r = 0; r < th_n; r++) {
            zt_fill((char *)want + (size_t)r * o->count * o->esize, 0, o->count, pat, r);
        }
        return 0;
    case 3:
        zt_fill(want, 0, o->count, pat, TH_BCAST_ROOT);
        return 0;
    case 4:
        if (rank != TH_REDUCE_ROOT) {
            return 1;
        }
        break;
    default:
        break;
    }
    for (int r = 0; r < th_n; r++) {
        zt_fill(ins[r], first, o->count, pat, r);
    }
    return zt_ref_reduce(want, (const void *const *)ins, th_n, o->count, o->dtype, o->op) != 0;
}

/* One op: fill, run, check every element (want, ins: scratch); its
 * output's checksum in *sum. */
static int th_one(zt_env_t *env, const th_op_t *o, void *want, void **ins, uint32_t *sum)
{
    zt_pat_t pat = {o->dtype, o->op, ZT_FILL_EXACT, th_n, 0x5eed + (uint64_t)o->k};
    unsigned char *in = env->zc.va;
    unsigned char *out = in + env->zc.block;
    size_t out_count = o->k == 1 ? (size_t)th_n * o->count : o->count;
    zt_fill(in, 0, o->k == 2 ? (size_t)th_n * o->count : o->count, &pat, env->rank);
    memset(out, 0xee, out_count * o->esize);
    void *res = o->k == 3 ? (void *)in : (void *)out;
    if (th_call(env, o, in, out) != HCCL_SUCCESS ||
        aclrtSynchronizeStream(env->stream) != ACL_SUCCESS) {
        fprintf(stderr, "rank %d: kind %d %s %s failed\n", env->rank, o->k, zt_dtype_name(o->dtype),
                zt_op_name(o->op));
        return 1;
    }
    char what[64];
    snprintf(what, sizeof(what), "rank %d kind %d %s %s", env->rank, o->k, zt_dtype_name(o->dtype),
             zt_op_name(o->op));
    if (th_expect(o, &pat, env->rank, ins, want) == 0 &&
        zt_compare(what, res, want, out_count, o->dtype) != 0) {
        return 1;
    }
    *sum = th_sum(res, out_count * o->esize);
    return 0;
}

/* The matrix's op number i. */
static th_op_t th_op_at(int i)
{
    int per = 3 * TH_REDOPS + 2;
    int d = i / per, j = i % per;
    static const int copy_kinds[2] = {1, 3}, reduce_kinds[3] = {0, 2, 4};
    th_op_t o = {.dtype = th_dtypes[d], .esize = zt_dtype_size(th_dtypes[d])};
    if (j < 2) {
        o.k = copy_kinds[j];
        o.op = ZT_OP_NONE;
    } else {
        o.k = reduce_kinds[(j - 2) / TH_REDOPS];
        o.op = th_redops[(j - 2) % TH_REDOPS];
    }
    o.count = TH_BYTES / o.esize;
    return o;
}

/* Every op of the matrix once; sums[op] its output's checksum. */
static int th_matrix(zt_env_t *env, uint32_t *sums)
{
    void *want = malloc((size_t)th_n * TH_BYTES);
    void *ins[TH_MAX] = {NULL};
    int bad = want == NULL;
    for (int r = 0; r < th_n; r++) {
        ins[r] = malloc(TH_BYTES);
        bad |= ins[r] == NULL;
    }
    for (int i = 0; i < TH_OPS && !bad; i++) {
        th_op_t o = th_op_at(i);
        bad = th_one(env, &o, want, ins, &sums[i]);
    }
    for (int r = 0; r < th_n; r++) {
        free(ins[r]);
    }
    free(want);
    return bad;
}

/* The checksums of results every rank holds alike (all but ReduceScatter's
 * and Reduce's) are equal on every rank: their MIN and MAX over the ranks
 * (one AllReduce each) equal mine. */
static int th_same_sums(zt_env_t *env, const uint32_t *sums)
{
    int64_t *buf = NULL;
    if (aclrtMalloc((void **)&buf, 2 * TH_OPS * sizeof(int64_t), ACL_MEM_MALLOC_HUGE_FIRST) !=
        ACL_SUCCESS) {
        return 1;
    }
    for (int n = 0; n < TH_OPS; n++) {
        buf[n] = buf[TH_OPS + n] = th_alike(th_op_at(n).k) ? (int64_t)sums[n] : 0;
    }
    int bad = HcclAllReduce(buf, buf, TH_OPS, HCCL_DATA_TYPE_INT64, HCCL_REDUCE_MIN, env->comm,
                            env->stream) != HCCL_SUCCESS ||
              HcclAllReduce(buf + TH_OPS, buf + TH_OPS, TH_OPS, HCCL_DATA_TYPE_INT64,
                            HCCL_REDUCE_MAX, env->comm, env->stream) != HCCL_SUCCESS ||
              aclrtSynchronizeStream(env->stream) != ACL_SUCCESS;
    for (int n = 0; n < TH_OPS && !bad; n++) {
        bad = buf[n] != buf[TH_OPS + n];
        if (bad) {
            fprintf(stderr, "rank %d: the result of op %d differs between ranks\n", env->rank, n);
        }
    }
    aclrtFree(buf);
    return bad;
}

static int th_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    const th_case_t *tc = arg;
    char cpus[16];
    snprintf(cpus, sizeof(cpus), "%d", tc->core[rank]);
    if (rank == tc->off_rank) {
        setenv("ZCCL_HIER", "off", 1);
    }
    th_n = nranks;
    zt_env_t env;
    if (zccl_topo_set_binding(cpus) != 0 || zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    uint32_t sums[2][TH_OPS];
    int bad = zt_env_arena(&env, (size_t)th_n * TH_BYTES) != 0;
    uint64_t zc0 = zccl_comm_zero_copy_ops(env.comm);
    bad = bad || th_matrix(&env, sums[0]) || th_matrix(&env, sums[1]);
    uint64_t hier = zccl_comm_hier_ops(env.comm);
    uint64_t zc = zccl_comm_zero_copy_ops(env.comm) - zc0;
    if (!bad && (zc != 2 * TH_OPS || hier != (tc->hier ? 2 * TH_OPS : 0))) {
        fprintf(stderr, "rank %d: %llu zero-copy ops, %llu hierarchical, expected %d and %d\n",
                rank, (unsigned long long)zc, (unsigned long long)hier, 2 * TH_OPS,
                tc->hier ? 2 * TH_OPS : 0);
        bad = 1;
    }
    if (!bad && memcmp(sums[0], sums[1], sizeof(sums[0])) != 0) {
        fprintf(stderr, "rank %d: the two runs differ\n", rank);
        bad = 1;
    }
    bad = bad || th_same_sums(&env, sums[0]);
    return zt_env_close(&env) != 0 || bad;
}

/* hier_env: ZCCL_HIER for every rank, NULL to leave it unset. */
static void th_run(const th_case_t *tc, const char *hier_env)
{
    setenv(tc->var, tc->topo, 1);
    if (hier_env != NULL) {
        setenv("ZCCL_HIER", hier_env, 1);
    }
    int failed = zt_launch_procs(tc->n, th_rank, (void *)tc, 300);
    unsetenv(tc->var);
    unsetenv("ZCCL_HIER");
    assert_int_equal(failed, 0);
}

#define TH_SMALL "HWLOC_SYNTHETIC", "pack:2 numa:2 core:2 pu:1"

/* 2 x 2 x 2, ranks on cores 0-3: NUMA nodes 0, 0, 1, 1 of package 0. */
static void test_hier_numa(void **state)
{
    (void)state;
    static const th_case_t tc = {TH_SMALL, 4, {0, 1, 2, 3}, 1, -1};
    th_run(&tc, NULL);
}

/* 2 x 2 x 2, cores 0, 1, 4, 5: packages 0, 0, 1, 1 (a node each). */
static void test_hier_package(void **state)
{
    (void)state;
    static const th_case_t tc = {TH_SMALL, 4, {0, 1, 4, 5}, 1, -1};
    th_run(&tc, NULL);
}

/* 2 x 4 x 16 (128 cores), 8 ranks in uneven NUMA groups {0,1,2} {3} {4}
 * {5,6} {7} across both packages. */
static void test_hier_2x4x16(void **state)
{
    (void)state;
    static const th_case_t tc = {
        "HWLOC_SYNTHETIC", "pack:2 numa:4 core:16 pu:1", 8, {0, 1, 2, 16, 64, 80, 81, 96}, 1, -1};
    th_run(&tc, NULL);
}

/* The XML topology (2 packages, a NUMA node each, 2 L3 groups per node):
 * one rank per L3 group, grouped by package. */
static void test_hier_xml(void **state)
{
    (void)state;
    static const th_case_t tc = {
        "HWLOC_XMLFILE", ZT_TOPO_DIR "/pack2_l3x2.xml", 4, {0, 2, 4, 6}, 1, -1};
    th_run(&tc, NULL);
}

/* One NUMA node: flat. */
static void test_hier_one_node(void **state)
{
    (void)state;
    static const th_case_t tc = {TH_SMALL, 4, {0, 1, 0, 1}, 0, -1};
    th_run(&tc, NULL);
}

static void test_hier_off(void **state)
{
    (void)state;
    static const th_case_t tc = {TH_SMALL, 4, {0, 1, 2, 3}, 0, -1};
    th_run(&tc, "off");
}

/* ZCCL_HIER=off on rank 2 alone: every rank runs flat (the setting is
 * agreed at init), none waits for a schedule the others do not run. */
static void test_hier_off_one_rank(void **state)
{
    (void)state;
    static const th_case_t tc = {TH_SMALL, 4, {0, 1, 2, 3}, 0, 2};
    th_run(&tc, NULL);
}

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hier_numa),         cmocka_unit_test(test_hier_package),
        cmocka_unit_test(test_hier_2x4x16),       cmocka_unit_test(test_hier_xml),
        cmocka_unit_test(test_hier_one_node),     cmocka_unit_test(test_hier_off),
        cmocka_unit_test(test_hier_off_one_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
