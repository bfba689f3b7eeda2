/*
 * Graph capture (acl/acl_mdl.h) with two thread ranks of one process.
 *
 * Each rank captures, on its stream, a copy of a staging buffer into its
 * zero-copy send buffer, an AllReduce, a Broadcast from rank 1, a buffered
 * AllReduce and a Send from rank 0 to rank 1: nothing runs during the capture (outputs stay
 * untouched, no op is counted). Five replays with new staging data each must give exact results,
 * and each replay's collectives are new ops (the comm's op counters grow by the model's ops per
 * replay). Ops issued one by one between two replays interleave correctly. Then the error codes:
 * begin twice, end with no capture, synchronize or record an event on a capturing stream (the
 * capture is invalidated and its end says so), end on another thread in a
 * non-relaxed mode, run a model on a capturing stream, bad handles, destroy
 * while a replay is queued.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "core/hccl_test_api.h"
#include "zccl/vmm_ext.h"
#include "zt_check.h"

#define NRANKS 2
#define COUNT 4096 /* floats: 16 KiB, past the inline limit */
#define REPLAYS 5

static int rank_capture(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t env;
    int fails = 0;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0 ||
        zt_env_arena(&env, COUNT * sizeof(float)) != 0) {
        return 1;
    }
    float *send = env.zc.va;
    float *recv = (float *)((char *)env.zc.va + env.zc.block);
    float *psend = (float *)(void *)env.plain;
    float *precv = (float *)(void *)(env.plain + env.half);
    static float stage[NRANKS][COUNT];
    static float bcast[NRANKS][COUNT];
    static float p2p[COUNT]; /* rank 1 receives rank 0's staging buffer */
    for (int i = 0; i < COUNT; i++) {
        recv[i] = -1.0f;
        precv[i] = -1.0f;
        psend[i] = (float)(rank + 1);
    }
    uint64_t zc0 = zccl_comm_zero_copy_ops(env.comm);
    uint64_t buf0 = zccl_comm_buffered_ops(env.comm);
    ZT_EXPECT(&env,
              aclmdlRICaptureBegin(env.stream, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL) ==
                  ACL_SUCCESS,
              "capture begin");
    aclmdlRICaptureStatus st = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    aclmdlRI live = NULL;
    ZT_EXPECT(&env,
              aclmdlRICaptureGetInfo(env.stream, &st, &live) == ACL_SUCCESS &&
                  st == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE && live != NULL,
              "get info");
    ZT_EXPECT(&env,
              aclrtMemcpyAsync(send, COUNT * sizeof(float), stage[rank], COUNT * sizeof(float),
                               ACL_MEMCPY_HOST_TO_DEVICE, env.stream) == ACL_SUCCESS,
              "captured copy");
    ZT_EXPECT_RC(&env,
                 HcclAllReduce(send, recv, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, env.comm,
                               env.stream),
                 HCCL_SUCCESS, "captured allreduce");
    ZT_EXPECT_RC(&env,
                 HcclBroadcast(bcast[rank], COUNT, HCCL_DATA_TYPE_FP32, 1, env.comm, env.stream),
                 HCCL_SUCCESS, "captured broadcast");
    ZT_EXPECT_RC(&env,
                 HcclAllReduce(psend, precv, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, env.comm,
                               env.stream),
                 HCCL_SUCCESS, "captured buffered");
    if (rank == 0) {
        ZT_EXPECT_RC(&env, HcclSend(stage[0], COUNT, HCCL_DATA_TYPE_FP32, 1, env.comm, env.stream),
                     HCCL_SUCCESS, "captured send");
    } else {
        ZT_EXPECT_RC(&env, HcclRecv(p2p, COUNT, HCCL_DATA_TYPE_FP32, 0, env.comm, env.stream),
                     HCCL_SUCCESS, "captured recv");
    }
    ZT_EXPECT(&env, aclrtSynchronizeStream(env.stream) == ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
              "sync while capturing");
    aclmdlRI model = NULL;
    ZT_EXPECT(&env, aclmdlRICaptureEnd(env.stream, &model) == ACL_SUCCESS && model == live,
              "capture end");
    ZT_EXPECT(&env, aclrtSynchronizeStream(env.stream) == ACL_SUCCESS, "sync after capture");
    ZT_EXPECT(&env, recv[0] == -1.0f && precv[0] == -1.0f, "captured work ran: %f %f", recv[0],
              precv[0]);
    ZT_EXPECT(&env,
              zccl_comm_zero_copy_ops(env.comm) == zc0 && zccl_comm_buffered_ops(env.comm) == buf0,
              "captured ops were counted");
    for (int k = 0; k < REPLAYS; k++) {
        for (int i = 0; i < COUNT; i++) {
            stage[rank][i] = (float)((rank + 1) * (k + 1) + i % 7);
            bcast[rank][i] = rank == 1 ? (float)(k * 1000 + i) : -5.0f;
        }
        if (k == 3) {
            /* the synchronous form runs on the model's own stream */
            ZT_EXPECT(&env, aclmdlRIExecute(model, -1) == ACL_SUCCESS, "replay %d (sync)", k);
        } else {
            ZT_EXPECT(&env, aclmdlRIExecuteAsync(model, env.stream) == ACL_SUCCESS, "replay %d", k);
        }
        if (k == 2) {
            /* an op issued one by one between replays */
            ZT_EXPECT_RC(&env, HcclBarrier(env.comm, env.stream), HCCL_SUCCESS, "barrier");
        }
        ZT_EXPECT(&env, aclrtSynchronizeStream(env.stream) == ACL_SUCCESS, "replay %d sync", k);
        int bad = 0;
        for (int i = 0; i < COUNT && !bad; i++) {
            float want = (float)(3 * (k + 1) + 2 * (i % 7));
            bad = recv[i] != want || bcast[rank][i] != (float)(k * 1000 + i) || precv[i] != 2.0f ||
                  (rank == 1 && p2p[i] != (float)(k + 1 + i % 7));
            ZT_EXPECT(&env, !bad, "replay %d element %d: %f (want %f) %f %f", k, i, recv[i], want,
                      bcast[rank][i], precv[i]);
        }
    }
    /* per replay: the zero-copy AllReduce and the send/recv (peers in one
     * process); the Broadcast (plain memory) and the buffered AllReduce */
    ZT_EXPECT(&env,
              zccl_comm_zero_copy_ops(env.comm) == zc0 + 2 * REPLAYS &&
                  zccl_comm_buffered_ops(env.comm) == buf0 + 2 * REPLAYS,
              "ops per replay: zero-copy %llu buffered %llu",
              (unsigned long long)(zccl_comm_zero_copy_ops(env.comm) - zc0),
              (unsigned long long)(zccl_comm_buffered_ops(env.comm) - buf0));
    ZT_EXPECT(&env, aclmdlRIDestroy(model) == ACL_SUCCESS, "destroy");
    ZT_EXPECT(&env, aclmdlRIDestroy(model) == ACL_ERROR_INVALID_PARAM, "destroy twice");
    ZT_EXPECT(&env, aclmdlRIExecuteAsync(model, env.stream) == ACL_ERROR_INVALID_PARAM,
              "run destroyed");
    return zt_env_close(&env) != 0 ? fails + 1 : fails;
}

static void test_capture_collectives(void **state)
{
    (void)state;
    assert_int_equal(zt_launch_threads(NRANKS, rank_capture, NULL), 0);
}

static void *end_elsewhere(void *arg)
{
    aclmdlRI m = NULL;
    return (void *)(intptr_t)aclmdlRICaptureEnd((aclrtStream)arg, &m);
}

static int slow_task(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 200000000L};
    nanosleep(&ts, NULL);
    return 0;
}

static void test_capture_errors(void **state)
{
    (void)state;
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    aclrtStream s = NULL;
    aclrtStream other = NULL;
    assert_int_equal(aclrtCreateStream(&s), ACL_SUCCESS);
    assert_int_equal(aclrtCreateStream(&other), ACL_SUCCESS);
    aclmdlRI m = NULL;
    aclmdlRICaptureStatus st = ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
    assert_int_equal(aclmdlRICaptureGetInfo(s, &st, &m), ACL_SUCCESS);
    assert_int_equal(st, ACL_MODEL_RI_CAPTURE_STATUS_NONE);
    assert_null(m);
    assert_int_equal(aclmdlRICaptureGetInfo(s, NULL, &m), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclmdlRICaptureEnd(s, &m), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
    assert_int_equal(aclmdlRICaptureBegin(s, (aclmdlRICaptureMode)7), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclmdlRICaptureBegin((aclrtStream)&m, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL),
                     ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclmdlRIExecuteAsync(NULL, s), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclmdlRIDestroy(NULL), ACL_ERROR_INVALID_PARAM);

    /* begin twice; end from another thread in GLOBAL mode; end with NULL */
    assert_int_equal(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_SUCCESS);
    assert_int_equal(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL),
                     ACL_ERROR_RT_STREAM_CAPTURED);
    pthread_t th;
    void *ret = NULL;
    assert_int_equal(pthread_create(&th, NULL, end_elsewhere, s), 0);
    pthread_join(th, &ret);
    assert_int_equal((int)(intptr_t)ret, ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD);
    assert_int_equal(aclmdlRICaptureEnd(s, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclmdlRIDestroy(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclmdlRICaptureGetInfo(s, &st, &m), ACL_SUCCESS);
    assert_int_equal(aclmdlRIDestroy(m), ACL_ERROR_RT_MODEL_CAPTURED);
    assert_int_equal(aclmdlRIExecuteAsync(m, other), ACL_ERROR_RT_MODEL_CAPTURED);
    assert_int_equal(aclmdlRICaptureEnd(s, &m), ACL_SUCCESS);
    char name[8] = "x";
    assert_int_equal(aclmdlRIGetName(m, sizeof(name), name), ACL_SUCCESS);
    assert_string_equal(name, "");
    assert_int_equal(aclmdlRISetName(m, "model-1"), ACL_SUCCESS);
    assert_int_equal(aclmdlRIGetName(m, sizeof(name), name), ACL_SUCCESS);
    assert_string_equal(name, "model-1");
    assert_int_equal(aclmdlRIGetName(m, 7, name), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclmdlRISetName(m, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclmdlRIExecute(m, -2), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclmdlRIExecute(m, -1), ACL_SUCCESS); /* an empty model */
    assert_int_equal(aclmdlRIExecute(NULL, -1), ACL_ERROR_INVALID_PARAM);

    /* running a model on a capturing stream; destroy while a replay is queued */
    assert_int_equal(aclmdlRICaptureBegin(other, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), ACL_SUCCESS);
    assert_int_equal(aclmdlRIExecuteAsync(m, other), ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
    assert_int_equal(pthread_create(&th, NULL, end_elsewhere, other), 0);
    pthread_join(th, &ret); /* RELAXED: another thread may end it */
    assert_int_equal((int)(intptr_t)ret, ACL_SUCCESS);
    assert_int_equal(zccl_stream_enqueue(s, slow_task, NULL, NULL), ACL_SUCCESS);
    assert_int_equal(aclmdlRIExecuteAsync(m, s), ACL_SUCCESS);
    assert_int_equal(aclmdlRIDestroy(m), ACL_ERROR_RT_MODEL_RUNNING);
    assert_int_equal(aclrtSynchronizeStream(s), ACL_SUCCESS);
    assert_int_equal(aclmdlRIDestroy(m), ACL_SUCCESS);

    /* an event on a capturing stream invalidates the capture */
    aclrtEvent ev = NULL;
    assert_int_equal(aclrtCreateEvent(&ev), ACL_SUCCESS);
    assert_int_equal(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_SUCCESS);
    assert_int_equal(aclrtRecordEvent(ev, s), ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
    assert_int_equal(aclmdlRICaptureGetInfo(s, &st, NULL), ACL_SUCCESS);
    assert_int_equal(st, ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED);
    m = NULL;
    assert_int_equal(aclmdlRICaptureEnd(s, &m), ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);
    assert_null(m);
    assert_int_equal(aclrtDestroyEvent(ev), ACL_SUCCESS);

    /* a stream destroyed while capturing: the capture is gone with it */
    assert_int_equal(aclmdlRICaptureBegin(other, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_SUCCESS);
    assert_int_equal(aclmdlRICaptureGetInfo(other, &st, &m), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(other), ACL_SUCCESS);
    assert_int_equal(aclmdlRIExecuteAsync(m, s), ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);
    assert_int_equal(aclmdlRIDestroy(m), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(s), ACL_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_errors),
        cmocka_unit_test(test_capture_collectives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
