/*
 * HcclAllGather under mpirun (ctest runs np 1, 2, 3 and 4): the dtype x
 * {zero-copy, buffered} x {in-place, out-of-place} x count matrix, re-activation
 * at the same address, descriptor mismatches and two communicators used
 * alternately (the scenarios of tests/common/zt_launch.c, as the forked and
 * thread tests run them).
 *
 * MPI is used only as real programs use it with HCCL: MPI_Bcast of the root
 * info from rank 0, plus one MPI_Allreduce of each test's failure count, so
 * every rank asserts the same global result and cmocka's flow stays in step.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "zt_check.h"

#define ZT_COLL ZT_ALLGATHER
#define ZT_SEED 0xa116a7e40000ull

static int g_rank;
static int g_size;

/* Rank 0 makes a root info; MPI_Bcast hands it to every rank. */
static void bcast_root(HcclRootInfo *root)
{
    memset(root, 0, sizeof(*root));
    if (g_rank == 0 && HcclGetRootInfo(root) != HCCL_SUCCESS) {
        /* Broadcast the zeroed root info anyway: the other ranks fail their
         * init instead of waiting here for ever. */
        memset(root, 0, sizeof(*root));
    }
    MPI_Bcast(root, (int)sizeof(*root), MPI_BYTE, 0, MPI_COMM_WORLD);
}

/* Failures summed over all ranks: the same value on every rank. */
static int global_fails(int local)
{
    int sum = 0;
    MPI_Allreduce(&local, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

/* Open a rank environment on a fresh root info, run body, close. */
static int with_env(int (*body)(zt_env_t *env, const void *arg), const void *arg)
{
    HcclRootInfo root;
    zt_env_t env;
    bcast_root(&root);
    if (zt_env_open(&env, g_rank, g_size, &root, NULL) != 0) {
        return 1;
    }
    int fails = body(&env, arg);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

static int body_matrix(zt_env_t *env, const void *arg)
{
    (void)arg;
    static const int big_all_ops[] = {HCCL_DATA_TYPE_FP16};
    zt_matrix_t m = {ZT_COLL, 1000003, ZT_COLL == ZT_ALLREDUCE ? big_all_ops : NULL,
                     ZT_COLL == ZT_ALLREDUCE ? 1 : 0, ZT_SEED + (uint64_t)g_size};
    return zt_matrix_run(env, &m);
}

static int body_reactivate(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_reactivate_run(env, ZT_COLL);
}

static int body_mismatch(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_mismatch_run(env, ZT_COLL);
}

static int body_two_comms(zt_env_t *env, const void *arg)
{
    (void)arg;
    HcclRootInfo root2;
    bcast_root(&root2);
    return zt_two_comms_run(env, &root2, ZT_COLL);
}

static void test_matrix(void **state)
{
    (void)state;
    assert_int_equal(global_fails(with_env(body_matrix, NULL)), 0);
}

static void test_reactivate(void **state)
{
    (void)state;
    assert_int_equal(global_fails(with_env(body_reactivate, NULL)), 0);
}

static void test_mismatch(void **state)
{
    (void)state;
    assert_int_equal(global_fails(with_env(body_mismatch, NULL)), 0);
}

static void test_two_comms(void **state)
{
    (void)state;
    assert_int_equal(global_fails(with_env(body_two_comms, NULL)), 0);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix),
        cmocka_unit_test(test_reactivate),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_two_comms),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return rc;
}
