/*
 * Bootstrap shared by the tests/mpi tests, and their single-collective suite.
 *
 * MPI is used only as real programs use it with HCCL: MPI_Bcast of the root
 * info from rank 0 (zt_mpi_bcast_root), plus one MPI_Allreduce of each
 * test's failure count (zt_mpi_global_fails), so every rank asserts the same
 * global result and cmocka's flow stays in step. zt_mpi_init/zt_mpi_finish
 * wrap main: MPI up, rank and size known, HCCL_EXEC_TIMEOUT and
 * HCCL_CONNECT_TIMEOUT 60 s unless set (a hang becomes an error).
 *
 * The single-collective suite (HcclAllReduce or HcclAllGather): the matrix,
 * re-activation at the same address, descriptor mismatches and two
 * communicators used alternately (scenarios of tests/common/zt_launch.c),
 * each case on a fresh root info; ZT_MPI_SUITE1_TESTS(&cfg) lists the four
 * cases with their configuration as cmocka state. Header-only (static
 * inline): each test executable takes only what it uses.
 */
#ifndef ZT_MPI_MAIN_H
#define ZT_MPI_MAIN_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zt_check.h"

/* This process's rank and the world size (set by zt_mpi_init). */
static int zt_mpi_rank;
static int zt_mpi_size;

/** Rank 0 makes a root info; MPI_Bcast hands it to every rank. */
static inline void zt_mpi_bcast_root(HcclRootInfo *root)
{
    memset(root, 0, sizeof(*root));
    if (zt_mpi_rank == 0 && HcclGetRootInfo(root) != HCCL_SUCCESS) {
        /* Broadcast the zeroed root info anyway: the other ranks fail their
         * init instead of waiting here for ever. */
        memset(root, 0, sizeof(*root));
    }
    MPI_Bcast(root, (int)sizeof(*root), MPI_BYTE, 0, MPI_COMM_WORLD);
}

/** Failures summed over all ranks: the same value on every rank. */
static inline int zt_mpi_global_fails(int local)
{
    int sum = 0;
    MPI_Allreduce(&local, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

/* Ranks on several hosts (hosts told apart by hostname, as mpirun does): the
 * reference reduces host by host (zt_check.h). */
static inline void zt_mpi_ref_hosts(void)
{
    enum { ZT_HN = 64 };
    char me[ZT_HN] = {0};
    gethostname(me, ZT_HN - 1);
    char *all = calloc((size_t)zt_mpi_size, ZT_HN);
    int *host_of = calloc((size_t)zt_mpi_size, sizeof(int));
    if (all == NULL || host_of == NULL) {
        fprintf(stderr, "rank %d: out of memory for the host table\n", zt_mpi_rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return;
    }
    MPI_Allgather(me, ZT_HN, MPI_CHAR, all, ZT_HN, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < zt_mpi_size; r++) {
        host_of[r] = r;
        for (int q = 0; q < r && host_of[r] == r; q++) {
            if (strcmp(all + (size_t)q * ZT_HN, all + (size_t)r * ZT_HN) == 0) {
                host_of[r] = host_of[q];
            }
        }
    }
    zt_ref_set_hosts(zt_mpi_size, host_of);
    free(all);
    free(host_of);
}

/** MPI_Init, rank and size, the HCCL timeouts (unless set), the reference's hosts. */
static inline void zt_mpi_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &zt_mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &zt_mpi_size);
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    zt_mpi_ref_hosts();
}

/** MPI_Finalize; returns rc (cmocka's result) for main to return. */
static inline int zt_mpi_finish(int rc)
{
    MPI_Finalize();
    return rc;
}

/* ---- the single-collective suite -------------------------------------------------------- */

/** The suite's configuration, handed to every case as its cmocka state. */
typedef struct {
    int coll;      /**< ZT_ALLREDUCE or ZT_ALLGATHER */
    uint64_t seed; /**< matrix seed; the world size is added */
} zt_mpi_suite1_t;

/* Open a rank environment on a fresh root info, run body, close. */
static inline int zt_mpi_with_env(int (*body)(zt_env_t *env, const zt_mpi_suite1_t *s),
                                  const zt_mpi_suite1_t *s)
{
    HcclRootInfo root;
    zt_env_t env;
    zt_mpi_bcast_root(&root);
    if (zt_env_open(&env, zt_mpi_rank, zt_mpi_size, &root, NULL) != 0) {
        return 1;
    }
    int fails = body(&env, s);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

static inline int zt_mpi_body_matrix(zt_env_t *env, const zt_mpi_suite1_t *s)
{
    static const int big_all_ops[] = {HCCL_DATA_TYPE_FP16};
    zt_matrix_t m = {s->coll, 1000003, s->coll == ZT_ALLREDUCE ? big_all_ops : NULL,
                     s->coll == ZT_ALLREDUCE ? 1 : 0, s->seed + (uint64_t)zt_mpi_size};
    return zt_matrix_run(env, &m);
}

static inline int zt_mpi_body_reactivate(zt_env_t *env, const zt_mpi_suite1_t *s)
{
    return zt_reactivate_run(env, s->coll);
}

static inline int zt_mpi_body_mismatch(zt_env_t *env, const zt_mpi_suite1_t *s)
{
    return zt_mismatch_run(env, s->coll);
}

static inline int zt_mpi_body_two_comms(zt_env_t *env, const zt_mpi_suite1_t *s)
{
    HcclRootInfo root2;
    zt_mpi_bcast_root(&root2);
    return zt_two_comms_run(env, &root2, s->coll);
}

static inline void zt_mpi_suite1_matrix(void **state)
{
    assert_int_equal(zt_mpi_global_fails(zt_mpi_with_env(zt_mpi_body_matrix, *state)), 0);
}

static inline void zt_mpi_suite1_reactivate(void **state)
{
    assert_int_equal(zt_mpi_global_fails(zt_mpi_with_env(zt_mpi_body_reactivate, *state)), 0);
}

static inline void zt_mpi_suite1_mismatch(void **state)
{
    assert_int_equal(zt_mpi_global_fails(zt_mpi_with_env(zt_mpi_body_mismatch, *state)), 0);
}

static inline void zt_mpi_suite1_two_comms(void **state)
{
    assert_int_equal(zt_mpi_global_fails(zt_mpi_with_env(zt_mpi_body_two_comms, *state)), 0);
}

/** The suite's four cmocka cases, each with cfg (const zt_mpi_suite1_t *) as its state. */
#define ZT_MPI_SUITE1_TESTS(cfg)                                                                   \
    {"test_matrix", zt_mpi_suite1_matrix, NULL, NULL, (void *)(cfg)},                              \
        {"test_reactivate", zt_mpi_suite1_reactivate, NULL, NULL, (void *)(cfg)},                  \
        {"test_mismatch", zt_mpi_suite1_mismatch, NULL, NULL, (void *)(cfg)},                      \
    {                                                                                              \
        "test_two_comms", zt_mpi_suite1_two_comms, NULL, NULL, (void *)(cfg)                       \
    }

#endif /* ZT_MPI_MAIN_H */
