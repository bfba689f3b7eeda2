/*
 * reduce_scatter_perf: HcclReduceScatter against MPI_Reduce_scatter_block.
 *
 * Size S = the bytes of each rank's input (N blocks of S/N; rank r receives
 * the reduction of every rank's block r). busbw = algbw * (N-1)/N.
 * Reference (see bench_ref.c): rank r reduces block r of every input into
 * its output, one L1 block at a time, cached or streaming stores.
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

/* Reference kernel: reduce my block of every input. */
static void rs_ref(const bench_ref_args_t *r)
{
    const bench_op_t *op = r->op;
    size_t off = (size_t)op->rank * op->count * op->esize;
    bench_ref_reduce(&r->out[op->rank], 1, 0, r->in, op->nranks, off, op->count, op->dtype,
                     op->redop, r->nt);
}

int main(int argc, char **argv)
{
    static const bench_coll_t coll = {
        .tool = "reduce_scatter_perf",
        .name = "ReduceScatter",
        .mpi_name = "MPI_Reduce_scatter_block",
        .flags = BENCH_REDUCES,
        .shape = rs_shape,
        .bus_factor = rs_bus_factor,
        .run = rs_run,
        .run_mpi = bench_mpi_reduce_scatter,
        .expect = rs_expect,
        .ref = rs_ref,
    };
    return bench_main(argc, argv, &coll);
}
