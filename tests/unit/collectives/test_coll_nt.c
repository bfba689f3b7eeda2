/*
 * The learned choice between cached and streaming stores (coll_nt.c): which
 * kind each op gets as measurements come in, the cases that are never
 * learned, and that AllReduce and AllGather stay exact while the choice
 * alternates (threads as ranks, the serial reference, bytewise compare).
 */
#include "test_coll_harness.h"

/* A direct-op argument block of np ranks; only the fields coll_nt reads. */
static coll_args_t nt_args(int np, const coll_tuning_t *tune)
{
    coll_args_t a;
    memset(&a, 0, sizeof(a));
    a.nranks = np;
    a.tune = tune;
    return a;
}

/* Choose, then report `ns` for 1 MiB written; returns the choice. */
static int nt_step(const coll_args_t *a, int kind, size_t in, size_t out, uint64_t cached_ns,
                   uint64_t nt_ns)
{
    coll_nt_ticket_t t;
    int nt = coll_nt_choose(a, kind, in, out, &t);
    assert_non_null(t.slot);
    assert_int_equal(t.nt, nt);
    coll_nt_record(&t, nt ? nt_ns : cached_ns, (size_t)1 << 20);
    return nt;
}

static void test_never_learned(void **state)
{
    (void)state;
    coll_nt_reset();
    coll_tuning_t tune = {16384, 8u << 20};
    coll_args_t a = nt_args(2, &tune);
    coll_nt_ticket_t t;
    /* 64 KiB of data over both ranks: below the learned classes, cached. */
    assert_int_equal(coll_nt_choose(&a, COLL_NT_ALLREDUCE, 16384, 16384, &t), 0);
    assert_null(t.slot);
    /* nt_min 0: never streaming, whatever the size. */
    coll_tuning_t never = {16384, 0};
    a = nt_args(2, &never);
    assert_int_equal(coll_nt_choose(&a, COLL_NT_ALLREDUCE, 1u << 28, 1u << 28, &t), 0);
    assert_null(t.slot);
    /* An unknown kind falls back to the static rule (2 x 128 MiB >= 16 MiB). */
    a = nt_args(2, &tune);
    assert_int_equal(coll_nt_choose(&a, COLL_NT_KINDS, 1u << 27, 1u << 27, &t), 1);
    assert_null(t.slot);
}

static void test_follows_the_cheaper(void **state)
{
    (void)state;
    coll_nt_reset();
    coll_tuning_t tune = {16384, 8u << 20};
    coll_args_t a = nt_args(2, &tune);
    size_t mib = (size_t)1 << 20;
    /* 1 MiB per rank, 4 MiB in all: the static rule says cached. The first
       four ops alternate, starting with it. */
    int want[4] = {0, 1, 0, 1};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(nt_step(&a, COLL_NT_ALLREDUCE, mib, mib, 3000000, 1000000), want[i]);
    }
    /* Streaming measured 3x cheaper: used from now on; cached stores are
       re-measured at ops 16, 32, 64, 128, ... (the gap doubles each time
       they lose again, up to 1024 ops). */
    for (int n = 4; n < 1100; n++) {
        int explore =
            n == 16 || n == 32 || n == 64 || n == 128 || n == 256 || n == 512 || n == 1024;
        assert_int_equal(nt_step(&a, COLL_NT_ALLREDUCE, mib, mib, 3000000, 1000000), !explore);
    }
    /* Cached stores become cheaper (streaming unchanged): the re-measurement
       at op 2048 sees it, the gap falls back to 16, and cached stores win
       within a few more re-measurements. */
    int cached = 0;
    for (int n = 1100; n < 2300; n++) {
        int nt = nt_step(&a, COLL_NT_ALLREDUCE, mib, mib, 200000, 1000000);
        assert_true(n >= 2048 || nt);
        cached += n >= 2280 && !nt;
    }
    assert_true(cached >= 18);
    /* The pattern changes again (streaming now cheaper, cached slower): the
       kind in use gets dearer with every op, and streaming wins back. */
    cached = 0;
    for (int n = 2300; n < 2500; n++) {
        int nt = nt_step(&a, COLL_NT_ALLREDUCE, mib, mib, 4000000, 500000);
        cached += n >= 2480 && !nt;
    }
    assert_true(cached <= 2);
    /* Other kinds and size classes learn apart: AllGather starts afresh. */
    assert_int_equal(nt_step(&a, COLL_NT_ALLGATHER, mib, 2 * mib, 1, 1), 0);
    assert_int_equal(nt_step(&a, COLL_NT_ALLGATHER, mib, 2 * mib, 1, 1), 1);
    coll_nt_reset();
}

/* 256 Ki fp32 per rank, repeated so both kinds run: every result exact. */
static void test_exact_while_alternating(void **state)
{
    (void)state;
    coll_nt_reset();
    for (int np = 2; np <= TC_MAXR; np++) {
        for (int kind = TC_ALLREDUCE; kind <= TC_ALLGATHER; kind += TC_ALLGATHER - TC_ALLREDUCE) {
            for (int rep = 0; rep < 6; rep++) {
                tc_case_t c = tc_case((tc_kind_t)kind, np, COLL_FP32, COLL_SUM, 1u << 18);
                c.inplace = rep % 3 == 2 ? TC_INPLACE : TC_OOP;
                tc_run_case(&c);
            }
        }
    }
    coll_nt_reset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_never_learned),
        cmocka_unit_test(test_follows_the_cheaper),
        cmocka_unit_test(test_exact_while_alternating),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
