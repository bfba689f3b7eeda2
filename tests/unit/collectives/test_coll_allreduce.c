/*
 * AllReduce and Reduce, direct and staged, with thread ranks: np 1..4, every
 * reducible dtype x op, counts 0 / 1 / 7 / 1000 and 1 Mi fp32, in place and
 * out of place, partially overlapping in/out, odd addresses, several roots,
 * tunings that force one-shot, reduce-scatter-write and streaming stores,
 * both write strategies (via the own output, via a stack block), and CCL
 * buffers small enough to force chunking.
 */
#include "test_coll_harness.h"

/* oneshot_max / nt_min pairs: defaults, always reduce-scatter-write with
 * streaming stores, always one-shot without. */
static const coll_tuning_t tunes[] = {
    {COLL_DEFAULT_ONESHOT_MAX, COLL_DEFAULT_NT_MIN, 0},
    {0, 1, 0},
    {SIZE_MAX, 0, 0},
};

static void run_all(tc_kind_t kind, int staged)
{
    for (int np = 1; np <= TC_MAXR; np++) {
        for (size_t t = 0; t < sizeof(tc_reduce_types) / sizeof(tc_reduce_types[0]); t++) {
            for (int op = COLL_SUM; op <= COLL_MIN; op++) {
                for (size_t ci = 0; ci < sizeof(tc_counts) / sizeof(tc_counts[0]); ci++) {
                    for (int ip = TC_OOP; ip <= TC_INPLACE; ip++) {
                        for (size_t k = 0; k < (staged ? 2 : 3); k++) {
                            tc_case_t c = tc_case(kind, np, tc_reduce_types[t], op, tc_counts[ci]);
                            c.staged = staged;
                            c.inplace = ip;
                            c.root = (int)(ci + t) % np;
                            if (staged) {
                                c.ccl_bytes = k == 0 ? 4096 : 700;
                            } else {
                                c.tune = tunes[k];
                            }
                            tc_run_case(&c);
                        }
                    }
                }
            }
        }
    }
}

static void test_allreduce_direct(void **state)
{
    (void)state;
    run_all(TC_ALLREDUCE, 0);
}

static void test_allreduce_direct_stack_block(void **state)
{
    (void)state;
    coll_allreduce_set_write_mode(COLL_AR_WRITE_STACK_BLOCK);
    for (int np = 1; np <= TC_MAXR; np++) {
        for (int ip = TC_OOP; ip <= TC_INPLACE; ip++) {
            for (size_t t = 0; t < sizeof(tc_reduce_types) / sizeof(tc_reduce_types[0]); t++) {
                tc_case_t c = tc_case(TC_ALLREDUCE, np, tc_reduce_types[t], COLL_SUM, 1000);
                c.inplace = ip;
                c.tune = tunes[1];
                tc_run_case(&c);
            }
        }
    }
    coll_allreduce_set_write_mode(COLL_AR_WRITE_BY_STORES);
}

static void test_allreduce_staged(void **state)
{
    (void)state;
    run_all(TC_ALLREDUCE, 1);
}

static void test_reduce_direct(void **state)
{
    (void)state;
    run_all(TC_REDUCE, 0);
}

static void test_reduce_staged(void **state)
{
    (void)state;
    run_all(TC_REDUCE, 1);
}

/* 1 Mi fp32 (4 MiB: streaming stores with the default nt_min). */
static void test_large(void **state)
{
    (void)state;
    for (int np = 1; np <= TC_MAXR; np++) {
        for (int kind = TC_ALLREDUCE; kind <= TC_REDUCE; kind++) {
            for (int staged = 0; staged < 2; staged++) {
                for (int ip = TC_OOP; ip <= TC_INPLACE; ip++) {
                    tc_case_t c =
                        tc_case((tc_kind_t)kind, np, COLL_FP32, ip ? COLL_MAX : COLL_SUM, 1u << 20);
                    c.staged = staged;
                    c.inplace = ip;
                    c.root = np - 1;
                    c.ccl_bytes = 256 * 1024;
                    tc_run_case(&c);
                }
            }
        }
    }
}

/* in and out overlap by all but one element (on every rank, or on odd ranks
 * with even ranks in place): the direct path goes through a private buffer,
 * the staged path reads a copy of send. */
static void test_partial_overlap(void **state)
{
    (void)state;
    for (int np = 1; np <= TC_MAXR; np++) {
        for (int kind = TC_ALLREDUCE; kind <= TC_REDUCE; kind++) {
            for (int staged = 0; staged < 2; staged++) {
                for (size_t ci = 1; ci < sizeof(tc_counts) / sizeof(tc_counts[0]); ci++) {
                    for (int ip = TC_PARTIAL; ip <= TC_MIXED; ip++) {
                        tc_case_t c =
                            tc_case((tc_kind_t)kind, np, COLL_INT32, COLL_SUM, tc_counts[ci]);
                        c.staged = staged;
                        c.inplace = ip;
                        c.root = np / 2;
                        tc_run_case(&c);
                    }
                }
            }
        }
    }
}

/* A staged rank with a NULL send returns ZC_ERR_PTR, the others finish, and
 * everybody calls barrier() equally often; a failing barrier is returned. */
static void test_staged_failures(void **state)
{
    (void)state;
    for (int kind = TC_ALLREDUCE; kind <= TC_REDUCE; kind++) {
        for (int np = 2; np <= TC_MAXR; np++) {
            tc_case_t c = tc_case((tc_kind_t)kind, np, COLL_FP32, COLL_SUM, 5000);
            c.staged = 1;
            c.null_send_rank = np - 1;
            tc_run_case(&c);

            c.null_send_rank = -1;
            c.barrier_fail_at = 4;
            c.expect_status = ZC_ERR_TIMEOUT;
            tc_run_case(&c);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_direct),
        cmocka_unit_test(test_allreduce_direct_stack_block),
        cmocka_unit_test(test_allreduce_staged),
        cmocka_unit_test(test_reduce_direct),
        cmocka_unit_test(test_reduce_staged),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_partial_overlap),
        cmocka_unit_test(test_staged_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
