/*
 * Memory ranges as CANN has them, with forked ranks:
 *  - ActivateCommMemory checks the handle against the runtime's mapping
 *    table: another block's handle, or the right handle at the wrong offset,
 *    is HCCL_E_PARA, and later ops stay correct (buffered);
 *  - SetMemoryRange takes flags 1 (what a framework passes);
 *  - chunked activation: a buffer spanning several adjacent activated blocks
 *    runs zero-copy as soon as every block it touches is active;
 *  - a range set and activated through one communicator is visible to every
 *    communicator of the process, present or created later; deactivating
 *    through another one takes it away from all;
 *  - every peer's shadow window starts at an address that differs from this
 *    rank's own range and from every other peer's window in bits 21-27 (the
 *    bits above 2 MiB of AMD's L1 way-predictor hash): a window the kernel
 *    placed a multiple of 256 MiB from the own range cost 30 % at 1 MiB.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/hccl_test_api.h"
#include "zt_check.h"

#define mr_op zt_allreduce_path

typedef struct {
    char *R;
    size_t g;
    aclrtDrvMemHandle h[3]; /* g at R, 2g at R + g, g at R + 3g */
} mr_mem_t;

static int mr_mem_open(mr_mem_t *m, int device)
{
    m->g = zt_granularity(device);
    void *va = NULL;
    if (aclrtReserveMemAddress(&va, 4 * m->g, 0, NULL, 1) != ACL_SUCCESS) {
        return -1;
    }
    m->R = va;
    size_t sz[3] = {m->g, 2 * m->g, m->g};
    size_t at[3] = {0, m->g, 3 * m->g};
    for (int i = 0; i < 3; i++) {
        m->h[i] = zt_phys_alloc(device, sz[i]);
        if (m->h[i] == NULL || aclrtMapMem(m->R + at[i], sz[i], 0, m->h[i], 0) != ACL_SUCCESS) {
            return -1;
        }
    }
    return 0;
}

static int mr_mem_close(mr_mem_t *m)
{
    size_t at[3] = {0, m->g, 3 * m->g};
    int rc = 0;
    for (int i = 0; i < 3; i++) {
        rc |= aclrtUnmapMem(m->R + at[i]) != ACL_SUCCESS;
        rc |= m->h[i] != NULL && aclrtFreePhysical(m->h[i]) != ACL_SUCCESS;
    }
    rc |= aclrtReleaseMemAddress(m->R) != ACL_SUCCESS;
    return rc ? -1 : 0;
}

static int rank_handles_and_chunks(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t env;
    mr_mem_t m;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0 || mr_mem_open(&m, env.device) != 0) {
        return 1;
    }
    int fails = 0;
    HcclComm cm = env.comm;
    char *R = m.R;
    size_t g = m.g;
    ZT_EXPECT_RC(&env, HcclCommSetMemoryRange(cm, R, 4 * g, 0, 1), HCCL_SUCCESS, "flags 1");
    /* The handle must be the allocation mapped at the address, from its start. */
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R, g, 0, m.h[2], 0), HCCL_E_PARA,
                 "another block's handle");
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R + 2 * g, g, 0, m.h[1], 0), HCCL_E_PARA,
                 "the right handle at the wrong offset");
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R + g, 2 * g, 0, m.h[0], 0), HCCL_E_PARA,
                 "a smaller handle over a bigger block");
    /* Nothing was activated: the op is buffered and right. */
    size_t count = (g + g / 2) / sizeof(int32_t);
    char *send = R + 64;
    char *recv = R + 2 * g + 64; /* blocks 1 and 2 */
    fails += mr_op(&env, cm, send, recv, count, 0, __LINE__);
    /* Grow block by block: zero-copy once every touched block is active. */
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R, g, 0, m.h[0], 0), HCCL_SUCCESS, "b0");
    fails += mr_op(&env, cm, send, recv, count, 0, __LINE__);
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R + g, 2 * g, 0, m.h[1], 0), HCCL_SUCCESS,
                 "b1");
    fails += mr_op(&env, cm, send, R + g + 128, count, 1, __LINE__);
    fails += mr_op(&env, cm, send, recv, count, 0, __LINE__); /* recv reaches block 2 */
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R + 3 * g, g, 0, m.h[2], 0), HCCL_SUCCESS,
                 "b2");
    fails += mr_op(&env, cm, send, recv, count, 1, __LINE__);
    fails += mr_op(&env, cm, R, R, 4 * g / sizeof(int32_t), 1, __LINE__); /* all, in place */
    /* Take the middle block away: a buffer across it is buffered again. */
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(cm, R + g), HCCL_SUCCESS, "deactivate b1");
    fails += mr_op(&env, cm, send, recv, count, 0, __LINE__);
    fails += mr_op(&env, cm, R + 3 * g + 8, R + 8, 1000, 1, __LINE__);
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(cm, R), HCCL_SUCCESS, "deactivate b0");
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(cm, R + 3 * g), HCCL_SUCCESS, "deactivate b2");
    ZT_EXPECT_RC(&env, HcclCommUnsetMemoryRange(cm, R), HCCL_SUCCESS, "unset");
    if (mr_mem_close(&m) != 0 || zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

static void test_handles_and_chunks(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 1; n <= 3; n++) {
        failed += zt_launch_procs(n, rank_handles_and_chunks, NULL, 120);
    }
    assert_int_equal(failed, 0);
}

/* ---- visible to every communicator ------------------------------------------ */

typedef struct {
    zt_root_slot_t *slot[2];
} mr_slots_t;

static int mr_comm(zt_env_t *env, zt_root_slot_t *slot, HcclComm *out)
{
    HcclRootInfo info;
    int fails = 0;
    if (zt_root_slot_get(slot, env->rank, &info) != 0) {
        return 1;
    }
    ZT_EXPECT_RC(env, HcclCommInitRootInfo((uint32_t)env->nranks, &info, (uint32_t)env->rank, out),
                 HCCL_SUCCESS, "second comm");
    return fails;
}

static int rank_every_comm(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    mr_slots_t *s = arg;
    zt_env_t env;
    mr_mem_t m;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0 || mr_mem_open(&m, env.device) != 0) {
        return 1;
    }
    int fails = 0;
    HcclComm a = env.comm;
    HcclComm b = NULL;
    HcclComm c = NULL;
    char *R = m.R;
    size_t g = m.g;
    fails += mr_comm(&env, s->slot[0], &b);
    /* Registered once, through a: b runs zero-copy on it. */
    ZT_EXPECT_RC(&env, HcclCommSetMemoryRange(a, R, 4 * g, 0, 1), HCCL_SUCCESS, "set on a");
    ZT_EXPECT_RC(&env, HcclCommSetMemoryRange(b, R, 4 * g, 0, 1), HCCL_E_PARA,
                 "set again on b (already visible there)");
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(a, R, g, 0, m.h[0], 0), HCCL_SUCCESS, "b0");
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(a, R + g, 2 * g, 0, m.h[1], 0), HCCL_SUCCESS,
                 "b1");
    fails += mr_op(&env, b, R + 100 * 4, R + g + 12, 70000, 1, __LINE__);
    fails += mr_op(&env, a, R + 100 * 4, R + g + 12, 70000, 1, __LINE__);
    /* A communicator created afterwards sees them too, even a block whose
     * handle the caller already released (its mapping keeps it alive). */
    ZT_EXPECT(&env, aclrtFreePhysical(m.h[0]) == ACL_SUCCESS, "release b0's handle");
    m.h[0] = NULL;
    fails += mr_comm(&env, s->slot[1], &c);
    fails += mr_op(&env, c, R + 8, R + 2 * g + 8, 300000, 1, __LINE__);
    /* Activated through c, deactivated through b: gone from all. */
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(c, R + 3 * g, g, 0, m.h[2], 0), HCCL_SUCCESS,
                 "b2 on c");
    fails += mr_op(&env, a, R + 3 * g, R + 8, 1000, 1, __LINE__);
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(b, R + g), HCCL_SUCCESS, "b1 off via b");
    fails += mr_op(&env, a, R + g + 64, R + 64, 1000, 0, __LINE__);
    fails += mr_op(&env, c, R + g + 64, R + 64, 1000, 0, __LINE__);
    /* The registering comm goes; the others keep the range. */
    ZT_EXPECT_RC(&env, HcclCommDestroy(a), HCCL_SUCCESS, "destroy a");
    env.comm = NULL;
    fails += mr_op(&env, b, R + 3 * g + 64, R + 64, 5000, 1, __LINE__);
    ZT_EXPECT_RC(&env, HcclCommUnsetMemoryRange(c, R), HCCL_E_PARA, "unset with active blocks");
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(c, R), HCCL_SUCCESS, "b0 off");
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(c, R + 3 * g), HCCL_SUCCESS, "b2 off");
    ZT_EXPECT_RC(&env, HcclCommUnsetMemoryRange(b, R), HCCL_SUCCESS, "unset via b");
    ZT_EXPECT_RC(&env, HcclCommDestroy(b), HCCL_SUCCESS, "destroy b");
    ZT_EXPECT_RC(&env, HcclCommDestroy(c), HCCL_SUCCESS, "destroy c");
    if (mr_mem_close(&m) != 0 || zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

static void test_every_comm(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 2; n <= 3; n++) {
        mr_slots_t s = {{zt_root_slot_create(), zt_root_slot_create()}};
        assert_non_null(s.slot[0]);
        assert_non_null(s.slot[1]);
        failed += zt_launch_procs(n, rank_every_comm, &s, 120);
        zt_root_slot_destroy(s.slot[0]);
        zt_root_slot_destroy(s.slot[1]);
    }
    assert_int_equal(failed, 0);
}

/* Bits 21-27 of an address: which 2 MiB step of 256 MiB it is in. */
static unsigned mr_color(const void *p)
{
    return (unsigned)(((uintptr_t)p >> 21) & 127u);
}

/* A 256 MiB range with one block at its start: the kernel put a window of
 * the same size right next to it, 256 MiB away, so the same colour. */
static int rank_window_colors(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = 0;
    HcclComm cm = env.comm;
    size_t g = zt_granularity(env.device);
    size_t span = (size_t)256 << 20;
    void *va = NULL;
    aclrtDrvMemHandle h = zt_phys_alloc(env.device, g);
    ZT_EXPECT_RC(&env, aclrtReserveMemAddress(&va, span, 0, NULL, 1), ACL_SUCCESS, "reserve");
    ZT_EXPECT_RC(&env, aclrtMapMem(va, g, 0, h, 0), ACL_SUCCESS, "map");
    char *R = va;
    ZT_EXPECT_RC(&env, HcclCommSetMemoryRange(cm, R, span, 0, 0), HCCL_SUCCESS, "set");
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R, g, 0, h, 0), HCCL_SUCCESS, "activate");
    fails += mr_op(&env, cm, R, R + g / 2, g / 2 / sizeof(int32_t), 1, __LINE__);
    /* Every rank's range base, gathered on the buffered path. */
    uint64_t *all = NULL;
    ZT_EXPECT_RC(&env, aclrtMalloc((void **)&all, 8 * (size_t)nranks, ACL_MEM_MALLOC_HUGE_FIRST),
                 ACL_SUCCESS, "malloc");
    all[rank] = (uint64_t)(uintptr_t)R;
    ZT_EXPECT_RC(&env, HcclAllGather(&all[rank], all, 1, HCCL_DATA_TYPE_UINT64, cm, env.stream),
                 HCCL_SUCCESS, "allgather");
    ZT_EXPECT_RC(&env, aclrtSynchronizeStream(env.stream), ACL_SUCCESS, "sync");
    unsigned char seen[128] = {0};
    seen[mr_color(R)] = 1;
    for (int q = 0; q < nranks; q++) {
        if (q == rank) {
            continue;
        }
        void *w = zccl_comm_peer_addr(cm, (uint32_t)q, (const void *)(uintptr_t)all[q], g);
        if (w == NULL || seen[mr_color(w)]) {
            zt_expect_fail(&env, __LINE__, "rank %d's window %p (own range %p): colour %u taken", q,
                           w, (void *)R, w != NULL ? mr_color(w) : 0);
            fails++;
        } else {
            seen[mr_color(w)] = 1;
        }
    }
    ZT_EXPECT_RC(&env, aclrtFree(all), ACL_SUCCESS, "free");
    /* Nobody deactivates while a peer still looks at its windows. */
    ZT_EXPECT_RC(&env, HcclBarrier(cm, env.stream), HCCL_SUCCESS, "barrier");
    ZT_EXPECT_RC(&env, aclrtSynchronizeStream(env.stream), ACL_SUCCESS, "sync");
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(cm, R), HCCL_SUCCESS, "deactivate");
    ZT_EXPECT_RC(&env, HcclCommUnsetMemoryRange(cm, R), HCCL_SUCCESS, "unset");
    ZT_EXPECT_RC(&env, aclrtUnmapMem(R), ACL_SUCCESS, "unmap");
    ZT_EXPECT_RC(&env, aclrtFreePhysical(h), ACL_SUCCESS, "free physical");
    ZT_EXPECT_RC(&env, aclrtReleaseMemAddress(R), ACL_SUCCESS, "release");
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

static void test_window_colors(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 2; n <= 4; n++) {
        failed += zt_launch_procs(n, rank_window_colors, NULL, 120);
    }
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handles_and_chunks),
        cmocka_unit_test(test_every_comm),
        cmocka_unit_test(test_window_colors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
