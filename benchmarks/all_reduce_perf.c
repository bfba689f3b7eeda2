/*
 * all_reduce_perf: HcclAllReduce against MPI_Allreduce, nccl-tests style.
 *
 * Size S = the bytes of each rank's input (= its output). busbw = algbw *
 * 2(N-1)/N. Traffic model (see bench_probe.c): the direct algorithm has every
 * rank read its S input bytes once and write its S output bytes once, so at
 * least 2*N*S bytes move through memory over all ranks per op.
 */
#include "harness.h"

static void ar_shape(bench_op_t *op, size_t elems, void *sendbuf, void *recvbuf, int inplace)
{
    op->count = elems;
    op->send_elems = elems;
    op->recv_elems = elems;
    op->recv = recvbuf;
    op->send = inplace ? recvbuf : sendbuf;
}

static double ar_bus_factor(int nranks)
{
    return 2.0 * (nranks - 1) / nranks;
}

static double ar_traffic(double size, int nranks)
{
    return 2.0 * nranks * size;
}

static HcclResult ar_run(const bench_op_t *op, HcclComm comm, aclrtStream stream)
{
    return HcclAllReduce(op->send, op->recv, op->count, (HcclDataType)op->dtype,
                         (HcclReduceOp)op->redop, comm, stream);
}

static int ar_expect(const bench_op_t *op, size_t i, double *value)
{
    *value = bench_fold(op, i);
    return 1;
}

int main(int argc, char **argv)
{
    static const bench_coll_t coll = {
        .tool = "all_reduce_perf",
        .name = "AllReduce",
        .mpi_name = "MPI_Allreduce",
        .flags = BENCH_REDUCES,
        .traffic_text = "2*N*S",
        .shape = ar_shape,
        .bus_factor = ar_bus_factor,
        .traffic = ar_traffic,
        .run = ar_run,
        .run_mpi = bench_mpi_allreduce,
        .expect = ar_expect,
    };
    return bench_main(argc, argv, &coll);
}
