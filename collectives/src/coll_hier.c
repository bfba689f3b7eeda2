/*
 * Hierarchical direct collectives (coll/coll_hier.h): argument checks,
 * scratch sizes, the choice against the flat path, the cost counter, and
 * the entry points that run a schedule (coll_hier_sched.c) on the executor.
 */
#include "coll_hier_sched.h"

#include <stdlib.h>
#include <string.h>

static const char *const hx_names[COLL_HIER_KINDS] = {
    "hier_allreduce", "hier_allgather", "hier_reducescatter", "hier_broadcast", "hier_reduce"};

static int hx_check_group(const coll_groups_t *g, int h, int nranks)
{
    for (int i = 0; i < g->first[h + 1] - g->first[h]; i++) {
        int m = g->members[g->first[h] + i];
        if (m < 0 || m >= nranks || g->group_of[m] != h || g->index_of[m] != i ||
            (i > 0 && m <= g->members[g->first[h] + i - 1])) {
            ZC_WARN(ZC_SUB_COLL,
                    "groups: member %d of group %d is rank %d, which is not in it, not at that "
                    "index or not in rank order",
                    i, h, m);
            return ZC_ERR_INVAL;
        }
    }
    return ZC_OK;
}

int coll_hier_check_groups(const coll_groups_t *g, int nranks)
{
    if (g == NULL || g->group_of == NULL || g->index_of == NULL || g->first == NULL ||
        g->members == NULL) {
        ZC_WARN(ZC_SUB_COLL, "groups: %s is NULL", g == NULL ? "groups" : "an array of groups");
        return ZC_ERR_PTR;
    }
    if (g->ngroups < 1 || g->ngroups > nranks || g->first[0] != 0 ||
        g->first[g->ngroups] != nranks) {
        ZC_WARN(ZC_SUB_COLL, "groups: ngroups %d (first[0] %d, first[ngroups] %d) for %d ranks",
                g->ngroups, g->first[0], g->ngroups >= 1 ? g->first[g->ngroups] : -1, nranks);
        return ZC_ERR_INVAL;
    }
    for (int h = 0; h < g->ngroups; h++) {
        if (g->first[h + 1] <= g->first[h] || g->first[h + 1] > nranks) {
            ZC_WARN(ZC_SUB_COLL, "groups: group %d is empty or past %d ranks (first %d .. %d)", h,
                    nranks, g->first[h], g->first[h + 1]);
            return ZC_ERR_INVAL;
        }
        ZC_CHECK(hx_check_group(g, h, nranks));
        if (h > 0 && g->members[g->first[h]] <= g->members[g->first[h - 1]]) {
            ZC_WARN(ZC_SUB_COLL, "groups: group %d's lowest rank %d is below group %d's (%d)", h,
                    g->members[g->first[h]], h - 1, g->members[g->first[h - 1]]);
            return ZC_ERR_INVAL;
        }
    }
    return ZC_OK;
}

/* ranks of the groups, valid or not (0 when first cannot be read) */
static int hx_nranks(const coll_groups_t *g)
{
    if (g == NULL || g->first == NULL || g->ngroups < 1) {
        return 0;
    }
    return g->first[g->ngroups];
}

static int hx_kind_ok(int kind)
{
    if (kind < 0 || kind >= COLL_HIER_KINDS) {
        ZC_WARN(ZC_SUB_COLL, "hier: kind %d is unknown", kind);
        return ZC_ERR_INVAL;
    }
    return ZC_OK;
}

/* Bytes of a reduction partial's element: fp16 / bf16 partials stay fp32,
 * so each result is rounded once (coll/coll_hier.h). */
static size_t hx_part_size(int dtype)
{
    return dtype == COLL_FP16 || dtype == COLL_BF16 ? 4 : coll_dtype_size(dtype);
}

int coll_hier_scratch_bytes(int kind, const coll_groups_t *g, size_t count, int dtype,
                            size_t *bytes)
{
    static const char what[] = "hier_scratch_bytes";
    int n = hx_nranks(g);
    size_t es = coll_dtype_size(dtype);
    *bytes = 0;
    ZC_CHECK(hx_kind_ok(kind));
    ZC_CHECK(coll_hier_check_groups(g, n));
    if (es == 0) {
        ZC_WARN(ZC_SUB_COLL, "%s: dtype %d is unknown", what, dtype);
        return ZC_ERR_INVAL;
    }
    int lmin = n;
    size_t slots_rs = 0;
    for (int h = 0; h < g->ngroups; h++) {
        int l = g->first[h + 1] - g->first[h];
        lmin = ZC_MIN(lmin, l);
        slots_rs = ZC_MAX(slots_rs, (size_t)((n - l + l - 1) / l + 1));
    }
    size_t off, stride;
    coll_slice(count, n, 0, es, &off, &stride);
    switch (kind) {
    case COLL_HIER_ALLREDUCE:
    case COLL_HIER_REDUCE:
        return coll_bytes(stride, hx_part_size(dtype), (size_t)((n + lmin - 1) / lmin), what,
                          bytes);
    case COLL_HIER_REDUCESCATTER:
        return coll_bytes(count, hx_part_size(dtype), slots_rs, what, bytes);
    case COLL_HIER_ALLGATHER:
        return coll_bytes(count, es, 1, what, bytes);
    default:
        return ZC_OK;
    }
}

int coll_hier_worth(const coll_groups_t *g, int kind, size_t bytes)
{
    int n = hx_nranks(g);
    if (hx_kind_ok(kind) != ZC_OK || coll_hier_check_groups(g, n) != ZC_OK) {
        return 0;
    }
    size_t data = bytes;
    if (kind == COLL_HIER_ALLGATHER || kind == COLL_HIER_REDUCESCATTER) {
        data = bytes > SIZE_MAX / (size_t)n ? SIZE_MAX : bytes * (size_t)n;
    }
    return g->ngroups > 1 && g->ngroups < n && data >= COLL_HIER_MIN_BYTES;
}

int hx_ag_conflict(const coll_args_t *a, int q, size_t bytes)
{
    const char *in = a->in[q];
    const char *out = a->out[q];
    size_t total = bytes * (size_t)a->nranks;
    return in != out + (size_t)q * bytes && coll_overlap(in, bytes, out, total);
}

typedef void (*hx_sched_fn)(hx_t *x);

static const hx_sched_fn hx_scheds[COLL_HIER_KINDS] = {hx_allreduce, hx_allgather, hx_reducescatter,
                                                       hx_broadcast, hx_reduce_root};

/* An executor for rank me over groups g (nothing resolved yet). */
static void hx_init(hx_t *x, const coll_groups_t *g, int me, int root, size_t count, int dtype)
{
    memset(x, 0, sizeof(*x));
    x->g = g;
    x->me = me;
    x->nranks = hx_nranks(g);
    x->root = root;
    x->count = count;
    x->dtype = dtype;
    x->es = coll_dtype_size(dtype);
    x->pes = hx_part_size(dtype);
}

/* Run kind's hierarchical schedule (or, flat, its flat model) for every
 * rank in counting mode. */
static void hx_count_all(int kind, const coll_groups_t *g, const coll_groups_t *across, int root,
                         size_t count, int dtype, int flat, hx_loc_t *locs, coll_cross_t *c,
                         long *nbar)
{
    for (int me = 0; me < hx_nranks(g); me++) {
        hx_t x;
        hx_init(&x, g, me, root, count, dtype);
        x.across = across;
        x.cnt = c;
        x.locs = locs;
        if (flat) {
            hx_flat(&x, kind);
        } else {
            hx_scheds[kind](&x);
        }
        *nbar = x.nbar;
    }
}

int coll_hier_cost(int kind, const coll_groups_t *g, const coll_groups_t *across, int root,
                   size_t count, int dtype, coll_hier_cost_t *cost)
{
    static const char what[] = "hier_cost";
    int n = hx_nranks(g);
    memset(cost, 0, sizeof(*cost));
    size_t bytes;
    ZC_CHECK(hx_kind_ok(kind));
    ZC_CHECK(coll_hier_check_groups(g, n));
    across = across != NULL ? across : g;
    ZC_CHECK(coll_hier_check_groups(across, n));
    if (coll_dtype_size(dtype) == 0 || root < 0 || root >= n) {
        ZC_WARN(ZC_SUB_COLL, "%s: dtype %d or root %d (of %d ranks) is invalid", what, dtype, root,
                n);
        return ZC_ERR_INVAL;
    }
    ZC_CHECK(coll_bytes(count, coll_dtype_size(dtype), (size_t)n, what, &bytes));
    hx_loc_t *locs = malloc((size_t)n * sizeof(*locs));
    if (locs == NULL) {
        return ZC_ERR_NOMEM;
    }
    long flat_bar = 0; /* the flat schedule's barriers: not reported */
    hx_count_all(kind, g, across, root, count, dtype, 0, locs, &cost->hier, &cost->hier_barriers);
    hx_count_all(kind, g, across, root, count, dtype, 1, locs, &cost->flat, &flat_bar);
    free(locs);
    return ZC_OK;
}

/* ---- entry points ---- */

/* Every rank's scratch, when the op needs `need` bytes of it. */
static int hx_check_scratch(const coll_args_t *a, const coll_hier_t *h, size_t need,
                            const char *what)
{
    if (need == 0) {
        return ZC_OK;
    }
    if (h->scratch == NULL || h->scratch_bytes < need) {
        ZC_WARN(ZC_SUB_COLL, "rank %d %s: scratch %p of %zu bytes, the op needs %zu", a->rank, what,
                (const void *)h->scratch, h->scratch_bytes, need);
        return h->scratch == NULL ? ZC_ERR_PTR : ZC_ERR_INVAL;
    }
    for (int q = 0; q < a->nranks; q++) {
        ZC_CHECK(coll_check_buf(h->scratch[q], need, what, "scratch[q]", q));
    }
    return ZC_OK;
}

/* The checks every entry shares; *x is ready to run for this rank. */
static int hx_begin(const coll_args_t *a, const coll_hier_t *h, int kind, unsigned flags, hx_t *x)
{
    const char *what = hx_names[kind];
    size_t es, bytes;
    ZC_CHECK(coll_begin(a, flags | COLL_F_DIRECT, what, &es, &bytes, NULL));
    if (h == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d %s: hier is NULL", a->rank, what);
        return ZC_ERR_PTR;
    }
    ZC_CHECK(coll_hier_check_groups(h->groups, a->nranks));
    hx_init(x, h->groups, a->rank, a->root, a->count, a->dtype);
    x->a = a;
    x->op = a->op;
    x->scr = h->scratch;
    x->out_me = a->out[a->rank];
    return ZC_OK;
}

/* Scratch and sync for a schedule that calls barrier(). */
static int hx_ready(const coll_args_t *a, const coll_hier_t *h, int kind, int scratch)
{
    size_t need = 0;
    if (scratch) {
        ZC_CHECK(coll_hier_scratch_bytes(kind, h->groups, a->count, a->dtype, &need));
    }
    ZC_CHECK(hx_check_scratch(a, h, need, hx_names[kind]));
    if (a->sync == NULL || a->sync->barrier == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d %s: sync is NULL", a->rank, hx_names[kind]);
        return ZC_ERR_PTR;
    }
    return ZC_OK;
}

/* Barriers of kind's schedule on every rank (coll/coll_hier.h); the cost
 * counter's count of them is checked against this in the unit tests. */
static size_t hx_barriers(int kind, int conflict_any)
{
    static const size_t base[COLL_HIER_KINDS] = {2, 0, 1, 1, 1};
    int extra = (kind == COLL_HIER_ALLGATHER || kind == COLL_HIER_REDUCESCATTER) && conflict_any;
    return base[kind] + (size_t)extra;
}

/* Run kind's schedule on this rank. A local failure (malloc) only joins the
 * schedule's barriers, then returns. tmp_bytes: this rank's output goes
 * through a private buffer of that size, committed at the end. */
static int hx_run(hx_t *x, int kind, size_t tmp_bytes)
{
    hx_loc_t locs_inl[COLL_PTRS_INLINE];
    const void *ptrs_inl[COLL_PTRS_INLINE];
    int n = x->nranks;
    int big = n > COLL_PTRS_INLINE;
    hx_loc_t *locs = big ? malloc((size_t)n * sizeof(*locs)) : locs_inl;
    const void **ptrs = big ? malloc((size_t)n * sizeof(*ptrs)) : ptrs_inl;
    char *tmp = tmp_bytes > 0 ? malloc(tmp_bytes) : NULL;
    int st = ZC_OK;
    if (locs == NULL || ptrs == NULL || (tmp_bytes > 0 && tmp == NULL)) {
        ZC_WARN(ZC_SUB_COLL, "rank %d %s: out of memory for %d ranks", x->me, hx_names[kind], n);
        st = coll_fail_staged(x->a, hx_barriers(kind, x->conflict_any), ZC_ERR_NOMEM);
    } else {
        x->locs = locs;
        x->ptrs = ptrs;
        if (tmp != NULL) {
            x->out_me = tmp;
        }
        hx_scheds[kind](x);
        st = x->st;
        if (tmp != NULL && st == ZC_OK) {
            memcpy(x->a->out[x->me], tmp, tmp_bytes);
        }
    }
    free(tmp);
    if (big) {
        free((void *)ptrs);
        free(locs);
    }
    return st;
}

static int hx_check_all(const coll_args_t *a, const void *const *p, size_t bytes, const char *name,
                        const char *what)
{
    for (int q = 0; q < a->nranks; q++) {
        ZC_CHECK(coll_check_buf(p[q], bytes, what, name, q));
    }
    return ZC_OK;
}

/* NULL checks of kind's buffers; AllGather / ReduceScatter: overlaps
 * outside the in-place form (x->conflict_any, x->conflict_me). */
static int hx_check_bufs(const coll_args_t *a, hx_t *x, int kind, size_t bytes)
{
    const char *what = hx_names[kind];
    size_t total;
    ZC_CHECK(coll_bytes(bytes, 1, (size_t)a->nranks, what, &total));
    switch (kind) {
    case COLL_HIER_ALLREDUCE:
        ZC_CHECK(hx_check_all(a, a->in, bytes, "in[q]", what));
        return hx_check_all(a, (const void *const *)a->out, bytes, "out[q]", what);
    case COLL_HIER_REDUCE:
        ZC_CHECK(hx_check_all(a, a->in, bytes, "in[q]", what));
        return coll_check_buf(a->out[a->root], bytes, what, "out[root]", a->root);
    case COLL_HIER_BROADCAST: {
        const void *src = a->in[a->root] != NULL ? a->in[a->root] : a->out[a->root];
        ZC_CHECK(coll_check_buf(src, bytes, what, "root buffer", a->root));
        for (int q = 0; q < a->nranks; q++) {
            if (q != a->root) {
                ZC_CHECK(coll_check_buf(a->out[q], bytes, what, "out[q]", q));
            }
        }
        return ZC_OK;
    }
    case COLL_HIER_REDUCESCATTER:
        return coll_blocks_conflicts(a, total, bytes, COLL_INPLACE_OUT_SLOT, what, bytes,
                                     &x->conflict_any, &x->conflict_me);
    default:
        return coll_blocks_conflicts(a, bytes, total, COLL_INPLACE_IN_SLOT, what, bytes,
                                     &x->conflict_any, &x->conflict_me);
    }
}

static int hx_entry(const coll_args_t *a, const coll_hier_t *h, int kind)
{
    static const unsigned flags[COLL_HIER_KINDS] = {COLL_F_REDUCE, 0, COLL_F_REDUCE, COLL_F_ROOT,
                                                    COLL_F_REDUCE | COLL_F_ROOT};
    hx_t x;
    ZC_CHECK(hx_begin(a, h, kind, flags[kind], &x));
    size_t bytes = x.count * x.es;
    if (bytes == 0) {
        return ZC_OK;
    }
    ZC_CHECK(hx_check_bufs(a, &x, kind, bytes));
    if (hx_barriers(kind, x.conflict_any) > 0) {
        /* AllGather gets here only on a conflict, whose copies go to scratch */
        ZC_CHECK(hx_ready(a, h, kind, kind != COLL_HIER_BROADCAST));
    }
    int private_out = kind == COLL_HIER_REDUCESCATTER && x.conflict_me;
    return hx_run(&x, kind, private_out ? bytes : 0);
}

int coll_hier_allreduce(const coll_args_t *a, const coll_hier_t *h)
{
    return hx_entry(a, h, COLL_HIER_ALLREDUCE);
}

int coll_hier_allgather(const coll_args_t *a, const coll_hier_t *h)
{
    return hx_entry(a, h, COLL_HIER_ALLGATHER);
}

int coll_hier_reducescatter(const coll_args_t *a, const coll_hier_t *h)
{
    return hx_entry(a, h, COLL_HIER_REDUCESCATTER);
}

int coll_hier_broadcast(const coll_args_t *a, const coll_hier_t *h)
{
    return hx_entry(a, h, COLL_HIER_BROADCAST);
}

int coll_hier_reduce(const coll_args_t *a, const coll_hier_t *h)
{
    return hx_entry(a, h, COLL_HIER_REDUCE);
}
