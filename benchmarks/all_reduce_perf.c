/*
 * all_reduce_perf: HcclAllReduce against MPI_Allreduce, nccl-tests style.
 *
 * Size S = the bytes of each rank's input (= its output). busbw = algbw *
 * 2(N-1)/N. Reference (see bench_ref.c): reduce-scatter-write: rank r
 * reduces slice r (whole cache lines) of every input, one L1 block at a
 * time, and writes the block to slice r of every output, starting with its
 * own, with cached or streaming stores; the own-output form (one-shot: every
 * rank reduces all inputs into its own output) is tried up to 4 MiB, and the
 * slot form up to 64 KiB.
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

/* Reference kernel: reduce-scatter-write, or one-shot into the own output. */
static void ar_ref(const bench_ref_args_t *r)
{
    const bench_op_t *op = r->op;
    int n = op->nranks;
    if (r->own_only) {
        bench_ref_reduce(&r->out[op->rank], 1, 0, r->in, n, 0, op->count, op->dtype, op->redop,
                         r->nt);
        return;
    }
    void *dst[BENCH_REF_MAX_RANKS];
    for (int k = 0; k < n; k++) {
        dst[k] = r->out[(op->rank + k) % n];
    }
    size_t off, len;
    bench_ref_slice(op->count, n, op->rank, op->esize, &off, &len);
    bench_ref_reduce(dst, n, off * op->esize, r->in, n, off * op->esize, len, op->dtype, op->redop,
                     r->nt);
}

int main(int argc, char **argv)
{
    static const bench_coll_t coll = {
        .tool = "all_reduce_perf",
        .name = "AllReduce",
        .mpi_name = "MPI_Allreduce",
        .flags = BENCH_REDUCES | BENCH_REF_SPREAD,
        .shape = ar_shape,
        .bus_factor = ar_bus_factor,
        .run = ar_run,
        .run_mpi = bench_mpi_allreduce,
        .expect = ar_expect,
        .ref = ar_ref,
    };
    return bench_main(argc, argv, &coll);
}
