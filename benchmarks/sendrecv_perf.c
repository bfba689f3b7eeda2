/*
 * sendrecv_perf: a ring of point-to-point transfers, HcclBatchSendRecv (one
 * send to rank+1, one receive from rank-1, in one call so the pair cannot
 * deadlock on a single stream) against MPI_Sendrecv, nccl-tests style.
 *
 * Size S = the bytes each rank sends (and receives). busbw = algbw.
 * Reference (see bench_ref.c): pull (copy rank-1's input into my output) or
 * push (my input into rank+1's output), cached or streaming stores. No
 * in-place form.
 */
#include "harness.h"

static void sr_shape(bench_op_t *op, size_t elems, void *sendbuf, void *recvbuf, int inplace)
{
    (void)inplace;
    op->count = elems;
    op->send_elems = elems;
    op->recv_elems = elems;
    op->send = sendbuf;
    op->recv = recvbuf;
}

static double sr_bus_factor(int nranks)
{
    (void)nranks;
    return 1.0;
}

static HcclResult sr_run(const bench_op_t *op, HcclComm comm, aclrtStream stream)
{
    uint32_t n = (uint32_t)op->nranks;
    uint32_t next = ((uint32_t)op->rank + 1) % n;
    uint32_t prev = ((uint32_t)op->rank + n - 1) % n;
    HcclSendRecvItem items[2] = {
        {.sendRecvType = HCCL_SEND,
         .buf = op->send,
         .count = op->count,
         .dataType = (HcclDataType)op->dtype,
         .remoteRank = next},
        {.sendRecvType = HCCL_RECV,
         .buf = op->recv,
         .count = op->count,
         .dataType = (HcclDataType)op->dtype,
         .remoteRank = prev},
    };
    return HcclBatchSendRecv(items, 2, comm, stream);
}

static int sr_expect(const bench_op_t *op, size_t i, double *value)
{
    *value = bench_value(op, (op->rank + op->nranks - 1) % op->nranks, i);
    return 1;
}

/* Reference kernel: pull from rank-1, or push to rank+1. */
static void sr_ref(const bench_ref_args_t *r)
{
    const bench_op_t *op = r->op;
    int n = op->nranks;
    size_t bytes = op->count * op->esize;
    if (r->own_only) {
        bench_ref_copy(r->out[op->rank], r->in[(op->rank + n - 1) % n], bytes, r->nt);
    } else {
        bench_ref_copy(r->out[(op->rank + 1) % n], r->in[op->rank], bytes, r->nt);
    }
}

int main(int argc, char **argv)
{
    static const bench_coll_t coll = {
        .tool = "sendrecv_perf",
        .name = "SendRecv",
        .mpi_name = "MPI_Sendrecv",
        .flags = BENCH_NO_INPLACE | BENCH_REF_SPREAD,
        .shape = sr_shape,
        .bus_factor = sr_bus_factor,
        .run = sr_run,
        .run_mpi = bench_mpi_sendrecv,
        .expect = sr_expect,
        .ref = sr_ref,
    };
    return bench_main(argc, argv, &coll);
}
