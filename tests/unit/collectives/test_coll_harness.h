/*
 * Harness shared by the collectives unit tests (header only: every test
 * file is its own executable and includes it once).
 *
 * Ranks are threads of this process; they meet at a pthread barrier through
 * a coll_sync_t that also counts the calls (every rank must call barrier()
 * equally often). Each rank owns one arena of bytes holding its in and out
 * regions at odd byte offsets; the whole arena starts as random bytes with
 * the input written in. The expected arena is a copy of the initial one with
 * the serial reference result written over the out regions (reductions in
 * rank order, in fp32 for fp16/bf16), and after the run the arenas are
 * compared bytewise: a wrong value, a write outside the output or a write to
 * an input all fail. Rank threads never call cmocka asserts (they would
 * longjmp across threads); the main thread checks everything afterwards.
 */
#ifndef TEST_COLL_HARNESS_H
#define TEST_COLL_HARNESS_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/coll_hier.h"
#include "coll_internal.h"
#include "coll_kernel.h"
#include "zc/status.h"

/* Ranks of the flat tests' loops (np 1..TC_MAXR); worlds hold up to TC_MAXW
 * (the hierarchical tests' groupings). */
#define TC_MAXR 4
#define TC_MAXW 72

/* Each test file uses part of the harness. */
#define TC_FN static __attribute__((unused))

typedef enum {
    TC_ALLREDUCE,
    TC_REDUCE,
    TC_ALLGATHER,
    TC_ALLGATHERV,
    TC_REDUCESCATTER,
    TC_REDUCESCATTERV,
    TC_BROADCAST,
    TC_SCATTER,
    TC_ALLTOALL,
    TC_ALLTOALLV,
} tc_kind_t;

/* In-place forms: in / out share memory in the op's own way. */
enum {
    TC_OOP = 0,     /* separate buffers */
    TC_INPLACE = 1, /* the op's in-place form (AllGather: in = slot r of out, ...) */
    TC_ALIAS = 2,   /* ReduceScatter(V): out == in; others: as TC_INPLACE */
    TC_PARTIAL = 3, /* in and out overlap, shifted by one element */
    TC_MIXED = 4,   /* even ranks TC_INPLACE, odd ranks TC_PARTIAL */
};

typedef struct {
    tc_kind_t kind;
    int np;
    int dtype;
    int op;
    int root;
    size_t count;
    int staged;
    int inplace;
    size_t ccl_bytes;
    coll_tuning_t tune;
    coll_reuse_t *reuse;         /* one history per rank, kept across cases (NULL: none) */
    int pull;                    /* coll_args_t.pull on every rank */
    int null_send_rank;          /* staged: this rank passes send = NULL (-1: none) */
    long barrier_fail_at;        /* the barrier call that fails with ZC_ERR_TIMEOUT (0: none) */
    int expect_status;           /* what every rank must return (ZC_OK normally) */
    int no_recv_count_each;      /* ReduceScatterV: pass recv_count_each = NULL */
    int v_mismatch;              /* V ops: the last rank's counts disagree with the others' */
    const coll_groups_t *groups; /* run the hierarchical algorithm over these (NULL: flat) */
    int scr_short;               /* hierarchical: scratch one byte shorter than needed */
    int check_bar;               /* every rank must call barrier() exactly bar times */
    long bar;
    /* writes input element elem of rank r at p (NULL: tc_value's random values) */
    void (*value)(void *p, int dtype, int r, size_t elem, uint64_t *seed);
} tc_case_t;

typedef struct {
    coll_sync_t base;
    pthread_barrier_t *bar;
    long calls;
    long fail_at;
} tc_sync_t;

typedef struct tc_world {
    tc_case_t c;
    size_t es;
    uint64_t sc[TC_MAXW][TC_MAXW], sd[TC_MAXW][TC_MAXW];
    uint64_t rc[TC_MAXW][TC_MAXW], rd[TC_MAXW][TC_MAXW];
    uint64_t rce[TC_MAXW];
    const uint64_t *scp[TC_MAXW], *sdp[TC_MAXW], *rcp[TC_MAXW], *rdp[TC_MAXW];
    size_t arena_sz[TC_MAXW], in_off[TC_MAXW], out_off[TC_MAXW];
    size_t in_sz[TC_MAXW], out_sz[TC_MAXW];
    unsigned char *arena[TC_MAXW], *orig[TC_MAXW], *expect[TC_MAXW];
    const void *inp[TC_MAXW];
    void *outp[TC_MAXW];
    void *ccl[TC_MAXW];
    pthread_barrier_t bar;
    tc_sync_t sync[TC_MAXW];
    int ret[TC_MAXW];
    uint64_t staged[TC_MAXW];
    void *scr[TC_MAXW]; /* hierarchical: every rank's scratch */
    coll_hier_t hier;
} tc_world_t;

__attribute__((unused)) static const int tc_reduce_types[] = {
    COLL_INT8,  COLL_UINT8,  COLL_INT16, COLL_UINT16, COLL_INT32, COLL_UINT32,
    COLL_INT64, COLL_UINT64, COLL_FP16,  COLL_BF16,   COLL_FP32,  COLL_FP64};
__attribute__((unused)) static const int tc_copy_types[] = {COLL_INT8, COLL_FP16,   COLL_FP32,
                                                            COLL_FP64, COLL_INT128, COLL_FP8E5M2};
__attribute__((unused)) static const size_t tc_counts[] = {0, 1, 7, 1000};

/* ---- deterministic data ---- */

TC_FN uint64_t tc_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A random finite value of dtype written at p: integers use all bits, floats
 * lie in [-8, 8) with random low mantissa bits so rounding matters. */
TC_FN void tc_value(void *p, int dtype, uint64_t *s)
{
    uint64_t r = tc_rand(s);
    float f = (float)((double)(int64_t)(r >> 11) * 0x1p-49);
    switch (dtype) {
    case COLL_FP32:
        memcpy(p, &f, 4);
        break;
    case COLL_FP64: {
        double d = (double)(int64_t)r * 0x1p-60;
        memcpy(p, &d, 8);
        break;
    }
    case COLL_FP16: {
        uint16_t h = coll_fp16_from_float(f);
        memcpy(p, &h, 2);
        break;
    }
    case COLL_BF16: {
        uint16_t h = coll_bf16_from_float(f);
        memcpy(p, &h, 2);
        break;
    }
    default:
        memcpy(p, &r, coll_dtype_size(dtype) < 8 ? coll_dtype_size(dtype) : 8);
        if (coll_dtype_size(dtype) == 16) {
            uint64_t hi = tc_rand(s);
            memcpy((char *)p + 8, &hi, 8);
        }
        break;
    }
}

/* ---- serial reference reduction ---- */

#define TC_FMAX(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (x) > (y) ? (x) : (y))
#define TC_FMIN(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (x) < (y) ? (x) : (y))

#define TC_REF_INT(T, W)                                                                           \
    do {                                                                                           \
        T acc, v;                                                                                  \
        memcpy(&acc, (const char *)src[0] + i * sizeof(T), sizeof(T));                             \
        for (int k = 1; k < n; k++) {                                                              \
            memcpy(&v, (const char *)src[k] + i * sizeof(T), sizeof(T));                           \
            if (op == COLL_SUM) {                                                                  \
                acc = (T)((W)acc + (W)v);                                                          \
            } else if (op == COLL_PROD) {                                                          \
                acc = (T)((W)acc * (W)v);                                                          \
            } else if (op == COLL_MAX) {                                                           \
                acc = v > acc ? v : acc;                                                           \
            } else {                                                                               \
                acc = v < acc ? v : acc;                                                           \
            }                                                                                      \
        }                                                                                          \
        memcpy((char *)dst + i * sizeof(T), &acc, sizeof(T));                                      \
    } while (0)

#define TC_REF_FLT_OP(acc, v)                                                                      \
    do {                                                                                           \
        if (op == COLL_SUM) {                                                                      \
            acc = acc + v;                                                                         \
        } else if (op == COLL_PROD) {                                                              \
            acc = acc * v;                                                                         \
        } else if (op == COLL_MAX) {                                                               \
            acc = TC_FMAX(acc, v);                                                                 \
        } else {                                                                                   \
            acc = TC_FMIN(acc, v);                                                                 \
        }                                                                                          \
    } while (0)

#define TC_REF_FLT(T)                                                                              \
    do {                                                                                           \
        T acc, v;                                                                                  \
        memcpy(&acc, (const char *)src[0] + i * sizeof(T), sizeof(T));                             \
        for (int k = 1; k < n; k++) {                                                              \
            memcpy(&v, (const char *)src[k] + i * sizeof(T), sizeof(T));                           \
            TC_REF_FLT_OP(acc, v);                                                                 \
        }                                                                                          \
        memcpy((char *)dst + i * sizeof(T), &acc, sizeof(T));                                      \
    } while (0)

TC_FN float tc_half_get(const void *p, size_t i, int dtype)
{
    uint16_t h;
    memcpy(&h, (const char *)p + i * 2, 2);
    return dtype == COLL_FP16 ? coll_fp16_to_float(h) : coll_bf16_to_float(h);
}

/* dst[i] = src[0][i] op ... op src[n-1][i], one element at a time. */
TC_FN void tc_ref_reduce(void *dst, const void *const *src, int n, size_t count, int dtype, int op)
{
    for (size_t i = 0; i < count; i++) {
        switch (dtype) {
        case COLL_INT8:
            TC_REF_INT(int8_t, uint32_t);
            break;
        case COLL_UINT8:
            TC_REF_INT(uint8_t, uint32_t);
            break;
        case COLL_INT16:
            TC_REF_INT(int16_t, uint32_t);
            break;
        case COLL_UINT16:
            TC_REF_INT(uint16_t, uint32_t);
            break;
        case COLL_INT32:
            TC_REF_INT(int32_t, uint32_t);
            break;
        case COLL_UINT32:
            TC_REF_INT(uint32_t, uint32_t);
            break;
        case COLL_INT64:
            TC_REF_INT(int64_t, uint64_t);
            break;
        case COLL_UINT64:
            TC_REF_INT(uint64_t, uint64_t);
            break;
        case COLL_FP32:
            TC_REF_FLT(float);
            break;
        case COLL_FP64:
            TC_REF_FLT(double);
            break;
        case COLL_FP16:
        case COLL_BF16: {
            float acc = tc_half_get(src[0], i, dtype);
            for (int k = 1; k < n; k++) {
                float v = tc_half_get(src[k], i, dtype);
                TC_REF_FLT_OP(acc, v);
            }
            uint16_t h = dtype == COLL_FP16 ? coll_fp16_from_float(acc) : coll_bf16_from_float(acc);
            memcpy((char *)dst + i * 2, &h, 2);
            break;
        }
        default:
            fail_msg("reference: dtype %d is not reducible", dtype);
        }
    }
}

/* acc op v in fp32 as the fp16/bf16 kernels do it: in SUM and PROD a NaN
 * wins, the accumulator's first, quietened (x86's rule, which the kernels
 * pin down). */
TC_FN float tc_wide_op(float acc, float v, int op)
{
    if ((op == COLL_SUM || op == COLL_PROD) && (acc != acc || v != v)) {
        uint32_t u;
        memcpy(&u, acc != acc ? &acc : &v, 4);
        u |= 0x400000u;
        memcpy(&acc, &u, 4);
        return acc;
    }
    TC_REF_FLT_OP(acc, v);
    return acc;
}

/* Hierarchical fp16 / bf16: each group's partial in member order and the
 * partials in group order, all in fp32, rounded once at the end. */
TC_FN void tc_ref_wide(const tc_case_t *c, void *dst, const void *const *src, size_t count)
{
    const coll_groups_t *g = c->groups;
    int op = c->op;
    for (size_t i = 0; i < count; i++) {
        float acc = 0;
        for (int h = 0; h < g->ngroups; h++) {
            const int *m = g->members + g->first[h];
            float p = tc_half_get(src[m[0]], i, c->dtype);
            for (int j = 1; j < g->first[h + 1] - g->first[h]; j++) {
                p = tc_wide_op(p, tc_half_get(src[m[j]], i, c->dtype), op);
            }
            acc = h == 0 ? p : tc_wide_op(acc, p, op);
        }
        uint16_t o = c->dtype == COLL_FP16 ? coll_fp16_from_float(acc) : coll_bf16_from_float(acc);
        memcpy((char *)dst + i * 2, &o, 2);
    }
}

/* The op's reduction of src[r] (by rank) in its documented order: rank
 * order when flat; hierarchical, each group's partial in member order, then
 * the partials in group order (coll/coll_hier.h), the partials rounded to
 * dtype except for fp16 / bf16, whose partials stay fp32. */
TC_FN void tc_ref_order(const tc_case_t *c, void *dst, const void *const *src, size_t count)
{
    const coll_groups_t *g = c->groups;
    if (g != NULL && (c->dtype == COLL_FP16 || c->dtype == COLL_BF16)) {
        tc_ref_wide(c, dst, src, count);
        return;
    }
    if (g == NULL) {
        tc_ref_reduce(dst, src, c->np, count, c->dtype, c->op);
        return;
    }
    size_t bytes = count * coll_dtype_size(c->dtype);
    unsigned char *part = malloc((size_t)g->ngroups * bytes + 1);
    const void *gs[TC_MAXW], *ps[TC_MAXW];
    assert_non_null(part);
    for (int h = 0; h < g->ngroups; h++) {
        int l = g->first[h + 1] - g->first[h];
        for (int i = 0; i < l; i++) {
            gs[i] = src[g->members[g->first[h] + i]];
        }
        ps[h] = part + (size_t)h * bytes;
        tc_ref_reduce(part + (size_t)h * bytes, gs, l, count, c->dtype, c->op);
    }
    tc_ref_reduce(dst, ps, g->ngroups, count, c->dtype, c->op);
    free(part);
}

/* ---- thread ranks ---- */

TC_FN int tc_barrier(coll_sync_t *self)
{
    tc_sync_t *s = (tc_sync_t *)self;
    s->calls++;
    if (s->fail_at != 0 && s->calls == s->fail_at) {
        return ZC_ERR_TIMEOUT;
    }
    pthread_barrier_wait(s->bar);
    return ZC_OK;
}

TC_FN int tc_is_reduction(tc_kind_t k)
{
    return k == TC_ALLREDUCE || k == TC_REDUCE || k == TC_REDUCESCATTER || k == TC_REDUCESCATTERV;
}

typedef int (*tc_fn)(const coll_args_t *);

TC_FN tc_fn tc_function(tc_kind_t k, int staged)
{
    static const tc_fn direct[] = {coll_allreduce_direct,     coll_reduce_direct,
                                   coll_allgather_direct,     coll_allgatherv_direct,
                                   coll_reducescatter_direct, coll_reducescatterv_direct,
                                   coll_broadcast_direct,     coll_scatter_direct,
                                   coll_alltoall_direct,      coll_alltoallv_direct};
    static const tc_fn stagedf[] = {coll_allreduce_staged,     coll_reduce_staged,
                                    coll_allgather_staged,     coll_allgatherv_staged,
                                    coll_reducescatter_staged, coll_reducescatterv_staged,
                                    coll_broadcast_staged,     coll_scatter_staged,
                                    coll_alltoall_staged,      coll_alltoallv_staged};
    return staged ? stagedf[k] : direct[k];
}

/* The hierarchical algorithms: their kind, and the function of a tc kind. */
TC_FN int tc_hier_kind(tc_kind_t k)
{
    switch (k) {
    case TC_ALLREDUCE:
        return COLL_HIER_ALLREDUCE;
    case TC_ALLGATHER:
        return COLL_HIER_ALLGATHER;
    case TC_REDUCESCATTER:
        return COLL_HIER_REDUCESCATTER;
    case TC_BROADCAST:
        return COLL_HIER_BROADCAST;
    default:
        return COLL_HIER_REDUCE;
    }
}

typedef int (*tc_hier_fn)(const coll_args_t *, const coll_hier_t *);

TC_FN tc_hier_fn tc_hier_function(tc_kind_t k)
{
    static const tc_hier_fn fns[COLL_HIER_KINDS] = {coll_hier_allreduce, coll_hier_allgather,
                                                    coll_hier_reducescatter, coll_hier_broadcast,
                                                    coll_hier_reduce};
    return fns[tc_hier_kind(k)];
}

typedef struct {
    tc_world_t *w;
    int rank;
} tc_rank_arg_t;

TC_FN void tc_rank_run(tc_world_t *w, int r)
{
    const tc_case_t *c = &w->c;
    coll_args_t a;
    memset(&a, 0, sizeof(a));
    a.rank = r;
    a.nranks = c->np;
    a.root = c->root;
    a.dtype = c->dtype;
    a.op = c->op;
    a.count = c->count;
    if (c->kind == TC_ALLGATHERV) {
        a.count = w->rc[0][r];
    } else if (c->kind == TC_REDUCESCATTERV) {
        a.count = w->rce[r];
    } else if (c->kind == TC_ALLTOALLV) {
        a.count = 0;
    }
    if (c->staged) {
        a.send = c->null_send_rank == r ? NULL : w->inp[r];
        a.recv = w->outp[r];
        a.ccl = w->ccl;
        a.ccl_bytes = c->ccl_bytes;
        a.staged_bytes = &w->staged[r];
    } else {
        a.in = w->inp;
        a.out = w->outp;
    }
    a.send_counts = w->scp;
    a.send_displs = w->sdp;
    a.recv_counts = w->rcp;
    a.recv_displs = w->rdp;
    a.recv_count_each = c->no_recv_count_each ? NULL : w->rce;
    a.sync = &w->sync[r].base;
    a.tune = &c->tune;
    a.reuse = c->reuse != NULL ? &c->reuse[r] : NULL;
    a.pull = c->pull;
    if (c->groups != NULL) {
        w->ret[r] = tc_hier_function(c->kind)(&a, &w->hier);
    } else {
        w->ret[r] = tc_function(c->kind, c->staged)(&a);
    }
}

TC_FN void *tc_rank_thread(void *p)
{
    tc_rank_arg_t *ra = p;
    tc_rank_run(ra->w, ra->rank);
    return NULL;
}

/* Run every rank (rank 0 on the calling thread). */
TC_FN void tc_world_run(tc_world_t *w)
{
    pthread_t th[TC_MAXW];
    tc_rank_arg_t ra[TC_MAXW];
    for (int r = 1; r < w->c.np; r++) {
        ra[r].w = w;
        ra[r].rank = r;
        assert_int_equal(pthread_create(&th[r], NULL, tc_rank_thread, &ra[r]), 0);
    }
    tc_rank_run(w, 0);
    for (int r = 1; r < w->c.np; r++) {
        assert_int_equal(pthread_join(th[r], NULL), 0);
    }
}

/* ---- layout: counts, displacements, arenas ---- */

/* Lay blocks of counts[q] out with gaps, in reverse rank order on odd ranks. */
TC_FN void tc_displs(uint64_t *displs, const uint64_t *counts, int np, int r)
{
    uint64_t d = (uint64_t)(r % 2) * 3;
    for (int i = 0; i < np; i++) {
        int q = r % 2 ? np - 1 - i : i;
        displs[q] = d;
        d += counts[q] + (uint64_t)r + 1;
    }
}

TC_FN size_t tc_extent(const uint64_t *counts, const uint64_t *displs, int np)
{
    size_t e = 0;
    for (int q = 0; q < np; q++) {
        if (counts[q] > 0 && displs[q] + counts[q] > e) {
            e = displs[q] + counts[q];
        }
    }
    return e;
}

TC_FN void tc_make_v(tc_world_t *w)
{
    const tc_case_t *c = &w->c;
    size_t n = c->count;
    for (int q = 0; q < c->np; q++) {
        /* uneven, with a zero for rank 1 */
        w->rce[q] = n == 0 ? 0 : (q % 3 == 1 ? 0 : n + (uint64_t)q * 3);
    }
    for (int r = 0; r < c->np; r++) {
        for (int q = 0; q < c->np; q++) {
            if (c->kind == TC_ALLTOALLV) {
                w->sc[r][q] = n == 0 ? 0 : ((r + 2 * q) % 4 == 3 ? 0 : n / 2 + r * 5 + q);
            } else if (c->kind == TC_REDUCESCATTERV) {
                w->sc[r][q] = w->rce[q];
            }
            w->rc[r][q] = c->kind == TC_ALLGATHERV ? w->rce[q] : 0;
        }
    }
    for (int r = 0; r < c->np; r++) {
        for (int q = 0; q < c->np; q++) {
            if (c->kind == TC_ALLTOALLV) {
                w->rc[r][q] = w->sc[q][r];
            }
        }
        tc_displs(w->sd[r], w->sc[r], c->np, r);
        tc_displs(w->rd[r], w->rc[r], c->np, c->np - 1 - r);
        w->scp[r] = w->sc[r];
        w->sdp[r] = w->sd[r];
        w->rcp[r] = w->rc[r];
        w->rdp[r] = w->rd[r];
    }
}

/* Bytes of in and out, and the in-place shift d = in_off - out_off. */
TC_FN void tc_sizes(const tc_world_t *w, int r, size_t *in_sz, size_t *out_sz, long *d)
{
    const tc_case_t *c = &w->c;
    int ip = c->inplace == TC_MIXED ? (r % 2 ? TC_PARTIAL : TC_INPLACE) : c->inplace;
    size_t es = w->es;
    size_t b = c->count * es;
    size_t nb = b * (size_t)c->np;
    long e = (long)es;
    *d = 0;
    switch (c->kind) {
    case TC_ALLREDUCE:
    case TC_REDUCE:
    case TC_BROADCAST:
        *in_sz = b;
        *out_sz = b;
        *d = ip == TC_PARTIAL ? e : 0;
        break;
    case TC_ALLGATHER:
        *in_sz = b;
        *out_sz = nb;
        *d = ip == TC_PARTIAL ? e : (long)(b * (size_t)r);
        break;
    case TC_ALLGATHERV:
        *in_sz = w->rce[r] * es;
        *out_sz = tc_extent(w->rc[r], w->rd[r], c->np) * es;
        *d = ip == TC_PARTIAL ? e : (long)(w->rd[r][r] * es);
        break;
    case TC_REDUCESCATTER:
        *in_sz = nb;
        *out_sz = b;
        *d = ip == TC_PARTIAL ? -e : ip == TC_ALIAS ? 0 : -(long)(b * (size_t)r);
        break;
    case TC_REDUCESCATTERV:
        *in_sz = tc_extent(w->sc[r], w->sd[r], c->np) * es;
        *out_sz = w->rce[r] * es;
        *d = ip == TC_PARTIAL ? -e : ip == TC_ALIAS ? 0 : -(long)(w->sd[r][r] * es);
        break;
    case TC_SCATTER:
        *in_sz = nb;
        *out_sz = b;
        *d = ip == TC_PARTIAL ? -e : -(long)(b * (size_t)r);
        break;
    case TC_ALLTOALL:
        *in_sz = nb;
        *out_sz = nb;
        *d = ip == TC_PARTIAL ? e : 0;
        break;
    case TC_ALLTOALLV:
        *in_sz = tc_extent(w->sc[r], w->sd[r], c->np) * es;
        *out_sz = tc_extent(w->rc[r], w->rd[r], c->np) * es;
        *d = ip == TC_PARTIAL ? e : 0;
        break;
    }
}

/* Every rank's scratch for the hierarchical algorithm (when the groups are
 * valid: bad groups are the algorithm's to reject). */
TC_FN void tc_world_scratch(tc_world_t *w)
{
    const tc_case_t *c = &w->c;
    size_t need = 0;
    if (coll_hier_check_groups(c->groups, c->np) == ZC_OK) {
        assert_int_equal(
            coll_hier_scratch_bytes(tc_hier_kind(c->kind), c->groups, c->count, c->dtype, &need),
            ZC_OK);
    }
    w->hier.groups = c->groups;
    w->hier.scratch = w->scr;
    w->hier.scratch_bytes = c->scr_short && need > 0 ? need - 1 : need;
    for (int r = 0; r < c->np; r++) {
        w->scr[r] = malloc(need + 1);
        assert_non_null(w->scr[r]);
        memset(w->scr[r], 0xa5, need + 1);
    }
}

TC_FN void tc_world_init(tc_world_t *w, const tc_case_t *c)
{
    memset(w, 0, sizeof(*w));
    w->c = *c;
    w->es = coll_dtype_size(c->dtype);
    tc_make_v(w);
    if (c->v_mismatch) {
        if (c->kind == TC_REDUCESCATTERV) {
            w->sc[c->np - 1][0]++;
        } else {
            w->rc[c->np - 1][0]++;
        }
    }
    uint64_t seed = 0x1234 + c->count * 131 + (uint64_t)c->dtype * 7 + (uint64_t)c->np;
    int inplace = c->inplace != TC_OOP || c->kind == TC_BROADCAST;
    for (int r = 0; r < c->np; r++) {
        long d;
        size_t mis = (size_t)(3 + 5 * r + (int)(c->count % 7)) % 16;
        tc_sizes(w, r, &w->in_sz[r], &w->out_sz[r], &d);
        if (!inplace) {
            w->in_off[r] = mis;
            w->out_off[r] = mis + w->in_sz[r] + 37;
        } else if (d >= 0) {
            w->out_off[r] = mis;
            w->in_off[r] = mis + (size_t)d;
        } else {
            w->in_off[r] = mis;
            w->out_off[r] = mis + (size_t)(-d);
        }
        size_t end = w->in_off[r] + w->in_sz[r];
        if (w->out_off[r] + w->out_sz[r] > end) {
            end = w->out_off[r] + w->out_sz[r];
        }
        w->arena_sz[r] = end + 67;
        w->arena[r] = malloc(w->arena_sz[r]);
        w->orig[r] = malloc(w->arena_sz[r]);
        w->expect[r] = malloc(w->arena_sz[r]);
        assert_non_null(w->arena[r]);
        assert_non_null(w->orig[r]);
        assert_non_null(w->expect[r]);
        for (size_t i = 0; i < w->arena_sz[r]; i++) {
            w->arena[r][i] = (unsigned char)tc_rand(&seed);
        }
        for (size_t i = 0; i < w->in_sz[r]; i += w->es) {
            if (c->value != NULL) {
                c->value(w->arena[r] + w->in_off[r] + i, c->dtype, r, i / w->es, &seed);
            } else {
                tc_value(w->arena[r] + w->in_off[r] + i, c->dtype, &seed);
            }
        }
        memcpy(w->orig[r], w->arena[r], w->arena_sz[r]);
        memcpy(w->expect[r], w->arena[r], w->arena_sz[r]);
        w->inp[r] = w->arena[r] + w->in_off[r];
        w->outp[r] = w->arena[r] + w->out_off[r];
        if (c->staged) {
            w->ccl[r] = malloc(c->ccl_bytes);
            assert_non_null(w->ccl[r]);
            memset(w->ccl[r], 0xa5, c->ccl_bytes);
        }
        w->sync[r].base.barrier = tc_barrier;
        w->sync[r].bar = &w->bar;
        w->sync[r].fail_at = c->barrier_fail_at;
    }
    if (c->groups != NULL) {
        tc_world_scratch(w);
    }
    assert_int_equal(pthread_barrier_init(&w->bar, NULL, (unsigned)c->np), 0);
}

TC_FN void tc_world_fini(tc_world_t *w)
{
    for (int r = 0; r < w->c.np; r++) {
        free(w->arena[r]);
        free(w->orig[r]);
        free(w->expect[r]);
        free(w->ccl[r]);
        free(w->scr[r]);
    }
    pthread_barrier_destroy(&w->bar);
}

/* ---- expected results ---- */

TC_FN const unsigned char *tc_in(const tc_world_t *w, int r, size_t elem)
{
    return w->orig[r] + w->in_off[r] + elem * w->es;
}

TC_FN unsigned char *tc_out(tc_world_t *w, int r, size_t elem)
{
    return w->expect[r] + w->out_off[r] + elem * w->es;
}

TC_FN void tc_expect(tc_world_t *w)
{
    const tc_case_t *c = &w->c;
    const void *src[TC_MAXW];
    size_t n = c->count;
    size_t es = w->es;
    for (int q = 0; q < c->np; q++) {
        switch (c->kind) {
        case TC_ALLREDUCE:
        case TC_REDUCE:
            if (c->kind == TC_REDUCE && q != c->root) {
                break;
            }
            for (int r = 0; r < c->np; r++) {
                src[r] = tc_in(w, r, 0);
            }
            tc_ref_order(c, tc_out(w, q, 0), src, n);
            break;
        case TC_ALLGATHER:
            for (int r = 0; r < c->np; r++) {
                memmove(tc_out(w, q, (size_t)r * n), tc_in(w, r, 0), n * es);
            }
            break;
        case TC_ALLGATHERV:
            for (int r = 0; r < c->np; r++) {
                memmove(tc_out(w, q, w->rd[q][r]), tc_in(w, r, 0), w->rce[r] * es);
            }
            break;
        case TC_REDUCESCATTER:
            for (int r = 0; r < c->np; r++) {
                src[r] = tc_in(w, r, (size_t)q * n);
            }
            tc_ref_order(c, tc_out(w, q, 0), src, n);
            break;
        case TC_REDUCESCATTERV:
            for (int r = 0; r < c->np; r++) {
                src[r] = tc_in(w, r, w->sd[r][q]);
            }
            tc_ref_reduce(tc_out(w, q, 0), src, c->np, w->rce[q], c->dtype, c->op);
            break;
        case TC_BROADCAST:
            if (q != c->root) {
                memmove(tc_out(w, q, 0), tc_in(w, c->root, 0), n * es);
            }
            break;
        case TC_SCATTER:
            memmove(tc_out(w, q, 0), tc_in(w, c->root, (size_t)q * n), n * es);
            break;
        case TC_ALLTOALL:
            for (int r = 0; r < c->np; r++) {
                memmove(tc_out(w, q, (size_t)r * n), tc_in(w, r, (size_t)q * n), n * es);
            }
            break;
        case TC_ALLTOALLV:
            for (int r = 0; r < c->np; r++) {
                memmove(tc_out(w, q, w->rd[q][r]), tc_in(w, r, w->sd[r][q]), w->sc[r][q] * es);
            }
            break;
        }
    }
}

TC_FN void tc_describe(const tc_case_t *c, char *buf, size_t len)
{
    snprintf(buf, len,
             "kind %d %s np %d dtype %d op %d root %d count %zu inplace %d ccl %zu "
             "oneshot %zu nt %zu pull %d groups %d",
             (int)c->kind, c->staged ? "staged" : "direct", c->np, c->dtype, c->op, c->root,
             c->count, c->inplace, c->ccl_bytes, c->tune.oneshot_max, c->tune.nt_min, c->pull,
             c->groups != NULL ? c->groups->ngroups : 0);
}

/* Run one case and check status, barrier counts and every arena byte. */
TC_FN void tc_run_case(const tc_case_t *c)
{
    tc_world_t *w = malloc(sizeof(*w));
    char desc[256];
    assert_non_null(w);
    tc_describe(c, desc, sizeof(desc));
    tc_world_init(w, c);
    tc_expect(w);
    tc_world_run(w);
    for (int r = 0; r < c->np; r++) {
        int want = c->expect_status;
        if (c->null_send_rank >= 0 && c->expect_status == ZC_OK) {
            want = r == c->null_send_rank ? ZC_ERR_PTR : ZC_OK;
        }
        if (w->ret[r] != want) {
            fail_msg("%s: rank %d returned %d, expected %d", desc, r, w->ret[r], want);
        }
        if (w->sync[r].calls != w->sync[0].calls) {
            fail_msg("%s: rank %d called barrier %ld times, rank 0 %ld", desc, r, w->sync[r].calls,
                     w->sync[0].calls);
        }
        if (c->check_bar && w->sync[r].calls != c->bar) {
            fail_msg("%s: rank %d called barrier %ld times, expected %ld", desc, r,
                     w->sync[r].calls, c->bar);
        }
        if (!c->staged && w->staged[r] != 0) {
            fail_msg("%s: direct path staged %llu bytes", desc, (unsigned long long)w->staged[r]);
        }
    }
    if (c->expect_status == ZC_OK && c->null_send_rank < 0) {
        for (int r = 0; r < c->np; r++) {
            if (memcmp(w->arena[r], w->expect[r], w->arena_sz[r]) != 0) {
                size_t i = 0;
                while (w->arena[r][i] == w->expect[r][i]) {
                    i++;
                }
                fail_msg("%s: rank %d arena differs at byte %zu (in @%zu+%zu, out @%zu+%zu): "
                         "got %02x want %02x",
                         desc, r, i, w->in_off[r], w->in_sz[r], w->out_off[r], w->out_sz[r],
                         w->arena[r][i], w->expect[r][i]);
            }
        }
    }
    tc_world_fini(w);
    free(w);
}

/* A case with the defaults: direct, out of place, default tuning. */
TC_FN tc_case_t tc_case(tc_kind_t kind, int np, int dtype, int op, size_t count)
{
    tc_case_t c;
    memset(&c, 0, sizeof(c));
    c.kind = kind;
    c.np = np;
    c.dtype = dtype;
    c.op = op;
    c.count = count;
    c.ccl_bytes = 4096;
    c.tune.oneshot_max = COLL_DEFAULT_ONESHOT_MAX;
    c.tune.nt_min = COLL_DEFAULT_NT_MIN;
    c.null_send_rank = -1;
    c.expect_status = ZC_OK;
    return c;
}

#endif /* TEST_COLL_HARNESS_H */
