/*
 * broadcast_perf: HcclBroadcast against MPI_Bcast, nccl-tests style.
 *
 * HcclBroadcast works in place on one buffer (the root's data replaces every
 * other rank's), so -I makes no difference. Size S = the buffer's bytes;
 * busbw = algbw. Reference (see bench_ref.c): every rank
 * but the root copies the root's buffer into its own, cached or streaming
 * stores.
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

static HcclResult bc_run(const bench_op_t *op, HcclComm comm, aclrtStream stream)
{
    return HcclBroadcast(op->recv, op->count, (HcclDataType)op->dtype, op->root, comm, stream);
}

static int bc_expect(const bench_op_t *op, size_t i, double *value)
{
    *value = bench_value(op, (int)op->root, i);
    return 1;
}

/* Reference kernel: pull the root's buffer. */
static void bc_ref(const bench_ref_args_t *r)
{
    const bench_op_t *op = r->op;
    if (op->rank != (int)op->root) {
        bench_ref_copy(r->out[op->rank], r->in[op->root], op->count * op->esize, r->nt);
    }
}

int main(int argc, char **argv)
{
    static const bench_coll_t coll = {
        .tool = "broadcast_perf",
        .name = "Broadcast",
        .mpi_name = "MPI_Bcast",
        .flags = BENCH_ROOTED,
        .shape = bc_shape,
        .bus_factor = bc_bus_factor,
        .run = bc_run,
        .run_mpi = bench_mpi_broadcast,
        .expect = bc_expect,
        .ref = bc_ref,
    };
    return bench_main(argc, argv, &coll);
}
