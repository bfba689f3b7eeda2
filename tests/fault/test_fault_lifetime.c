/*
 * Lifetimes and misuse of handles, with forked ranks:
 *
 *  - stale handles: a destroyed communicator's handle fails with HCCL_E_PARA
 *    on every API taking a comm, however many comms are created after it
 *    (handles carry a generation and are never reused);
 *  - fork: a child forked from a rank after init gets HCCL_E_NOT_SUPPORT from
 *    every API on the inherited comm (HcclCommDestroy included) and
 *    ACL_ERROR_RT_INVALID_HANDLE on the inherited stream; the parent's next
 *    ops with its peers are correct;
 *  - frees ordered after queued work: aclrtFree of an op's buffers, unmap +
 *    free of activated memory and HcclCommDeactivateCommMemory, each issued
 *    while the op waits for a slow peer, wait for the op (which is then
 *    correct, zero-copy where it was issued so) and the comm stays usable;
 *    from a stream task they fail at once with ACL_ERROR_RT_STREAM_CONTEXT /
 *    HCCL_E_NOT_SUPPORT and change nothing; with threads as ranks, a free
 *    does not wait for another rank thread's queued op (which may wait for
 *    the freeing thread).
 * Each waiting call's time is printed (it must cover the peer's delay).
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
#include <sys/wait.h>
#include <unistd.h>

#include "core/hccl_test_api.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"
#include "zt_check.h"

#define ZT_SLOW_MS 300          /* how late the slow peer issues its op */
#define ZT_COUNT (256u * 1024u) /* int32 elements: 1 MiB, past the inline size */
#define ZT_NEW_COMMS 200        /* comms created after the stale one */
#define ZT_LIVE 16              /* of which this many are alive at once */

#define ZT_FAIL(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);                                         \
        fails++;                                                                                   \
    } while (0)

static double zt_ms_since(uint64_t t0)
{
    return (double)(zc_time_ns() - t0) / 1e6;
}

/* ---- data ------------------------------------------------------------------------- */

static void zt_lf_fill(int32_t *p, size_t n, int rank, int salt)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = rank * 7 + salt + (int32_t)(i % 1000);
    }
}

/* Elements of an AllReduce SUM result of zt_fill inputs that are wrong. */
static size_t zt_lf_sum_bad(const int32_t *p, size_t n, int nranks, int salt)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t want = 7 * nranks * (nranks - 1) / 2 + nranks * (salt + (int32_t)(i % 1000));
        bad += p[i] != want;
    }
    return bad;
}

/* One AllReduce SUM of zt_fill data on send -> recv, synchronized and checked. */
static int zt_allreduce_ok(zt_env_t *env, int32_t *send, int32_t *recv, int salt)
{
    zt_lf_fill(send, ZT_COUNT, env->rank, salt);
    HcclResult r = HcclAllReduce(send, recv, ZT_COUNT, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM,
                                 env->comm, env->stream);
    aclError e = r == HCCL_SUCCESS ? aclrtSynchronizeStream(env->stream) : ACL_SUCCESS;
    size_t bad = r == HCCL_SUCCESS && e == ACL_SUCCESS
                     ? zt_lf_sum_bad(recv, ZT_COUNT, env->nranks, salt)
                     : ZT_COUNT;
    if (bad != 0) {
        fprintf(stderr, "rank %d: AllReduce salt %d: call %d, sync %d, %zu wrong\n", env->rank,
                salt, (int)r, (int)e, bad);
    }
    return bad != 0;
}

/* Line the ranks up, so that a later sleep makes one of them the slow peer. */
static int zt_line_up(zt_env_t *env)
{
    HcclResult r = HcclBarrier(env->comm, env->stream);
    aclError e = aclrtSynchronizeStream(env->stream);
    if (r != HCCL_SUCCESS || e != ACL_SUCCESS) {
        fprintf(stderr, "rank %d: barrier %d / sync %d\n", env->rank, (int)r, (int)e);
        return 1;
    }
    return 0;
}

/* ---- every API taking a comm ------------------------------------------------------- */

#define ZT_API(call)                                                                               \
    do {                                                                                           \
        HcclResult r_ = (call);                                                                    \
        if (r_ != want) {                                                                          \
            fprintf(stderr, "pid %d: %s -> %d, want %d\n", (int)getpid(), #call, (int)r_,          \
                    (int)want);                                                                    \
            bad++;                                                                                 \
        }                                                                                          \
        (*ncalls)++;                                                                               \
    } while (0)

/* Call every HCCL API that takes a comm on h (HcclCommDestroy last); returns how many did
 * not return want. buf: 4 KiB of device memory the calls may name. */
static int zt_every_api(HcclComm h, aclrtStream s, void *buf, HcclResult want, int *ncalls)
{
    int bad = 0;
    uint32_t v = 0;
    char name[COMM_NAME_MAX_LENGTH];
    HcclResult async = HCCL_SUCCESS;
    uint64_t counts[64], displs[64];
    for (int i = 0; i < 64; i++) {
        counts[i] = 1;
        displs[i] = (uint64_t)i;
    }
    HcclSendRecvItem item = {HCCL_SEND, buf, 1, HCCL_DATA_TYPE_INT32, 1};
    uint32_t ids[1] = {0};
    HcclCommConfig cfg;
    HcclCommConfigInit(&cfg);
    HcclComm sub = NULL;
    HcclCommSymWindow win = NULL;
    size_t off = 0;
    const HcclDataType i32 = HCCL_DATA_TYPE_INT32;
    const HcclReduceOp sum = HCCL_REDUCE_SUM;
    ZT_API(HcclGetRankSize(h, &v));
    ZT_API(HcclGetRankId(h, &v));
    ZT_API(HcclGetCommName(h, name));
    ZT_API(HcclGetCommAsyncError(h, &async));
    ZT_API(HcclBarrier(h, s));
    ZT_API(HcclAllReduce(buf, buf, 1, i32, sum, h, s));
    ZT_API(HcclBroadcast(buf, 1, i32, 0, h, s));
    ZT_API(HcclReduceScatter(buf, buf, 1, i32, sum, h, s));
    ZT_API(HcclReduceScatterV(buf, counts, displs, buf, 1, i32, sum, h, s));
    ZT_API(HcclScatter(buf, buf, 1, i32, 0, h, s));
    ZT_API(HcclAllGather(buf, buf, 1, i32, h, s));
    ZT_API(HcclAllGatherV(buf, 1, buf, counts, displs, i32, h, s));
    ZT_API(HcclSend(buf, 1, i32, 1, h, s));
    ZT_API(HcclRecv(buf, 1, i32, 1, h, s));
    ZT_API(HcclAlltoAllVC(buf, counts, i32, buf, i32, h, s));
    ZT_API(HcclAlltoAllV(buf, counts, displs, i32, buf, counts, displs, i32, h, s));
    ZT_API(HcclAlltoAll(buf, 1, i32, buf, 1, i32, h, s));
    ZT_API(HcclReduce(buf, buf, 1, i32, sum, 0, h, s));
    ZT_API(HcclBatchSendRecv(&item, 1, h, s));
    if (HcclGroupStart() != HCCL_SUCCESS) {
        bad++;
    }
    ZT_API(HcclSend(buf, 1, i32, 1, h, s));
    if (HcclGroupEnd() != HCCL_SUCCESS) {
        bad++;
    }
    ZT_API(HcclCreateSubCommConfig(&h, 1, ids, 99, 0, &cfg, &sub));
    ZT_API(HcclCommSuspend(h));
    ZT_API(HcclCommResume(h));
    ZT_API(HcclCommSymWinRegister(h, buf, 64, &win, 0));
    ZT_API(HcclCommSymWinGet(h, buf, 64, &win, &off));
    ZT_API(HcclCommSetMemoryRange(h, buf, 2u << 20, 0, 0));
    ZT_API(HcclCommUnsetMemoryRange(h, buf));
    ZT_API(HcclCommActivateCommMemory(h, buf, 2u << 20, 0, (aclrtDrvMemHandle)buf, 0));
    ZT_API(HcclCommDeactivateCommMemory(h, buf));
    ZT_API(HcclCommDestroy(h));
    if (sub != NULL) {
        fprintf(stderr, "pid %d: HcclCreateSubCommConfig set subComm\n", (int)getpid());
        bad++;
    }
    return bad;
}

/* ---- stale handles ---------------------------------------------------------------------- */

static int zt_comm_one(HcclComm *out)
{
    HcclRootInfo ri;
    if (HcclGetRootInfo(&ri) != HCCL_SUCCESS) {
        return -1;
    }
    return HcclCommInitRootInfo(1, &ri, 0, out) == HCCL_SUCCESS ? 0 : -1;
}

static int rank_stale(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = 0;
    void *buf = NULL;
    if (aclrtMalloc(&buf, 4096, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        return 1;
    }
    HcclComm old = env.comm;
    if (HcclCommDestroy(old) != HCCL_SUCCESS) {
        ZT_FAIL("destroy of the first comm failed");
    }
    env.comm = NULL;
    HcclComm live[ZT_LIVE] = {NULL};
    HcclComm seen[ZT_NEW_COMMS];
    uint64_t t0 = zc_time_ns();
    for (int i = 0; i < ZT_NEW_COMMS && fails == 0; i++) {
        HcclComm *slot = &live[i % ZT_LIVE];
        if (*slot != NULL && HcclCommDestroy(*slot) != HCCL_SUCCESS) {
            ZT_FAIL("destroy of comm %d failed", i - ZT_LIVE);
        }
        if (zt_comm_one(slot) != 0) {
            ZT_FAIL("init of comm %d failed", i);
            break;
        }
        seen[i] = *slot;
        for (int j = 0; j < i; j++) {
            if (seen[j] == *slot) {
                ZT_FAIL("comm %d got the handle of comm %d (%p)", i, j, *slot);
            }
        }
        if (*slot == old) {
            ZT_FAIL("comm %d got the destroyed comm's handle %p", i, old);
        }
    }
    double create_ms = zt_ms_since(t0);
    int ncalls = 0;
    int bad = zt_every_api(old, env.stream, buf, HCCL_E_PARA, &ncalls);
    /* A handle destroyed inside the loop too, while its slot is taken again. */
    bad += zt_every_api(seen[0], env.stream, buf, HCCL_E_PARA, &ncalls);
    if (bad != 0) {
        ZT_FAIL("%d of %d calls on stale handles did not return HCCL_E_PARA", bad, ncalls);
    }
    for (int i = 0; i < ZT_LIVE; i++) {
        uint32_t v = 0;
        if (live[i] == NULL || HcclGetRankSize(live[i], &v) != HCCL_SUCCESS || v != 1 ||
            HcclCommDestroy(live[i]) != HCCL_SUCCESS) {
            ZT_FAIL("live comm %d is not usable", i);
        }
    }
    printf("stale handles: %d comms created after the destroy (%.0f ms), %d calls on 2 stale "
           "handles, all HCCL_E_PARA: %s\n",
           ZT_NEW_COMMS, create_ms, ncalls, bad == 0 ? "yes" : "no");
    aclrtFree(buf);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

static void test_stale_handles(void **state)
{
    (void)state;
    assert_int_equal(zt_launch_procs(1, rank_stale, NULL, 240), 0);
}

/* ---- fork -------------------------------------------------------------------------------- */

/* In the forked child: the inherited comm and stream are unusable, with clear codes. */
static int zt_forked_child(zt_env_t *env, void *buf)
{
    int ncalls = 0;
    int bad = zt_every_api(env->comm, env->stream, buf, HCCL_E_NOT_SUPPORT, &ncalls);
    aclError e = aclrtSynchronizeStream(env->stream);
    if (e != ACL_ERROR_RT_INVALID_HANDLE) {
        fprintf(stderr, "child: aclrtSynchronizeStream(parent's stream) -> %d\n", (int)e);
        bad++;
    }
    printf("forked child %d: %d calls on the parent's comm, %d not HCCL_E_NOT_SUPPORT\n",
           (int)getpid(), ncalls, bad);
    return bad != 0;
}

static int rank_fork(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = 0;
    int32_t *send = NULL, *recv = NULL;
    if (aclrtMalloc((void **)&send, ZT_COUNT * 4, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
        aclrtMalloc((void **)&recv, ZT_COUNT * 4, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        return 1;
    }
    fails += zt_allreduce_ok(&env, send, recv, 1);
    if (rank == 0) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            exit(zt_forked_child(&env, send)); /* exit(): atexit handlers run too */
        }
        int status = -1;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            ZT_FAIL("forked child failed (status 0x%x)", status);
        }
    }
    /* The peers' next ops pair with the parent's, and are correct. */
    for (int salt = 2; salt < 5; salt++) {
        fails += zt_allreduce_ok(&env, send, recv, salt);
    }
    aclrtFree(send);
    aclrtFree(recv);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

static void test_fork(void **state)
{
    (void)state;
    assert_int_equal(zt_launch_procs(2, rank_fork, NULL, 120), 0);
    assert_int_equal(zt_launch_procs(3, rank_fork, NULL, 120), 0);
}

/* ---- frees while an op is queued ------------------------------------------------------- */

/* Rank 0 frees send (and then recv of a second op) right after queuing each op; the
 * other ranks issue theirs ZT_SLOW_MS late. */
static int rank_free(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = 0;
    int32_t *send = NULL, *recv = NULL, *recv2 = NULL;
    if (aclrtMalloc((void **)&send, ZT_COUNT * 4, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
        aclrtMalloc((void **)&recv, ZT_COUNT * 4, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
        aclrtMalloc((void **)&recv2, ZT_COUNT * 4, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        return 1;
    }
    fails += zt_line_up(&env);
    if (rank != 0) {
        usleep(ZT_SLOW_MS * 1000);
    }
    zt_lf_fill(send, ZT_COUNT, rank, 10);
    HcclResult r = HcclAllReduce(send, recv, ZT_COUNT, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM,
                                 env.comm, env.stream);
    if (rank == 0) {
        uint64_t t0 = zc_time_ns();
        aclError e = aclrtFree(send);
        double ms = zt_ms_since(t0);
        send = NULL;
        printf("aclrtFree(send) with the op queued behind a %d ms late peer: %d after %.0f ms\n",
               ZT_SLOW_MS, (int)e, ms);
        if (e != ACL_SUCCESS) {
            ZT_FAIL("aclrtFree -> %d", (int)e);
        }
    }
    aclError e = aclrtSynchronizeStream(env.stream);
    size_t bad = zt_lf_sum_bad(recv, ZT_COUNT, nranks, 10);
    if (r != HCCL_SUCCESS || e != ACL_SUCCESS || bad != 0) {
        ZT_FAIL("rank %d: op with freed send: call %d sync %d, %zu wrong", rank, (int)r, (int)e,
                bad);
    }
    /* Free the output of a queued op: the op completes first, nothing is corrupted. */
    fails += zt_line_up(&env);
    if (rank != 0) {
        usleep(ZT_SLOW_MS * 1000);
    }
    int32_t *in = send != NULL ? send : recv;
    zt_lf_fill(in, ZT_COUNT, rank, 20);
    r = HcclAllReduce(in, recv2, ZT_COUNT, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, env.comm,
                      env.stream);
    if (rank == 0) {
        uint64_t t0 = zc_time_ns();
        e = aclrtFree(recv2);
        printf("aclrtFree(recv) with the op queued behind a %d ms late peer: %d after %.0f ms\n",
               ZT_SLOW_MS, (int)e, zt_ms_since(t0));
        recv2 = NULL;
        if (e != ACL_SUCCESS) {
            ZT_FAIL("aclrtFree(recv2) -> %d", (int)e);
        }
    }
    e = aclrtSynchronizeStream(env.stream);
    if (r != HCCL_SUCCESS || e != ACL_SUCCESS ||
        (recv2 != NULL && zt_lf_sum_bad(recv2, ZT_COUNT, nranks, 20) != 0)) {
        ZT_FAIL("rank %d: op with freed recv: call %d sync %d", rank, (int)r, (int)e);
    }
    /* The comm is still in step and correct. */
    int32_t *s2 = NULL;
    if (aclrtMalloc((void **)&s2, ZT_COUNT * 4, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        return 1;
    }
    fails += zt_allreduce_ok(&env, s2, recv, 30);
    aclrtFree(s2);
    if (send != NULL) {
        aclrtFree(send);
    }
    if (recv2 != NULL) {
        aclrtFree(recv2);
    }
    aclrtFree(recv);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

static void test_free_queued(void **state)
{
    (void)state;
    assert_int_equal(zt_launch_procs(2, rank_free, NULL, 120), 0);
    assert_int_equal(zt_launch_procs(3, rank_free, NULL, 120), 0);
}

/* Threads as ranks: rank 1 queues an op that waits for rank 0; rank 0 then frees a buffer
 * of its own before issuing its op. The free waits only for work rank 0's thread queued
 * (none), so it returns at once; waiting for every stream would wait for rank 1's op, which
 * waits for rank 0: a deadlock until the exec timeout. */
static atomic_int zt_thr_queued;

static int rank_thread_free(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = 0;
    int32_t *send = NULL, *recv = NULL, *tmp = NULL;
    if (aclrtMalloc((void **)&send, ZT_COUNT * 4, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
        aclrtMalloc((void **)&recv, ZT_COUNT * 4, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
        aclrtMalloc((void **)&tmp, 4096, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        return 1;
    }
    fails += zt_line_up(&env);
    zt_lf_fill(send, ZT_COUNT, rank, 80);
    HcclResult r = HCCL_SUCCESS;
    if (rank != 0) {
        r = HcclAllReduce(send, recv, ZT_COUNT, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, env.comm,
                          env.stream);
        atomic_fetch_add_explicit(&zt_thr_queued, 1, memory_order_release);
    } else {
        while (atomic_load_explicit(&zt_thr_queued, memory_order_acquire) < nranks - 1) {
            usleep(1000);
        }
        uint64_t t0 = zc_time_ns();
        aclError e = aclrtFree(tmp);
        double ms = zt_ms_since(t0);
        printf("threads as ranks: aclrtFree with a peer thread's op queued: %d after %.1f ms\n",
               (int)e, ms);
        if (e != ACL_SUCCESS || ms > 1000) {
            ZT_FAIL("aclrtFree -> %d after %.0f ms", (int)e, ms);
        }
        tmp = NULL;
        r = HcclAllReduce(send, recv, ZT_COUNT, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, env.comm,
                          env.stream);
    }
    aclError e = aclrtSynchronizeStream(env.stream);
    size_t bad = zt_lf_sum_bad(recv, ZT_COUNT, nranks, 80);
    if (r != HCCL_SUCCESS || e != ACL_SUCCESS || bad != 0) {
        ZT_FAIL("rank %d: call %d sync %d, %zu wrong", rank, (int)r, (int)e, bad);
    }
    if (tmp != NULL) {
        aclrtFree(tmp);
    }
    aclrtFree(send);
    aclrtFree(recv);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

static void test_threads_free(void **state)
{
    (void)state;
    atomic_store(&zt_thr_queued, 0);
    assert_int_equal(zt_launch_threads(2, rank_thread_free, NULL), 0);
    atomic_store(&zt_thr_queued, 0);
    assert_int_equal(zt_launch_threads(3, rank_thread_free, NULL), 0);
}

/* A zero-copy AllReduce on the arena (block 0 -> block 1), queued; returns the call's code. */
static HcclResult zt_zc_allreduce(zt_env_t *env, int salt)
{
    int32_t *send = env->zc.va;
    int32_t *recv = (int32_t *)((char *)env->zc.va + env->zc.block);
    zt_lf_fill(send, ZT_COUNT, env->rank, salt);
    return HcclAllReduce(send, recv, ZT_COUNT, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, env->comm,
                         env->stream);
}

/* The queued zero-copy op finished correctly, on the zero-copy path. */
static int zt_zc_done_ok(zt_env_t *env, HcclResult r, uint64_t zc_before, int salt)
{
    aclError e = aclrtSynchronizeStream(env->stream);
    const int32_t *recv = (const int32_t *)((char *)env->zc.va + env->zc.block);
    size_t bad = zt_lf_sum_bad(recv, ZT_COUNT, env->nranks, salt);
    uint64_t zc = zccl_comm_zero_copy_ops(env->comm) - zc_before;
    if (r != HCCL_SUCCESS || e != ACL_SUCCESS || bad != 0 || zc != 1) {
        fprintf(stderr,
                "rank %d: zero-copy op salt %d: call %d sync %d, %zu wrong, %llu "
                "zero-copy ops (want 1)\n",
                env->rank, salt, (int)r, (int)e, bad, (unsigned long long)zc);
        return 1;
    }
    return 0;
}

typedef struct {
    void *va;
    aclError rc;
    HcclComm comm;
    HcclResult hrc;
} zt_task_arg_t;

static int zt_task_unmap(void *p)
{
    zt_task_arg_t *a = p;
    a->rc = aclrtUnmapMem(a->va);
    return 0;
}

static int zt_task_free(void *p)
{
    zt_task_arg_t *a = p;
    a->rc = aclrtFree(a->va);
    return 0;
}

static int zt_task_deactivate(void *p)
{
    zt_task_arg_t *a = p;
    a->hrc = HcclCommDeactivateCommMemory(a->comm, a->va);
    return 0;
}

/* Run fn(a) as a task of a fresh stream and wait for it. */
static int zt_in_task(zccl_task_fn fn, zt_task_arg_t *a)
{
    aclrtStream s = NULL;
    if (aclrtCreateStream(&s) != ACL_SUCCESS || zccl_stream_enqueue(s, fn, a, NULL) != 0 ||
        aclrtSynchronizeStream(s) != ACL_SUCCESS || aclrtDestroyStream(s) != ACL_SUCCESS) {
        return -1;
    }
    return 0;
}

/* Unmap + free of activated memory, then Deactivate, each while a zero-copy op on it waits
 * for a late peer; and both from a stream task. Pipe gate[] holds the slow peers back until
 * rank 0 made its in-task calls. */
static int rank_zc_lifetime(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    int *gate = arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0 ||
        zt_zc_open(&env.zc, env.comm, env.device, ZT_COUNT * 4, 2, 1) != 0) {
        return 1;
    }
    int fails = 0;
    /* 1. Unmap + free the send block of a queued zero-copy op. */
    fails += zt_line_up(&env);
    if (rank != 0) {
        usleep(ZT_SLOW_MS * 1000);
    }
    uint64_t zc0 = zccl_comm_zero_copy_ops(env.comm);
    HcclResult r = zt_zc_allreduce(&env, 40);
    if (rank == 0) {
        uint64_t t0 = zc_time_ns();
        aclError e1 = aclrtUnmapMem(env.zc.va);
        double ms = zt_ms_since(t0);
        aclError e2 = aclrtFreePhysical(env.zc.h[0]);
        printf("aclrtUnmapMem + aclrtFreePhysical with the op queued behind a %d ms late peer: "
               "%d, %d after %.0f ms\n",
               ZT_SLOW_MS, (int)e1, (int)e2, ms);
        if (e1 != ACL_SUCCESS || e2 != ACL_SUCCESS) {
            ZT_FAIL("unmap %d free %d", (int)e1, (int)e2);
        }
        env.zc.h[0] = NULL;
    }
    fails += zt_zc_done_ok(&env, r, zc0, 40);
    if (rank == 0) {
        /* Put block 0 back (deactivate the unmapped one, map new memory, activate). */
        env.zc.h[0] = zt_phys_alloc(env.device, env.zc.block);
        if (HcclCommDeactivateCommMemory(env.comm, env.zc.va) != HCCL_SUCCESS ||
            env.zc.h[0] == NULL ||
            aclrtMapMem(env.zc.va, env.zc.block, 0, env.zc.h[0], 0) != ACL_SUCCESS ||
            HcclCommActivateCommMemory(env.comm, env.zc.va, env.zc.block, 0, env.zc.h[0], 0) !=
                HCCL_SUCCESS) {
            ZT_FAIL("rank 0: could not put block 0 back");
        }
    }
    /* 2. From a stream task, with an op queued that waits for the gated peers: the
     * calls fail at once and change nothing. */
    fails += zt_line_up(&env);
    char go = 0;
    if (rank != 0 && (read(gate[0], &go, 1) != 1 || go != 'g')) {
        ZT_FAIL("rank %d: gate", rank);
    }
    zc0 = zccl_comm_zero_copy_ops(env.comm);
    r = zt_zc_allreduce(&env, 50);
    if (rank == 0) {
        zt_task_arg_t a = {.va = env.zc.va, .comm = env.comm};
        void *plain = NULL;
        if (aclrtMalloc(&plain, 4096, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
            return 1;
        }
        uint64_t t0 = zc_time_ns();
        if (zt_in_task(zt_task_unmap, &a) != 0 || a.rc != ACL_ERROR_RT_STREAM_CONTEXT) {
            ZT_FAIL("aclrtUnmapMem from a task -> %d", (int)a.rc);
        }
        a.va = plain;
        if (zt_in_task(zt_task_free, &a) != 0 || a.rc != ACL_ERROR_RT_STREAM_CONTEXT) {
            ZT_FAIL("aclrtFree from a task -> %d", (int)a.rc);
        }
        a.va = env.zc.va;
        if (zt_in_task(zt_task_deactivate, &a) != 0 || a.hrc != HCCL_E_NOT_SUPPORT) {
            ZT_FAIL("HcclCommDeactivateCommMemory from a task -> %d", (int)a.hrc);
        }
        printf("from a stream task with the op queued: unmap %d, free %d, deactivate %d, "
               "in %.1f ms\n",
               ACL_ERROR_RT_STREAM_CONTEXT, ACL_ERROR_RT_STREAM_CONTEXT, (int)a.hrc,
               zt_ms_since(t0));
        for (int k = 1; k < nranks; k++) {
            if (write(gate[1], "g", 1) != 1) {
                ZT_FAIL("gate write");
            }
        }
        /* (Outside a task it waits for the queued op, hence after the gate.) */
        if (aclrtFree(plain) != ACL_SUCCESS) {
            ZT_FAIL("aclrtFree outside a task");
        }
    }
    fails += zt_zc_done_ok(&env, r, zc0, 50);
    /* 3. Deactivate the send block of a queued zero-copy op. */
    fails += zt_line_up(&env);
    if (rank != 0) {
        usleep(ZT_SLOW_MS * 1000);
    }
    zc0 = zccl_comm_zero_copy_ops(env.comm);
    r = zt_zc_allreduce(&env, 60);
    if (rank == 0) {
        uint64_t t0 = zc_time_ns();
        HcclResult d = HcclCommDeactivateCommMemory(env.comm, env.zc.va);
        printf("HcclCommDeactivateCommMemory with the op queued behind a %d ms late peer: %d "
               "after %.0f ms\n",
               ZT_SLOW_MS, (int)d, zt_ms_since(t0));
        if (d != HCCL_SUCCESS) {
            ZT_FAIL("deactivate -> %d", (int)d);
        }
        env.zc.active[0] = 0;
    }
    fails += zt_zc_done_ok(&env, r, zc0, 60);
    /* The comm is usable: the next op (send no longer active on rank 0) is buffered on
     * every rank and correct. */
    int32_t *recv = (int32_t *)((char *)env.zc.va + env.zc.block);
    fails += zt_allreduce_ok(&env, env.zc.va, recv, 70);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

static void test_zc_lifetime(void **state)
{
    (void)state;
    for (int n = 2; n <= 3; n++) {
        int gate[2];
        assert_int_equal(pipe(gate), 0);
        assert_int_equal(zt_launch_procs(n, rank_zc_lifetime, gate, 120), 0);
        close(gate[0]);
        close(gate[1]);
    }
}

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "30", 1);
    setenv("HCCL_CONNECT_TIMEOUT", "20", 1);
    setenv("HCCL_BUFFSIZE", "4", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_handles),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_free_queued),
        cmocka_unit_test(test_zc_lifetime),
        /* Last: ranks as threads leave this process multi-threaded, and the
         * tests above fork it. */
        cmocka_unit_test(test_threads_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
