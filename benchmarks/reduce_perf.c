/*
 * reduce_perf: HcclReduce against MPI_Reduce, nccl-tests style.
 *
 * Size S = each rank's input bytes; only the root's output is defined (and
 * checked). busbw = algbw. Reference (see bench_ref.c): rank r reduces slice r of every input
 * into slice r of the root's output (own-output form: the root reduces all
 * of it), one L1 block at a time, cached or streaming stores.
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

/* Reference kernel: my slice into the root's output, or the root does it all. */
static void rd_ref(const bench_ref_args_t *r)
{
    const bench_op_t *op = r->op;
    if (r->own_only) {
        if (op->rank == (int)op->root) {
            bench_ref_reduce(&r->out[op->root], 1, 0, r->in, op->nranks, 0, op->count, op->dtype,
                             op->redop, r->nt);
        }
        return;
    }
    size_t off, len;
    bench_ref_slice(op->count, op->nranks, op->rank, op->esize, &off, &len);
    bench_ref_reduce(&r->out[op->root], 1, off * op->esize, r->in, op->nranks, off * op->esize, len,
                     op->dtype, op->redop, r->nt);
}

int main(int argc, char **argv)
{
    static const bench_coll_t coll = {
        .tool = "reduce_perf",
        .name = "Reduce",
        .mpi_name = "MPI_Reduce",
        .flags = BENCH_REDUCES | BENCH_ROOTED | BENCH_REF_SPREAD,
        .shape = rd_shape,
        .bus_factor = rd_bus_factor,
        .run = rd_run,
        .run_mpi = bench_mpi_reduce,
        .expect = rd_expect,
        .ref = rd_ref,
    };
    return bench_main(argc, argv, &coll);
}
