/*
 * HcclSend / HcclRecv, HcclBatchSendRecv and HcclGroupStart / HcclGroupEnd
 * with forked processes as ranks, np = 2, 3 and 4: rings (one to four
 * messages per pair matched in order, counts 0 to a message the staging
 * must chunk, grouped, nested, batched and ungrouped even-sends-first),
 * neighbour exchanges, all-to-all batches whose items each rank issues in
 * another order, a Broadcast inside a group, on every combination of
 * activated and plain send and receive buffers; staged bytes exactly the
 * bytes sent on the buffered path and 0 on the zero-copy path; count and
 * type mismatches (HCCL_E_PARA on both sides); local argument errors. The
 * scenarios are in tests/common/zt_coll_p2p.h.
 *
 * HCCL_BUFFSIZE=1 (unless set) keeps the staging buffer small so large
 * messages go in chunks; HCCL_EXEC_TIMEOUT=60 turns a deadlock into an
 * error the launcher sees. Ranks are forked before any library call.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "zt_coll_p2p.h"

#define ZT_BIG 300001
#define ZT_SEED 0x9e2beedull
#define ZT_TIMEOUT_S 300

static int body_ring(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_p2p_ring_run(env, 0, ZT_BIG, ZT_SEED + (uint64_t)env->nranks);
}

static int body_a2a(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_p2p_a2a_run(env, 0, ZT_BIG, ZT_SEED ^ (uint64_t)env->nranks);
}

static int body_mismatch(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_p2p_mismatch_run(env, 0, ZT_SEED ^ 0x77ull);
}

static int body_badargs(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_p2p_badargs_run(env, 0);
}

static int run_np(zt_cc_body_fn body, int lo, int hi)
{
    zt_cc_job_t job = {body, NULL};
    int failed = 0;
    for (int n = lo; n <= hi; n++) {
        failed += zt_launch_procs(n, zt_cc_rank_job, &job, ZT_TIMEOUT_S);
    }
    return failed;
}

static void test_ring(void **state)
{
    (void)state;
    assert_int_equal(run_np(body_ring, 2, 4), 0);
}

static void test_batch_alltoall(void **state)
{
    (void)state;
    assert_int_equal(run_np(body_a2a, 2, 4), 0);
}

static void test_mismatch(void **state)
{
    (void)state;
    assert_int_equal(run_np(body_mismatch, 2, 4), 0);
}

static void test_badargs(void **state)
{
    (void)state;
    assert_int_equal(run_np(body_badargs, 1, 4), 0);
}

int main(void)
{
    setenv("HCCL_BUFFSIZE", "1", 0);
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring),
        cmocka_unit_test(test_batch_alltoall),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_badargs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
