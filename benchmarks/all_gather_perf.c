/*
 * all_gather_perf: HcclAllGather against MPI_Allgather, nccl-tests style.
 *
 * Size S = the bytes of each rank's output (N blocks of S/N, block r from rank
 * r). busbw = algbw * (N-1)/N. Traffic model (see bench_probe.c): each of the
 * N outputs of S bytes is written once and every written byte is read once
 * from some input, so at least 2*N*S bytes move per op (out of place; in place
 * a rank's own block need not move, which this bound does not credit).
 */
#include "harness.h"

static void ag_shape(bench_op_t *op, size_t elems, void *sendbuf, void *recvbuf, int inplace)
{
    size_t n = (size_t)op->nranks;
    /* At least one element per rank, so tiny sizes still move data. */
    op->count = elems > 0 && elems < n ? 1 : elems / n;
    op->send_elems = (size_t)op->count;
    op->recv_elems = (size_t)op->count * n;
    op->recv = recvbuf;
    op->send = inplace ? bench_at(recvbuf, (size_t)op->rank * op->count * op->esize) : sendbuf;
}

static double ag_bus_factor(int nranks)
{
    return (double)(nranks - 1) / nranks;
}

static double ag_traffic(double size, int nranks)
{
    return 2.0 * nranks * size;
}

static HcclResult ag_run(const bench_op_t *op, HcclComm comm, aclrtStream stream)
{
    return HcclAllGather(op->send, op->recv, op->count, (HcclDataType)op->dtype, comm, stream);
}

static int ag_expect(const bench_op_t *op, size_t i, double *value)
{
    *value = bench_value(op, (int)(i / op->count), i % op->count);
    return 1;
}

int main(int argc, char **argv)
{
    static const bench_coll_t coll = {
        .tool = "all_gather_perf",
        .name = "AllGather",
        .mpi_name = "MPI_Allgather",
        .flags = 0,
        .traffic_text = "2*N*S",
        .shape = ag_shape,
        .bus_factor = ag_bus_factor,
        .traffic = ag_traffic,
        .run = ag_run,
        .run_mpi = bench_mpi_allgather,
        .expect = ag_expect,
    };
    return bench_main(argc, argv, &coll);
}
