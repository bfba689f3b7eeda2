/*
 * reduce_perf: HcclReduce against MPI_Reduce, nccl-tests style.
 *
 * Size S = each rank's input bytes; only the root's output is defined (and
 * checked). busbw = algbw. Traffic model (see bench_probe.c): every input
 * byte is read once (N*S) and the root's output written once (S), at least
 * (N+1)*S bytes per op.
 */
#include "harness.h"

static void rd_shape(bench_op_t *op, size_t elems, void *sendbuf, void *recvbuf, int inplace)
{
    op->count = elems;
    op->send_elems = elems;
    op->recv_elems = elems;
    op->recv = recvbuf;
    op->send = inplace ? recvbuf : sendbuf;
}

static double rd_bus_factor(int nranks)
{
    (void)nranks;
    return 1.0;
}

static double rd_traffic(double size, int nranks)
{
    return (nranks + 1.0) * size;
}

static HcclResult rd_run(const bench_op_t *op, HcclComm comm, aclrtStream stream)
{
    return HcclReduce(op->send, op->recv, op->count, (HcclDataType)op->dtype,
                      (HcclReduceOp)op->redop, op->root, comm, stream);
}

static int rd_expect(const bench_op_t *op, size_t i, double *value)
{
    if ((uint32_t)op->rank != op->root) {
        return 0;
    }
    *value = bench_fold(op, i);
    return 1;
}

int main(int argc, char **argv)
{
    static const bench_coll_t coll = {
        .tool = "reduce_perf",
        .name = "Reduce",
        .mpi_name = "MPI_Reduce",
        .flags = BENCH_REDUCES | BENCH_ROOTED,
        .traffic_text = "(N+1)*S",
        .shape = rd_shape,
        .bus_factor = rd_bus_factor,
        .traffic = rd_traffic,
        .run = rd_run,
        .run_mpi = bench_mpi_reduce,
        .expect = rd_expect,
    };
    return bench_main(argc, argv, &coll);
}
