/*
 * ReduceScatter(V), Reduce, Broadcast, Scatter, AllGatherV, AlltoAll(V, VC),
 * Send/Recv, BatchSendRecv and groups under mpirun (ctest runs np 1, 2, 3
 * and 4): the collective matrix (every collective x {zero-copy, buffered,
 * rank 0 plain} x {in place, out of place} x counts x dtypes x roots, uneven
 * V counts with zeros), mismatches between ranks, local argument errors,
 * Send/Recv rings, all-to-all batches and send/recv mismatches (the
 * scenarios of tests/common/zt_coll_scen.h and zt_coll_p2p.h, as the forked
 * and thread tests run them). The CCL buffer keeps its default size here
 * (the mp tests shrink it).
 *
 * MPI is used only as real programs use it with HCCL (the bootstrap of
 * tests/common/zt_mpi_main.h): MPI_Bcast of the root info from rank 0, plus
 * one MPI_Allreduce of each test's failure count, so every rank asserts the
 * same global result and cmocka's flow stays in step.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "zt_coll_p2p.h"
#include "zt_coll_scen.h"
#include "zt_mpi_main.h"

#define ZT_BIG 300001
#define ZT_SEED 0x3b1c011ull

/* Open a rank environment on a fresh root info, run body, close. */
static int with_env(zt_cc_body_fn body, const void *arg)
{
    HcclRootInfo root;
    zt_mpi_bcast_root(&root);
    zt_cc_job_t job = {body, arg};
    return zt_cc_rank_job(zt_mpi_rank, zt_mpi_size, &root, &job);
}

static int body_matrix(zt_env_t *env, const void *arg)
{
    (void)arg;
    zt_ccmatrix_t m = {ZT_SEED + (uint64_t)zt_mpi_size, ZT_BIG, 1};
    return zt_cc_matrix_run(env, &m);
}

static int body_mismatch(zt_env_t *env, const void *arg)
{
    return zt_cc_mismatch_run(env, arg);
}

static int body_badargs(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_cc_badargs_run(env);
}

static int body_ring(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_p2p_ring_run(env, 0, ZT_BIG, ZT_SEED ^ 0x41ull);
}

static int body_a2a(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_p2p_a2a_run(env, 0, ZT_BIG, ZT_SEED ^ 0x42ull);
}

static int body_p2p_mismatch(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_p2p_mismatch_run(env, 0, ZT_SEED ^ 0x43ull);
}

static int body_p2p_badargs(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_p2p_badargs_run(env, 0);
}

static void test_matrix(void **state)
{
    (void)state;
    assert_int_equal(zt_mpi_global_fails(with_env(body_matrix, NULL)), 0);
}

static void test_mismatch(void **state)
{
    (void)state;
    zt_ccmismatch_t mm = {ZT_SEED ^ 0x3153ull, -1, 0};
    assert_int_equal(zt_mpi_global_fails(with_env(body_mismatch, &mm)), 0);
}

/* V count arrays that disagree: a fresh communicator per collective and path. */
static void test_mismatch_counts(void **state)
{
    (void)state;
    static const int vcolls[4] = {ZT_CC_REDUCESCATTERV, ZT_CC_ALLGATHERV, ZT_CC_ALLTOALLV,
                                  ZT_CC_ALLTOALLVC};
    int fails = 0;
    for (int k = 0; k < 4; k++) {
        for (int mem = 1; mem >= 0; mem--) {
            zt_ccmismatch_t mm = {ZT_SEED ^ 0x3154ull, vcolls[k], mem};
            fails += with_env(body_mismatch, &mm);
        }
    }
    assert_int_equal(zt_mpi_global_fails(fails), 0);
}

static void test_badargs(void **state)
{
    (void)state;
    assert_int_equal(zt_mpi_global_fails(with_env(body_badargs, NULL)), 0);
}

static void test_p2p_ring(void **state)
{
    (void)state;
    assert_int_equal(zt_mpi_global_fails(with_env(body_ring, NULL)), 0);
}

static void test_p2p_batch_alltoall(void **state)
{
    (void)state;
    assert_int_equal(zt_mpi_global_fails(with_env(body_a2a, NULL)), 0);
}

static void test_p2p_mismatch(void **state)
{
    (void)state;
    assert_int_equal(zt_mpi_global_fails(with_env(body_p2p_mismatch, NULL)), 0);
}

static void test_p2p_badargs(void **state)
{
    (void)state;
    assert_int_equal(zt_mpi_global_fails(with_env(body_p2p_badargs, NULL)), 0);
}

int main(int argc, char **argv)
{
    zt_mpi_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix),          cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_mismatch_counts), cmocka_unit_test(test_badargs),
        cmocka_unit_test(test_p2p_ring),        cmocka_unit_test(test_p2p_batch_alltoall),
        cmocka_unit_test(test_p2p_mismatch),    cmocka_unit_test(test_p2p_badargs),
    };
    return zt_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
