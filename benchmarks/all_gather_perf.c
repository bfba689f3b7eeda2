/*
 * all_gather_perf: HcclAllGather against MPI_Allgather, nccl-tests style.
 *
 * Size S = the bytes of each rank's output (N blocks of S/N, block r from rank
 * r). busbw = algbw * (N-1)/N. Reference (see bench_ref.c): pull (own output: rank r copies
 * every in[q] into slot q of out[r], starting at q = r) or push (rank r
 * copies in[r] into slot r of every out[q]), cached or streaming stores.
 */
#include "harness.h"

static void ag_shape(bench_op_t *op, size_t elems, void *sendbuf, void *recvbuf, int inplace)
{
    size_t n = (size_t)op->nranks;
    /* At least one element per rank, so tiny sizes still move data. */
    op->count = elems > 0 && elems < n ? 1 : elems / n;
    op->send_elems = (size_t)op->count;
    op->recv_elems = (size_t)op->count * n;
    op->recv = recvbuf;
    op->send = inplace ? bench_at(recvbuf, (size_t)op->rank * op->count * op->esize) : sendbuf;
}

static double ag_bus_factor(int nranks)
{
    return (double)(nranks - 1) / nranks;
}

static HcclResult ag_run(const bench_op_t *op, HcclComm comm, aclrtStream stream)
{
    return HcclAllGather(op->send, op->recv, op->count, (HcclDataType)op->dtype, comm, stream);
}

static int ag_expect(const bench_op_t *op, size_t i, double *value)
{
    *value = bench_value(op, (int)(i / op->count), i % op->count);
    return 1;
}

/* Bytes of the own block pushed to every output before the next: the block is
   read from memory once and stays in L1/L2 for the other n - 1 copies. */
#define AG_REF_PUSH_CHUNK ((size_t)32 << 10)

/* Reference kernel: pull into the own output, or push the own block. */
static void ag_ref(const bench_ref_args_t *r)
{
    const bench_op_t *op = r->op;
    int n = op->nranks;
    size_t bytes = (size_t)op->count * op->esize;
    if (r->own_only) {
        for (int k = 0; k < n; k++) {
            int q = (op->rank + k) % n;
            bench_ref_copy((char *)r->out[op->rank] + (size_t)q * bytes, r->in[q], bytes, r->nt);
        }
        return;
    }
    size_t slot = (size_t)op->rank * bytes;
    for (size_t o = 0; o < bytes; o += AG_REF_PUSH_CHUNK) {
        size_t len = bytes - o < AG_REF_PUSH_CHUNK ? bytes - o : AG_REF_PUSH_CHUNK;
        for (int k = 0; k < n; k++) {
            int q = (op->rank + k) % n;
            bench_ref_copy((char *)r->out[q] + slot + o, (const char *)r->in[op->rank] + o, len,
                           r->nt);
        }
    }
}

int main(int argc, char **argv)
{
    static const bench_coll_t coll = {
        .tool = "all_gather_perf",
        .name = "AllGather",
        .mpi_name = "MPI_Allgather",
        .flags = BENCH_REF_SPREAD,
        .shape = ag_shape,
        .bus_factor = ag_bus_factor,
        .run = ag_run,
        .run_mpi = bench_mpi_allgather,
        .expect = ag_expect,
        .ref = ag_ref,
    };
    return bench_main(argc, argv, &coll);
}
