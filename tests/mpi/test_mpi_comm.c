/*
 * Communicator API under mpirun: the bodies of tests/common/zt_comm.h (rank
 * size / id / name, error strings, barrier, config and argument errors, the
 * zero-copy rule errors, path choice, stream order, the NULL stream), each on
 * a fresh root info that rank 0 makes and MPI_Bcast hands out. The same
 * bodies run as forked processes (tests/mp/test_mp_comm.c) and threads
 * (tests/unit/hccl/test_hccl_threads_comm.c).
 *
 * The barrier check counts arrivals in memory every rank sees: an MPI-3
 * shared window (all ranks run on this host). Each test's failures are summed
 * over the ranks, so every rank asserts the same value.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "zt_comm.h"
#include "zt_mpi_main.h"

/* Run fn on every rank with a fresh root info; the failures of all ranks. */
static int run_mpi(zt_rank_fn fn, void *arg)
{
    HcclRootInfo root;
    zt_mpi_bcast_root(&root);
    return zt_mpi_global_fails(fn(zt_mpi_rank, zt_mpi_size, &root, arg));
}

static void test_api(void **state)
{
    (void)state;
    MPI_Comm node;
    MPI_Win win;
    zt_comm_shared_t *sh = NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Aint size = zt_mpi_rank == 0 ? (MPI_Aint)sizeof(*sh) : 0;
    int rc = MPI_Win_allocate_shared(size, 1, MPI_INFO_NULL, node, &sh, &win);
    assert_int_equal(rc, MPI_SUCCESS);
    MPI_Aint got = 0;
    int disp = 0;
    MPI_Win_shared_query(win, 0, &got, &disp, &sh);
    assert_true(sh != NULL && got == (MPI_Aint)sizeof(*sh));
    if (zt_mpi_rank == 0) {
        memset(sh, 0, sizeof(*sh));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int failed = run_mpi(zt_comm_api, sh);
    MPI_Win_free(&win);
    MPI_Comm_free(&node);
    assert_int_equal(failed, 0);
}

static void test_config(void **state)
{
    (void)state;
    assert_int_equal(run_mpi(zt_comm_config, NULL), 0);
}

static void test_zc_rules(void **state)
{
    (void)state;
    assert_int_equal(run_mpi(zt_comm_zc_rules, NULL), 0);
}

static void test_paths_and_streams(void **state)
{
    (void)state;
    assert_int_equal(run_mpi(zt_comm_paths, NULL), 0);
}

int main(int argc, char **argv)
{
    zt_mpi_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_zc_rules),
        cmocka_unit_test(test_paths_and_streams),
    };
    return zt_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
