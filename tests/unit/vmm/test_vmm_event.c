/*
 * Events: create (with flags, reusable), destroy, record, reset, query
 * (recorded and wait status), host synchronize (with timeout), elapsed time,
 * cross-stream waits (wait before and after the record, classic and reusable
 * events), an event destroyed under a waiting stream, a force-destroyed
 * stream blocked in a wait, a forked child with no inherited events, and the
 * exact aclError plus one log line for each bad input.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- tasks ----------------------------------------------------------------------------- */

static atomic_int gate;   /* blocking tasks wait for it */
static atomic_int flag_a; /* set by a task on stream A */
static atomic_int seen_a; /* what a task on stream B saw of flag_a */
static atomic_int b_ran;

static int task_block(void *arg)
{
    (void)arg;
    while (atomic_load(&gate) == 0) {
        zt_sleep_ms(1);
    }
    return 0;
}

static int task_sleep(void *arg)
{
    zt_sleep_ms((int)(intptr_t)arg);
    return 0;
}

static int task_set_a(void *arg)
{
    (void)arg;
    atomic_store(&flag_a, 1);
    return 0;
}

static int task_read_a(void *arg)
{
    (void)arg;
    atomic_store(&seen_a, atomic_load(&flag_a));
    atomic_fetch_add(&b_ran, 1);
    return 0;
}

static void reset_flags(void)
{
    atomic_store(&gate, 0);
    atomic_store(&flag_a, 0);
    atomic_store(&seen_a, -1);
    atomic_store(&b_ran, 0);
}

static void *release_gate_later(void *p)
{
    zt_sleep_ms((int)(intptr_t)p);
    atomic_store(&gate, 1);
    return NULL;
}

static void setup_streams(aclrtStream *a, aclrtStream *b)
{
    reset_flags();
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(a), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(b), ACL_SUCCESS);
}

static void teardown_streams(aclrtStream a, aclrtStream b)
{
    assert_int_equal(aclrtDestroyStream(a), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(b), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

/* ---- tests ---------------------------------------------------------------------------- */

static void test_bad_input(void **state)
{
    (void)state;
    aclrtEvent ev = NULL;
    int bogus = 0;
    aclrtEventRecordedStatus rs;
    aclrtEventWaitStatus ws;
    aclrtEventStatus os;
    float ms = 0;
    ZT_EXPECT_ERR(aclrtCreateEvent(NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtCreateEventWithFlag(NULL, ACL_EVENT_SYNC), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtCreateEventWithFlag(&ev, 0x80), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtCreateEventWithFlag(&ev, ACL_EVENT_IPC), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    ZT_EXPECT_ERR(aclrtCreateEventExWithFlag(&ev, 0x100), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtCreateEventExWithFlag(NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_null(ev);
    ZT_EXPECT_ERR(aclrtDestroyEvent(NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtDestroyEvent(&bogus), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtRecordEvent(NULL, NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtRecordEvent(&bogus, NULL), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtResetEvent(&bogus, NULL), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtStreamWaitEvent(NULL, &bogus), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtSynchronizeEvent(&bogus), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtSynchronizeEventWithTimeout(&bogus, 5), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtQueryEventStatus(&bogus, &rs), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtQueryEventWaitStatus(&bogus, &ws), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtQueryEvent(&bogus, &os), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtEventElapsedTime(&ms, &bogus, &bogus), ACL_ERROR_RT_INVALID_HANDLE);

    assert_int_equal(aclrtCreateEvent(&ev), ACL_SUCCESS);
    int bogus_stream = 0;
    ZT_EXPECT_ERR(aclrtQueryEventStatus(ev, NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtQueryEventWaitStatus(ev, NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtQueryEvent(ev, NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtEventElapsedTime(NULL, ev, ev), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtEventElapsedTime(&ms, ev, ev), ACL_ERROR_INVALID_PARAM); /* unrecorded */
    ZT_EXPECT_ERR(aclrtSynchronizeEventWithTimeout(ev, -2), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtRecordEvent(ev, &bogus_stream), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtStreamWaitEvent(&bogus_stream, ev), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtResetEvent(ev, &bogus_stream), ACL_ERROR_RT_INVALID_HANDLE);
    /* The NULL stream needs a current device (this thread has none here). */
    ZT_EXPECT_ERR(aclrtRecordEvent(ev, NULL), ACL_ERROR_RT_CONTEXT_NULL);
    ZT_EXPECT_ERR(aclrtStreamWaitEvent(NULL, ev), ACL_ERROR_RT_CONTEXT_NULL);
    /* A failed record did not count: the event is still unrecorded. */
    assert_int_equal(aclrtQueryEventStatus(ev, &rs), ACL_SUCCESS);
    assert_int_equal(rs, ACL_EVENT_RECORDED_STATUS_NOT_READY);
    assert_int_equal(aclrtSynchronizeEvent(ev), ACL_SUCCESS); /* unrecorded: returns at once */
    assert_int_equal(aclrtDestroyEvent(ev), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclrtDestroyEvent(ev), ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtQueryEventStatus(ev, &rs), ACL_ERROR_RT_INVALID_HANDLE);
}

static void test_record_query_reset(void **state)
{
    (void)state;
    aclrtStream a, b;
    setup_streams(&a, &b);
    aclrtEvent ev;
    aclrtEventRecordedStatus rs;
    aclrtEventWaitStatus ws;
    aclrtEventStatus os;
    assert_int_equal(aclrtCreateEventWithFlag(&ev, ACL_EVENT_SYNC), ACL_SUCCESS);
    assert_int_equal(aclrtQueryEventWaitStatus(ev, &ws), ACL_SUCCESS);
    assert_int_equal(ws, ACL_EVENT_WAIT_STATUS_NOT_READY); /* classic: waits for a record */

    assert_int_equal(zccl_stream_enqueue(a, task_block, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(ev, a), ACL_SUCCESS);
    assert_int_equal(aclrtQueryEventStatus(ev, &rs), ACL_SUCCESS);
    assert_int_equal(rs, ACL_EVENT_RECORDED_STATUS_NOT_READY);
    assert_int_equal(aclrtQueryEvent(ev, &os), ACL_SUCCESS);
    assert_int_equal(os, ACL_EVENT_STATUS_NOT_READY);
    ZT_EXPECT_ERR(aclrtSynchronizeEventWithTimeout(ev, 20), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    atomic_store(&gate, 1);
    assert_int_equal(aclrtSynchronizeEvent(ev), ACL_SUCCESS);
    assert_int_equal(aclrtQueryEventStatus(ev, &rs), ACL_SUCCESS);
    assert_int_equal(rs, ACL_EVENT_RECORDED_STATUS_COMPLETE);
    assert_int_equal(aclrtQueryEvent(ev, &os), ACL_SUCCESS);
    assert_int_equal(os, ACL_EVENT_STATUS_COMPLETE);
    assert_int_equal(aclrtQueryEventWaitStatus(ev, &ws), ACL_SUCCESS);
    assert_int_equal(ws, ACL_EVENT_WAIT_STATUS_COMPLETE);

    /* Reset in stream order: the completed record no longer counts. */
    assert_int_equal(aclrtResetEvent(ev, b), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
    assert_int_equal(aclrtQueryEventStatus(ev, &rs), ACL_SUCCESS);
    assert_int_equal(rs, ACL_EVENT_RECORDED_STATUS_NOT_READY);
    assert_int_equal(aclrtRecordEvent(ev, b), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
    assert_int_equal(aclrtQueryEventStatus(ev, &rs), ACL_SUCCESS);
    assert_int_equal(rs, ACL_EVENT_RECORDED_STATUS_COMPLETE);
    assert_int_equal(aclrtDestroyEvent(ev), ACL_SUCCESS);
    teardown_streams(a, b);
}

static void test_elapsed_time(void **state)
{
    (void)state;
    aclrtStream a, b;
    setup_streams(&a, &b);
    aclrtEvent e0, e1, nt;
    float ms = -1;
    assert_int_equal(aclrtCreateEvent(&e0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateEventWithFlag(&e1, ACL_EVENT_TIME_LINE), ACL_SUCCESS);
    assert_int_equal(aclrtCreateEventWithFlag(&nt, ACL_EVENT_SYNC), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(e0, a), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(a, task_sleep, (void *)(intptr_t)5, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(e1, a), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(nt, a), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(a), ACL_SUCCESS);
    assert_int_equal(aclrtEventElapsedTime(&ms, e0, e1), ACL_SUCCESS);
    assert_true(ms >= 4.5f);
    assert_true(ms < 5000.0f);
    ZT_EXPECT_ERR(aclrtEventElapsedTime(&ms, e1, e0), ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL);
    ZT_EXPECT_ERR(aclrtEventElapsedTime(&ms, e0, nt), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
    float same = -1;
    assert_int_equal(aclrtEventElapsedTime(&same, e0, e0), ACL_SUCCESS);
    assert_true(same == 0.0f);

    /* A record that has not run yet. */
    assert_int_equal(zccl_stream_enqueue(b, task_block, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(e1, b), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclrtEventElapsedTime(&ms, e0, e1), ACL_ERROR_RT_EVENT_NOT_COMPLETE);
    atomic_store(&gate, 1);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
    assert_int_equal(aclrtEventElapsedTime(&ms, e0, e1), ACL_SUCCESS);
    assert_true(ms > 0.0f);
    assert_int_equal(aclrtDestroyEvent(e0), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyEvent(e1), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyEvent(nt), ACL_SUCCESS);
    teardown_streams(a, b);
}

/* B waits for A's record: B's reader runs after A's writer. */
static void test_cross_stream_wait(void **state)
{
    (void)state;
    aclrtStream a, b;
    setup_streams(&a, &b);
    aclrtEvent ev;
    assert_int_equal(aclrtCreateEvent(&ev), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(a, task_block, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(a, task_set_a, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(ev, a), ACL_SUCCESS);
    assert_int_equal(aclrtStreamWaitEvent(b, ev), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(b, task_read_a, NULL, NULL), ACL_SUCCESS);
    aclrtStreamStatus st;
    zt_sleep_ms(10);
    assert_int_equal(aclrtStreamQuery(b, &st), ACL_SUCCESS);
    assert_int_equal(st, ACL_STREAM_STATUS_NOT_READY);
    assert_int_equal(atomic_load(&b_ran), 0);
    atomic_store(&gate, 1);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
    assert_int_equal(atomic_load(&seen_a), 1);
    assert_int_equal(aclrtDestroyEvent(ev), ACL_SUCCESS);
    teardown_streams(a, b);
}

/* Classic event: a wait enqueued before any record waits for the next record. */
static void test_wait_before_record(void **state)
{
    (void)state;
    aclrtStream a, b;
    setup_streams(&a, &b);
    aclrtEvent ev;
    assert_int_equal(aclrtCreateEventWithFlag(&ev, ACL_EVENT_SYNC), ACL_SUCCESS);
    assert_int_equal(aclrtStreamWaitEvent(b, ev), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(b, task_read_a, NULL, NULL), ACL_SUCCESS);
    zt_sleep_ms(10);
    assert_int_equal(atomic_load(&b_ran), 0);
    assert_int_equal(zccl_stream_enqueue(a, task_set_a, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(ev, a), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
    assert_int_equal(atomic_load(&seen_a), 1);
    assert_int_equal(aclrtDestroyEvent(ev), ACL_SUCCESS);
    teardown_streams(a, b);
}

/* Reusable event: no record means no wait; a record is waited for; re-recording
 * needs no reset. */
static void test_reusable_event(void **state)
{
    (void)state;
    aclrtStream a, b;
    setup_streams(&a, &b);
    aclrtEvent ev;
    aclrtEventWaitStatus ws;
    assert_int_equal(aclrtCreateEventExWithFlag(&ev, ACL_EVENT_TIME_LINE), ACL_SUCCESS);
    assert_int_equal(aclrtQueryEventWaitStatus(ev, &ws), ACL_SUCCESS);
    assert_int_equal(ws, ACL_EVENT_WAIT_STATUS_COMPLETE);
    assert_int_equal(aclrtStreamWaitEvent(b, ev), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(b, task_read_a, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
    assert_int_equal(atomic_load(&b_ran), 1);
    assert_int_equal(atomic_load(&seen_a), 0);

    for (int round = 0; round < 3; round++) {
        atomic_store(&gate, 0);
        atomic_store(&flag_a, 0);
        assert_int_equal(zccl_stream_enqueue(a, task_block, NULL, NULL), ACL_SUCCESS);
        assert_int_equal(zccl_stream_enqueue(a, task_set_a, NULL, NULL), ACL_SUCCESS);
        assert_int_equal(aclrtRecordEvent(ev, a), ACL_SUCCESS);
        assert_int_equal(aclrtQueryEventWaitStatus(ev, &ws), ACL_SUCCESS);
        assert_int_equal(ws, ACL_EVENT_WAIT_STATUS_NOT_READY);
        assert_int_equal(aclrtStreamWaitEvent(b, ev), ACL_SUCCESS);
        assert_int_equal(zccl_stream_enqueue(b, task_read_a, NULL, NULL), ACL_SUCCESS);
        pthread_t rel;
        assert_int_equal(pthread_create(&rel, NULL, release_gate_later, (void *)(intptr_t)5), 0);
        assert_int_equal(aclrtSynchronizeStream(b), ACL_SUCCESS);
        pthread_join(rel, NULL);
        assert_int_equal(atomic_load(&seen_a), 1);
    }
    assert_int_equal(aclrtDestroyEvent(ev), ACL_SUCCESS);
    teardown_streams(a, b);
}

/* Destroying an event under a waiting stream fails that wait (reported by sync);
 * force-destroying a stream blocked in a wait returns. */
static void test_destroy_under_wait(void **state)
{
    (void)state;
    aclrtStream a, b;
    setup_streams(&a, &b);
    aclrtEvent ev;
    assert_int_equal(aclrtCreateEvent(&ev), ACL_SUCCESS);
    assert_int_equal(aclrtStreamWaitEvent(b, ev), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(b, task_read_a, NULL, NULL), ACL_SUCCESS);
    zt_sleep_ms(5);
    long m = zt_lg_mark();
    assert_int_equal(aclrtDestroyEvent(ev), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(b), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(zt_lg_lines_since(m), 1);
    assert_int_equal(atomic_load(&b_ran), 1); /* continue-on-failure mode */

    aclrtStream c;
    assert_int_equal(aclrtCreateStream(&c), ACL_SUCCESS);
    assert_int_equal(aclrtCreateEvent(&ev), ACL_SUCCESS);
    assert_int_equal(aclrtStreamWaitEvent(c, ev), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(c, task_read_a, NULL, NULL), ACL_SUCCESS);
    zt_sleep_ms(5);
    assert_int_equal(aclrtDestroyStreamForce(c), ACL_SUCCESS);
    assert_int_equal(atomic_load(&b_ran), 1); /* c's reader was dropped */
    assert_int_equal(aclrtDestroyEvent(ev), ACL_SUCCESS);
    teardown_streams(a, b);
}

/* A record dropped by a stop-on-failure stream still completes the event (no
 * hang) but has no timestamp. */
static int task_fail(void *arg)
{
    (void)arg;
    return 99;
}

static void test_dropped_record(void **state)
{
    (void)state;
    aclrtStream a, b;
    setup_streams(&a, &b);
    aclrtEvent e0, e1;
    float ms;
    assert_int_equal(aclrtCreateEvent(&e0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateEvent(&e1), ACL_SUCCESS);
    assert_int_equal(aclrtSetStreamFailureMode(a, ACL_STOP_ON_FAILURE), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(e0, a), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(a, task_fail, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(e1, a), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeEvent(e1), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclrtEventElapsedTime(&ms, e0, e1), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
    assert_int_equal(aclrtSynchronizeStream(a), 99);
    assert_int_equal(aclrtDestroyEvent(e0), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyEvent(e1), ACL_SUCCESS);
    teardown_streams(a, b);
}

static void test_null_stream_events(void **state)
{
    (void)state;
    reset_flags();
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    aclrtEvent e0, e1;
    float ms = 0;
    assert_int_equal(aclrtCreateEvent(&e0), ACL_SUCCESS);
    assert_int_equal(aclrtCreateEvent(&e1), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(e0, NULL), ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(NULL, task_sleep, (void *)(intptr_t)2, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(e1, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtStreamWaitEvent(NULL, e1), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
    assert_int_equal(aclrtEventElapsedTime(&ms, e0, e1), ACL_SUCCESS);
    assert_true(ms > 1.5f);
    assert_int_equal(aclrtDestroyEvent(e0), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyEvent(e1), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

static void test_fork_child_has_no_events(void **state)
{
    (void)state;
    aclrtEvent ev;
    assert_int_equal(aclrtCreateEvent(&ev), ACL_SUCCESS);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        aclrtEventRecordedStatus rs;
        aclrtEvent mine = NULL;
        int bad = aclrtQueryEventStatus(ev, &rs) != ACL_ERROR_RT_INVALID_HANDLE;
        bad |= (aclrtCreateEvent(&mine) != ACL_SUCCESS) << 1;
        bad |= (aclrtSetDevice(0) != ACL_SUCCESS) << 2;
        bad |= (aclrtRecordEvent(mine, NULL) != ACL_SUCCESS) << 3;
        bad |= (aclrtSynchronizeEvent(mine) != ACL_SUCCESS) << 4;
        bad |= (aclrtQueryEventStatus(mine, &rs) != ACL_SUCCESS ||
                rs != ACL_EVENT_RECORDED_STATUS_COMPLETE)
               << 5;
        _exit(bad);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(aclrtDestroyEvent(ev), ACL_SUCCESS);
}

int main(void)
{
    zt_lg_open("event");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input),          cmocka_unit_test(test_record_query_reset),
        cmocka_unit_test(test_elapsed_time),       cmocka_unit_test(test_cross_stream_wait),
        cmocka_unit_test(test_wait_before_record), cmocka_unit_test(test_reusable_event),
        cmocka_unit_test(test_destroy_under_wait), cmocka_unit_test(test_dropped_record),
        cmocka_unit_test(test_null_stream_events), cmocka_unit_test(test_fork_child_has_no_events),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zt_lg_close();
    return rc;
}
