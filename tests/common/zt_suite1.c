/* The single-collective suite of zt_suite1.h, compiled once into the test library. */
#include "zt_suite1.h"

/* Ranks as forked processes or as threads, as the configuration says. */
static int zt_suite1_launch(const zt_suite1_t *s, int n, zt_rank_fn fn, void *arg, int timeout_s)
{
    return s->procs_s > 0 ? zt_launch_procs(n, fn, arg, timeout_s) : zt_launch_threads(n, fn, arg);
}

static void zt_suite1_matrix(void **state, int n)
{
    const zt_suite1_t *s = *state;
    zt_matrix_t m = {s->coll, ZT_SUITE1_BIG_COUNT, s->big_ops, s->n_big_ops, s->seed + (uint64_t)n};
    assert_int_equal(zt_suite1_launch(s, n, zt_rank_matrix, &m, s->procs_s), 0);
}

void zt_suite1_matrix_np1(void **state)
{
    zt_suite1_matrix(state, 1);
}

void zt_suite1_matrix_np2(void **state)
{
    zt_suite1_matrix(state, 2);
}

void zt_suite1_matrix_np3(void **state)
{
    zt_suite1_matrix(state, 3);
}

void zt_suite1_matrix_np4(void **state)
{
    zt_suite1_matrix(state, 4);
}

void zt_suite1_reactivate(void **state)
{
    const zt_suite1_t *s = *state;
    int failed = 0;
    for (int n = 1; n <= 4; n++) {
        failed += zt_suite1_launch(s, n, zt_rank_reactivate, (void *)&s->coll, ZT_SUITE1_SHORT_S);
    }
    assert_int_equal(failed, 0);
}

void zt_suite1_mismatch(void **state)
{
    const zt_suite1_t *s = *state;
    int failed = 0;
    for (int n = 2; n <= 4; n++) {
        failed += zt_suite1_launch(s, n, zt_rank_mismatch, (void *)&s->coll, ZT_SUITE1_SHORT_S);
    }
    assert_int_equal(failed, 0);
}

void zt_suite1_two_comms(void **state)
{
    const zt_suite1_t *s = *state;
    int failed = 0;
    for (int n = 1; n <= 4; n++) {
        zt_root_slot_t *slot = zt_root_slot_create();
        assert_non_null(slot);
        zt_two_comms_t t = {s->coll, slot};
        failed += zt_suite1_launch(s, n, zt_rank_two_comms, &t, ZT_SUITE1_SHORT_S);
        zt_root_slot_destroy(slot);
    }
    assert_int_equal(failed, 0);
}
