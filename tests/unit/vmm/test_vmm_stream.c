/*
 * Streams: FIFO order of many tasks (more than the queue depth), the NULL
 * stream as the current device's default stream, synchronize returning (and
 * clearing) an enqueued task's error, stop/continue on failure, timeouts,
 * query, destroy (draining and forced), synchronize-device, tasks that
 * misuse their own stream, a forked child with no inherited streams, and the
 * exact aclError plus one log line for each bad input.
 *
 * The device count comes from hwloc here (ZCCL_DEVICES unset); device 0
 * always exists.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "acl/acl.h"
#include "zccl/vmm_ext.h"
#include "zt_logcount.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- task helpers --------------------------------------------------------------------- */

#define NORDER 5000

static int order_log[NORDER];
static atomic_int order_n;
static atomic_int dtor_n;
static atomic_int ran_n;
static atomic_int gate; /* blocking tasks wait until it is non-zero */

static int task_append(void *arg)
{
    int i = atomic_fetch_add(&order_n, 1);
    if (i < NORDER) {
        order_log[i] = (int)(intptr_t)arg;
    }
    return 0;
}

static int task_count(void *arg)
{
    (void)arg;
    atomic_fetch_add(&ran_n, 1);
    return 0;
}

static int task_fail(void *arg)
{
    return (int)(intptr_t)arg;
}

static int task_block(void *arg)
{
    while (atomic_load(&gate) == 0) {
        zt_sleep_ms(1);
    }
    return (int)(intptr_t)arg;
}

static void dtor_count(void *arg)
{
    (void)arg;
    atomic_fetch_add(&dtor_n, 1);
}

static void reset_counters(void)
{
    atomic_store(&order_n, 0);
    atomic_store(&dtor_n, 0);
    atomic_store(&ran_n, 0);
    atomic_store(&gate, 0);
}

static void *release_gate_later(void *p)
{
    zt_sleep_ms((int)(intptr_t)p);
    atomic_store(&gate, 1);
    return NULL;
}

/* ---- tests ------------------------------------------------------------------------------ */

static int body_create_no_device(void)
{
    aclrtStream s = NULL;
    long m = zt_lg_mark();
    if (aclrtCreateStream(&s) != ACL_ERROR_RT_CONTEXT_NULL || zt_lg_lines_since(m) != 1) {
        return 1;
    }
    m = zt_lg_mark();
    if (aclrtSynchronizeStream(NULL) != ACL_ERROR_RT_CONTEXT_NULL || zt_lg_lines_since(m) != 1) {
        return 2;
    }
    m = zt_lg_mark();
    if (zccl_stream_enqueue(NULL, task_count, NULL, NULL) != ACL_ERROR_RT_CONTEXT_NULL ||
        zt_lg_lines_since(m) != 1) {
        return 3;
    }
    m = zt_lg_mark();
    if (aclrtSynchronizeDevice() != ACL_ERROR_RT_CONTEXT_NULL || zt_lg_lines_since(m) != 1) {
        return 4;
    }
    if (zccl_stream_device(NULL) != -1) {
        return 5;
    }
    return s == NULL ? 0 : 6;
}

static void test_create_destroy_bad_input(void **state)
{
    (void)state;
    assert_int_equal(zt_in_fresh_thread(body_create_no_device), 0);
    aclrtStream s = NULL;
    int bogus = 0;
    ZT_EXPECT_ERR(aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtCreateStreamWithConfig(&s, 8, 0), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtCreateStreamWithConfig(&s, 0, 0x40), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtCreateStreamWithConfig(NULL, 0, 0), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtDestroyStream(NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtDestroyStream(&bogus), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtDestroyStreamForce(&bogus), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtSynchronizeStream(&bogus), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtSynchronizeStreamWithTimeout(&bogus, 10), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtSynchronizeStreamWithTimeout(NULL, -2), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtSetStreamFailureMode(&bogus, ACL_STOP_ON_FAILURE),
                  ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtSetStreamFailureMode(NULL, ACL_STOP_ON_FAILURE), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(zccl_stream_enqueue(&bogus, task_count, NULL, NULL), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtSynchronizeDeviceWithTimeout(-5), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(zccl_stream_device(&bogus), -1);
    assert_null(s);

    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStreamWithConfig(&s, 7, ACL_STREAM_FAST_LAUNCH | ACL_STREAM_HUGE),
                     ACL_SUCCESS);
    assert_int_equal(zccl_stream_device(s), 0);
    ZT_EXPECT_ERR(zccl_stream_enqueue(s, NULL, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtSetStreamFailureMode(s, 2), ACL_ERROR_INVALID_PARAM);
    aclrtStreamStatus st;
    ZT_EXPECT_ERR(aclrtStreamQuery(s, NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtStreamQuery(&bogus, &st), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtDestroyStream(s), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclrtDestroyStream(s), ACL_ERROR_RT_INVALID_HANDLE); /* stale handle */
    ZT_EXPECT_ERR(aclrtSynchronizeStream(s), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(zccl_stream_device(s), -1);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

/* More tasks than the queue depth, from two producers on two streams. */
static void test_fifo_order(void **state)
{
    (void)state;
    reset_counters();
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    aclrtStream s;
    assert_int_equal(aclrtCreateStream(&s), ACL_SUCCESS);
    for (int i = 0; i < NORDER; i++) {
        assert_int_equal(zccl_stream_enqueue(s, task_append, (void *)(intptr_t)i, dtor_count),
                         ACL_SUCCESS);
    }
    assert_int_equal(aclrtSynchronizeStream(s), ACL_SUCCESS);
    assert_int_equal(atomic_load(&order_n), NORDER);
    assert_int_equal(atomic_load(&dtor_n), NORDER);
    for (int i = 0; i < NORDER; i++) {
        assert_int_equal(order_log[i], i);
    }
    aclrtStreamStatus st = ACL_STREAM_STATUS_RESERVED;
    assert_int_equal(aclrtStreamQuery(s, &st), ACL_SUCCESS);
    assert_int_equal(st, ACL_STREAM_STATUS_COMPLETE);
    assert_int_equal(aclrtDestroyStream(s), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

static void test_sync_returns_task_error(void **state)
{
    (void)state;
    reset_counters();
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    aclrtStream s;
    assert_int_equal(aclrtCreateStream(&s), ACL_SUCCESS);
    /* Default mode continues after a failure; the first error is reported. */
    assert_int_equal(zccl_stream_enqueue(s, task_fail, (void *)(intptr_t)12345, NULL), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(s, task_count, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(s, task_fail, (void *)(intptr_t)777, NULL), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(s, task_count, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(s), 12345);
    assert_int_equal(atomic_load(&ran_n), 2);
    assert_int_equal(aclrtSynchronizeStream(s), ACL_SUCCESS); /* cleared */

    /* Stop on failure: the tasks after the failure are dropped (dtor only) until
     * the error is collected; then the stream runs work again. */
    atomic_store(&ran_n, 0);
    assert_int_equal(aclrtSetStreamFailureMode(s, ACL_STOP_ON_FAILURE), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(s, task_count, NULL, dtor_count), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(s, task_fail, (void *)(intptr_t)5, dtor_count),
                     ACL_SUCCESS);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(zccl_stream_enqueue(s, task_count, NULL, dtor_count), ACL_SUCCESS);
    }
    assert_int_equal(aclrtSynchronizeStream(s), 5);
    assert_int_equal(atomic_load(&ran_n), 1);
    assert_int_equal(atomic_load(&dtor_n), 12);
    assert_int_equal(zccl_stream_enqueue(s, task_count, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(s), ACL_SUCCESS);
    assert_int_equal(atomic_load(&ran_n), 2);

    /* Back to continue mode. */
    assert_int_equal(aclrtSetStreamFailureMode(s, ACL_CONTINUE_ON_FAILURE), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(s, task_fail, (void *)(intptr_t)9, NULL), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(s, task_count, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(s), 9);
    assert_int_equal(atomic_load(&ran_n), 3);
    assert_int_equal(aclrtDestroyStream(s), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

static void test_sync_timeout_and_query(void **state)
{
    (void)state;
    reset_counters();
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    aclrtStream s;
    aclrtStreamStatus st;
    assert_int_equal(aclrtCreateStream(&s), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(s, task_block, (void *)(intptr_t)77, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtStreamQuery(s, &st), ACL_SUCCESS);
    assert_int_equal(st, ACL_STREAM_STATUS_NOT_READY);
    ZT_EXPECT_ERR(aclrtSynchronizeStreamWithTimeout(s, 0), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    ZT_EXPECT_ERR(aclrtSynchronizeStreamWithTimeout(s, 30), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    ZT_EXPECT_ERR(aclrtSynchronizeDeviceWithTimeout(20), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    atomic_store(&gate, 1);
    /* The task's error is still there for the synchronize that sees it finish. */
    assert_int_equal(aclrtSynchronizeStreamWithTimeout(s, -1), 77);
    assert_int_equal(aclrtStreamQuery(s, &st), ACL_SUCCESS);
    assert_int_equal(st, ACL_STREAM_STATUS_COMPLETE);
    assert_int_equal(aclrtSynchronizeStreamWithTimeout(s, 0), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(s), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

static void test_null_stream_is_default(void **state)
{
    (void)state;
    reset_counters();
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(zccl_stream_device(NULL), 0);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(zccl_stream_enqueue(NULL, task_append, (void *)(intptr_t)i, NULL),
                         ACL_SUCCESS);
    }
    assert_int_equal(zccl_stream_enqueue(NULL, task_fail, (void *)(intptr_t)31, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(NULL), 31);
    assert_int_equal(atomic_load(&order_n), 100);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(order_log[i], i);
    }
    aclrtStreamStatus st;
    assert_int_equal(aclrtStreamQuery(NULL, &st), ACL_SUCCESS);
    assert_int_equal(st, ACL_STREAM_STATUS_COMPLETE);
    /* Reset drains and destroys the default stream; a new one appears on next use. */
    atomic_store(&ran_n, 0);
    for (int i = 0; i < 50; i++) {
        assert_int_equal(zccl_stream_enqueue(NULL, task_count, NULL, NULL), ACL_SUCCESS);
    }
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
    assert_int_equal(atomic_load(&ran_n), 50);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(NULL, task_count, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
    assert_int_equal(atomic_load(&ran_n), 51);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

static void test_synchronize_device(void **state)
{
    (void)state;
    reset_counters();
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    aclrtStream a, b;
    assert_int_equal(aclrtCreateStream(&a), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&b), ACL_SUCCESS);
    for (int i = 0; i < 200; i++) {
        assert_int_equal(zccl_stream_enqueue(i % 2 ? a : b, task_count, NULL, NULL), ACL_SUCCESS);
    }
    assert_int_equal(zccl_stream_enqueue(b, task_fail, (void *)(intptr_t)4242, NULL), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(NULL, task_count, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeDevice(), 4242);
    assert_int_equal(atomic_load(&ran_n), 201);
    assert_int_equal(aclrtSynchronizeDevice(), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(a), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(b), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

static void test_destroy_drains_and_force_drops(void **state)
{
    (void)state;
    reset_counters();
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    aclrtStream s;
    assert_int_equal(aclrtCreateStream(&s), ACL_SUCCESS);
    for (int i = 0; i < 300; i++) {
        assert_int_equal(zccl_stream_enqueue(s, task_count, NULL, dtor_count), ACL_SUCCESS);
    }
    assert_int_equal(aclrtDestroyStream(s), ACL_SUCCESS);
    assert_int_equal(atomic_load(&ran_n), 300);
    assert_int_equal(atomic_load(&dtor_n), 300);

    reset_counters();
    assert_int_equal(aclrtCreateStream(&s), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(s, task_block, NULL, dtor_count), ACL_SUCCESS);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(zccl_stream_enqueue(s, task_count, NULL, dtor_count), ACL_SUCCESS);
    }
    pthread_t rel;
    assert_int_equal(pthread_create(&rel, NULL, release_gate_later, (void *)(intptr_t)30), 0);
    assert_int_equal(aclrtDestroyStreamForce(s), ACL_SUCCESS);
    pthread_join(rel, NULL);
    assert_int_equal(atomic_load(&ran_n), 0);   /* queued work was dropped */
    assert_int_equal(atomic_load(&dtor_n), 21); /* but every dtor ran */
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

/* A task may enqueue on its own stream, but not synchronize or destroy it. */
static aclrtStream self_stream;
static atomic_int self_sync_rc, self_destroy_rc;

static int task_misuse_self(void *arg)
{
    (void)arg;
    atomic_store(&self_sync_rc, aclrtSynchronizeStream(self_stream));
    atomic_store(&self_destroy_rc, aclrtDestroyStream(self_stream));
    return zccl_stream_enqueue(self_stream, task_count, NULL, NULL);
}

static void test_task_uses_own_stream(void **state)
{
    (void)state;
    reset_counters();
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&self_stream), ACL_SUCCESS);
    long m = zt_lg_mark();
    assert_int_equal(zccl_stream_enqueue(self_stream, task_misuse_self, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(self_stream), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(self_stream), ACL_SUCCESS);
    assert_int_equal(zt_lg_lines_since(m), 2);
    assert_int_equal(atomic_load(&self_sync_rc), ACL_ERROR_RT_PARAM_INVALID);
    assert_int_equal(atomic_load(&self_destroy_rc), ACL_ERROR_RT_PARAM_INVALID);
    assert_int_equal(atomic_load(&ran_n), 1);
    assert_int_equal(aclrtDestroyStream(self_stream), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

/* Many threads enqueue on one stream at once: every task runs exactly once. */
static aclrtStream shared_stream;

static void *producer(void *p)
{
    (void)p;
    for (int i = 0; i < 500; i++) {
        if (zccl_stream_enqueue(shared_stream, task_count, NULL, dtor_count) != ACL_SUCCESS) {
            return (void *)1;
        }
    }
    return NULL;
}

static void test_concurrent_producers(void **state)
{
    (void)state;
    reset_counters();
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&shared_stream), ACL_SUCCESS);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, producer, NULL), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        assert_null(r);
    }
    assert_int_equal(aclrtSynchronizeStream(shared_stream), ACL_SUCCESS);
    assert_int_equal(atomic_load(&ran_n), 2000);
    assert_int_equal(atomic_load(&dtor_n), 2000);
    assert_int_equal(aclrtDestroyStream(shared_stream), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

/* A forked child inherits no stream: parent handles are invalid there, new
 * streams and the default stream work. */
static void test_fork_child_has_no_streams(void **state)
{
    (void)state;
    reset_counters();
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    aclrtStream s;
    assert_int_equal(aclrtCreateStream(&s), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(NULL, task_count, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(s, task_count, NULL, NULL), ACL_SUCCESS);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int bad = 0;
        aclrtStream c = NULL;
        bad |= aclrtSynchronizeStream(s) != ACL_ERROR_RT_INVALID_HANDLE;
        bad |= (zccl_stream_enqueue(s, task_count, NULL, NULL) != ACL_ERROR_RT_INVALID_HANDLE) << 1;
        bad |= (aclrtCreateStream(&c) != ACL_SUCCESS) << 2;
        atomic_store(&ran_n, 0);
        bad |= (zccl_stream_enqueue(c, task_count, NULL, NULL) != ACL_SUCCESS) << 3;
        bad |= (zccl_stream_enqueue(NULL, task_count, NULL, NULL) != ACL_SUCCESS) << 4;
        bad |= (aclrtSynchronizeDevice() != ACL_SUCCESS) << 5;
        bad |= (atomic_load(&ran_n) != 2) << 6;
        bad |= (aclrtDestroyStream(c) != ACL_SUCCESS) << 7;
        _exit(bad);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(aclrtSynchronizeDevice(), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(s), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

/* aclFinalize drains the default streams. */
static void test_finalize_drains_default(void **state)
{
    (void)state;
    reset_counters();
    assert_int_equal(aclInit(NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(zccl_stream_enqueue(NULL, task_count, NULL, NULL), ACL_SUCCESS);
    }
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
    assert_int_equal(atomic_load(&ran_n), 20);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

/* Pages of the worker's stack below a shallow task's frame: how many of the
 * 4 kB pages from 8 kB to 24 kB below it are resident (the worker touched
 * 32 kB of its stack when it started, so none faults in a deep task). */
static atomic_int stack_resident = -1;
static atomic_int stack_on_worker;

static int task_stack_probe(void *arg)
{
    pthread_t caller = *(pthread_t *)arg;
    atomic_store(&stack_on_worker, !pthread_equal(pthread_self(), caller));
    volatile char here = 0;
    uintptr_t page = ((uintptr_t)&here & ~(uintptr_t)4095) - (8u << 10);
    unsigned char vec[4];
    int rc = mincore((void *)(page - (12u << 10)), 16u << 10, vec);
    int n = 0;
    for (int i = 0; rc == 0 && i < 4; i++) {
        n += vec[i] & 1;
    }
    atomic_store(&stack_resident, rc == 0 ? n : -1);
    return here;
}

static void test_worker_stack_resident(void **state)
{
    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    aclrtStream s;
    assert_int_equal(aclrtCreateStream(&s), ACL_SUCCESS);
    pthread_t me = pthread_self();
    assert_int_equal(zccl_stream_enqueue(s, task_stack_probe, &me, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(s), ACL_SUCCESS);
    assert_int_equal(atomic_load(&stack_on_worker), 1);
    assert_int_equal(atomic_load(&stack_resident), 4);
    assert_int_equal(aclrtDestroyStream(s), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

int main(void)
{
    zt_lg_open("stream");
    unsetenv("ZCCL_DEVICES");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_destroy_bad_input),
        cmocka_unit_test(test_fifo_order),
        cmocka_unit_test(test_sync_returns_task_error),
        cmocka_unit_test(test_sync_timeout_and_query),
        cmocka_unit_test(test_null_stream_is_default),
        cmocka_unit_test(test_synchronize_device),
        cmocka_unit_test(test_destroy_drains_and_force_drops),
        cmocka_unit_test(test_task_uses_own_stream),
        cmocka_unit_test(test_concurrent_producers),
        cmocka_unit_test(test_fork_child_has_no_streams),
        cmocka_unit_test(test_finalize_drains_default),
        cmocka_unit_test(test_worker_stack_resident),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zt_lg_close();
    return rc;
}
