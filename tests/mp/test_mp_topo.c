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
 * {host}: flat. The hierarchical collectives on such comms are
 * test_mp_topo_hier's.
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

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topo_levels),
        cmocka_unit_test(test_topo_one_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
