/*
 * HcclAllGather with threads of one process as ranks (one
 * HcclCommInitRootInfo per thread, as CANN's one-thread-per-device samples
 * do), np = 1..4: the full dtype x {zero-copy, buffered} x {in-place,
 * out-of-place} x count matrix against the expected concatenation,
 * re-activation at the same address, descriptor mismatches and two
 * communicators used alternately. Same-process peers use each other's addresses directly, so
 * this exercises the library's other peer-mapping path than the mp tests.
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

#include "zt_check.h"

#define ZT_COLL ZT_ALLGATHER
#define ZT_SEED 0x7b7ea9ull

static const int coll = ZT_COLL;

static void run_matrix(int n)
{
    static const int big_all_ops[] = {HCCL_DATA_TYPE_FP32};
    zt_matrix_t m = {ZT_COLL, 1000003, ZT_COLL == ZT_ALLREDUCE ? big_all_ops : NULL,
                     ZT_COLL == ZT_ALLREDUCE ? 1 : 0, ZT_SEED + (uint64_t)n};
    assert_int_equal(zt_launch_threads(n, zt_rank_matrix, &m), 0);
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
        failed += zt_launch_threads(n, zt_rank_reactivate, (void *)&coll);
    }
    assert_int_equal(failed, 0);
}

static void test_mismatch(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 2; n <= 4; n++) {
        failed += zt_launch_threads(n, zt_rank_mismatch, (void *)&coll);
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
        zt_two_comms_t t = {ZT_COLL, slot};
        failed += zt_launch_threads(n, zt_rank_two_comms, &t);
        zt_root_slot_destroy(slot);
    }
    assert_int_equal(failed, 0);
}

int main(void)
{
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
