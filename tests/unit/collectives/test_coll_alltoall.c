/*
 * AlltoAll and AlltoAllV, direct and staged, with thread ranks: np 1..4,
 * element sizes 1 / 2 / 4 / 8 / 16, counts 0 / 1 / 7 / 1000 and 64 Ki fp32,
 * in place (send == recv), out of place and partially overlapping, uneven V
 * counts with zeros and gaps in different layouts on each rank, odd
 * addresses, streaming stores forced, CCL buffers small enough to force
 * chunking, and mismatched V counts rejected on every rank.
 */
#include "test_coll_harness.h"

static void run_kind(tc_kind_t kind, int staged)
{
    for (int np = 1; np <= TC_MAXR; np++) {
        for (size_t t = 0; t < sizeof(tc_copy_types) / sizeof(tc_copy_types[0]); t++) {
            for (size_t ci = 0; ci < sizeof(tc_counts) / sizeof(tc_counts[0]); ci++) {
                for (int ip = TC_OOP; ip <= TC_MIXED; ip++) {
                    if (ip == TC_ALIAS) {
                        continue;
                    }
                    tc_case_t c = tc_case(kind, np, tc_copy_types[t], COLL_SUM, tc_counts[ci]);
                    c.staged = staged;
                    c.inplace = ip;
                    c.ccl_bytes = (ci + t) % 2 ? 700 : 4096;
                    if (t % 3 == 2) {
                        c.tune.nt_min = 1;
                    }
                    tc_run_case(&c);
                }
            }
        }
    }
}

static void test_alltoall_direct(void **state)
{
    (void)state;
    run_kind(TC_ALLTOALL, 0);
}

static void test_alltoall_staged(void **state)
{
    (void)state;
    run_kind(TC_ALLTOALL, 1);
}

static void test_alltoallv_direct(void **state)
{
    (void)state;
    run_kind(TC_ALLTOALLV, 0);
}

static void test_alltoallv_staged(void **state)
{
    (void)state;
    run_kind(TC_ALLTOALLV, 1);
}

static void test_large(void **state)
{
    (void)state;
    for (int kind = TC_ALLTOALL; kind <= TC_ALLTOALLV; kind++) {
        for (int np = 1; np <= TC_MAXR; np++) {
            for (int staged = 0; staged < 2; staged++) {
                for (int ip = TC_OOP; ip <= TC_INPLACE; ip++) {
                    tc_case_t c = tc_case((tc_kind_t)kind, np, COLL_FP32, COLL_SUM, 64 * 1024);
                    c.staged = staged;
                    c.inplace = ip;
                    c.ccl_bytes = 128 * 1024;
                    c.tune.nt_min = 1u << 16;
                    tc_run_case(&c);
                }
            }
        }
    }
}

static void test_staged_failures(void **state)
{
    (void)state;
    for (int kind = TC_ALLTOALL; kind <= TC_ALLTOALLV; kind++) {
        for (int np = 2; np <= TC_MAXR; np++) {
            tc_case_t c = tc_case((tc_kind_t)kind, np, COLL_INT8, COLL_SUM, 3000);
            c.staged = 1;
            c.null_send_rank = 0;
            tc_run_case(&c);

            c.null_send_rank = -1;
            c.barrier_fail_at = kind == TC_ALLTOALL ? 3 : 1; /* V: one round only */
            c.expect_status = ZC_ERR_TIMEOUT;
            tc_run_case(&c);
        }
    }
}

/* recv_counts[r][q] != send_counts[q][r]: ZC_ERR_INVAL on every rank, on
 * both paths, with no barrier called and no byte written. */
typedef struct {
    uint64_t sc[2][2], sd[2][2], rc[2][2], rd[2][2];
    const uint64_t *scp[2], *sdp[2], *rcp[2], *rdp[2];
    float in[2][8], out[2][8], ccl[2][64];
    const void *inp[2];
    void *outp[2], *cclp[2];
} a2av_bad_t;

static void test_alltoallv_mismatch(void **state)
{
    (void)state;
    a2av_bad_t b;
    memset(&b, 0, sizeof(b));
    for (int r = 0; r < 2; r++) {
        for (int q = 0; q < 2; q++) {
            b.sc[r][q] = 2;
            b.rc[r][q] = 2;
            b.sd[r][q] = (uint64_t)q * 2;
            b.rd[r][q] = (uint64_t)q * 2;
        }
        b.scp[r] = b.sc[r];
        b.sdp[r] = b.sd[r];
        b.rcp[r] = b.rc[r];
        b.rdp[r] = b.rd[r];
        b.inp[r] = b.in[r];
        b.outp[r] = b.out[r];
        b.cclp[r] = b.ccl[r];
    }
    b.rc[1][0] = 3;
    tc_sync_t sync = {.base = {.barrier = tc_barrier}, .bar = NULL, .calls = 0, .fail_at = 1};
    for (int r = 0; r < 2; r++) {
        coll_args_t a;
        memset(&a, 0, sizeof(a));
        a.rank = r;
        a.nranks = 2;
        a.dtype = COLL_FP32;
        a.in = b.inp;
        a.out = b.outp;
        a.send = b.in[r];
        a.recv = b.out[r];
        a.ccl = b.cclp;
        a.ccl_bytes = sizeof(b.ccl[0]);
        a.send_counts = b.scp;
        a.send_displs = b.sdp;
        a.recv_counts = b.rcp;
        a.recv_displs = b.rdp;
        a.sync = &sync.base;
        assert_int_equal(coll_alltoallv_direct(&a), ZC_ERR_INVAL);
        assert_int_equal(coll_alltoallv_staged(&a), ZC_ERR_INVAL);
    }
    assert_int_equal(sync.calls, 0);
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < 8; i++) {
            assert_true(b.out[r][i] == 0.0f);
        }
    }
}

/* The same with thread ranks, np 2..4, both paths. */
static void test_alltoallv_mismatch_np(void **state)
{
    (void)state;
    for (int np = 2; np <= TC_MAXR; np++) {
        for (int staged = 0; staged < 2; staged++) {
            tc_case_t c = tc_case(TC_ALLTOALLV, np, COLL_FP32, COLL_SUM, 100);
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
        cmocka_unit_test(test_alltoall_direct),
        cmocka_unit_test(test_alltoall_staged),
        cmocka_unit_test(test_alltoallv_direct),
        cmocka_unit_test(test_alltoallv_staged),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_staged_failures),
        cmocka_unit_test(test_alltoallv_mismatch),
        cmocka_unit_test(test_alltoallv_mismatch_np),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
