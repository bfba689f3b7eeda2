/*
 * HcclAllReduce under mpirun (ctest runs np 1, 2, 3 and 4): the dtype x op x
 * {zero-copy, buffered} x {in-place, out-of-place} x count matrix, re-activation
 * at the same address, descriptor mismatches and two communicators used
 * alternately (the scenarios of tests/common/zt_launch.c, as the forked and
 * thread tests run them).
 * The cases are the single-collective suite of tests/common/zt_mpi_main.h.
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

#include "zt_mpi_main.h"

static const zt_mpi_suite1_t cfg = {ZT_ALLREDUCE, 0xa11ed0ce0000ull};

int main(int argc, char **argv)
{
    zt_mpi_init(&argc, &argv);
    const struct CMUnitTest tests[] = {ZT_MPI_SUITE1_TESTS(&cfg)};
    return zt_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
