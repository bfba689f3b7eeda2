/*
 * Op ordering and the caller-thread path.
 *
 *  - two streams: one thread issues AllReduce ops alternately on two streams
 *    of one communicator (small ones that finish inline and larger ones,
 *    zero-copy and buffered); on rank 0 stream A first waits for an event
 *    that is recorded only 50 ms later, so its ops reach the front of their
 *    stream long after the ops of stream B that follow them in issue order.
 *    Ops must be matched across ranks in issue order: every element of every
 *    output is checked. Forked ranks (np 2 and 3) and thread ranks (np 2,
 *    run last, with the thread-rank cross-stream case).
 *  - cross streams: rank 0 issues an AllReduce on stream A, then a Send on
 *    stream B; rank 1 a Recv on B, then (100 ms later) the AllReduce on A.
 *    Rank 0's AllReduce cannot finish on its thread (rank 1 is not there) and
 *    must go on on the stream worker, so the Send is issued and both finish.
 *    Small (inline) and large AllReduce, the large one with ZCCL_CALLER_MAX
 *    letting the caller's thread run it and keeping it for the worker.
 *  - op + synchronize loop: 2000 small AllReduce ops each followed by
 *    aclrtSynchronizeStream, each result checked, then 100,000 more in
 *    batches of 1000: the resident set must not grow by more than 1 MiB.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zt_launch.h"

#define OR_OPS 64
#define OR_BIG 3000 /* int32 elements of a large op: 12 KB, past the inline limit */
#define OR_SMALL 7
#define OR_LAUNCH_TIMEOUT_S 120

static int32_t or_value(int rank, int op, size_t j)
{
    return (int32_t)(rank * 1000003 + op * 7919 + (int)j);
}

static int32_t or_sum(int nranks, int op, size_t j)
{
    int64_t s = 0;
    for (int r = 0; r < nranks; r++) {
        s += or_value(r, op, j);
    }
    return (int32_t)s;
}

static size_t or_count(int i)
{
    return i % 4 < 2 ? OR_SMALL : OR_BIG;
}

/* Op i's buffers: zero-copy for i % 3 != 2, buffered otherwise. */
static void or_bufs(zt_env_t *e, int i, int32_t **send, int32_t **recv)
{
    char *base = i % 3 != 2 ? (char *)e->zc.va : (char *)e->plain;
    size_t slot = (size_t)OR_BIG * sizeof(int32_t);
    *send = (int32_t *)(void *)(base + (size_t)i * slot);
    *recv = (int32_t *)(void *)(base + e->half + (size_t)i * slot);
}

static void *or_record_later(void *p)
{
    aclrtEvent ev = p;
    usleep(50000);
    aclrtStream s = NULL;
    if (aclrtSetDevice(0) != ACL_SUCCESS || aclrtCreateStream(&s) != ACL_SUCCESS ||
        aclrtRecordEvent(ev, s) != ACL_SUCCESS || aclrtSynchronizeStream(s) != ACL_SUCCESS) {
        fprintf(stderr, "recording the late event failed\n");
    }
    if (s != NULL) {
        (void)aclrtDestroyStream(s);
    }
    return NULL;
}

static int or_check(int rank, int nranks, int i, const int32_t *recv)
{
    for (size_t j = 0; j < or_count(i); j++) {
        if (recv[j] != or_sum(nranks, i, j)) {
            fprintf(stderr, "[rank %d] op %d element %zu: %d, want %d\n", rank, i, j, recv[j],
                    or_sum(nranks, i, j));
            return 1;
        }
    }
    return 0;
}

static int or_rank_two_streams(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t e;
    if (zt_env_open(&e, rank, nranks, root, NULL) != 0 ||
        zt_env_arena(&e, (size_t)OR_OPS * OR_BIG * sizeof(int32_t)) != 0) {
        return 1;
    }
    aclrtStream b = NULL;
    aclrtEvent ev = NULL;
    pthread_t rec;
    int fails = aclrtCreateStream(&b) != ACL_SUCCESS || aclrtCreateEvent(&ev) != ACL_SUCCESS;
    if (!fails && rank == 0) {
        fails += aclrtStreamWaitEvent(e.stream, ev) != ACL_SUCCESS;
        fails += pthread_create(&rec, NULL, or_record_later, ev) != 0;
    }
    for (int i = 0; i < OR_OPS && !fails; i++) {
        int32_t *send, *recv;
        or_bufs(&e, i, &send, &recv);
        for (size_t j = 0; j < or_count(i); j++) {
            send[j] = or_value(rank, i, j);
            recv[j] = -1;
        }
        HcclResult h = HcclAllReduce(send, recv, or_count(i), HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM,
                                     e.comm, i % 2 ? b : e.stream);
        if (h != HCCL_SUCCESS) {
            fprintf(stderr, "[rank %d] op %d: HcclAllReduce %d\n", rank, i, (int)h);
            fails++;
        }
    }
    if (rank == 0 && ev != NULL) {
        pthread_join(rec, NULL);
    }
    aclError sa = aclrtSynchronizeStream(e.stream);
    aclError sb = aclrtSynchronizeStream(b);
    if (sa != ACL_SUCCESS || sb != ACL_SUCCESS) {
        fprintf(stderr, "[rank %d] synchronize: %d, %d\n", rank, (int)sa, (int)sb);
        fails++;
    }
    for (int i = 0; i < OR_OPS && !fails; i++) {
        int32_t *send, *recv;
        or_bufs(&e, i, &send, &recv);
        fails += or_check(rank, nranks, i, recv);
    }
    if (ev != NULL) {
        fails += aclrtDestroyEvent(ev) != ACL_SUCCESS;
    }
    if (b != NULL) {
        fails += aclrtDestroyStream(b) != ACL_SUCCESS;
    }
    fails += zt_env_close(&e) != 0;
    return fails;
}

static void test_two_streams_procs(void **state)
{
    (void)state;
    assert_int_equal(zt_launch_procs(2, or_rank_two_streams, NULL, OR_LAUNCH_TIMEOUT_S), 0);
    assert_int_equal(zt_launch_procs(3, or_rank_two_streams, NULL, OR_LAUNCH_TIMEOUT_S), 0);
}

/* ---- cross-stream order ----------------------------------------------------------------- */

static int or_rank_cross(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    size_t count = *(const size_t *)arg;
    zt_env_t e;
    if (zt_env_open(&e, rank, nranks, root, NULL) != 0 || zt_env_arena(&e, 1u << 20) != 0) {
        return 1;
    }
    aclrtStream b = NULL;
    int fails = aclrtCreateStream(&b) != ACL_SUCCESS;
    int32_t *send = e.zc.va;
    int32_t *recv = (int32_t *)(void *)((char *)e.zc.va + e.half);
    int32_t *msg = (int32_t *)(void *)(e.plain);
    for (size_t j = 0; j < count; j++) {
        send[j] = or_value(rank, 0, j);
        recv[j] = -1;
    }
    for (size_t j = 0; j < 1000; j++) {
        msg[j] = rank == 0 ? (int32_t)(j * 3) : -1;
    }
    HcclResult h1, h2;
    if (rank == 0) {
        h1 = HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, e.comm,
                           e.stream);
        h2 = HcclSend(msg, 1000, HCCL_DATA_TYPE_INT32, 1, e.comm, b);
    } else {
        h1 = HcclRecv(msg, 1000, HCCL_DATA_TYPE_INT32, 0, e.comm, b);
        usleep(100000);
        h2 = HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, e.comm,
                           e.stream);
    }
    aclError sa = aclrtSynchronizeStream(e.stream);
    aclError sb = aclrtSynchronizeStream(b);
    if (h1 != HCCL_SUCCESS || h2 != HCCL_SUCCESS || sa != ACL_SUCCESS || sb != ACL_SUCCESS) {
        fprintf(stderr, "[rank %d] calls %d %d, synchronize %d %d\n", rank, (int)h1, (int)h2,
                (int)sa, (int)sb);
        fails++;
    }
    for (size_t j = 0; j < count && !fails; j++) {
        if (recv[j] != or_sum(nranks, 0, j)) {
            fprintf(stderr, "[rank %d] element %zu: %d\n", rank, j, recv[j]);
            fails++;
        }
    }
    for (size_t j = 0; j < 1000 && !fails; j++) {
        if (msg[j] != (int32_t)(j * 3)) {
            fprintf(stderr, "[rank %d] message element %zu: %d\n", rank, j, msg[j]);
            fails++;
        }
    }
    if (b != NULL) {
        fails += aclrtDestroyStream(b) != ACL_SUCCESS;
    }
    fails += zt_env_close(&e) != 0;
    return fails;
}

static void test_cross_streams(void **state)
{
    (void)state;
    size_t small = 2;
    size_t big = 100000;
    /* The large op on the caller's thread (as on a host with no core to
     * spare per rank) and on the stream worker (as with cores to spare),
     * whatever host this runs on; the ranks are forked after the setenv. */
    static const char *const limits[] = {"1073741824", "65536"};
    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
        setenv("ZCCL_CALLER_MAX", limits[i], 1);
        assert_int_equal(zt_launch_procs(2, or_rank_cross, &small, OR_LAUNCH_TIMEOUT_S), 0);
        assert_int_equal(zt_launch_procs(2, or_rank_cross, &big, OR_LAUNCH_TIMEOUT_S), 0);
    }
    unsetenv("ZCCL_CALLER_MAX");
}

/* ---- op + synchronize ------------------------------------------------------------------- */

static long or_rss_kb(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL) {
        return -1;
    }
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) {
        rss = -1;
    }
    fclose(f);
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static int or_rank_loop(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t e;
    if (zt_env_open(&e, rank, nranks, root, NULL) != 0 || zt_env_arena(&e, 1u << 20) != 0) {
        return 1;
    }
    int fails = 0;
    float *send = e.zc.va;
    float *recv = (float *)(void *)((char *)e.zc.va + e.half);
    for (int i = 0; i < 2000 && !fails; i++) {
        send[0] = (float)(rank + i);
        send[1] = 1.0f;
        HcclResult h =
            HcclAllReduce(send, recv, 2, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, e.comm, e.stream);
        aclError s = aclrtSynchronizeStream(e.stream);
        float want = (float)(nranks * i + nranks * (nranks - 1) / 2);
        if (h != HCCL_SUCCESS || s != ACL_SUCCESS || recv[0] != want || recv[1] != (float)nranks) {
            fprintf(stderr, "[rank %d] op %d: %d/%d, got %g %g want %g %d\n", rank, i, (int)h,
                    (int)s, recv[0], recv[1], want, nranks);
            fails++;
        }
    }
    long before = or_rss_kb();
    for (int i = 0; i < 100 && !fails; i++) {
        for (int k = 0; k < 1000; k++) {
            fails += HcclAllReduce(send, recv, 2, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, e.comm,
                                   e.stream) != HCCL_SUCCESS;
        }
        fails += aclrtSynchronizeStream(e.stream) != ACL_SUCCESS;
    }
    long after = or_rss_kb();
    printf("[rank %d] resident set %ld kB before 100,000 small ops, %ld kB after\n", rank, before,
           after);
    if (before < 0 || after - before > 1024) {
        fprintf(stderr, "[rank %d] resident set grew from %ld to %ld kB\n", rank, before, after);
        fails++;
    }
    fails += zt_env_close(&e) != 0;
    return fails;
}

static void test_op_sync_loop(void **state)
{
    (void)state;
    assert_int_equal(zt_launch_procs(2, or_rank_loop, NULL, OR_LAUNCH_TIMEOUT_S), 0);
}

/* Thread ranks last: after them this process runs library threads, and a
 * fork from it (the forked launcher) is what the launcher avoids. */
static void test_thread_ranks(void **state)
{
    (void)state;
    size_t small = 2;
    assert_int_equal(zt_launch_threads(2, or_rank_two_streams, NULL), 0);
    assert_int_equal(zt_launch_threads(2, or_rank_cross, &small), 0);
}

int main(void)
{
    setenv("HCCL_BUFFSIZE", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_streams_procs),
        cmocka_unit_test(test_cross_streams),
        cmocka_unit_test(test_op_sync_loop),
        cmocka_unit_test(test_thread_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
