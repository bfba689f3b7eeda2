/*
 * ReduceScatter(V), Reduce, Broadcast, Scatter, AllGatherV, AlltoAll(V, VC),
 * Send/Recv, BatchSendRecv and groups with threads of one process as ranks
 * (one HcclCommInitRootInfo per thread, as CANN's one-thread-per-device
 * samples do), np = 1..4: the collective matrix, mismatches between ranks,
 * local argument errors, Send/Recv rings, all-to-all batches and send/recv
 * mismatches (the scenarios of tests/common/zt_coll_scen.h and
 * zt_coll_p2p.h). Same-process peers use each other's addresses directly,
 * the library's other peer-mapping path than the mp tests take: collectives
 * on plain memory still go buffered, but point-to-point messages between
 * threads always go zero-copy, so they must stage nothing.
 *
 * The CCL buffer keeps its default size here (the mp tests shrink it);
 * HCCL_EXEC_TIMEOUT=60 turns a hang into an error.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "zt_coll_p2p.h"
#include "zt_coll_scen.h"

#define ZT_BIG 300001
#define ZT_SEED 0x7c011ull

static int body_matrix(zt_env_t *env, const void *arg)
{
    (void)arg;
    zt_ccmatrix_t m = {ZT_SEED + (uint64_t)env->nranks, ZT_BIG, 1};
    return zt_cc_matrix_run(env, &m);
}

static int body_mismatch(zt_env_t *env, const void *arg)
{
    return zt_cc_mismatch_run(env, arg);
}

static int body_badargs(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_cc_badargs_run(env);
}

static int body_ring(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_p2p_ring_run(env, 1, ZT_BIG, ZT_SEED ^ 0x51ull);
}

static int body_a2a(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_p2p_a2a_run(env, 1, ZT_BIG, ZT_SEED ^ 0x52ull);
}

static int body_p2p_mismatch(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_p2p_mismatch_run(env, 1, ZT_SEED ^ 0x53ull);
}

static int body_p2p_badargs(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_p2p_badargs_run(env, 1);
}

static int run_threads(zt_cc_body_fn body, const void *arg, int lo, int hi)
{
    zt_cc_job_t job = {body, arg};
    int failed = 0;
    for (int n = lo; n <= hi; n++) {
        failed += zt_launch_threads(n, zt_cc_rank_job, &job);
    }
    return failed;
}

static void test_matrix_np1(void **state)
{
    (void)state;
    assert_int_equal(run_threads(body_matrix, NULL, 1, 1), 0);
}

static void test_matrix_np2(void **state)
{
    (void)state;
    assert_int_equal(run_threads(body_matrix, NULL, 2, 2), 0);
}

static void test_matrix_np3(void **state)
{
    (void)state;
    assert_int_equal(run_threads(body_matrix, NULL, 3, 3), 0);
}

static void test_matrix_np4(void **state)
{
    (void)state;
    assert_int_equal(run_threads(body_matrix, NULL, 4, 4), 0);
}

static void test_mismatch(void **state)
{
    (void)state;
    zt_ccmismatch_t mm = {ZT_SEED ^ 0x3153ull, -1, 0};
    assert_int_equal(run_threads(body_mismatch, &mm, 2, 4), 0);
}

/* V count arrays that disagree: a fresh communicator per collective and path. */
static void test_mismatch_counts(void **state)
{
    (void)state;
    static const int vcolls[4] = {ZT_CC_REDUCESCATTERV, ZT_CC_ALLGATHERV, ZT_CC_ALLTOALLV,
                                  ZT_CC_ALLTOALLVC};
    int failed = 0;
    for (int k = 0; k < 4; k++) {
        for (int mem = 1; mem >= 0; mem--) {
            zt_ccmismatch_t mm = {ZT_SEED ^ 0x3154ull, vcolls[k], mem};
            failed += run_threads(body_mismatch, &mm, 2, 4);
        }
    }
    assert_int_equal(failed, 0);
}

static void test_badargs(void **state)
{
    (void)state;
    assert_int_equal(run_threads(body_badargs, NULL, 1, 4), 0);
}

static void test_p2p_ring(void **state)
{
    (void)state;
    assert_int_equal(run_threads(body_ring, NULL, 2, 4), 0);
}

static void test_p2p_batch_alltoall(void **state)
{
    (void)state;
    assert_int_equal(run_threads(body_a2a, NULL, 2, 4), 0);
}

static void test_p2p_mismatch(void **state)
{
    (void)state;
    assert_int_equal(run_threads(body_p2p_mismatch, NULL, 2, 4), 0);
}

static void test_p2p_badargs(void **state)
{
    (void)state;
    assert_int_equal(run_threads(body_p2p_badargs, NULL, 1, 4), 0);
}

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix_np1),
        cmocka_unit_test(test_matrix_np2),
        cmocka_unit_test(test_matrix_np3),
        cmocka_unit_test(test_matrix_np4),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_mismatch_counts),
        cmocka_unit_test(test_badargs),
        cmocka_unit_test(test_p2p_ring),
        cmocka_unit_test(test_p2p_batch_alltoall),
        cmocka_unit_test(test_p2p_mismatch),
        cmocka_unit_test(test_p2p_badargs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
