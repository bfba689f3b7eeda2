/*
 * Copy collectives that fan data out or in: AllGather, AllGatherV, Broadcast
 * and Scatter, direct and staged, with thread ranks: np 1..4, element sizes
 * 1 / 2 / 4 / 8 / 16 (copy-only types included), counts 0 / 1 / 7 / 1000 and
 * 256 Ki, in place, out of place and partially overlapping, uneven V counts
 * with zeros and gaps, every root, odd addresses, streaming stores forced,
 * and CCL buffers small enough to force chunking.
 */
#include "test_coll_harness.h"

static void run_kind(tc_kind_t kind, int staged)
{
    int max_ip = kind == TC_BROADCAST ? TC_OOP : TC_MIXED;
    for (int np = 1; np <= TC_MAXR; np++) {
        for (size_t t = 0; t < sizeof(tc_copy_types) / sizeof(tc_copy_types[0]); t++) {
            for (size_t ci = 0; ci < sizeof(tc_counts) / sizeof(tc_counts[0]); ci++) {
                for (int ip = TC_OOP; ip <= max_ip; ip++) {
                    if (ip == TC_ALIAS) {
                        continue;
                    }
                    for (int root = 0; root < np; root++) {
                        tc_case_t c = tc_case(kind, np, tc_copy_types[t], COLL_SUM, tc_counts[ci]);
                        c.staged = staged;
                        c.inplace = ip;
                        c.root = root;
                        c.ccl_bytes = (root % 2) ? 700 : 4096;
                        if (root == np - 1) {
                            c.tune.nt_min = 1;
                        }
                        tc_run_case(&c);
                        if (kind != TC_BROADCAST && kind != TC_SCATTER) {
                            break; /* root does not matter */
                        }
                    }
                }
            }
        }
    }
}

static void test_allgather_direct(void **state)
{
    (void)state;
    run_kind(TC_ALLGATHER, 0);
}

static void test_allgather_staged(void **state)
{
    (void)state;
    run_kind(TC_ALLGATHER, 1);
}

static void test_allgatherv_direct(void **state)
{
    (void)state;
    run_kind(TC_ALLGATHERV, 0);
}

static void test_allgatherv_staged(void **state)
{
    (void)state;
    run_kind(TC_ALLGATHERV, 1);
}

static void test_broadcast_direct(void **state)
{
    (void)state;
    run_kind(TC_BROADCAST, 0);
}

static void test_broadcast_staged(void **state)
{
    (void)state;
    run_kind(TC_BROADCAST, 1);
}

static void test_scatter_direct(void **state)
{
    (void)state;
    run_kind(TC_SCATTER, 0);
}

static void test_scatter_staged(void **state)
{
    (void)state;
    run_kind(TC_SCATTER, 1);
}

/* 256 Ki fp32 per rank, streaming stores on (nt_min = 1 MiB). */
static void test_large(void **state)
{
    (void)state;
    static const tc_kind_t kinds[] = {TC_ALLGATHER, TC_ALLGATHERV, TC_BROADCAST, TC_SCATTER};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        for (int np = 1; np <= TC_MAXR; np++) {
            for (int staged = 0; staged < 2; staged++) {
                tc_case_t c = tc_case(kinds[k], np, COLL_FP32, COLL_SUM, 256 * 1024);
                c.staged = staged;
                c.inplace = kinds[k] == TC_BROADCAST ? TC_OOP : TC_INPLACE;
                c.root = np / 2;
                c.ccl_bytes = 128 * 1024;
                c.tune.nt_min = 1u << 20;
                tc_run_case(&c);
            }
        }
    }
}

/* AllGather of about 6 MiB of output per rank pushes (every rank writes its
 * block into every output), or pulls when every rank asks to
 * (coll_args_t.pull): out of place, in place, partially overlapping (every
 * rank pulls then) and mixed, an odd count (no whole 32 KiB chunks),
 * streaming and cached stores (nt_min 0), repeated so the learned choice
 * alternates. */
static void test_allgather_push(void **state)
{
    (void)state;
    static const int forms[] = {TC_OOP, TC_INPLACE, TC_PARTIAL, TC_MIXED};
    for (int np = 1; np <= TC_MAXR; np++) {
        for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
            for (int rep = 0; rep < 10; rep++) {
                tc_case_t c = tc_case(TC_ALLGATHER, np, COLL_FP32, COLL_SUM,
                                      (size_t)(1536 * 1024) / (size_t)np + 7);
                c.inplace = forms[f];
                c.pull = rep >= 5;
                c.tune.nt_min = rep % 5 == 4 ? 0 : 8u << 20;
                tc_run_case(&c);
            }
        }
    }
}

/* A staged rank with a NULL send (the root for Broadcast / Scatter) fails
 * alone, without leaving the others at a barrier. */
static void test_staged_failures(void **state)
{
    (void)state;
    static const tc_kind_t kinds[] = {TC_ALLGATHER, TC_ALLGATHERV, TC_BROADCAST, TC_SCATTER};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        for (int np = 2; np <= TC_MAXR; np++) {
            tc_case_t c = tc_case(kinds[k], np, COLL_INT16, COLL_SUM, 3000);
            c.staged = 1;
            c.root = 1;
            /* rank 1 sends nothing in AllGatherV: a NULL send is fine there */
            c.null_send_rank = kinds[k] == TC_ALLGATHERV ? 0 : 1;
            if (kinds[k] == TC_BROADCAST) {
                /* the root falls back to recv when send is NULL: not a failure */
                c.null_send_rank = -1;
            }
            tc_run_case(&c);

            c.null_send_rank = -1;
            c.barrier_fail_at = 2;
            c.expect_status = ZC_ERR_TIMEOUT;
            tc_run_case(&c);
        }
    }
}

/* AllGatherV with recv_counts that differ between ranks: ZC_ERR_INVAL on
 * every rank, no barrier, on both paths. */
static void test_allgatherv_mismatch(void **state)
{
    (void)state;
    for (int np = 2; np <= TC_MAXR; np++) {
        for (int staged = 0; staged < 2; staged++) {
            tc_case_t c = tc_case(TC_ALLGATHERV, np, COLL_FP32, COLL_SUM, 100);
            c.staged = staged;
            c.v_mismatch = 1;
            c.expect_status = ZC_ERR_INVAL;
            tc_run_case(&c);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allgather_direct),
        cmocka_unit_test(test_allgather_staged),
        cmocka_unit_test(test_allgatherv_direct),
        cmocka_unit_test(test_allgatherv_staged),
        cmocka_unit_test(test_broadcast_direct),
        cmocka_unit_test(test_broadcast_staged),
        cmocka_unit_test(test_scatter_direct),
        cmocka_unit_test(test_scatter_staged),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_allgather_push),
        cmocka_unit_test(test_staged_failures),
        cmocka_unit_test(test_allgatherv_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
