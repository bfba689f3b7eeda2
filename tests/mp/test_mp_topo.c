/*
 * Levels on a real communicator: 4 forked ranks under HWLOC_SYNTHETIC
 * "pack:2 numa:2 core:2 pu:1" (2 packages x 2 NUMA nodes x 2 cores), each
 * taken as bound to one core by the test hook (zccl_topo_set_binding: the
 * synthetic CPUs are not this machine's): ranks 0..3 on cores 0, 2, 4, 5,
 * so NUMA nodes 0, 1, 2, 2 and packages 0, 0, 1, 1. Every rank's comm must
 * have built the levels {host, package {0,1}{2,3}, NUMA {0}{1}{2,3}}, the
 * same on every rank (checked against the expected ones and, through an
 * AllGather of each rank's description, against each other's); then an
 * AllReduce gives the right sums: nothing else changed. A second case puts
 * the 4 ranks on cores 0, 1, 0, 1 (one NUMA node), where the list is just
 * {host}: flat.
 * The hierarchical cases put the ranks on cores 0, 1, 2, 3 (NUMA nodes 0, 0,
 * 1, 1 of package 0: levels {host, NUMA}) or 0, 1, 4, 5 (packages 0, 0, 1,
 * 1: {host, package}) and run AllReduce, AllGather, ReduceScatter,
 * Broadcast and Reduce of 128 Ki elements (above coll_hier_worth's
 * threshold) in fp32, bf16 and int32 with SUM and MAX on activated memory,
 * twice: inputs are small integers, so every result is exact and checked
 * element by element; each op's checksum must match across ranks (for the
 * results every rank holds alike) and across the two runs; every op must
 * have run hierarchically (zccl_comm_hier_ops). On one node, or with
 * ZCCL_HIER=off, the same ops run flat: the counter stays 0.
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

#define TM_N 4
#define TM_LEVELS 4
#define TM_SIG (TM_LEVELS * (2 + 2 * TM_N) + 1)

typedef struct {
    int core[TM_N];
    int nlevels;
    int kind[TM_LEVELS];
    int group_of[TM_LEVELS][TM_N];
} tm_case_t;

/* The levels of comm as ints: count, then per level kind, groups, each
 * rank's group and index. */
static void tm_describe(HcclComm comm, int32_t *sig)
{
    memset(sig, 0xff, TM_SIG * sizeof(*sig));
    int n = 0;
    for (int i = 0; i < TM_LEVELS; i++) {
        int kind, g[TM_N], x[TM_N];
        int ng = zccl_comm_level(comm, i, &kind, g, x);
        if (ng == 0) {
            break;
        }
        int32_t *p = &sig[1 + i * (2 + 2 * TM_N)];
        p[0] = kind;
        p[1] = ng;
        for (int r = 0; r < TM_N; r++) {
            p[2 + r] = g[r];
            p[2 + TM_N + r] = x[r];
        }
        n++;
    }
    sig[0] = n;
}

static int tm_check_levels(const tm_case_t *tc, const int32_t *sig, int rank)
{
    int bad = sig[0] != tc->nlevels;
    for (int i = 0; i < tc->nlevels && !bad; i++) {
        const int32_t *p = &sig[1 + i * (2 + 2 * TM_N)];
        bad |= p[0] != tc->kind[i];
        for (int r = 0; r < TM_N; r++) {
            int index = 0; /* members keep rank order */
            for (int q = 0; q < r; q++) {
                index += tc->group_of[i][q] == tc->group_of[i][r];
            }
            bad |= p[2 + r] != tc->group_of[i][r] || p[2 + TM_N + r] != index;
        }
    }
    if (bad) {
        fprintf(stderr, "rank %d: levels differ from the expected ones (%d levels)\n", rank,
                sig[0]);
    }
    return bad;
}

/* AllGather n ints of every rank: a buffer with rank r's at n * (1 + r),
 * for aclrtFree, or NULL (printed). */
static int32_t *tm_gather(zt_env_t *env, const int32_t *mine, size_t n)
{
    int32_t *buf = NULL;
    if (aclrtMalloc((void **)&buf, n * sizeof(int32_t) * (TM_N + 1), ACL_MEM_MALLOC_HUGE_FIRST) !=
        ACL_SUCCESS) {
        return NULL;
    }
    memcpy(buf, mine, n * sizeof(int32_t));
    if (HcclAllGather(buf, buf + n, n, HCCL_DATA_TYPE_INT32, env->comm, env->stream) !=
            HCCL_SUCCESS ||
        aclrtSynchronizeStream(env->stream) != ACL_SUCCESS) {
        fprintf(stderr, "rank %d: the AllGather of %zu ints failed\n", env->rank, n);
        aclrtFree(buf);
        return NULL;
    }
    return buf;
}

/* AllGather every rank's description: all equal to mine. */
static int tm_same_everywhere(zt_env_t *env, const int32_t *sig)
{
    int32_t *buf = tm_gather(env, sig, TM_SIG);
    if (buf == NULL) {
        return 1;
    }
    int bad = 0;
    for (int r = 0; r < TM_N && !bad; r++) {
        bad = memcmp(buf + TM_SIG * (1 + r), sig, TM_SIG * sizeof(int32_t)) != 0;
        if (bad) {
            fprintf(stderr, "rank %d built other levels than this rank\n", r);
        }
    }
    aclrtFree(buf);
    return bad;
}

/* Bound (as the hook takes it) to core, open the rank's comm. 0 or 1. */
static int tm_open(zt_env_t *env, int rank, int nranks, const HcclRootInfo *root, int core)
{
    char cpus[16];
    snprintf(cpus, sizeof(cpus), "%d", core);
    return zccl_topo_set_binding(cpus) != 0 || zt_env_open(env, rank, nranks, root, NULL) != 0;
}

static int tm_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    const tm_case_t *tc = arg;
    zt_env_t env;
    if (tm_open(&env, rank, nranks, root, tc->core[rank]) != 0) {
        return 1;
    }
    int32_t sig[TM_SIG];
    tm_describe(env.comm, sig);
    int bad = tm_check_levels(tc, sig, rank) || tm_same_everywhere(&env, sig);
    const size_t count = 4096;
    float *x = NULL;
    if (!bad && aclrtMalloc((void **)&x, count * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST) == 0) {
        bad = zt_ramp_allreduce(&env, x, count) != HCCL_SUCCESS;
        for (size_t i = 0; i < count && !bad; i++) {
            bad = x[i] != zt_ramp_sum(nranks, i);
        }
        aclrtFree(x);
    } else {
        bad = 1;
    }
    return zt_env_close(&env) != 0 || bad;
}

static void tm_run(const tm_case_t *tc)
{
    setenv("HWLOC_SYNTHETIC", "pack:2 numa:2 core:2 pu:1", 1);
    int failed = zt_launch_procs(TM_N, tm_rank, (void *)tc, 120);
    unsetenv("HWLOC_SYNTHETIC");
    assert_int_equal(failed, 0);
}

static void test_topo_levels(void **state)
{
    (void)state;
    static const tm_case_t tc = {
        .core = {0, 2, 4, 5},
        .nlevels = 3,
        .kind = {0, 1, 2},
        .group_of = {{0, 0, 0, 0}, {0, 0, 1, 1}, {0, 1, 2, 2}},
    };
    tm_run(&tc);
}

static void test_topo_one_node(void **state)
{
    (void)state;
    static const tm_case_t tc = {
        .core = {0, 1, 0, 1},
        .nlevels = 1,
        .kind = {0},
        .group_of = {{0, 0, 0, 0}},
    };
    tm_run(&tc);
}

/* ---- hierarchical collectives ---------------------------------------------------- */

#define TH_COUNT ((size_t)128 << 10)
#define TH_KINDS 5 /* AllReduce, AllGather, ReduceScatter, Broadcast, Reduce */
#define TH_DTYPES 3
#define TH_OPS (TH_DTYPES * TH_KINDS * 2)
#define TH_BCAST_ROOT 2
#define TH_REDUCE_ROOT 3

typedef struct {
    int core[TM_N];
    int hier; /* 1: every op must run hierarchically, 0: none may */
} th_case_t;

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
    for (int r = 1; r < TM_N; r++) {
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
    return k == 1 ? TM_N * TH_COUNT : TH_COUNT;
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
    size_t nin = k == 2 ? TM_N * TH_COUNT : TH_COUNT;
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

/* AllGather the checksums: those of results every rank holds alike
 * (all but ReduceScatter's and Reduce's) equal rank 0's. */
static int th_same_sums(zt_env_t *env, const uint32_t *sums)
{
    int32_t mine[TH_OPS];
    memcpy(mine, sums, sizeof(mine));
    int32_t *buf = tm_gather(env, mine, TH_OPS);
    if (buf == NULL) {
        return 1;
    }
    int bad = 0;
    for (int r = 1; r < TM_N && !bad; r++) {
        for (int n = 0; n < TH_OPS && !bad; n++) {
            int k = n / 2 % TH_KINDS;
            bad = k != 2 && k != 4 && buf[TH_OPS * (1 + r) + n] != buf[TH_OPS + n];
            if (bad) {
                fprintf(stderr, "rank %d's result of op %d differs from rank 0's\n", r, n);
            }
        }
    }
    aclrtFree(buf);
    return bad;
}

static int th_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    const th_case_t *tc = arg;
    zt_env_t env;
    if (tm_open(&env, rank, nranks, root, tc->core[rank]) != 0) {
        return 1;
    }
    uint32_t sums[2][TH_OPS];
    int bad = zt_env_arena(&env, TM_N * TH_COUNT * sizeof(float)) != 0;
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

/* hier_env: ZCCL_HIER for the ranks, NULL to leave it unset. */
static void th_run(const th_case_t *tc, const char *hier_env)
{
    setenv("HWLOC_SYNTHETIC", "pack:2 numa:2 core:2 pu:1", 1);
    if (hier_env != NULL) {
        setenv("ZCCL_HIER", hier_env, 1);
    }
    int failed = zt_launch_procs(TM_N, th_rank, (void *)tc, 300);
    unsetenv("HWLOC_SYNTHETIC");
    unsetenv("ZCCL_HIER");
    assert_int_equal(failed, 0);
}

static void test_topo_hier_numa(void **state)
{
    (void)state;
    static const th_case_t tc = {.core = {0, 1, 2, 3}, .hier = 1};
    th_run(&tc, NULL);
}

static void test_topo_hier_package(void **state)
{
    (void)state;
    static const th_case_t tc = {.core = {0, 1, 4, 5}, .hier = 1};
    th_run(&tc, NULL);
}

static void test_topo_hier_one_node(void **state)
{
    (void)state;
    static const th_case_t tc = {.core = {0, 1, 0, 1}, .hier = 0};
    th_run(&tc, NULL);
}

static void test_topo_hier_off(void **state)
{
    (void)state;
    static const th_case_t tc = {.core = {0, 1, 2, 3}, .hier = 0};
    th_run(&tc, "off");
}

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topo_levels),        cmocka_unit_test(test_topo_one_node),
        cmocka_unit_test(test_topo_hier_numa),     cmocka_unit_test(test_topo_hier_package),
        cmocka_unit_test(test_topo_hier_one_node), cmocka_unit_test(test_topo_hier_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
