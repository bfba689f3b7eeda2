/*
 * ReduceScatter(V), Reduce, Broadcast, Scatter, AllGatherV, AlltoAll(V, VC),
 * Send/Recv, BatchSendRecv and groups under mpirun (ctest runs np 1, 2, 3
 * and 4): the collective matrix (every collective x {zero-copy, buffered,
 * rank 0 plain} x {in place, out of place} x counts x dtypes x roots, uneven
 * V counts with zeros), mismatches between ranks, local argument errors,
 * Send/Recv rings, all-to-all batches and send/recv mismatches (every row
 * of tests/common/zt_coll_table.h, as the forked and thread tests run
 * them; this file only bootstraps the ranks). The CCL buffer keeps its
 * default size here (the mp tests shrink it).
 *
 * MPI is used only as real programs use it with HCCL (the bootstrap of
 * tests/common/zt_mpi_main.h): MPI_Bcast of the root info from rank 0, plus
 * one MPI_Allreduce of each test's failure count, so every rank asserts the
 * same global result and cmocka's flow stays in step.
 */
#include "zt_coll_table.h"
#include "zt_mpi_main.h"

/* The ranks mpirun started, on a fresh root info; non-zero when any rank failed. */
static int launch_mpi(int n, zt_cc_job_t *job, int timeout_s)
{
    (void)n;
    (void)timeout_s;
    HcclRootInfo root;
    zt_mpi_bcast_root(&root);
    return zt_mpi_global_fails(zt_cc_rank_job(zt_mpi_rank, zt_mpi_size, &root, job));
}

int main(int argc, char **argv)
{
    zt_mpi_init(&argc, &argv);
    zt_cs_launcher_t l = {.launch = launch_mpi,
                          .fixed_n = zt_mpi_size,
                          .rows = ZT_CS_COLL | ZT_CS_P2P,
                          .seed = 0x3b1c011ull};
    return zt_mpi_finish(zt_cs_run(&l));
}
