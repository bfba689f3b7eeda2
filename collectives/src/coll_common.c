/*
 * Argument checks, slicing, barrier, staging and block-pull helpers shared by the
 * algorithm files. See coll_internal.h for the rules they implement.
 */
#include "coll_internal.h"

#include <stdlib.h>
#include <string.h>

int coll_check(const coll_args_t *a, unsigned flags, const char *what)
{
    if (a == NULL) {
        ZC_WARN(ZC_SUB_COLL, "%s: args is NULL", what);
        return ZC_ERR_PTR;
    }
    if (a->nranks < 1) {
        ZC_WARN(ZC_SUB_COLL, "%s: nranks %d is not positive", what, a->nranks);
        return ZC_ERR_INVAL;
    }
    if (a->rank < 0 || a->rank >= a->nranks) {
        ZC_WARN(ZC_SUB_COLL, "%s: rank %d is outside [0, %d)", what, a->rank, a->nranks);
        return ZC_ERR_INVAL;
    }
    if (coll_dtype_size(a->dtype) == 0) {
        ZC_WARN(ZC_SUB_COLL, "rank %d %s: dtype %d is unknown", a->rank, what, a->dtype);
        return ZC_ERR_INVAL;
    }
    if ((flags & COLL_F_REDUCE) && !coll_reducible(a->dtype, a->op)) {
        ZC_WARN(ZC_SUB_COLL, "rank %d %s: reduce op %d is not supported for dtype %d", a->rank,
                what, a->op, a->dtype);
        return ZC_ERR_INVAL;
    }
    if ((flags & COLL_F_ROOT) && (a->root < 0 || a->root >= a->nranks)) {
        ZC_WARN(ZC_SUB_COLL, "rank %d %s: root %d is outside [0, %d)", a->rank, what, a->root,
                a->nranks);
        return ZC_ERR_INVAL;
    }
    if ((flags & COLL_F_DIRECT) && (a->in == NULL || a->out == NULL)) {
        ZC_WARN(ZC_SUB_COLL, "rank %d %s: direct path needs in[] and out[] (in %p, out %p)",
                a->rank, what, (const void *)a->in, (const void *)a->out);
        return ZC_ERR_PTR;
    }
    if (flags & COLL_F_STAGED) {
        if (a->sync == NULL || a->sync->barrier == NULL) {
            ZC_WARN(ZC_SUB_COLL, "rank %d %s: staged path needs a sync object", a->rank, what);
            return ZC_ERR_PTR;
        }
        if (a->ccl == NULL) {
            ZC_WARN(ZC_SUB_COLL, "rank %d %s: staged path needs ccl[]", a->rank, what);
            return ZC_ERR_PTR;
        }
        for (int q = 0; q < a->nranks; q++) {
            if (a->ccl[q] == NULL) {
                ZC_WARN(ZC_SUB_COLL, "rank %d %s: ccl[%d] is NULL", a->rank, what, q);
                return ZC_ERR_PTR;
            }
        }
    }
    return ZC_OK;
}

int coll_begin(const coll_args_t *a, unsigned flags, const char *what, size_t *es, size_t *bytes,
               size_t *total)
{
    ZC_CHECK(coll_check(a, flags, what));
    *es = coll_dtype_size(a->dtype);
    ZC_CHECK(coll_bytes(a->count, *es, 1, what, bytes));
    if (total != NULL) {
        ZC_CHECK(coll_bytes(*bytes, 1, (size_t)a->nranks, what, total));
    }
    return ZC_OK;
}

size_t coll_extent(const uint64_t *cnt, const uint64_t *displ, int n, size_t es)
{
    size_t e = 0;
    for (int q = 0; q < n; q++) {
        if (cnt[q] > 0) {
            e = ZC_MAX(e, (size_t)(displ[q] + cnt[q]) * es);
        }
    }
    return e;
}

int coll_check_vec(const coll_args_t *a, const uint64_t *const *counts,
                   const uint64_t *const *displs, const char *names, const char *what)
{
    if (counts == NULL || displs == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d %s: %s are NULL", a->rank, what, names);
        return ZC_ERR_PTR;
    }
    for (int r = 0; r < a->nranks; r++) {
        if (counts[r] == NULL || displs[r] == NULL) {
            ZC_WARN(ZC_SUB_COLL, "rank %d %s: rank %d's %s are NULL", a->rank, what, r, names);
            return ZC_ERR_PTR;
        }
    }
    return ZC_OK;
}

int coll_check_span(const coll_args_t *a, int r, uint64_t c, uint64_t d, size_t es,
                    const char *what)
{
    if (c > SIZE_MAX / es || d > SIZE_MAX / es - c) {
        ZC_WARN(ZC_SUB_COLL, "rank %d %s: rank %d's displ %llu + count %llu overflows", a->rank,
                what, r, (unsigned long long)d, (unsigned long long)c);
        return ZC_ERR_INVAL;
    }
    return ZC_OK;
}

int coll_check_buf(const void *p, size_t bytes, const char *what, const char *name, int rank)
{
    if (p == NULL && bytes > 0) {
        ZC_WARN(ZC_SUB_COLL, "rank %d %s: %s is NULL for %zu bytes", rank, what, name, bytes);
        return ZC_ERR_PTR;
    }
    return ZC_OK;
}

int coll_bytes(size_t count, size_t es, size_t mul, const char *what, size_t *out)
{
    if (mul == 0 || es == 0) {
        *out = 0;
        return ZC_OK;
    }
    if (count > SIZE_MAX / es / mul) {
        ZC_WARN(ZC_SUB_COLL, "%s: count %zu x %zu bytes x %zu overflows", what, count, es, mul);
        return ZC_ERR_INVAL;
    }
    *out = count * es * mul;
    return ZC_OK;
}

int coll_barrier(const coll_args_t *a)
{
    if (a->sync == NULL || a->sync->barrier == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: algorithm needs a barrier but sync is NULL", a->rank);
        return ZC_ERR_PTR;
    }
    int st = a->sync->barrier(a->sync);
    if (st != ZC_OK) {
        ZC_DEBUG(ZC_SUB_COLL, "rank %d: barrier -> %s", a->rank, zc_status_str(st));
    }
    return st;
}

int coll_fail_staged(const coll_args_t *a, size_t nbar, int st)
{
    for (size_t i = 0; i < nbar; i++) {
        if (coll_barrier(a) != ZC_OK) {
            break;
        }
    }
    return st;
}

size_t coll_stage_elems(const coll_args_t *a, size_t parts, const char *what)
{
    size_t es = coll_dtype_size(a->dtype);
    size_t per = a->ccl_bytes / parts / es;
    size_t line = es >= 64 ? 1 : 64 / es;
    if (per >= line) {
        per -= per % line;
    }
    if (per == 0) {
        ZC_WARN(ZC_SUB_COLL, "rank %d %s: ccl_bytes %zu holds no element of %zu bytes x %zu",
                a->rank, what, a->ccl_bytes, es, parts);
    }
    return per;
}

int coll_stage_plan(const coll_args_t *a, size_t parts, uint64_t maxc, const char *what,
                    size_t *per, size_t *rounds)
{
    *per = coll_stage_elems(a, parts, what);
    if (*per == 0) {
        return ZC_ERR_INVAL;
    }
    *rounds = (size_t)((maxc + *per - 1) / *per);
    return ZC_OK;
}

void coll_stage_in(const coll_args_t *a, void *ccl_dst, const void *src, size_t bytes)
{
    if (bytes == 0) {
        return;
    }
    memcpy(ccl_dst, src, bytes);
    if (a->staged_bytes != NULL) {
        *a->staged_bytes += bytes;
    }
}

int coll_use_nt(const coll_args_t *a, size_t msg_bytes)
{
    size_t nt_min = a->tune != NULL ? a->tune->nt_min : COLL_DEFAULT_NT_MIN;
    return nt_min != 0 && msg_bytes >= nt_min;
}

int coll_use_nt_op(const coll_args_t *a, size_t in_bytes, size_t out_bytes)
{
    size_t nt_min = a->tune != NULL ? a->tune->nt_min : COLL_DEFAULT_NT_MIN;
    size_t per_rank = in_bytes + out_bytes;
    if (nt_min == 0 || per_rank < in_bytes) {
        return nt_min != 0;
    }
    /* data >= 2 x nt_min, as per_rank >= its ceiling share (no overflow) */
    size_t n = (size_t)a->nranks;
    return per_rank >= 2 * (nt_min / n) + (2 * (nt_min % n) + n - 1) / n;
}

size_t coll_oneshot_max(const coll_args_t *a)
{
    return a->tune != NULL ? a->tune->oneshot_max : COLL_DEFAULT_ONESHOT_MAX;
}

void coll_slice(size_t count, int n, int r, size_t es, size_t *off, size_t *len)
{
    size_t line = es >= 64 ? 1 : 64 / es;
    size_t per = (count + (size_t)n - 1) / (size_t)n;
    per = (per + line - 1) / line * line;
    size_t o = ZC_MIN(per * (size_t)r, count);
    size_t e = ZC_MIN(o + per, count);
    *off = o;
    *len = e - o;
}

int coll_overlap(const void *p, size_t plen, const void *q, size_t qlen)
{
    uintptr_t a = (uintptr_t)p;
    uintptr_t b = (uintptr_t)q;
    if (plen == 0 || qlen == 0) {
        return 0;
    }
    return a < b + qlen && b < a + plen;
}

int coll_ptrs_init(coll_ptrs_t *v, int n)
{
    if (n <= COLL_PTRS_INLINE) {
        v->p = v->inl;
        return ZC_OK;
    }
    v->p = malloc((size_t)n * sizeof(*v->p));
    if (v->p == NULL) {
        ZC_WARN(ZC_SUB_COLL, "cannot allocate %d source pointers", n);
        return ZC_ERR_NOMEM;
    }
    return ZC_OK;
}

void coll_ptrs_fini(coll_ptrs_t *v)
{
    if (v->p != v->inl) {
        free(v->p);
    }
    v->p = NULL;
}

uint64_t coll_max_u64(const uint64_t *arr, int n)
{
    uint64_t m = 0;
    for (int i = 0; i < n; i++) {
        m = ZC_MAX(m, arr[i]);
    }
    return m;
}

int coll_run_owned(const coll_args_t *a, int conflict_any, int conflict_me, size_t tmp_bytes,
                   coll_work_fn work, coll_commit_fn commit, void *ctx)
{
    char *out = a->out[a->rank];
    if (!conflict_any) {
        return work(a, out, ctx);
    }
    if (!conflict_me) {
        int st = work(a, out, ctx);
        int bst = coll_barrier(a);
        return st != ZC_OK ? st : bst;
    }
    char *tmp = malloc(tmp_bytes > 0 ? tmp_bytes : 1);
    int st = ZC_OK;
    if (tmp == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: cannot allocate %zu bytes for an overlapping in/out",
                a->rank, tmp_bytes);
        st = ZC_ERR_NOMEM;
    } else {
        st = work(a, tmp, ctx);
    }
    /* every peer has read my input once all have passed this barrier */
    int bst = coll_barrier(a);
    if (st == ZC_OK && bst == ZC_OK) {
        if (commit != NULL) {
            commit(a, tmp, ctx);
        } else {
            memcpy(out, tmp, tmp_bytes);
        }
    }
    free(tmp);
    return st != ZC_OK ? st : bst;
}

int coll_blocks_conflicts(const coll_args_t *a, size_t in_bytes, size_t out_bytes, int inplace,
                          const char *what, size_t bytes, int *any, int *me)
{
    *any = 0;
    *me = 0;
    for (int q = 0; q < a->nranks; q++) {
        ZC_CHECK(coll_check_buf(a->in[q], in_bytes, what, "in[q]", q));
        ZC_CHECK(coll_check_buf(a->out[q], out_bytes, what, "out[q]", q));
        const char *in = a->in[q];
        const char *out = a->out[q];
        size_t slot = (size_t)q * bytes;
        int safe = (inplace == COLL_INPLACE_IN_SLOT && in == out + slot) ||
                   (inplace == COLL_INPLACE_OUT_SLOT && out == in + slot);
        if (!safe && coll_overlap(in, in_bytes, out, out_bytes)) {
            *any = 1;
            *me |= q == a->rank;
        }
    }
    return ZC_OK;
}

int coll_run_blocks(const coll_args_t *a, size_t in_bytes, size_t out_bytes, int inplace,
                    const char *what, coll_work_fn work, size_t *bytes)
{
    int any, me;
    ZC_CHECK(coll_blocks_conflicts(a, in_bytes, out_bytes, inplace, what, *bytes, &any, &me));
    return coll_run_owned(a, any, me, out_bytes, work, NULL, bytes);
}

void coll_pull_blocks(const coll_args_t *a, char *base, size_t bytes, size_t src_off, int nt)
{
    for (int k = 0; k < a->nranks; k++) {
        int q = (a->rank + k) % a->nranks;
        coll_put(base + (size_t)q * bytes, (const char *)a->in[q] + src_off, bytes, nt);
    }
    if (nt) {
        coll_store_fence();
    }
}

int coll_stage_send(const coll_args_t *a, size_t send_bytes, size_t recv_bytes, int safe,
                    const char **send, void **snap)
{
    *snap = NULL;
    *send = a->send;
    if (safe || !coll_overlap(a->send, send_bytes, a->recv, recv_bytes)) {
        return ZC_OK;
    }
    /* Later chunks of send would be overwritten by earlier chunks of recv. */
    void *copy = malloc(send_bytes);
    if (copy == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: cannot allocate %zu bytes to copy an overlapping send",
                a->rank, send_bytes);
        return ZC_ERR_NOMEM;
    }
    memcpy(copy, a->send, send_bytes);
    *snap = copy;
    *send = copy;
    return ZC_OK;
}

int coll_stage_io(const coll_args_t *a, size_t send_bytes, size_t recv_bytes, int safe,
                  const char *what, size_t nbar, const char **send, void **snap)
{
    *send = NULL;
    *snap = NULL;
    int st = coll_check_buf(a->send, send_bytes, what, "send", a->rank);
    if (st == ZC_OK) {
        st = coll_check_buf(a->recv, recv_bytes, what, "recv", a->rank);
    }
    if (st == ZC_OK) {
        st = coll_stage_send(a, send_bytes, recv_bytes, safe, send, snap);
    }
    return st != ZC_OK ? coll_fail_staged(a, nbar, st) : ZC_OK;
}
