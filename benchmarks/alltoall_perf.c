/*
 * alltoall_perf: HcclAlltoAll against MPI_Alltoall, nccl-tests style.
 *
 * Size S = each rank's send bytes (N blocks of S/N; block j goes to rank j,
 * which stores it as its block r). busbw = algbw * (N-1)/N. Reference (see
 * bench_ref.c): pull (rank r copies block r of every in[q] into block q of
 * its output) or push (block q of in[r] into block r of every out[q]),
 * cached or streaming stores. No in-place form.
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

/* Reference kernel: pull my blocks, or push mine to every peer. */
static void a2a_ref(const bench_ref_args_t *r)
{
    const bench_op_t *op = r->op;
    int n = op->nranks;
    size_t bytes = (size_t)op->count * op->esize;
    size_t me = (size_t)op->rank;
    for (int k = 0; k < n; k++) {
        int q = (op->rank + k) % n;
        if (r->own_only) {
            bench_ref_copy((char *)r->out[me] + (size_t)q * bytes,
                           (const char *)r->in[q] + me * bytes, bytes, r->nt);
        } else {
            bench_ref_copy((char *)r->out[q] + me * bytes,
                           (const char *)r->in[me] + (size_t)q * bytes, bytes, r->nt);
        }
    }
}

int main(int argc, char **argv)
{
    static const bench_coll_t coll = {
        .tool = "alltoall_perf",
        .name = "AlltoAll",
        .mpi_name = "MPI_Alltoall",
        .flags = BENCH_NO_INPLACE | BENCH_REF_SPREAD,
        .shape = a2a_shape,
        .bus_factor = a2a_bus_factor,
        .run = a2a_run,
        .run_mpi = bench_mpi_alltoall,
        .expect = a2a_expect,
        .ref = a2a_ref,
    };
    return bench_main(argc, argv, &coll);
}
