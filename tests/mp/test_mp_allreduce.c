/*
 * HcclAllReduce with forked processes as ranks, np = 1..4 (4 oversubscribes
 * a 2-core machine): the full dtype x op x {zero-copy, buffered} x {in-place,
 * out-of-place} x count matrix against a serial reference, re-activation at
 * the same address, descriptor mismatches, and two communicators used
 * alternately (scenarios in tests/common/zt_launch.c).
 *
 * HCCL_BUFFSIZE=1 (unless set) makes the buffered path chunk every op past
 * 1 MB; HCCL_EXEC_TIMEOUT=60 turns a hang into an error the launcher sees.
 * Nothing of the library runs in this parent process: ranks are forked first.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "zt_check.h"

#define ZT_BIG_COUNT 1000003
#define ZT_TIMEOUT_S 300

static const int big_all_ops[] = {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_FP32};
static const int coll = ZT_ALLREDUCE;

static void run_matrix(int n)
{
    zt_matrix_t m = {ZT_ALLREDUCE, ZT_BIG_COUNT, big_all_ops,
                     (int)(sizeof(big_all_ops) / sizeof(big_all_ops[0])), 0xa11ed0ce + (uint64_t)n};
    assert_int_equal(zt_launch_procs(n, zt_rank_matrix, &m, ZT_TIMEOUT_S), 0);
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

static void test_reactivate(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 1; n <= 4; n++) {
        failed += zt_launch_procs(n, zt_rank_reactivate, (void *)&coll, 120);
    }
    assert_int_equal(failed, 0);
}

static void test_mismatch(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 2; n <= 4; n++) {
        failed += zt_launch_procs(n, zt_rank_mismatch, (void *)&coll, 120);
    }
    assert_int_equal(failed, 0);
}

static void test_two_comms(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 1; n <= 4; n++) {
        zt_root_slot_t *slot = zt_root_slot_create();
        assert_non_null(slot);
        zt_two_comms_t t = {ZT_ALLREDUCE, slot};
        failed += zt_launch_procs(n, zt_rank_two_comms, &t, 120);
        zt_root_slot_destroy(slot);
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
        cmocka_unit_test(test_reactivate), cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_two_comms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
