/*
 * Soak: SO_OPS random operations on np = 3 forked ranks, every result
 * checked element by element against a serial reference.
 *
 * Every rank derives the same op sequence from one seed (so the ranks agree
 * without talking): collective (AllReduce, AllGather, ReduceScatter,
 * Broadcast, Reduce, Scatter, AlltoAll, AlltoAllV, AllGatherV,
 * ReduceScatterV, Send/Recv in a group or as one HcclBatchSendRecv, Barrier),
 * data type, reduction, root, count (mostly small: 0..64, sometimes up to
 * 4096, rarely up to ~1 MB per buffer), in-place or not, misaligned by one
 * element or not, the V counts and displacements (with gaps). Each rank also
 * picks, from the same sequence, whether its buffers lie in activated
 * zero-copy memory or in plain aclrtMalloc memory (the op runs zero-copy
 * only when every rank's do, else buffered everywhere) and whether a batch
 * goes to its own stream or the default stream. Ops run in batches of 1..4
 * enqueued before one aclrtSynchronizeStream, each in its own slot of the
 * arenas. After each batch every rank checks:
 *  - each output against the reference built from every rank's input
 *    (inputs are a pure function of seed, rank and index: tests/common);
 *  - 64 guard bytes before and after every buffer, the inputs of
 *    out-of-place ops and a non-root Reduce's receive buffer unchanged;
 *  - the zero-copy / buffered op counters moved as the path rule says
 *    (so_expect).
 * HCCL_BUFFSIZE=1 makes the buffered path chunk the larger ops.
 * The parent prints ops per collective, wrong results and path mismatches;
 * any non-zero count fails the test.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../../hccl/src/core/hccl_test_api.h"
#include "zt_check.h"

#define SO_NRANKS 3
#define SO_OPS 20000
#define SO_SEED 0x50a4c0ffee15ULL
#define SO_SLOTS 4
#define SO_SLOT (4u << 20) /* bytes per op slot, each side */
#define SO_GUARD 64
#define SO_MAXBUF (SO_SLOT - 4 * SO_GUARD - 64)
#define SO_SENTINEL 0xa5
#define SO_TIMEOUT_S 500

enum {
    SO_AR,
    SO_AG,
    SO_RS,
    SO_BC,
    SO_RED,
    SO_SC,
    SO_A2A,
    SO_A2AV,
    SO_AGV,
    SO_RSV,
    SO_P2P,
    SO_BARRIER,
    SO_NCOLL
};

static const char *const so_names[SO_NCOLL] = {
    "allreduce", "allgather", "reducescatter", "broadcast",      "reduce",   "scatter",
    "alltoall",  "alltoallv", "allgatherv",    "reducescatterv", "sendrecv", "barrier"};

static const int so_dtypes[] = {HCCL_DATA_TYPE_INT8,   HCCL_DATA_TYPE_UINT8,  HCCL_DATA_TYPE_INT16,
                                HCCL_DATA_TYPE_UINT16, HCCL_DATA_TYPE_INT32,  HCCL_DATA_TYPE_UINT32,
                                HCCL_DATA_TYPE_INT64,  HCCL_DATA_TYPE_UINT64, HCCL_DATA_TYPE_FP16,
                                HCCL_DATA_TYPE_BFP16,  HCCL_DATA_TYPE_FP32,   HCCL_DATA_TYPE_FP64};
#define SO_NDT ((int)(sizeof(so_dtypes) / sizeof(so_dtypes[0])))

/* One op as every rank sees it (all of it derived from the seed). */
typedef struct {
    int coll;
    int dtype;
    int op; /* HcclReduceOp, or ZT_OP_NONE for copies */
    int root;
    int in_place;
    int mis;       /* misalign buffers by one element */
    int batch_api; /* Send/Recv: HcclBatchSendRecv instead of a group */
    int shift;     /* Send/Recv: send to rank + shift */
    size_t count;
    uint64_t seed;
    int zc[SO_NRANKS];                 /* rank q's buffers are activated memory */
    uint64_t m[SO_NRANKS][SO_NRANKS];  /* V counts: [i][j] = i sends to j */
    uint64_t sd[SO_NRANKS][SO_NRANKS]; /* send displacements of rank i for peer j */
    uint64_t rd[SO_NRANKS][SO_NRANKS]; /* receive displacements of rank i for peer j */
} so_op_t;

typedef struct {
    zt_env_t env;
    unsigned char *ref; /* expected output */
    unsigned char *tmp[SO_NRANKS];
    long wrong; /* ops with a wrong result */
    long path;  /* ops that took the wrong path */
    long guard; /* ops that wrote outside their output */
    long by_coll[SO_NCOLL];
} so_rank_t;

typedef struct {
    long wrong[SO_NRANKS];
    long path[SO_NRANKS];
    long guard[SO_NRANKS];
    long by_coll[SO_NCOLL];
    long ops;
    double secs;
} so_result_t;

/* ---- the op sequence ---------------------------------------------------------------- */

typedef struct {
    uint64_t s;
} so_rng_t;

static uint64_t so_next(so_rng_t *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t so_below(so_rng_t *r, uint64_t n)
{
    return n == 0 ? 0 : so_next(r) % n;
}

/* Mostly tiny, sometimes medium, rarely large counts, capped at cap. */
static size_t so_count(so_rng_t *r, size_t cap)
{
    uint64_t k = so_below(r, 100);
    size_t c = k < 60   ? so_below(r, 65)
               : k < 90 ? 65 + so_below(r, 4032)
               : k < 99 ? 4097 + so_below(r, 61440)
                        : 65537 + so_below(r, 200000);
    return c < cap ? c : cap;
}

/* Packed displacements with gaps of 0..3 elements; returns the extent. */
static uint64_t so_displs(so_rng_t *r, const uint64_t *counts, uint64_t *displs, int n)
{
    uint64_t at = 0;
    for (int j = 0; j < n; j++) {
        at += so_below(r, 4);
        displs[j] = at;
        at += counts[j];
    }
    return at;
}

static void so_gen(so_op_t *o, uint64_t idx)
{
    so_rng_t r = {zt_pattern(SO_SEED, 0, idx)};
    int n = SO_NRANKS;
    memset(o, 0, sizeof(*o));
    uint64_t k = so_below(&r, 100);
    /* Weights: the V and p2p paths are as hot as the classic ones. */
    o->coll = k < 14   ? SO_AR
              : k < 24 ? SO_AG
              : k < 33 ? SO_RS
              : k < 41 ? SO_BC
              : k < 49 ? SO_RED
              : k < 56 ? SO_SC
              : k < 64 ? SO_A2A
              : k < 72 ? SO_A2AV
              : k < 80 ? SO_AGV
              : k < 88 ? SO_RSV
              : k < 98 ? SO_P2P
                       : SO_BARRIER;
    o->dtype = so_dtypes[so_below(&r, SO_NDT)];
    int reduces = o->coll == SO_AR || o->coll == SO_RS || o->coll == SO_RED || o->coll == SO_RSV;
    o->op = reduces ? (int)so_below(&r, 4) : ZT_OP_NONE;
    o->root = (int)so_below(&r, (uint64_t)n);
    o->in_place = so_below(&r, 4) == 0;
    o->mis = so_below(&r, 3) == 0;
    o->batch_api = (int)so_below(&r, 2);
    o->shift = 1 + (int)so_below(&r, (uint64_t)(n - 1));
    o->seed = so_next(&r);
    size_t es = zt_dtype_size(o->dtype);
    size_t cap = SO_MAXBUF / es / (size_t)(n + 1); /* n blocks plus V gaps */
    o->count = so_count(&r, cap);
    for (int q = 0; q < n; q++) {
        o->zc[q] = so_below(&r, 10) < 7;
    }
    /* V arguments: counts up to count, displacements with gaps. */
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            o->m[i][j] = so_below(&r, o->count + 1);
        }
    }
    for (int i = 0; i < n; i++) {
        uint64_t col[SO_NRANKS];
        so_displs(&r, o->m[i], o->sd[i], n); /* what i sends, by destination */
        for (int j = 0; j < n; j++) {
            col[j] = o->m[j][i];
        }
        so_displs(&r, col, o->rd[i], n); /* what i receives, by source */
    }
    /* AllGatherV: rank j contributes m[0][j]; every rank uses rd[0] to place
     * them. ReduceScatterV: rank j gets m[0][j]; rank i's input block for j
     * starts at sd[i][j] over the counts m[0][*] (per-rank displacements). */
    if (o->coll == SO_RSV) {
        for (int i = 0; i < n; i++) {
            so_displs(&r, o->m[0], o->sd[i], n);
        }
    }
    if (o->coll == SO_AGV) {
        so_displs(&r, o->m[0], o->rd[0], n);
    }
}

static zt_pat_t so_pat(const so_op_t *o)
{
    zt_pat_t p = {o->dtype, o->op, ZT_FILL_EXACT, SO_NRANKS, o->seed};
    return p;
}

static uint64_t so_extent(const uint64_t *counts, const uint64_t *displs, int n)
{
    uint64_t end = 0;
    for (int j = 0; j < n; j++) {
        if (counts[j] != 0 && displs[j] + counts[j] > end) {
            end = displs[j] + counts[j];
        }
    }
    return end;
}

/* Elements of rank q's send and receive buffers the op touches (as the
 * library computes them: the path rule depends on them). */
static void so_elems(const so_op_t *o, int q, uint64_t *se, uint64_t *re)
{
    int n = SO_NRANKS;
    uint64_t c = o->count;
    uint64_t col[SO_NRANKS];
    switch (o->coll) {
    case SO_AR:
        *se = c;
        *re = c;
        break;
    case SO_AG:
        *se = c;
        *re = c * (uint64_t)n;
        break;
    case SO_RS:
        *se = c * (uint64_t)n;
        *re = c;
        break;
    case SO_BC:
        *se = c;
        *re = c;
        break;
    case SO_RED:
        *se = c;
        *re = q == o->root ? c : 0;
        break;
    case SO_SC:
        *se = q == o->root ? c * (uint64_t)n : 0;
        *re = c;
        break;
    case SO_A2A:
        *se = c * (uint64_t)n;
        *re = c * (uint64_t)n;
        break;
    case SO_A2AV:
        for (int j = 0; j < n; j++) {
            col[j] = o->m[j][q];
        }
        *se = so_extent(o->m[q], o->sd[q], n);
        *re = so_extent(col, o->rd[q], n);
        break;
    case SO_AGV:
        *se = o->m[0][q];
        *re = so_extent(o->m[0], o->rd[0], n);
        break;
    case SO_RSV:
        *se = so_extent(o->m[0], o->sd[q], n);
        *re = o->m[0][q];
        break;
    case SO_P2P:
        *se = c;
        *re = c;
        break;
    default:
        *se = 0;
        *re = 0;
        break;
    }
}

/* ---- issuing ---------------------------------------------------------------------- */

typedef struct {
    unsigned char *sbase; /* slot start, send side */
    unsigned char *rbase; /* slot start, receive side */
    unsigned char *send;
    unsigned char *recv;
    size_t sbytes; /* bytes of the send region (guards around it) */
    size_t rbytes;
    int separate; /* recv region is not inside the send region */
} so_bufs_t;

static void so_place(so_rank_t *R, const so_op_t *o, int slot, so_bufs_t *b)
{
    zt_env_t *e = &R->env;
    int me = e->rank;
    size_t es = zt_dtype_size(o->dtype);
    int zc = o->zc[me];
    unsigned char *sh = zc ? (unsigned char *)e->zc.va : e->plain;
    unsigned char *rh = zc ? (unsigned char *)e->zc.va + e->zc.block : e->plain + e->half;
    uint64_t se = 0;
    uint64_t re = 0;
    so_elems(o, me, &se, &re);
    b->sbase = sh + (size_t)slot * SO_SLOT;
    b->rbase = rh + (size_t)slot * SO_SLOT;
    size_t off = SO_GUARD + (o->mis ? es : 0);
    b->send = b->sbase + off;
    b->recv = b->rbase + off;
    b->sbytes = se * es;
    b->rbytes = re * es;
    b->separate = 1;
    if (o->coll == SO_RED) {
        /* A non-root receive buffer is checked untouched over count elements. */
        b->rbytes = o->count * es;
    }
    if (o->coll == SO_BC) {
        b->recv = b->send;
        b->separate = 0;
    } else if (o->in_place && o->coll == SO_AR) {
        b->recv = b->send;
        b->separate = 0;
    } else if (o->in_place && o->coll == SO_RED) {
        b->recv = b->send;
        b->rbytes = b->sbytes;
        b->separate = 0;
    } else if (o->in_place && o->coll == SO_AG) {
        /* send is this rank's block of recv */
        b->recv = b->send;
        b->send = b->recv + (size_t)me * o->count * es;
        b->sbytes = b->rbytes;
        b->separate = 0;
    } else if (o->in_place && o->coll == SO_RS) {
        b->recv = b->send + (size_t)me * o->count * es;
        b->separate = 0;
    }
}

/* Sentinel around (and in) the buffers, then this rank's input. */
static void so_prepare(so_rank_t *R, const so_op_t *o, const so_bufs_t *b)
{
    int me = R->env.rank;
    zt_pat_t p = so_pat(o);
    unsigned char *sreg = o->in_place && o->coll == SO_AG ? b->recv : b->send;
    size_t sreg_bytes = o->in_place && o->coll == SO_AG ? b->rbytes : b->sbytes;
    memset(sreg - SO_GUARD, SO_SENTINEL, sreg_bytes + 2 * SO_GUARD);
    if (b->separate) {
        memset(b->recv - SO_GUARD, SO_SENTINEL, b->rbytes + 2 * SO_GUARD);
    }
    uint64_t se = 0;
    uint64_t re = 0;
    so_elems(o, me, &se, &re);
    if (o->coll == SO_BC && me != o->root) {
        return; /* receives into the sentinel */
    }
    /* V inputs: the gaps between blocks hold pattern too, which is harmless. */
    zt_fill(b->send, 0, se, &p, me);
    (void)re;
}

static HcclResult so_issue(so_rank_t *R, const so_op_t *o, const so_bufs_t *b, aclrtStream st)
{
    zt_env_t *e = &R->env;
    int me = e->rank;
    int n = SO_NRANKS;
    HcclComm c = e->comm;
    HcclDataType dt = (HcclDataType)o->dtype;
    HcclReduceOp op = (HcclReduceOp)o->op;
    uint64_t sc[SO_NRANKS];
    uint64_t rc[SO_NRANKS];
    switch (o->coll) {
    case SO_AR:
        return HcclAllReduce(b->send, b->recv, o->count, dt, op, c, st);
    case SO_AG:
        return HcclAllGather(b->send, b->recv, o->count, dt, c, st);
    case SO_RS:
        return HcclReduceScatter(b->send, b->recv, o->count, dt, op, c, st);
    case SO_BC:
        return HcclBroadcast(b->send, o->count, dt, (uint32_t)o->root, c, st);
    case SO_RED:
        return HcclReduce(b->send, b->recv, o->count, dt, op, (uint32_t)o->root, c, st);
    case SO_SC:
        return HcclScatter(b->send, b->recv, o->count, dt, (uint32_t)o->root, c, st);
    case SO_A2A:
        return HcclAlltoAll(b->send, o->count, dt, b->recv, o->count, dt, c, st);
    case SO_A2AV:
        for (int j = 0; j < n; j++) {
            sc[j] = o->m[me][j];
            rc[j] = o->m[j][me];
        }
        return HcclAlltoAllV(b->send, sc, o->sd[me], dt, b->recv, rc, o->rd[me], dt, c, st);
    case SO_AGV:
        return HcclAllGatherV(b->send, o->m[0][me], b->recv, o->m[0], o->rd[0], dt, c, st);
    case SO_RSV:
        return HcclReduceScatterV(b->send, o->m[0], o->sd[me], b->recv, o->m[0][me], dt, op, c, st);
    case SO_P2P: {
        uint32_t to = (uint32_t)((me + o->shift) % n);
        uint32_t from = (uint32_t)((me + n - o->shift) % n);
        if (o->batch_api) {
            HcclSendRecvItem it[2] = {{HCCL_RECV, b->recv, o->count, dt, from},
                                      {HCCL_SEND, b->send, o->count, dt, to}};
            return HcclBatchSendRecv(it, 2, c, st);
        }
        HcclResult h = HcclGroupStart();
        HcclResult h1 = HcclSend(b->send, o->count, dt, to, c, st);
        HcclResult h2 = HcclRecv(b->recv, o->count, dt, from, c, st);
        HcclResult h3 = HcclGroupEnd();
        return h != HCCL_SUCCESS ? h : h1 != HCCL_SUCCESS ? h1 : h2 != HCCL_SUCCESS ? h2 : h3;
    }
    default:
        return HcclBarrier(c, st);
    }
}

/* ---- checking --------------------------------------------------------------------- */

static int so_guard_ok(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != SO_SENTINEL) {
            return 0;
        }
    }
    return 1;
}

/* Reduce count elements at element offset off_q[q] of every rank's input
 * (input extent ext elements) into R->ref. */
static void so_ref_reduce(so_rank_t *R, const so_op_t *o, const uint64_t *off_q, uint64_t ext,
                          size_t count)
{
    zt_pat_t p = so_pat(o);
    size_t es = zt_dtype_size(o->dtype);
    const void *in[SO_NRANKS];
    for (int q = 0; q < SO_NRANKS; q++) {
        zt_fill(R->tmp[q], 0, ext, &p, q);
        in[q] = R->tmp[q] + off_q[q] * es;
    }
    zt_ref_reduce(R->ref, in, SO_NRANKS, count, o->dtype, o->op);
}

/* Compare count elements of got with R->ref; returns 1 on a mismatch. */
static int so_cmp(so_rank_t *R, const so_op_t *o, uint64_t idx, const void *got, size_t count)
{
    char what[160];
    snprintf(what, sizeof(what), "[rank %d] op %" PRIu64 " %s %s %s count %zu%s%s", R->env.rank,
             idx, so_names[o->coll], zt_dtype_name(o->dtype), o->op >= 0 ? zt_op_name(o->op) : "",
             o->count, o->in_place ? " in-place" : "",
             o->zc[0] && o->zc[1] && o->zc[2] ? " zero-copy" : " buffered");
    return zt_compare(what, got, R->ref, count, o->dtype) != 0;
}

/* The gaps between the blocks of a V receive buffer must be untouched. */
static int so_gaps_bad(so_rank_t *R, const so_op_t *o, uint64_t idx, const so_bufs_t *b,
                       const uint64_t *counts, const uint64_t *displs)
{
    size_t es = zt_dtype_size(o->dtype);
    uint64_t ext = so_extent(counts, displs, SO_NRANKS);
    for (uint64_t x = 0; x < ext; x++) {
        int inside = 0;
        for (int q = 0; q < SO_NRANKS && !inside; q++) {
            inside = x >= displs[q] && x < displs[q] + counts[q];
        }
        if (!inside && !so_guard_ok(b->recv + x * es, es)) {
            fprintf(stderr, "[rank %d] op %" PRIu64 " %s: gap element %" PRIu64 " written\n",
                    R->env.rank, idx, so_names[o->coll], x);
            return 1;
        }
    }
    return 0;
}

/* Check one finished op; returns 0 or 1 (wrong result). */
static int so_check(so_rank_t *R, const so_op_t *o, uint64_t idx, const so_bufs_t *b)
{
    int me = R->env.rank;
    int n = SO_NRANKS;
    size_t es = zt_dtype_size(o->dtype);
    size_t c = o->count;
    zt_pat_t p = so_pat(o);
    int bad = 0;
    uint64_t zero[SO_NRANKS] = {0};
    uint64_t offs[SO_NRANKS];
    switch (o->coll) {
    case SO_AR:
        so_ref_reduce(R, o, zero, c, c);
        bad = so_cmp(R, o, idx, b->recv, c);
        break;
    case SO_AG:
        zt_ref_allgather(R->ref, c, &p);
        bad = so_cmp(R, o, idx, b->recv, c * (size_t)n);
        break;
    case SO_RS:
        for (int q = 0; q < n; q++) {
            offs[q] = (uint64_t)me * c;
        }
        so_ref_reduce(R, o, offs, c * (uint64_t)n, c);
        bad = so_cmp(R, o, idx, b->recv, c);
        break;
    case SO_BC:
        zt_fill(R->ref, 0, c, &p, o->root);
        bad = so_cmp(R, o, idx, b->recv, c);
        break;
    case SO_RED:
        if (me == o->root) {
            so_ref_reduce(R, o, zero, c, c);
            bad = so_cmp(R, o, idx, b->recv, c);
        } else if (b->separate && !so_guard_ok(b->recv, c * es)) {
            fprintf(stderr, "[rank %d] op %" PRIu64 " reduce: non-root receive buffer written\n",
                    me, idx);
            bad = 1;
        }
        break;
    case SO_SC:
        zt_fill(R->ref, (size_t)me * c, c, &p, o->root);
        bad = so_cmp(R, o, idx, b->recv, c);
        break;
    case SO_A2A:
        for (int q = 0; q < n; q++) {
            zt_fill(R->ref + (size_t)q * c * es, (size_t)me * c, c, &p, q);
        }
        bad = so_cmp(R, o, idx, b->recv, c * (size_t)n);
        break;
    case SO_A2AV:
        for (int q = 0; q < n && !bad; q++) {
            size_t k = o->m[q][me];
            zt_fill(R->ref, o->sd[q][me], k, &p, q);
            bad = so_cmp(R, o, idx, b->recv + o->rd[me][q] * es, k);
        }
        if (!bad) {
            uint64_t col[SO_NRANKS];
            for (int q = 0; q < n; q++) {
                col[q] = o->m[q][me];
            }
            bad = so_gaps_bad(R, o, idx, b, col, o->rd[me]);
        }
        break;
    case SO_AGV:
        for (int q = 0; q < n && !bad; q++) {
            size_t k = o->m[0][q];
            zt_fill(R->ref, 0, k, &p, q);
            bad = so_cmp(R, o, idx, b->recv + o->rd[0][q] * es, k);
        }
        bad = bad || so_gaps_bad(R, o, idx, b, o->m[0], o->rd[0]);
        break;
    case SO_RSV: {
        uint64_t ext = 0;
        for (int q = 0; q < n; q++) {
            offs[q] = o->sd[q][me];
            uint64_t x = so_extent(o->m[0], o->sd[q], n);
            ext = x > ext ? x : ext;
        }
        so_ref_reduce(R, o, offs, ext, o->m[0][me]);
        bad = so_cmp(R, o, idx, b->recv, o->m[0][me]);
        break;
    }
    case SO_P2P:
        zt_fill(R->ref, 0, c, &p, (me + n - o->shift) % n);
        bad = so_cmp(R, o, idx, b->recv, c);
        break;
    default:
        break;
    }
    return bad;
}

/* Guards, and inputs of out-of-place ops; returns 0 or 1. */
static int so_check_guards(so_rank_t *R, const so_op_t *o, uint64_t idx, const so_bufs_t *b)
{
    int me = R->env.rank;
    unsigned char *sreg = o->in_place && o->coll == SO_AG ? b->recv : b->send;
    size_t sbytes = o->in_place && o->coll == SO_AG ? b->rbytes : b->sbytes;
    int ok = so_guard_ok(sreg - SO_GUARD, SO_GUARD) && so_guard_ok(sreg + sbytes, SO_GUARD);
    if (b->separate) {
        ok = ok && so_guard_ok(b->recv - SO_GUARD, SO_GUARD) &&
             so_guard_ok(b->recv + b->rbytes, SO_GUARD);
    }
    if (ok && b->separate && o->coll != SO_BC) {
        uint64_t se = 0;
        uint64_t re = 0;
        so_elems(o, me, &se, &re);
        zt_pat_t p = so_pat(o);
        zt_fill(R->ref, 0, se, &p, me);
        ok = memcmp(R->ref, b->send, se * zt_dtype_size(o->dtype)) == 0;
        if (!ok) {
            fprintf(stderr, "[rank %d] op %" PRIu64 " %s: the input changed\n", me, idx,
                    so_names[o->coll]);
        }
    } else if (!ok) {
        fprintf(stderr, "[rank %d] op %" PRIu64 " %s: bytes next to a buffer changed\n", me, idx,
                so_names[o->coll]);
    }
    return !ok;
}

/* Add to *zc / *buf what this op adds to rank me's zero-copy / buffered op
 * counters: a collective counts once, zero-copy when every rank's buffers
 * are activated (an empty buffer counts as activated); each Send or Recv
 * item counts once, zero-copy when both ends' buffers are; a Barrier not. */
static void so_expect(const so_op_t *o, int me, int *zc, int *buf)
{
    int n = SO_NRANKS;
    if (o->coll == SO_BARRIER) {
        return;
    }
    if (o->coll == SO_P2P) {
        int to = (me + o->shift) % n;
        int from = (me + n - o->shift) % n;
        int empty = o->count == 0;
        int s = empty || (o->zc[me] && o->zc[to]);
        int r = empty || (o->zc[from] && o->zc[me]);
        *zc += s + r;
        *buf += 2 - s - r;
        return;
    }
    int all = 1;
    for (int q = 0; q < n; q++) {
        uint64_t se = 0;
        uint64_t re = 0;
        so_elems(o, q, &se, &re);
        all &= o->zc[q] || (se == 0 && re == 0);
    }
    *zc += all;
    *buf += !all;
}

/* ---- a rank ----------------------------------------------------------------------- */

static int so_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    so_result_t *res = arg;
    so_rank_t R;
    memset(&R, 0, sizeof(R));
    if (zt_env_open(&R.env, rank, nranks, root, NULL) != 0 ||
        zt_env_arena(&R.env, (size_t)SO_SLOTS * SO_SLOT) != 0) {
        return 1;
    }
    R.ref = malloc(SO_SLOT);
    for (int q = 0; q < SO_NRANKS; q++) {
        R.tmp[q] = malloc(SO_SLOT);
    }
    int fatal = R.ref == NULL;
    uint64_t t0 = (uint64_t)time(NULL);
    uint64_t idx = 0;
    uint64_t batch_no = 0;
    while (idx < SO_OPS && !fatal) {
        so_rng_t br = {zt_pattern(SO_SEED ^ 0xba7c4ULL, 0, batch_no)};
        so_rng_t mine = {zt_pattern(SO_SEED ^ 0x57eaULL, rank, batch_no++)};
        int nb = 1 + (int)so_below(&br, SO_SLOTS);
        aclrtStream st = so_below(&mine, 3) == 0 ? NULL : R.env.stream;
        so_op_t ops[SO_SLOTS];
        so_bufs_t bufs[SO_SLOTS];
        int expect_zc = 0;
        int expect_buf = 0;
        uint64_t zc0 = zccl_comm_zero_copy_ops(R.env.comm);
        uint64_t buf0 = zccl_comm_buffered_ops(R.env.comm);
        int issued = 0;
        for (int k = 0; k < nb && idx + (uint64_t)k < SO_OPS; k++) {
            so_gen(&ops[k], idx + (uint64_t)k);
            so_place(&R, &ops[k], k, &bufs[k]);
            so_prepare(&R, &ops[k], &bufs[k]);
            HcclResult h = so_issue(&R, &ops[k], &bufs[k], st);
            if (h != HCCL_SUCCESS) {
                fprintf(stderr, "[rank %d] op %" PRIu64 " %s: call returned %d\n", rank,
                        idx + (uint64_t)k, so_names[ops[k].coll], (int)h);
                fatal = 1;
                break;
            }
            so_expect(&ops[k], rank, &expect_zc, &expect_buf);
            issued++;
        }
        aclError e = aclrtSynchronizeStream(st);
        if (e != ACL_SUCCESS) {
            fprintf(stderr, "[rank %d] batch at op %" PRIu64 ": sync returned %d\n", rank, idx,
                    (int)e);
            fatal = 1;
        }
        for (int k = 0; k < issued && !fatal; k++) {
            R.wrong += so_check(&R, &ops[k], idx + (uint64_t)k, &bufs[k]);
            R.guard += so_check_guards(&R, &ops[k], idx + (uint64_t)k, &bufs[k]);
            R.by_coll[ops[k].coll]++;
        }
        uint64_t dz = zccl_comm_zero_copy_ops(R.env.comm) - zc0;
        uint64_t db = zccl_comm_buffered_ops(R.env.comm) - buf0;
        if (!fatal && (dz != (uint64_t)expect_zc || db != (uint64_t)expect_buf)) {
            if (R.path < 10) {
                fprintf(stderr,
                        "[rank %d] batch at op %" PRIu64 ": %" PRIu64 " zero-copy and %" PRIu64
                        " buffered ops, want %d and %d\n",
                        rank, idx, dz, db, expect_zc, expect_buf);
            }
            R.path++;
        }
        idx += (uint64_t)issued;
    }
    res->wrong[rank] = R.wrong;
    res->path[rank] = R.path;
    res->guard[rank] = R.guard;
    if (rank == 0) {
        memcpy(res->by_coll, R.by_coll, sizeof(res->by_coll));
        res->ops = (long)idx;
        res->secs = (double)((uint64_t)time(NULL) - t0);
    }
    free(R.ref);
    for (int q = 0; q < SO_NRANKS; q++) {
        free(R.tmp[q]);
    }
    int close_failed = zt_env_close(&R.env) != 0;
    return fatal || close_failed || R.wrong != 0 || R.path != 0 || R.guard != 0;
}

static void test_soak(void **state)
{
    (void)state;
    so_result_t *res =
        mmap(NULL, sizeof(*res), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(res != MAP_FAILED);
    memset(res, 0, sizeof(*res));
    int failed = zt_launch_procs(SO_NRANKS, so_rank, res, SO_TIMEOUT_S);
    long wrong = 0;
    long path = 0;
    long guard = 0;
    for (int r = 0; r < SO_NRANKS; r++) {
        wrong += res->wrong[r];
        path += res->path[r];
        guard += res->guard[r];
    }
    printf("soak np=%d seed 0x%llx: %ld ops in ~%.0f s, %ld wrong results, %ld path mismatches, "
           "%ld guard/input violations (sums over ranks)\n",
           SO_NRANKS, (unsigned long long)SO_SEED, res->ops, res->secs, wrong, path, guard);
    for (int c = 0; c < SO_NCOLL; c++) {
        printf("  %-15s %6ld\n", so_names[c], res->by_coll[c]);
    }
    fflush(stdout);
    long ops = res->ops;
    munmap(res, sizeof(*res));
    assert_int_equal(failed, 0);
    assert_int_equal(ops, SO_OPS);
    assert_int_equal(wrong, 0);
    assert_int_equal(path, 0);
    assert_int_equal(guard, 0);
}

int main(void)
{
    setenv("HCCL_BUFFSIZE", "1", 0);
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_soak)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
