/*
 * alltoall_perf: HcclAlltoAll against MPI_Alltoall, nccl-tests style.
 *
 * Size S = each rank's send bytes (N blocks of S/N; block j goes to rank j,
 * which stores it as its block r). busbw = algbw * (N-1)/N. Traffic model
 * (see bench_probe.c): every send byte is read once and every receive byte
 * written once, at least 2*N*S bytes per op. No in-place form.
 */
#include "harness.h"

static void a2a_shape(bench_op_t *op, size_t elems, void *sendbuf, void *recvbuf, int inplace)
{
    size_t n = (size_t)op->nranks;
    (void)inplace;
    /* At least one element per rank, so tiny sizes still move data. */
    op->count = elems > 0 && elems < n ? 1 : elems / n;
    op->send_elems = (size_t)op->count * n;
    op->recv_elems = (size_t)op->count * n;
    op->send = sendbuf;
    op->recv = recvbuf;
}

static double a2a_bus_factor(int nranks)
{
    return (double)(nranks - 1) / nranks;
}

static double a2a_traffic(double size, int nranks)
{
    return 2.0 * nranks * size;
}

static HcclResult a2a_run(const bench_op_t *op, HcclComm comm, aclrtStream stream)
{
    return HcclAlltoAll(op->send, op->count, (HcclDataType)op->dtype, op->recv, op->count,
                        (HcclDataType)op->dtype, comm, stream);
}

static int a2a_expect(const bench_op_t *op, size_t i, double *value)
{
    size_t from = i / op->count;
    *value = bench_value(op, (int)from, (size_t)op->rank * op->count + i % op->count);
    return 1;
}

int main(int argc, char **argv)
{
    static const bench_coll_t coll = {
        .tool = "alltoall_perf",
        .name = "AlltoAll",
        .mpi_name = "MPI_Alltoall",
        .flags = BENCH_NO_INPLACE,
        .traffic_text = "2*N*S",
        .shape = a2a_shape,
        .bus_factor = a2a_bus_factor,
        .traffic = a2a_traffic,
        .run = a2a_run,
        .run_mpi = bench_mpi_alltoall,
        .expect = a2a_expect,
    };
    return bench_main(argc, argv, &coll);
}
