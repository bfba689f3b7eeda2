/*
 * Communicators with threads of one process as ranks: the bodies of
 * tests/common/zt_comm.h (rank size / id / name, error strings, barrier,
 * config and argument errors, the zero-copy rule errors where several ranks
 * of one process set ranges and activate blocks, path choice, stream order,
 * the NULL stream). The same bodies run as forked processes in
 * tests/mp/test_mp_comm.c (with the init faults) and under mpirun in
 * tests/mpi/test_mpi_comm.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "zt_check.h"
#include "zt_comm.h"

static void test_api(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 1; n <= 4; n++) {
        zt_comm_shared_t sh;
        memset(&sh, 0, sizeof(sh));
        failed += zt_launch_threads(n, zt_comm_api, &sh);
    }
    assert_int_equal(failed, 0);
}

/* Each body at 1..3 thread ranks. */
static int run_threads(zt_rank_fn fn)
{
    static int threads = ZT_COMM_THREADS;
    int failed = 0;
    for (int n = 1; n <= 3; n++) {
        failed += zt_launch_threads(n, fn, &threads);
    }
    return failed;
}

static void test_config(void **state)
{
    (void)state;
    assert_int_equal(run_threads(zt_comm_config), 0);
}

static void test_zc_rules(void **state)
{
    (void)state;
    assert_int_equal(run_threads(zt_comm_zc_rules), 0);
}

static void test_paths_and_streams(void **state)
{
    (void)state;
    assert_int_equal(run_threads(zt_comm_paths), 0);
}

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_zc_rules),
        cmocka_unit_test(test_paths_and_streams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
