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
 * state. Compiled once into the test library (zt_suite1.c).
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

/* The cmocka cases (state: const zt_suite1_t *). */
void zt_suite1_matrix_np1(void **state);
void zt_suite1_matrix_np2(void **state);
void zt_suite1_matrix_np3(void **state);
void zt_suite1_matrix_np4(void **state);
void zt_suite1_reactivate(void **state);
void zt_suite1_mismatch(void **state);
void zt_suite1_two_comms(void **state);

/** The suite's seven cmocka cases, each with cfg (const zt_suite1_t *) as its state. */
#define ZT_SUITE1_TESTS(cfg)                                                                       \
    {"test_matrix_np1", zt_suite1_matrix_np1, NULL, NULL, (void *)(cfg)},                          \
        {"test_matrix_np2", zt_suite1_matrix_np2, NULL, NULL, (void *)(cfg)},                      \
        {"test_matrix_np3", zt_suite1_matrix_np3, NULL, NULL, (void *)(cfg)},                      \
        {"test_matrix_np4", zt_suite1_matrix_np4, NULL, NULL, (void *)(cfg)},                      \
        {"test_reactivate", zt_suite1_reactivate, NULL, NULL, (void *)(cfg)},                      \
        {"test_mismatch", zt_suite1_mismatch, NULL, NULL, (void *)(cfg)},                          \
    {                                                                                              \
        "test_two_comms", zt_suite1_two_comms, NULL, NULL, (void *)(cfg)                           \
    }

#endif /* ZT_SUITE1_H */
