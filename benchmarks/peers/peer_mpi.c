/*
 * MPI_Allreduce (MPI_IN_PLACE, MPI_FLOAT, MPI_SUM) through peer_loop.h, for
 * scripts/bench_peers.sh: the one source built with each MPI's own compiler
 * wrapper (Open MPI's mpicc, MPICH's mpicc.mpich, Intel MPI's mpicc) and run
 * with that MPI's launcher. MPI has no bfloat16 datatype, so float32 only.
 *
 * Usage: mpirun -np N peer_mpi SIZES fp32 BUDGET_MS ROUNDS
 */
#include <mpi.h>

#include "peer_loop.h"

static int peer_mpi_all_reduce(void *lib, void *buf, size_t count)
{
    (void)lib;
    return MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) ==
                   MPI_SUCCESS
               ? 0
               : 1;
}

static void peer_mpi_barrier(void *lib)
{
    (void)lib;
    MPI_Barrier(MPI_COMM_WORLD);
}

static double peer_mpi_max(void *lib, double v)
{
    (void)lib;
    double m = v;
    MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    peer_ops_t ops = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &ops.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ops.nranks);
    if (argc != 5 || strcmp(argv[2], "fp32") != 0) {
        if (ops.rank == 0) {
            fprintf(stderr, "usage: peer_mpi SIZES fp32 BUDGET_MS ROUNDS (dtype '%s')\n",
                    argc > 2 ? argv[2] : "");
        }
        MPI_Finalize();
        return 2;
    }
    ops.all_reduce = peer_mpi_all_reduce;
    ops.barrier = peer_mpi_barrier;
    ops.max = peer_mpi_max;
    int rc = peer_sweep(&ops, argv[1], atof(argv[3]), atoi(argv[4]));
    MPI_Finalize();
    return rc;
}
