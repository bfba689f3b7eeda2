/*
 * reduce_scatter_perf: HcclReduceScatter against MPI_Reduce_scatter_block.
 *
 * Size S = the bytes of each rank's input (N blocks of S/N; rank r receives
 * the reduction of every rank's block r). busbw = algbw * (N-1)/N. Traffic
 * model (see bench_probe.c): every input byte is read once (N*S) and every
 * output byte written once (N outputs of S/N), at least (N+1)*S bytes per op.
 */
#include "harness.h"

static void rs_shape(bench_op_t *op, size_t elems, void *sendbuf, void *recvbuf, int inplace)
{
    size_t n = (size_t)op->nranks;
    /* At least one element per rank, so tiny sizes still move data. */
    op->count = elems > 0 && elems < n ? 1 : elems / n;
    op->send_elems = (size_t)op->count * n;
    op->recv_elems = (size_t)op->count;
    op->send = sendbuf;
    op->recv = inplace ? bench_at(sendbuf, (size_t)op->rank * op->count * op->esize) : recvbuf;
}

static double rs_bus_factor(int nranks)
{
    return (double)(nranks - 1) / nranks;
}

static double rs_traffic(double size, int nranks)
{
    return (nranks + 1.0) * size;
}

static HcclResult rs_run(const bench_op_t *op, HcclComm comm, aclrtStream stream)
{
    return HcclReduceScatter(op->send, op->recv, op->count, (HcclDataType)op->dtype,
                             (HcclReduceOp)op->redop, comm, stream);
}

static int rs_expect(const bench_op_t *op, size_t i, double *value)
{
    *value = bench_fold(op, (size_t)op->rank * op->count + i);
    return 1;
}

int main(int argc, char **argv)
{
    static const bench_coll_t coll = {
        .tool = "reduce_scatter_perf",
        .name = "ReduceScatter",
        .mpi_name = "MPI_Reduce_scatter_block",
        .flags = BENCH_REDUCES,
        .traffic_text = "(N+1)*S",
        .shape = rs_shape,
        .bus_factor = rs_bus_factor,
        .traffic = rs_traffic,
        .run = rs_run,
        .run_mpi = bench_mpi_reduce_scatter,
        .expect = rs_expect,
    };
    return bench_main(argc, argv, &coll);
}
