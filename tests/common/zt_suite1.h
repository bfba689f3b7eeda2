/*
 * The single-collective suite (HcclAllReduce or HcclAllGather) shared by the
 * forked-process and the thread tests: the dtype x {zero-copy, buffered} x
 * {in-place, out-of-place} x count matrix at np 1..4, re-activation at the
 * same address (np 1..4), descriptor mismatches (np 2..4) and two
 * communicators used alternately (np 1..4), all scenarios of
 * tests/common/zt_launch.c.
 *
 * A test file fills one zt_suite1_t and lists ZT_SUITE1_TESTS(&cfg) in its
 * cmocka group: the cases keep the names test_matrix_np1..4, test_reactivate,
 * test_mismatch and test_two_comms, and read the configuration from their
 * state. Header-only (static inline) so each test executable takes only what
 * it uses.
 */
#ifndef ZT_SUITE1_H
#define ZT_SUITE1_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "zt_check.h"

/** The matrix element count: past 1 MB so the buffered path chunks. */
#define ZT_SUITE1_BIG_COUNT 1000003

/** Seconds each non-matrix launch of forked ranks may take. */
#define ZT_SUITE1_SHORT_S 120

/** One suite's configuration, handed to every case as its cmocka state. */
typedef struct {
    int coll;           /**< ZT_ALLREDUCE or ZT_ALLGATHER */
    const int *big_ops; /**< dtypes also run at ZT_SUITE1_BIG_COUNT (NULL: none) */
    int n_big_ops;      /**< entries of big_ops */
    uint64_t seed;      /**< matrix seed; the rank count is added per launch */
    int procs_s;        /**< > 0: forked ranks, matrix launch timeout in s; 0: threads */
} zt_suite1_t;

/* Ranks as forked processes or as threads, as the configuration says. */
static inline int zt_suite1_launch(const zt_suite1_t *s, int n, zt_rank_fn fn, void *arg,
                                   int timeout_s)
{
    return s->procs_s > 0 ? zt_launch_procs(n, fn, arg, timeout_s)
                          : zt_launch_threads(n, fn, arg);
}

static inline void zt_suite1_matrix(void **state, int n)
{
    const zt_suite1_t *s = *state;
    zt_matrix_t m = {s->coll, ZT_SUITE1_BIG_COUNT, s->big_ops, s->n_big_ops,
                     s->seed + (uint64_t)n};
    assert_int_equal(zt_suite1_launch(s, n, zt_rank_matrix, &m, s->procs_s), 0);
}

static inline void zt_suite1_matrix_np1(void **state)
{
    zt_suite1_matrix(state, 1);
}

static inline void zt_suite1_matrix_np2(void **state)
{
    zt_suite1_matrix(state, 2);
}

static inline void zt_suite1_matrix_np3(void **state)
{
    zt_suite1_matrix(state, 3);
}

static inline void zt_suite1_matrix_np4(void **state)
{
    zt_suite1_matrix(state, 4);
}

static inline void zt_suite1_reactivate(void **state)
{
    const zt_suite1_t *s = *state;
    int failed = 0;
    for (int n = 1; n <= 4; n++) {
        failed += zt_suite1_launch(s, n, zt_rank_reactivate, (void *)&s->coll, ZT_SUITE1_SHORT_S);
    }
    assert_int_equal(failed, 0);
}

static inline void zt_suite1_mismatch(void **state)
{
    const zt_suite1_t *s = *state;
    int failed = 0;
    for (int n = 2; n <= 4; n++) {
        failed += zt_suite1_launch(s, n, zt_rank_mismatch, (void *)&s->coll, ZT_SUITE1_SHORT_S);
    }
    assert_int_equal(failed, 0);
}

static inline void zt_suite1_two_comms(void **state)
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

/** The suite's seven cmocka cases, each with cfg (const zt_suite1_t *) as its state. */
#define ZT_SUITE1_TESTS(cfg)                                                                       \
    {"test_matrix_np1", zt_suite1_matrix_np1, NULL, NULL, (void *)(cfg)},                          \
        {"test_matrix_np2", zt_suite1_matrix_np2, NULL, NULL, (void *)(cfg)},                      \
        {"test_matrix_np3", zt_suite1_matrix_np3, NULL, NULL, (void *)(cfg)},                      \
        {"test_matrix_np4", zt_suite1_matrix_np4, NULL, NULL, (void *)(cfg)},                      \
        {"test_reactivate", zt_suite1_reactivate, NULL, NULL, (void *)(cfg)},                      \
        {"test_mismatch", zt_suite1_mismatch, NULL, NULL, (void *)(cfg)},                          \
        {"test_two_comms", zt_suite1_two_comms, NULL, NULL, (void *)(cfg)}

#endif /* ZT_SUITE1_H */
