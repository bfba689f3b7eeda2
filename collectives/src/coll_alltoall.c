/*
 * AlltoAll and AlltoAllV: block q of rank r's send lands at block r of rank
 * q's recv.
 *
 * Direct path: pull. Rank r copies block r of every in[q] into block q of
 * its own out[r], starting at q = r. Only rank r writes out[r]. In place
 * (out[r] overlapping in[r]) peers read in[r] while rank r writes it: those
 * ranks pull into a private buffer and commit after one barrier that all
 * ranks join (coll_run_owned).
 *
 * Staged path: the CCL buffer is cut into n parts of P elements. Per round:
 *   copy chunk k of my block q into part q of ccl[me] (q != me); barrier;
 *   copy part me of every ccl[q] into chunk k of recv block q (my own block
 *   straight from send); barrier before the next round overwrites ccl[me].
 * Round k reads chunk k of each send block before writing chunk k of each
 * recv block, so send == recv is safe for AlltoAll; any other overlap (and
 * any overlap at all for AlltoAllV, whose blocks may be laid out freely)
 * uses a private copy of send.
 *
 * AlltoAllV: rank r receives send_counts[q][r] elements from in[q] +
 * send_displs[q][r] at out[r] + recv_displs[r][q]; recv_counts[r][q] must
 * equal send_counts[q][r] (checked, ZC_ERR_INVAL otherwise).
 */
#include "coll_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- AlltoAll ---- */

static int coll_a2a_work(const coll_args_t *a, char *base, void *ctx)
{
    size_t bytes = *(const size_t *)ctx;
    coll_pull_blocks(a, base, bytes, (size_t)a->rank * bytes,
                     coll_use_nt(a, bytes * (size_t)a->nranks));
    return ZC_OK;
}

int coll_alltoall_direct(const coll_args_t *a)
{
    static const char what[] = "alltoall_direct";
    size_t es, bytes, total;
    ZC_CHECK(coll_begin(a, COLL_F_DIRECT, what, &es, &bytes, &total));
    if (bytes == 0) {
        return ZC_OK;
    }
    return coll_run_blocks(a, total, total, COLL_INPLACE_NONE, what, coll_a2a_work, &bytes);
}

int coll_alltoall_staged(const coll_args_t *a)
{
    static const char what[] = "alltoall_staged";
    size_t es, bytes, total, per, rounds;
    ZC_CHECK(coll_begin(a, COLL_F_STAGED, what, &es, &bytes, &total));
    if (bytes == 0) {
        return ZC_OK;
    }
    ZC_CHECK(coll_stage_plan(a, (size_t)a->nranks, a->count, what, &per, &rounds));
    int me = a->rank;
    const char *send;
    void *snap;
    ZC_CHECK(
        coll_stage_io(a, total, total, a->send == a->recv, what, 2 * rounds - 1, &send, &snap));

    size_t pb = per * es;
    int nt = coll_use_nt(a, total);
    int st = ZC_OK;
    for (size_t k = 0; k < rounds; k++) {
        size_t co = k * pb;
        size_t cl = ZC_MIN(per, a->count - k * per) * es;
        if (k > 0) {
            ZC_CHECK_GOTO(coll_barrier(a), st, out);
        }
        for (int q = 0; q < a->nranks; q++) {
            if (q != me) {
                coll_stage_in(a, (char *)a->ccl[me] + (size_t)q * pb, send + q * bytes + co, cl);
            }
        }
        ZC_CHECK_GOTO(coll_barrier(a), st, out);
        for (int i = 0; i < a->nranks; i++) {
            int q = (me + i) % a->nranks;
            const char *src = q == me ? send + (size_t)me * bytes + co
                                      : (const char *)a->ccl[q] + (size_t)me * pb;
            coll_put((char *)a->recv + q * bytes + co, src, cl, nt);
        }
    }
out:
    if (nt) {
        coll_store_fence();
    }
    free(snap);
    return st;
}

/* ---- AlltoAllV ---- */

typedef struct {
    size_t es;
} coll_a2av_t;

static int coll_a2av_check(const coll_args_t *a, const char *what)
{
    if (a->send_counts == NULL || a->send_displs == NULL || a->recv_counts == NULL ||
        a->recv_displs == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d %s: a count or displacement array is NULL", a->rank, what);
        return ZC_ERR_PTR;
    }
    size_t es = coll_dtype_size(a->dtype);
    for (int r = 0; r < a->nranks; r++) {
        if (a->send_counts[r] == NULL || a->send_displs[r] == NULL || a->recv_counts[r] == NULL ||
            a->recv_displs[r] == NULL) {
            ZC_WARN(ZC_SUB_COLL, "rank %d %s: rank %d's count / displacement arrays are NULL",
                    a->rank, what, r);
            return ZC_ERR_PTR;
        }
    }
    for (int r = 0; r < a->nranks; r++) {
        for (int q = 0; q < a->nranks; q++) {
            uint64_t c = a->recv_counts[r][q];
            if (c != a->send_counts[q][r]) {
                ZC_WARN(ZC_SUB_COLL,
                        "rank %d %s: rank %d expects %llu elements from rank %d, which sends "
                        "%llu",
                        a->rank, what, r, (unsigned long long)c, q,
                        (unsigned long long)a->send_counts[q][r]);
                return ZC_ERR_INVAL;
            }
            uint64_t sd = a->send_displs[q][r];
            uint64_t rd = a->recv_displs[r][q];
            if (c > SIZE_MAX / es || sd > SIZE_MAX / es - c || rd > SIZE_MAX / es - c) {
                ZC_WARN(ZC_SUB_COLL,
                        "rank %d %s: displacements %llu / %llu + count %llu overflow (%d -> %d)",
                        a->rank, what, (unsigned long long)sd, (unsigned long long)rd,
                        (unsigned long long)c, q, r);
                return ZC_ERR_INVAL;
            }
        }
    }
    return ZC_OK;
}

/* Bytes covered by rank r's blocks, from counts[r][q] at displs[r][q]. */
static size_t coll_a2av_extent(const uint64_t *const *counts, const uint64_t *const *displs, int r,
                               int n, size_t es)
{
    return coll_extent(counts[r], displs[r], n, es);
}

static int coll_a2av_work(const coll_args_t *a, char *base, void *ctx)
{
    const coll_a2av_t *v = ctx;
    int me = a->rank;
    size_t ext = coll_a2av_extent(a->recv_counts, a->recv_displs, me, a->nranks, v->es);
    int nt = coll_use_nt(a, ext);
    for (int k = 0; k < a->nranks; k++) {
        int q = (me + k) % a->nranks;
        const char *src = (const char *)a->in[q] + a->send_displs[q][me] * v->es;
        coll_put(base + a->recv_displs[me][q] * v->es, src, a->recv_counts[me][q] * v->es, nt);
    }
    if (nt) {
        coll_store_fence();
    }
    return ZC_OK;
}

static void coll_a2av_commit(const coll_args_t *a, const char *tmp, void *ctx)
{
    const coll_a2av_t *v = ctx;
    for (int q = 0; q < a->nranks; q++) {
        size_t o = a->recv_displs[a->rank][q] * v->es;
        memcpy((char *)a->out[a->rank] + o, tmp + o, a->recv_counts[a->rank][q] * v->es);
    }
}

int coll_alltoallv_direct(const coll_args_t *a)
{
    static const char what[] = "alltoallv_direct";
    ZC_CHECK(coll_check(a, COLL_F_DIRECT, what));
    ZC_CHECK(coll_a2av_check(a, what));
    coll_a2av_t v = {.es = coll_dtype_size(a->dtype)};
    int any = 0;
    int me_conflict = 0;
    for (int q = 0; q < a->nranks; q++) {
        size_t se = coll_a2av_extent(a->send_counts, a->send_displs, q, a->nranks, v.es);
        size_t re = coll_a2av_extent(a->recv_counts, a->recv_displs, q, a->nranks, v.es);
        ZC_CHECK(coll_check_buf(a->in[q], se, what, "in[q]", q));
        ZC_CHECK(coll_check_buf(a->out[q], re, what, "out[q]", q));
        if (coll_overlap(a->in[q], se, a->out[q], re)) {
            any = 1;
            me_conflict |= q == a->rank;
        }
    }
    size_t ext = coll_a2av_extent(a->recv_counts, a->recv_displs, a->rank, a->nranks, v.es);
    return coll_run_owned(a, any, me_conflict, ext, coll_a2av_work, coll_a2av_commit, &v);
}

int coll_alltoallv_staged(const coll_args_t *a)
{
    static const char what[] = "alltoallv_staged";
    ZC_CHECK(coll_check(a, COLL_F_STAGED, what));
    ZC_CHECK(coll_a2av_check(a, what));
    size_t es = coll_dtype_size(a->dtype);
    size_t per, rounds;
    uint64_t maxc = 0;
    for (int r = 0; r < a->nranks; r++) {
        maxc = ZC_MAX(maxc, coll_max_u64(a->send_counts[r], a->nranks));
    }
    ZC_CHECK(coll_stage_plan(a, (size_t)a->nranks, maxc, what, &per, &rounds));
    if (maxc == 0) {
        return ZC_OK;
    }
    int me = a->rank;
    const uint64_t *sc = a->send_counts[me];
    const uint64_t *sd = a->send_displs[me];
    const uint64_t *rc = a->recv_counts[me];
    const uint64_t *rd = a->recv_displs[me];
    size_t se = coll_a2av_extent(a->send_counts, a->send_displs, me, a->nranks, es);
    size_t re = coll_a2av_extent(a->recv_counts, a->recv_displs, me, a->nranks, es);
    const char *send;
    void *snap;
    ZC_CHECK(coll_stage_io(a, se, re, 0, what, 2 * rounds - 1, &send, &snap));

    size_t pb = per * es;
    int nt = coll_use_nt(a, re);
    int st = ZC_OK;
    for (size_t k = 0; k < rounds; k++) {
        size_t lo = k * per;
        if (k > 0) {
            ZC_CHECK_GOTO(coll_barrier(a), st, out);
        }
        for (int q = 0; q < a->nranks; q++) {
            if (q != me && sc[q] > lo) {
                coll_stage_in(a, (char *)a->ccl[me] + (size_t)q * pb, send + (sd[q] + lo) * es,
                              ZC_MIN(per, sc[q] - lo) * es);
            }
        }
        ZC_CHECK_GOTO(coll_barrier(a), st, out);
        for (int i = 0; i < a->nranks; i++) {
            int q = (me + i) % a->nranks;
            if (rc[q] <= lo) {
                continue;
            }
            const char *src =
                q == me ? send + (sd[me] + lo) * es : (const char *)a->ccl[q] + (size_t)me * pb;
            coll_put((char *)a->recv + (rd[q] + lo) * es, src, ZC_MIN(per, rc[q] - lo) * es, nt);
        }
    }
out:
    if (nt) {
        coll_store_fence();
    }
    free(snap);
    return st;
}
