/*
 * The hierarchical collectives on real communicators of forked ranks, each
 * taken as bound to one core of a synthetic or XML topology by the test hook
 * (zccl_topo_set_binding: those CPUs are not this machine's):
 *   - 2 x 2 x 2 ("pack:2 numa:2 core:2"), 4 ranks on 2 NUMA nodes of one
 *     package (levels {host, NUMA}) or on 2 packages ({host, package});
 *   - 2 x 4 x 16, 8 ranks in uneven NUMA groups over both packages;
 *   - the XML topology of test_hccl_levels (an L3 split below each node),
 *     grouped by package;
 * run AllReduce, AllGather, ReduceScatter, Broadcast and Reduce of 128 Ki
 * elements (above coll_hier_worth's threshold) in fp32, bf16 and int32
 * with SUM and MAX on activated memory, twice. Inputs are small integers,
 * so every result is exact and checked element by element; each op's
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
#include "zt_launch.h"

#define TH_COUNT ((size_t)128 << 10)
#define TH_KINDS 5 /* AllReduce, AllGather, ReduceScatter, Broadcast, Reduce */
#define TH_DTYPES 3
#define TH_OPS (TH_DTYPES * TH_KINDS * 2)
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

static const HcclDataType th_dtypes[TH_DTYPES] = {HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_BFP16,
                                                  HCCL_DATA_TYPE_INT32};

/* Rank r's input element j: a small integer, exact in every dtype. */
static int th_val(int r, size_t j)
{
    return (int)((size_t)r * 5 + j % 13) % 13 + 1;
}

static size_t th_size(HcclDataType dt)
{
    return dt == HCCL_DATA_TYPE_BFP16 ? 2 : 4;
}

static void th_put(void *buf, size_t i, HcclDataType dt, int v)
{
    float f = (float)v;
    uint32_t bits;
    memcpy(&bits, &f, sizeof(bits));
    if (dt == HCCL_DATA_TYPE_INT32) {
        ((int32_t *)buf)[i] = v;
    } else if (dt == HCCL_DATA_TYPE_FP32) {
        ((float *)buf)[i] = f;
    } else {
        ((uint16_t *)buf)[i] = (uint16_t)(bits >> 16); /* exact: a small integer */
    }
}

static int th_get(const void *buf, size_t i, HcclDataType dt)
{
    if (dt == HCCL_DATA_TYPE_INT32) {
        return ((const int32_t *)buf)[i];
    }
    float f;
    if (dt == HCCL_DATA_TYPE_FP32) {
        f = ((const float *)buf)[i];
    } else {
        uint32_t bits = (uint32_t)((const uint16_t *)buf)[i] << 16;
        memcpy(&f, &bits, sizeof(f));
    }
    return f == (float)(int)f ? (int)f : -1000000;
}

/* Element j reduced over all ranks. */
static int th_reduced(size_t j, int max)
{
    int acc = th_val(0, j);
    for (int r = 1; r < th_n; r++) {
        acc = max ? (th_val(r, j) > acc ? th_val(r, j) : acc) : acc + th_val(r, j);
    }
    return acc;
}

/* What rank holds at element i after op kind k (-1: nothing to check). */
static int th_expect(int k, int rank, size_t i, int max)
{
    switch (k) {
    case 0:
        return th_reduced(i, max);
    case 1:
        return th_val((int)(i / TH_COUNT), i % TH_COUNT);
    case 2:
        return th_reduced((size_t)rank * TH_COUNT + i, max);
    case 3:
        return th_val(TH_BCAST_ROOT, i);
    default:
        return rank == TH_REDUCE_ROOT ? th_reduced(i, max) : -1;
    }
}

/* Output elements of op kind k. */
static size_t th_out_count(int k)
{
    return k == 1 ? (size_t)th_n * TH_COUNT : TH_COUNT;
}

static HcclResult th_call(zt_env_t *env, int k, void *in, void *out, HcclDataType dt,
                          HcclReduceOp op)
{
    switch (k) {
    case 0:
        return HcclAllReduce(in, out, TH_COUNT, dt, op, env->comm, env->stream);
    case 1:
        return HcclAllGather(in, out, TH_COUNT, dt, env->comm, env->stream);
    case 2:
        return HcclReduceScatter(in, out, TH_COUNT, dt, op, env->comm, env->stream);
    case 3:
        return HcclBroadcast(in, TH_COUNT, dt, TH_BCAST_ROOT, env->comm, env->stream);
    default:
        return HcclReduce(in, out, TH_COUNT, dt, op, TH_REDUCE_ROOT, env->comm, env->stream);
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

/* One op: fill, run, check; its output's checksum in *sum. */
static int th_one(zt_env_t *env, int k, HcclDataType dt, int max, uint32_t *sum)
{
    unsigned char *in = env->zc.va;
    unsigned char *out = in + env->zc.block;
    size_t nin = k == 2 ? (size_t)th_n * TH_COUNT : TH_COUNT;
    for (size_t j = 0; j < nin; j++) {
        th_put(in, j, dt, th_val(env->rank, j));
    }
    memset(out, 0xee, th_out_count(k) * th_size(dt));
    void *res = k == 3 ? (void *)in : (void *)out;
    HcclReduceOp op = max ? HCCL_REDUCE_MAX : HCCL_REDUCE_SUM;
    if (th_call(env, k, in, out, dt, op) != HCCL_SUCCESS ||
        aclrtSynchronizeStream(env->stream) != ACL_SUCCESS) {
        fprintf(stderr, "rank %d: op %d dtype %d failed\n", env->rank, k, (int)dt);
        return 1;
    }
    for (size_t i = 0; i < th_out_count(k); i++) {
        int want = th_expect(k, env->rank, i, max);
        if (want >= 0 && th_get(res, i, dt) != want) {
            fprintf(stderr, "rank %d: op %d dtype %d max %d: [%zu] = %d, expected %d\n", env->rank,
                    k, (int)dt, max, i, th_get(res, i, dt), want);
            return 1;
        }
    }
    *sum = th_sum(res, th_out_count(k) * th_size(dt));
    return 0;
}

/* Every op of the matrix once; sums[op] its output's checksum. */
static int th_matrix(zt_env_t *env, uint32_t *sums)
{
    int n = 0;
    for (int d = 0; d < TH_DTYPES; d++) {
        for (int k = 0; k < TH_KINDS; k++) {
            for (int max = 0; max < 2; max++, n++) {
                if (th_one(env, k, th_dtypes[d], max, &sums[n]) != 0) {
                    return 1;
                }
            }
        }
    }
    return 0;
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
        int k = n / 2 % TH_KINDS;
        buf[n] = buf[TH_OPS + n] = k == 2 || k == 4 ? 0 : (int64_t)sums[n];
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
    int bad = zt_env_arena(&env, (size_t)th_n * TH_COUNT * sizeof(float)) != 0;
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
