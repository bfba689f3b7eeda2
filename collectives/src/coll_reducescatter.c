/*
 * ReduceScatter and ReduceScatterV: rank r receives the reduction over all
 * ranks of their send block r.
 *
 * Direct path: rank r reduces block r of every in[q] straight into out[r]
 * (blocked, so the accumulator stays in L1). Only rank r reads block r of
 * any input, so out[r] == block r of in[r] (the usual in-place form) is
 * safe without a barrier. An out[r] overlapping another block of in[r]
 * (out[r] == in[r] with r > 0, say) would be written while a peer reads it:
 * such ranks reduce into a private buffer and commit after one barrier that
 * all ranks join (coll_run_owned).
 *
 * Staged path: the CCL buffer is cut into n parts of P elements. Per round:
 *   copy chunk k of each of my n send blocks into part q of ccl[me]; barrier;
 *   reduce part me of every ccl[q] into chunk k of recv; barrier before the
 *   next round overwrites ccl[me].
 * Round k reads chunk k of each send block before it writes chunk k of
 * recv, so recv == send and recv == block me of send are both safe; other
 * overlaps use a private copy of send.
 *
 * ReduceScatterV: send_counts[r][q] / send_displs[r][q] are rank r's
 * arguments; recv_count_each[q] is rank q's recv count. Every
 * send_counts[r][q] must equal recv_count_each[q] (checked); without
 * recv_count_each, every rank's send_counts must agree and give them.
 */
#include "coll_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- ReduceScatter ---- */

static int coll_rs_work(const coll_args_t *a, char *base, void *ctx)
{
    size_t bytes = *(const size_t *)ctx;
    coll_reduce_at(base, a->in, (size_t)a->rank * bytes, a->nranks, a->count, a->dtype, a->op);
    return ZC_OK;
}

int coll_reducescatter_direct(const coll_args_t *a)
{
    static const char what[] = "reducescatter_direct";
    size_t es, bytes, total;
    ZC_CHECK(coll_begin(a, COLL_F_REDUCE | COLL_F_DIRECT, what, &es, &bytes, &total));
    if (bytes == 0) {
        return ZC_OK;
    }
    return coll_run_blocks(a, total, bytes, COLL_INPLACE_OUT_SLOT, what, coll_rs_work, &bytes);
}

int coll_reducescatter_staged(const coll_args_t *a)
{
    static const char what[] = "reducescatter_staged";
    size_t es, bytes, total, per, rounds;
    ZC_CHECK(coll_begin(a, COLL_F_REDUCE | COLL_F_STAGED, what, &es, &bytes, &total));
    if (bytes == 0) {
        return ZC_OK;
    }
    ZC_CHECK(coll_stage_plan(a, (size_t)a->nranks, a->count, what, &per, &rounds));
    int me = a->rank;
    uintptr_t rv = (uintptr_t)a->recv;
    int safe = rv == (uintptr_t)a->send || rv == (uintptr_t)a->send + (size_t)me * bytes;
    const char *send;
    void *snap;
    ZC_CHECK(coll_stage_io(a, total, bytes, safe, what, 2 * rounds - 1, &send, &snap));

    size_t pb = per * es;
    int st = ZC_OK;
    for (size_t k = 0; k < rounds; k++) {
        size_t lo = k * per;
        size_t cl = ZC_MIN(per, a->count - lo);
        if (k > 0) {
            ZC_CHECK_GOTO(coll_barrier(a), st, out);
        }
        for (int q = 0; q < a->nranks; q++) {
            coll_stage_in(a, (char *)a->ccl[me] + (size_t)q * pb, send + q * bytes + lo * es,
                          cl * es);
        }
        ZC_CHECK_GOTO(coll_barrier(a), st, out);
        coll_reduce_at((char *)a->recv + lo * es, (const void *const *)a->ccl, (size_t)me * pb,
                       a->nranks, cl, a->dtype, a->op);
    }
out:
    free(snap);
    return st;
}

/* ---- ReduceScatterV ---- */

typedef struct {
    size_t es;
    const uint64_t *rc; /* recv count of each rank */
    coll_ptrs_t src;    /* direct: in[q] + send_displs[q][me] */
} coll_rsv_t;

static int coll_rsv_check(const coll_args_t *a, coll_rsv_t *v, const char *what)
{
    ZC_CHECK(coll_check_vec(a, a->send_counts, a->send_displs, "send_counts / send_displs", what));
    v->es = coll_dtype_size(a->dtype);
    /* without recv_count_each, every rank's send_counts must agree */
    v->rc = a->recv_count_each != NULL ? a->recv_count_each : a->send_counts[0];
    for (int r = 0; r < a->nranks; r++) {
        for (int q = 0; q < a->nranks; q++) {
            uint64_t c = a->send_counts[r][q];
            if (c != v->rc[q]) {
                ZC_WARN(ZC_SUB_COLL,
                        "rank %d %s: rank %d's send_counts[%d] = %llu but rank %d receives %llu",
                        a->rank, what, r, q, (unsigned long long)c, q,
                        (unsigned long long)v->rc[q]);
                return ZC_ERR_INVAL;
            }
            ZC_CHECK(coll_check_span(a, r, c, a->send_displs[r][q], v->es, what));
        }
    }
    return ZC_OK;
}

/* Bytes of rank r's send buffer covered by its blocks. */
static size_t coll_rsv_extent(const coll_args_t *a, const coll_rsv_t *v, int r)
{
    return coll_extent(v->rc, a->send_displs[r], a->nranks, v->es);
}

static int coll_rsv_work(const coll_args_t *a, char *base, void *ctx)
{
    coll_rsv_t *v = ctx;
    coll_reduce_at(base, v->src.p, 0, a->nranks, v->rc[a->rank], a->dtype, a->op);
    return ZC_OK;
}

/* Does out[q] overlap a block of in[q] other than being exactly block q? */
static int coll_rsv_conflict(const coll_args_t *a, const coll_rsv_t *v, int q)
{
    size_t ob = v->rc[q] * v->es;
    for (int p = 0; p < a->nranks; p++) {
        const char *blk = (const char *)a->in[q] + a->send_displs[q][p] * v->es;
        if (coll_overlap(a->out[q], ob, blk, v->rc[p] * v->es) &&
            !(p == q && (const void *)blk == a->out[q])) {
            return 1;
        }
    }
    return 0;
}

int coll_reducescatterv_direct(const coll_args_t *a)
{
    static const char what[] = "reducescatterv_direct";
    coll_rsv_t v;
    ZC_CHECK(coll_check(a, COLL_F_REDUCE | COLL_F_DIRECT, what));
    ZC_CHECK(coll_rsv_check(a, &v, what));
    if (coll_max_u64(v.rc, a->nranks) == 0) {
        return ZC_OK;
    }
    int any = 0;
    int me_conflict = 0;
    for (int q = 0; q < a->nranks; q++) {
        ZC_CHECK(coll_check_buf(a->in[q], coll_rsv_extent(a, &v, q), what, "in[q]", q));
        ZC_CHECK(coll_check_buf(a->out[q], v.rc[q] * v.es, what, "out[q]", q));
        if (coll_rsv_conflict(a, &v, q)) {
            any = 1;
            me_conflict |= q == a->rank;
        }
    }
    /* a failed allocation here is seen by this rank only: still join the
     * barrier that coll_run_owned would have called */
    int st = coll_ptrs_init(&v.src, a->nranks);
    if (st != ZC_OK) {
        return any ? coll_fail_staged(a, 1, st) : st;
    }
    for (int q = 0; q < a->nranks; q++) {
        v.src.p[q] = (const char *)a->in[q] + a->send_displs[q][a->rank] * v.es;
    }
    st = coll_run_owned(a, any, me_conflict, v.rc[a->rank] * v.es, coll_rsv_work, NULL, &v);
    coll_ptrs_fini(&v.src);
    return st;
}

int coll_reducescatterv_staged(const coll_args_t *a)
{
    static const char what[] = "reducescatterv_staged";
    coll_rsv_t v;
    ZC_CHECK(coll_check(a, COLL_F_REDUCE | COLL_F_STAGED, what));
    ZC_CHECK(coll_rsv_check(a, &v, what));
    size_t per, rounds;
    uint64_t maxc = coll_max_u64(v.rc, a->nranks);
    ZC_CHECK(coll_stage_plan(a, (size_t)a->nranks, maxc, what, &per, &rounds));
    if (maxc == 0) {
        return ZC_OK;
    }
    int me = a->rank;
    size_t es = v.es;
    const uint64_t *sd = a->send_displs[me];
    int safe = (uintptr_t)a->recv == (uintptr_t)a->send + sd[me] * es;
    const char *send;
    void *snap;
    ZC_CHECK(coll_stage_io(a, coll_rsv_extent(a, &v, me), v.rc[me] * es, safe, what, 2 * rounds - 1,
                           &send, &snap));

    size_t pb = per * es;
    int st = ZC_OK;
    for (size_t k = 0; k < rounds; k++) {
        size_t lo = k * per;
        if (k > 0) {
            ZC_CHECK_GOTO(coll_barrier(a), st, out);
        }
        for (int q = 0; q < a->nranks; q++) {
            if (v.rc[q] > lo) {
                coll_stage_in(a, (char *)a->ccl[me] + (size_t)q * pb, send + (sd[q] + lo) * es,
                              ZC_MIN(per, v.rc[q] - lo) * es);
            }
        }
        ZC_CHECK_GOTO(coll_barrier(a), st, out);
        if (v.rc[me] > lo) {
            coll_reduce_at((char *)a->recv + lo * es, (const void *const *)a->ccl, (size_t)me * pb,
                           a->nranks, ZC_MIN(per, v.rc[me] - lo), a->dtype, a->op);
        }
    }
out:
    free(snap);
    return st;
}
