/*
 * Symmetric windows with forked ranks: HcclCommSymWinRegister (collective,
 * same layout on every rank, within hcclSymWinMaxMemSizePerRank, the window
 * is the physical allocation at addr), HcclCommSymWinGet (handle + offset),
 * HcclCommSymWinDeregister; collectives in windows run zero-copy; a size
 * that differs on one rank fails every rank with HCCL_E_PARA.
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
#include "zt_check.h"

/* AllGather INT8 of bytes per rank, checked byte by byte; want_zc as in
 * test_mp_memrange. */
static int sw_gather(zt_env_t *env, void *send, void *recv, size_t bytes, int want_zc, int line)
{
    int fails = 0;
    zt_pat_t p = {HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, ZT_FILL_EXACT, env->nranks, (uint64_t)line};
    zt_fill(send, 0, bytes, &p, env->rank);
    uint64_t zc0 = zccl_comm_zero_copy_ops(env->comm);
    uint64_t st0 = zccl_comm_staged_bytes(env->comm);
    HcclResult r = HcclAllGather(send, recv, bytes, HCCL_DATA_TYPE_INT8, env->comm, env->stream);
    aclError e = aclrtSynchronizeStream(env->stream);
    if (!ZT_EXPECT(env, r == HCCL_SUCCESS && e == ACL_SUCCESS, "line %d: %d / %d", line, (int)r,
                   (int)e)) {
        return fails;
    }
    char *want = malloc(bytes * (size_t)env->nranks);
    zt_ref_allgather(want, bytes, &p);
    fails += zt_compare("symwin allgather", recv, want, bytes * (size_t)env->nranks,
                        HCCL_DATA_TYPE_INT8) != 0;
    free(want);
    uint64_t zc = zccl_comm_zero_copy_ops(env->comm) - zc0;
    uint64_t st = zccl_comm_staged_bytes(env->comm) - st0;
    ZT_EXPECT(env, want_zc ? (zc == 1 && st == 0) : zc == 0,
              "line %d: want %s, got %llu zc ops, %llu bytes staged", line,
              want_zc ? "zero-copy" : "buffered", (unsigned long long)zc, (unsigned long long)st);
    return fails;
}

static int rank_symwin(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    HcclCommConfig cfg;
    HcclCommConfigInit(&cfg);
    cfg.hcclSymWinMaxMemSizePerRank = 1; /* GB */
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, &cfg) != 0) {
        return 1;
    }
    int fails = 0;
    HcclComm cm = env.comm;
    size_t g = zt_granularity(env.device);
    void *va = NULL;
    aclrtDrvMemHandle h[3];
    size_t sz[3] = {2 * g, g, g};
    size_t at[3] = {0, 2 * g, 3 * g};
    if (aclrtReserveMemAddress(&va, 4 * g, 0, NULL, 1) != ACL_SUCCESS) {
        return 1;
    }
    char *W = va;
    for (int i = 0; i < 3; i++) {
        h[i] = zt_phys_alloc(env.device, sz[i]);
        if (h[i] == NULL || aclrtMapMem(W + at[i], sz[i], 0, h[i], 0) != ACL_SUCCESS) {
            return 1;
        }
    }
    const size_t bytes = 100000;
    HcclCommSymWindow w0 = NULL;
    HcclCommSymWindow w1 = NULL;
    HcclCommSymWindow got = NULL;
    size_t off = 1;
    /* Before registration the same op is buffered. */
    fails += sw_gather(&env, W, W + bytes, bytes, 0, __LINE__);
    ZT_EXPECT_RC(&env, HcclCommSymWinRegister(cm, W, bytes * (size_t)(nranks + 1), &w0, 1),
                 HCCL_SUCCESS, "register w0");
    ZT_EXPECT_RC(&env, HcclCommSymWinGet(cm, W + 100, 64, &got, &off), HCCL_SUCCESS, "get");
    ZT_EXPECT(&env, got == w0 && off == 100, "get: window %p offset %zu", got, off);
    /* The window is the whole physical allocation (2g), as in CANN. */
    ZT_EXPECT_RC(&env, HcclCommSymWinGet(cm, W + 2 * g - 64, 64, &got, &off), HCCL_SUCCESS,
                 "get at the window's end");
    ZT_EXPECT(&env, off == 2 * g - 64, "offset %zu", off);
    ZT_EXPECT_RC(&env, HcclCommSymWinGet(cm, W + 2 * g - 64, 65, &got, &off), HCCL_E_NOT_FOUND,
                 "get past the window");
    fails += sw_gather(&env, W, W + bytes, bytes, 1, __LINE__);
    fails += sw_gather(&env, W + 7, W + g + 3, bytes, 1, __LINE__);
    ZT_EXPECT_RC(&env, HcclCommSymWinRegister(cm, W + 2 * g, g, &w1, 1), HCCL_SUCCESS, "w1");
    ZT_EXPECT_RC(&env, HcclCommSymWinGet(cm, W + 2 * g + 8, 8, &got, &off), HCCL_SUCCESS, "get w1");
    ZT_EXPECT(&env, got == w1 && w1 != w0 && off == 8, "get w1: %p offset %zu", got, off);
    fails += sw_gather(&env, W + 2 * g + 64, W, bytes, 1, __LINE__); /* across two windows */
    /* Refusals, on every rank together. */
    if (nranks > 1) {
        ZT_EXPECT_RC(&env, HcclCommSymWinRegister(cm, W + 3 * g, rank == 0 ? 4096 : 8192, &got, 1),
                     HCCL_E_PARA, "a size that differs on rank 0");
    }
    ZT_EXPECT_RC(&env, HcclCommSymWinRegister(cm, W + 3 * g, 2ull << 30, &got, 1), HCCL_E_PARA,
                 "more than hcclSymWinMaxMemSizePerRank");
    ZT_EXPECT_RC(&env, HcclCommSymWinRegister(cm, W + 3 * g, 2 * g, &got, 1), HCCL_E_PARA,
                 "more than the physical allocation");
    ZT_EXPECT_RC(&env, HcclCommSymWinRegister(cm, W + 3 * g + 4096, 4096, &got, 1), HCCL_E_PARA,
                 "not the start of an allocation");
    if (nranks > 1) {
        /* The other ranks refuse flag 7 locally; rank 0 learns it at once. */
        ZT_EXPECT_RC(&env, HcclCommSymWinRegister(cm, W + 3 * g, 4096, &got, rank == 0 ? 1 : 7),
                     HCCL_E_PARA, "flag 7 on the other ranks");
        ZT_EXPECT_RC(&env, HcclCommSymWinRegister(cm, W + 3 * g, 4096, rank == 0 ? &got : NULL, 1),
                     rank == 0 ? HCCL_E_PARA : HCCL_E_PTR, "NULL winHandle on the other ranks");
    }
    ZT_EXPECT_RC(&env, HcclCommSymWinRegister(cm, W + 3 * g, 4096, &got, 0), HCCL_E_NOT_SUPPORT,
                 "flag 0");
    /* Deregistered: the memory is plain again (buffered). */
    ZT_EXPECT_RC(&env, HcclCommSymWinDeregister(w1), HCCL_SUCCESS, "deregister w1");
    ZT_EXPECT_RC(&env, HcclCommSymWinDeregister(w1), HCCL_E_NOT_FOUND, "twice");
    ZT_EXPECT_RC(&env, HcclCommSymWinGet(cm, W + 2 * g + 8, 8, &got, &off), HCCL_E_NOT_FOUND,
                 "get after deregister");
    fails += sw_gather(&env, W + 2 * g + 64, W, bytes, 0, __LINE__);
    fails += sw_gather(&env, W, W + bytes, bytes, 1, __LINE__);
    /* A window inside the caller's own range keeps that range. */
    ZT_EXPECT_RC(&env, HcclCommSymWinDeregister(w0), HCCL_SUCCESS, "deregister w0");
    ZT_EXPECT_RC(&env, HcclCommSetMemoryRange(cm, W, 4 * g, 0, 1), HCCL_SUCCESS, "own range");
    ZT_EXPECT_RC(&env, HcclCommSymWinRegister(cm, W + 3 * g, g, &w1, 1), HCCL_SUCCESS,
                 "window in a range");
    fails += sw_gather(&env, W + 3 * g, W + 3 * g + bytes, bytes, 1, __LINE__);
    ZT_EXPECT_RC(&env, HcclCommSymWinDeregister(w1), HCCL_SUCCESS, "deregister");
    ZT_EXPECT_RC(&env, HcclCommUnsetMemoryRange(cm, W), HCCL_SUCCESS, "range still there");
    /* Windows left registered are released by HcclCommDestroy. */
    ZT_EXPECT_RC(&env, HcclCommSymWinRegister(cm, W, g, &w0, 1), HCCL_SUCCESS, "left over");
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    for (int i = 0; i < 3; i++) {
        if (aclrtUnmapMem(W + at[i]) != ACL_SUCCESS || aclrtFreePhysical(h[i]) != ACL_SUCCESS) {
            fails++;
        }
    }
    if (aclrtReleaseMemAddress(W) != ACL_SUCCESS) {
        fails++;
    }
    return fails;
}

static void test_symwin(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 1; n <= 4; n++) {
        failed += zt_launch_procs(n, rank_symwin, NULL, 120);
    }
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symwin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
