/*
 * ReduceScatter and ReduceScatterV, direct and staged, with thread ranks:
 * np 1..4, every reducible dtype x op, counts 0 / 1 / 7 / 1000 and 256 Ki
 * fp32, out of place, both in-place forms (recv = own block of send, and
 * recv = send), a partial overlap, uneven V counts with zeros and gaps, odd
 * addresses, and CCL buffers small enough to force chunking.
 */
#include "test_coll_harness.h"

static void run_kind(tc_kind_t kind, int staged)
{
    for (int np = 1; np <= TC_MAXR; np++) {
        for (size_t t = 0; t < sizeof(tc_reduce_types) / sizeof(tc_reduce_types[0]); t++) {
            for (int op = COLL_SUM; op <= COLL_MIN; op++) {
                for (size_t ci = 0; ci < sizeof(tc_counts) / sizeof(tc_counts[0]); ci++) {
                    for (int ip = TC_OOP; ip <= TC_MIXED; ip++) {
                        tc_case_t c = tc_case(kind, np, tc_reduce_types[t], op, tc_counts[ci]);
                        c.staged = staged;
                        c.inplace = ip;
                        c.ccl_bytes = (ci + (size_t)op) % 2 ? 700 : 4096;
                        tc_run_case(&c);
                    }
                }
            }
        }
    }
}

static void test_reducescatter_direct(void **state)
{
    (void)state;
    run_kind(TC_REDUCESCATTER, 0);
}

static void test_reducescatter_staged(void **state)
{
    (void)state;
    run_kind(TC_REDUCESCATTER, 1);
}

static void test_reducescatterv_direct(void **state)
{
    (void)state;
    run_kind(TC_REDUCESCATTERV, 0);
}

static void test_reducescatterv_staged(void **state)
{
    (void)state;
    run_kind(TC_REDUCESCATTERV, 1);
}

static void test_large(void **state)
{
    (void)state;
    for (int kind = TC_REDUCESCATTER; kind <= TC_REDUCESCATTERV; kind++) {
        for (int np = 1; np <= TC_MAXR; np++) {
            for (int staged = 0; staged < 2; staged++) {
                for (int ip = TC_OOP; ip <= TC_ALIAS; ip++) {
                    tc_case_t c = tc_case((tc_kind_t)kind, np, COLL_FP32, COLL_SUM, 256 * 1024);
                    c.staged = staged;
                    c.inplace = ip;
                    c.ccl_bytes = 128 * 1024;
                    tc_run_case(&c);
                }
            }
        }
    }
}

static void test_staged_failures(void **state)
{
    (void)state;
    for (int kind = TC_REDUCESCATTER; kind <= TC_REDUCESCATTERV; kind++) {
        for (int np = 2; np <= TC_MAXR; np++) {
            tc_case_t c = tc_case((tc_kind_t)kind, np, COLL_BF16, COLL_MAX, 3000);
            c.staged = 1;
            c.null_send_rank = np - 1;
            tc_run_case(&c);

            c.null_send_rank = -1;
            c.barrier_fail_at = 3;
            c.expect_status = ZC_ERR_TIMEOUT;
            tc_run_case(&c);
        }
    }
}

/* ReduceScatterV without recv_count_each (the send counts give them), and
 * counts that disagree between ranks: ZC_ERR_INVAL everywhere, no barrier. */
static void test_v_counts(void **state)
{
    (void)state;
    for (int np = 1; np <= TC_MAXR; np++) {
        for (int staged = 0; staged < 2; staged++) {
            tc_case_t c = tc_case(TC_REDUCESCATTERV, np, COLL_FP16, COLL_SUM, 1000);
            c.staged = staged;
            c.no_recv_count_each = 1;
            tc_run_case(&c);
            /* with one rank and no recv_count_each there is nothing to disagree */
            for (int nullrce = 0; nullrce < (np > 1 ? 2 : 1); nullrce++) {
                c.no_recv_count_each = nullrce;
                c.v_mismatch = 1;
                c.expect_status = ZC_ERR_INVAL;
                tc_run_case(&c);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reducescatter_direct),
        cmocka_unit_test(test_reducescatter_staged),
        cmocka_unit_test(test_reducescatterv_direct),
        cmocka_unit_test(test_reducescatterv_staged),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_staged_failures),
        cmocka_unit_test(test_v_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
