/*
 * ReduceScatter(V), Reduce, Broadcast, Scatter, AllGatherV and
 * AlltoAll(V, VC) with forked processes as ranks, np = 2, 3 and 4 (4
 * oversubscribes a 2-core machine; np = 1 too): every collective x {zero-copy, buffered,
 * rank 0 plain} x {in place, out of place} x counts (0 to chunked) x dtypes
 * (all 12 for the reductions, with all 4 ops) x roots, uneven V counts with
 * zeros, each element checked against a serial reference and each byte
 * around the outputs; staged bytes 0 on the zero-copy path; mismatches
 * between ranks (HCCL_E_PARA on every rank) and local argument errors. The
 * cases and scenarios are in tests/common/zt_coll.h and zt_coll_scen.h.
 *
 * HCCL_BUFFSIZE=1 (unless set) makes the buffered path chunk the large
 * cases; HCCL_EXEC_TIMEOUT=60 turns a hang into an error the launcher sees.
 * Nothing of the library runs in this parent process: ranks are forked first.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "zt_coll_scen.h"

#define ZT_BIG 300001
#define ZT_SEED 0xc011ec7ull
#define ZT_TIMEOUT_S 300

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

static void run_matrix(int n)
{
    zt_cc_job_t job = {body_matrix, NULL};
    assert_int_equal(zt_launch_procs(n, zt_cc_rank_job, &job, ZT_TIMEOUT_S), 0);
}

static void test_matrix_np1(void **state)
{
    (void)state;
    run_matrix(1);
}

static void test_matrix_np2(void **state)
{
    (void)state;
    run_matrix(2);
}

static void test_matrix_np3(void **state)
{
    (void)state;
    run_matrix(3);
}

static void test_matrix_np4(void **state)
{
    (void)state;
    run_matrix(4);
}

/* Count, dtype, op and root mismatches of every collective on one communicator. */
static void test_mismatch(void **state)
{
    (void)state;
    zt_ccmismatch_t mm = {ZT_SEED ^ 0x3153ull, -1, 0};
    zt_cc_job_t job = {body_mismatch, &mm};
    int failed = 0;
    for (int n = 2; n <= 4; n++) {
        failed += zt_launch_procs(n, zt_cc_rank_job, &job, 120);
    }
    assert_int_equal(failed, 0);
}

/* V count arrays (matrix) that disagree: a fresh communicator per collective and path. */
static void test_mismatch_counts(void **state)
{
    (void)state;
    static const int vcolls[4] = {ZT_CC_REDUCESCATTERV, ZT_CC_ALLGATHERV, ZT_CC_ALLTOALLV,
                                  ZT_CC_ALLTOALLVC};
    int failed = 0;
    for (int n = 2; n <= 4; n++) {
        for (int k = 0; k < 4; k++) {
            for (int mem = 1; mem >= 0; mem--) {
                zt_ccmismatch_t mm = {ZT_SEED ^ 0x3154ull, vcolls[k], mem};
                zt_cc_job_t job = {body_mismatch, &mm};
                failed += zt_launch_procs(n, zt_cc_rank_job, &job, 120);
            }
        }
    }
    assert_int_equal(failed, 0);
}

static void test_badargs(void **state)
{
    (void)state;
    zt_cc_job_t job = {body_badargs, NULL};
    int failed = 0;
    for (int n = 1; n <= 4; n++) {
        failed += zt_launch_procs(n, zt_cc_rank_job, &job, 120);
    }
    assert_int_equal(failed, 0);
}

int main(void)
{
    setenv("HCCL_BUFFSIZE", "1", 0);
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix_np1), cmocka_unit_test(test_matrix_np2),
        cmocka_unit_test(test_matrix_np3), cmocka_unit_test(test_matrix_np4),
        cmocka_unit_test(test_mismatch),   cmocka_unit_test(test_mismatch_counts),
        cmocka_unit_test(test_badargs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
