/*
 * AllReduce: out[r] = in[0] op in[1] op ... op in[n-1] on every rank r.
 *
 * Direct path (every rank's buffers mapped here):
 *  - one-shot, up to tune->oneshot_max bytes when no rank is in place: each
 *    rank reduces all n inputs into its own output. Only local writes, and
 *    nobody writes a buffer another rank reads, so no barrier is needed.
 *  - reduce-scatter-write otherwise: the count is cut into n slices of whole
 *    cache lines; rank r reduces slice r of all inputs, one L1-sized block at
 *    a time, into slice r of its own output and copies that still L1-hot
 *    block into slice r of every other output; with streaming stores
 *    (chosen by where the output probably is, coll_nt.c) it reduces into an L1 stack block
 *    instead and streams it into every output, its own included (see
 *    coll_ar_mode). Only rank r reads or
 *    writes slice r of any buffer, so in-place (out[q] == in[q]) is safe with
 *    no barrier; traffic is the minimal 2·N·S bytes.
 *  - an output that partially overlaps its own input would be written while
 *    peers read it: the ranks concerned reduce into a private buffer and
 *    commit after one barrier that all ranks join (coll_run_owned).
 *
 * Staged path (only ccl[] shared), per chunk of the CCL buffer's size:
 *   copy my chunk of send into ccl[me]; barrier;
 *   rank r reduces slice r of every ccl[q] into slice r of ccl[r] (only rank
 *   r reads slice r, so reducing in place is safe); barrier;
 *   every rank copies slice q from ccl[q] into its recv; barrier before the
 *   next chunk overwrites ccl[me] (none after the last chunk: the caller's
 *   exit handshake keeps ccl[me] alive until every peer has read it).
 * Reduce's staged variant is the same loop with only the root copying out.
 */
#include "coll_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Write strategy of reduce-scatter-write (coll_ar_write_t). The default,
 * COLL_AR_WRITE_BY_STORES, picks by store kind: with cached stores reduce
 * into out[me] and copy from there (the own output is written once, where
 * it will be read); with streaming stores reduce into a stack block and
 * stream it to every output, the own one included (a cached own output
 * would cost a read-for-ownership and a later write-back of every line: a
 * third more memory traffic at np 2). The other two modes force one way
 * (measurements and tests). */
static atomic_int coll_ar_mode = COLL_AR_WRITE_BY_STORES;

void coll_allreduce_set_write_mode(coll_ar_write_t mode)
{
    atomic_store_explicit(&coll_ar_mode, (int)mode, memory_order_relaxed);
}

static int coll_ar_direct_ptrs(const coll_args_t *a, size_t bytes, const char *what)
{
    for (int q = 0; q < a->nranks; q++) {
        ZC_CHECK(coll_check_buf(a->in[q], bytes, what, "in[q]", q));
        ZC_CHECK(coll_check_buf(a->out[q], bytes, what, "out[q]", q));
    }
    return ZC_OK;
}

/* Reduce-scatter-write of slice `me`, one block at a time: reduce into
 * out[me] (or the stack block), then copy the L1-hot result to the other
 * outputs (or all of them). */
static void coll_ar_rsw(const coll_args_t *a, size_t es, int nt)
{
    unsigned char blk[COLL_BLK_BYTES] __attribute__((aligned(64)));
    size_t off, len;
    size_t per = COLL_BLK_BYTES / es;
    coll_slice(a->count, a->nranks, a->rank, es, &off, &len);

    int mode = atomic_load_explicit(&coll_ar_mode, memory_order_relaxed);
    int via_own = mode == COLL_AR_WRITE_OWN_OUTPUT || (mode == COLL_AR_WRITE_BY_STORES && !nt);
    for (size_t i = 0; i < len; i += per) {
        size_t m = ZC_MIN(per, len - i);
        size_t bo = (off + i) * es;
        const void *src = blk;
        if (via_own) {
            src = (char *)a->out[a->rank] + bo;
            coll_reduce_at((char *)a->out[a->rank] + bo, a->in, bo, a->nranks, m, a->dtype, a->op);
        } else {
            coll_reduce_at(blk, a->in, bo, a->nranks, m, a->dtype, a->op);
        }
        for (int k = 0; k < a->nranks; k++) {
            int q = (a->rank + k) % a->nranks;
            coll_put((char *)a->out[q] + bo, src, m * es, nt);
        }
    }
    if (nt) {
        coll_store_fence();
    }
}

static int coll_ar_oneshot_work(const coll_args_t *a, char *base, void *ctx)
{
    (void)ctx;
    coll_reduce_at(base, a->in, 0, a->nranks, a->count, a->dtype, a->op);
    return ZC_OK;
}

int coll_allreduce_direct(const coll_args_t *a)
{
    static const char what[] = "allreduce_direct";
    size_t es, bytes;
    ZC_CHECK(coll_begin(a, COLL_F_REDUCE | COLL_F_DIRECT, what, &es, &bytes, NULL));
    if (bytes == 0) {
        return ZC_OK;
    }
    ZC_CHECK(coll_ar_direct_ptrs(a, bytes, what));

    int inplace_any = 0;
    int partial_any = 0;
    for (int q = 0; q < a->nranks; q++) {
        if (a->in[q] == a->out[q]) {
            inplace_any = 1;
        } else if (coll_overlap(a->in[q], bytes, a->out[q], bytes)) {
            partial_any = 1;
        }
    }
    if (partial_any) {
        /* one-shot on every rank, where peers read all of in[me]: any
         * overlap, exact in-place included, must wait for the barrier */
        int me_overlaps = coll_overlap(a->in[a->rank], bytes, a->out[a->rank], bytes);
        return coll_run_owned(a, 1, me_overlaps, bytes, coll_ar_oneshot_work, NULL, NULL);
    }
    if (bytes <= coll_oneshot_max(a) && !inplace_any) {
        return coll_ar_oneshot_work(a, a->out[a->rank], NULL);
    }
    coll_ar_rsw(a, es, coll_nt_choose(a, bytes, bytes));
    return ZC_OK;
}

int coll_reduce_staged_run(const coll_args_t *a, int root, const char *what)
{
    size_t es = coll_dtype_size(a->dtype);
    size_t bytes;
    ZC_CHECK(coll_bytes(a->count, es, 1, what, &bytes));
    if (bytes == 0) {
        return ZC_OK;
    }
    size_t per, chunks;
    ZC_CHECK(coll_stage_plan(a, 1, a->count, what, &per, &chunks));
    size_t nbar = 3 * chunks - 1;
    int me = a->rank;
    int copy_out = root < 0 || root == me;

    int st = coll_check_buf(a->send, bytes, what, "send", me);
    if (st == ZC_OK && copy_out) {
        st = coll_check_buf(a->recv, bytes, what, "recv", me);
    }
    const char *send = a->send;
    void *snap = NULL;
    if (st == ZC_OK && copy_out) {
        st = coll_stage_send(a, bytes, bytes, a->send == a->recv, &send, &snap);
    }
    if (st != ZC_OK) {
        return coll_fail_staged(a, nbar, st);
    }

    int nt = copy_out && coll_use_nt(a, bytes);
    char *mine = a->ccl[me];
    for (size_t c = 0; c < chunks && st == ZC_OK; c++) {
        size_t co = c * per;
        size_t cl = ZC_MIN(per, a->count - co);
        size_t so, sl;
        if (c > 0) {
            /* peers have finished copying the previous chunk out of ccl[me] */
            ZC_CHECK_GOTO(coll_barrier(a), st, out);
        }
        coll_stage_in(a, mine, send + co * es, cl * es);
        ZC_CHECK_GOTO(coll_barrier(a), st, out);
        coll_slice(cl, a->nranks, me, es, &so, &sl);
        coll_reduce_at(mine + so * es, (const void *const *)a->ccl, so * es, a->nranks, sl,
                       a->dtype, a->op);
        ZC_CHECK_GOTO(coll_barrier(a), st, out);
        if (copy_out) {
            for (int k = 0; k < a->nranks; k++) {
                int q = (me + k) % a->nranks;
                coll_slice(cl, a->nranks, q, es, &so, &sl);
                coll_put((char *)a->recv + (co + so) * es, (const char *)a->ccl[q] + so * es,
                         sl * es, nt);
            }
        }
    }
out:
    if (nt) {
        coll_store_fence();
    }
    free(snap);
    return st;
}

int coll_allreduce_staged(const coll_args_t *a)
{
    static const char what[] = "allreduce_staged";
    ZC_CHECK(coll_check(a, COLL_F_REDUCE | COLL_F_STAGED, what));
    return coll_reduce_staged_run(a, -1, what);
}
