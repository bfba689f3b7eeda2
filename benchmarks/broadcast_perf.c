/*
 * broadcast_perf: HcclBroadcast against MPI_Bcast, nccl-tests style.
 *
 * HcclBroadcast works in place on one buffer (the root's data replaces every
 * other rank's), so -I makes no difference. Size S = the buffer's bytes;
 * busbw = algbw. Traffic model (see bench_probe.c): N-1 ranks' buffers are
 * written (N-1)*S bytes, each byte read once from the root's or a copy,
 * at least 2*(N-1)*S bytes per op.
 */
#include "harness.h"

static void bc_shape(bench_op_t *op, size_t elems, void *sendbuf, void *recvbuf, int inplace)
{
    (void)sendbuf;
    (void)inplace;
    op->count = elems;
    op->send_elems = elems;
    op->recv_elems = elems;
    op->send = recvbuf;
    op->recv = recvbuf;
}

static double bc_bus_factor(int nranks)
{
    (void)nranks;
    return 1.0;
}

static double bc_traffic(double size, int nranks)
{
    return 2.0 * (nranks - 1) * size;
}

static HcclResult bc_run(const bench_op_t *op, HcclComm comm, aclrtStream stream)
{
    return HcclBroadcast(op->recv, op->count, (HcclDataType)op->dtype, op->root, comm, stream);
}

static int bc_expect(const bench_op_t *op, size_t i, double *value)
{
    *value = bench_value(op, (int)op->root, i);
    return 1;
}

int main(int argc, char **argv)
{
    static const bench_coll_t coll = {
        .tool = "broadcast_perf",
        .name = "Broadcast",
        .mpi_name = "MPI_Bcast",
        .flags = BENCH_ROOTED,
        .traffic_text = "2*(N-1)*S",
        .shape = bc_shape,
        .bus_factor = bc_bus_factor,
        .traffic = bc_traffic,
        .run = bc_run,
        .run_mpi = bench_mpi_broadcast,
        .expect = bc_expect,
    };
    return bench_main(argc, argv, &coll);
}
