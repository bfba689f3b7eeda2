/*
 * Communicators with threads of one process as ranks: rank size / id / name
 * (the same name on every rank), HcclBarrier (nobody leaves before all
 * arrived), HcclCommInitRootInfoConfig with a 1 MB CCL buffer (chunked ops,
 * the buffer created on first buffered use, the configured name), path choice
 * with one rank's buffers activated and the others' not, and the zero-copy
 * rules where several ranks of one process set ranges and activate blocks.
 * The forked-process versions, with the init faults, are in
 * tests/mp/test_mp_comm.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hccl_test_api.h"
#include "zt_check.h"

#define ZT_NAME "zt-threads-comm"

/* Shared by the thread ranks of one launch. */
typedef struct {
    atomic_int arrived[4];
    char names[8][COMM_NAME_MAX_LENGTH];
} shared_t;

static int rank_api(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    shared_t *sh = arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = 0;
    uint32_t v = 12345;
    HcclResult r = HcclGetRankSize(env.comm, &v);
    ZT_EXPECT(&env, r == HCCL_SUCCESS && v == (uint32_t)nranks, "rank size %d %u", (int)r, v);
    r = HcclGetRankId(env.comm, &v);
    ZT_EXPECT(&env, r == HCCL_SUCCESS && v == (uint32_t)rank, "rank id %d %u", (int)r, v);
    char name[COMM_NAME_MAX_LENGTH] = "";
    r = HcclGetCommName(env.comm, name);
    ZT_EXPECT(&env, r == HCCL_SUCCESS && name[0] != 0, "comm name %d", (int)r);
    memcpy(sh->names[rank], name, sizeof(name));
    for (int k = 0; k < 4; k++) {
        struct timespec ts = {0, 15000000L * ((rank + k) % nranks)};
        nanosleep(&ts, NULL);
        atomic_fetch_add_explicit(&sh->arrived[k], 1, memory_order_release);
        r = HcclBarrier(env.comm, env.stream);
        aclError e = aclrtSynchronizeStream(env.stream);
        int seen = atomic_load_explicit(&sh->arrived[k], memory_order_acquire);
        ZT_EXPECT(&env, r == HCCL_SUCCESS && e == ACL_SUCCESS && seen == nranks,
                  "barrier %d: %d/%d, %d of %d arrived", k, (int)r, (int)e, seen, nranks);
    }
    ZT_EXPECT(&env, strcmp(sh->names[0], name) == 0, "name '%s', rank 0 has '%s'", name,
              sh->names[0]);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

static void test_api(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 1; n <= 4; n++) {
        shared_t sh;
        memset(&sh, 0, sizeof(sh));
        failed += zt_launch_threads(n, rank_api, &sh);
    }
    assert_int_equal(failed, 0);
}

static int rank_config(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    HcclCommConfig cfg;
    HcclCommConfigInit(&cfg);
    cfg.hcclBufferSize = 1; /* MB: every op below is chunked */
    snprintf(cfg.hcclCommName, sizeof(cfg.hcclCommName), "%s", ZT_NAME);
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, &cfg) != 0) {
        return 1;
    }
    int fails = 0;
    char name[COMM_NAME_MAX_LENGTH] = "";
    ZT_EXPECT(&env, HcclGetCommName(env.comm, name) == HCCL_SUCCESS && strcmp(name, ZT_NAME) == 0,
              "name '%s'", name);
    ZT_EXPECT(&env, zccl_comm_ccl_allocated(env.comm) == 0, "CCL buffer before use");
    const size_t big = 1000003;
    if (zt_env_arena(&env, zt_case_bytes(ZT_ALLGATHER, HCCL_DATA_TYPE_INT64, big, nranks)) != 0) {
        zt_env_close(&env);
        return fails + 1;
    }
    zt_case_t cases[] = {
        {.coll = ZT_ALLREDUCE,
         .dtype = HCCL_DATA_TYPE_FP32,
         .op = HCCL_REDUCE_SUM,
         .count = big,
         .zero_copy = 1,
         .misalign = 1,
         .seed = 41},
        {.coll = ZT_ALLREDUCE,
         .dtype = HCCL_DATA_TYPE_BFP16,
         .op = HCCL_REDUCE_SUM,
         .count = big,
         .misalign = 1,
         .seed = 42},
        {.coll = ZT_ALLREDUCE,
         .dtype = HCCL_DATA_TYPE_INT64,
         .op = HCCL_REDUCE_MIN,
         .count = big,
         .in_place = 1,
         .misalign = 1,
         .seed = 43},
        {.coll = ZT_ALLGATHER,
         .dtype = HCCL_DATA_TYPE_FP32,
         .count = big,
         .misalign = 1,
         .seed = 44},
        {.coll = ZT_ALLGATHER,
         .dtype = HCCL_DATA_TYPE_UINT8,
         .count = big,
         .in_place = 1,
         .misalign = 1,
         .seed = 45},
    };
    fails += zt_case_run(&env, &cases[0]) != 0;
    ZT_EXPECT(&env, zccl_comm_ccl_allocated(env.comm) == 0, "CCL buffer for a zero-copy op");
    for (size_t i = 1; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fails += zt_case_run(&env, &cases[i]) != 0;
    }
    ZT_EXPECT(&env, nranks == 1 || zccl_comm_ccl_allocated(env.comm) == 1, "no CCL buffer");
    /* One rank's buffers activated, the others' not: buffered everywhere. */
    for (int coll = ZT_ALLREDUCE; coll <= ZT_ALLGATHER; coll++) {
        zt_case_t c = {.coll = coll,
                       .dtype = HCCL_DATA_TYPE_INT16,
                       .op = HCCL_REDUCE_MAX,
                       .count = 4099,
                       .zero_copy = rank == 0,
                       .expect_buffered = rank == 0,
                       .misalign = 1,
                       .seed = 46};
        fails += zt_case_run(&env, &c) != 0;
    }
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

static void test_config_and_paths(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 1; n <= 3; n++) {
        failed += zt_launch_threads(n, rank_config, NULL);
    }
    assert_int_equal(failed, 0);
}

static int rank_zc_rules(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = 0;
    size_t g = zt_granularity(env.device);
    zt_zc_t z;
    if (zt_zc_open(&z, env.comm, env.device, g, 2, 0) != 0) {
        zt_env_close(&env);
        return 1;
    }
    char *R = z.va;
    HcclComm cm = env.comm;
    ZT_EXPECT_RC(&env, HcclCommSetMemoryRange(cm, R, 2 * g, 0, 0), HCCL_E_PARA, "same range");
    ZT_EXPECT_RC(&env, HcclCommSetMemoryRange(cm, R + g, g, 0, 0), HCCL_E_PARA, "range in range");
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(cm, R), HCCL_E_NOT_FOUND, "never active");
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R, g, 0, z.h[0], 0), HCCL_SUCCESS, "b0");
    z.active[0] = 1;
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R, g, 0, z.h[0], 0), HCCL_E_PARA, "twice");
    ZT_EXPECT_RC(&env, HcclCommUnsetMemoryRange(cm, R), HCCL_E_PARA, "unset with an active block");
    /* Block 0 active, block 1 not: buffers only in block 0 run zero-copy. */
    zt_pat_t p = {HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, ZT_FILL_EXACT, nranks, 47};
    const size_t count = 3001;
    float *send = (float *)(R + 64 + 4);
    float *recv = (float *)(R + g / 2 + 4);
    float *want = malloc(count * sizeof(float));
    for (int blk = 0; blk < 2; blk++) {
        if (blk == 1) {
            recv = (float *)(R + g + 4); /* output in the inactive block */
        }
        zt_fill(send, 0, count, &p, rank);
        uint64_t st0 = zccl_comm_staged_bytes(cm);
        HcclResult r =
            HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, cm, env.stream);
        aclError e = aclrtSynchronizeStream(env.stream);
        ZT_EXPECT(&env, r == HCCL_SUCCESS && e == ACL_SUCCESS, "op %d: %d %d", blk, (int)r, (int)e);
        zt_ref_allreduce(want, count, &p);
        fails += zt_compare("zc rules: output", recv, want, count, HCCL_DATA_TYPE_FP32) != 0;
        uint64_t st = zccl_comm_staged_bytes(cm);
        ZT_EXPECT(&env, blk == 0 ? st == st0 : (nranks == 1 || st > st0),
                  "op %d: staged %llu -> %llu", blk, (unsigned long long)st0,
                  (unsigned long long)st);
    }
    free(want);
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(cm, R), HCCL_SUCCESS, "deactivate");
    z.active[0] = 0;
    if (zt_zc_close(&z, cm) != 0) {
        fails++;
    }
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

static void test_zc_rules(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 1; n <= 3; n++) {
        failed += zt_launch_threads(n, rank_zc_rules, NULL);
    }
    assert_int_equal(failed, 0);
}

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api),
        cmocka_unit_test(test_config_and_paths),
        cmocka_unit_test(test_zc_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
