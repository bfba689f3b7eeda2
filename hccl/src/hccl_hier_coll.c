/*
 * The hierarchical algorithms over the host level (hccl_hier.h). Local steps
 * run on the local comm (zero-copy when the buffers are activated); the
 * inter-host steps move only what must cross, on UCX tags named by
 * (op seq, sender, step).
 *
 * AllReduce: my host's count elements are cut into one slice per local
 * rank. (1) local ReduceScatterV: local rank l gets its host's partial of
 * slice l, in place in its recv buffer; (2) every local rank at once
 * exchanges its slice with the ranks of the other hosts whose slices
 * overlap it, in chunks of ZCCL_NET_CHUNK bytes, and reduces each chunk as
 * soon as every host's copy is in, host partials in host order; (3) local
 * AllGatherV in place. Each host sends (hosts - 1) x count elements.
 * AllGather: my block goes straight to every rank of the other hosts; the
 * local part is a local AllGatherV into the global slots.
 * Broadcast: the root sends once to one rank of each other host (its
 * first), which broadcasts locally; the root's host broadcasts locally.
 * Reduce: local Reduce to each host's delegate (the root on its host, the
 * first rank elsewhere), delegates send their partials to the root, which
 * combines them in host order.
 * ReduceScatter: a local ReduceScatterV for my own block, the raw blocks of
 * the other hosts' ranks, combined in rank order.
 * Scatter, AlltoAll(V): remote blocks go straight to their rank; the
 * local part is a local AlltoAllV with the global displacements.
 * Barrier: local barrier, delegates exchange empty messages, local barrier.
 */
#include "hccl_hier.h"

#include <stdlib.h>
#include <string.h>

#include "zc/export.h"
#include "zc/log.h"

#define ZH_LV(x) (&(x)->h->level[ZH_LEVEL_HOST])

/* A growable list of requests. */
typedef struct {
    zh_net_req_t *r;
    int n;
    int cap;
} zh_reqs_t;

static zh_net_req_t *zh_reqs_add(zh_reqs_t *q)
{
    if (q->n == q->cap) {
        int cap = q->cap == 0 ? 16 : 2 * q->cap;
        zh_net_req_t *nr = realloc(q->r, sizeof(*nr) * (size_t)cap);
        if (nr == NULL) {
            return NULL;
        }
        q->r = nr;
        q->cap = cap;
    }
    return &q->r[q->n++];
}

static int zh_post(zh_hop_t *x, zh_reqs_t *q, int send, int peer, uint32_t step, void *buf,
                   size_t bytes)
{
    zh_net_req_t *r = zh_reqs_add(q);
    if (r == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory for transfer requests", x->c->rank);
        return ZC_ERR_NOMEM;
    }
    if (send) {
        atomic_fetch_add_explicit(&x->h->net_bytes, bytes, memory_order_relaxed);
        return zh_net_isend(x->h->net, peer, ZH_TAG_COLL(x->seq, x->c->rank, step), buf, bytes, r);
    }
    return zh_net_irecv(x->h->net, peer, ZH_TAG_COLL(x->seq, peer, step), buf, bytes, r);
}

/* Wait for all of q (cancelling the rest on error) and free it. */
static int zh_reqs_finish(zh_hop_t *x, zh_reqs_t *q, int st)
{
    if (st == ZC_OK) {
        st = zh_hier_wait(x, q->r, q->n);
    } else {
        zh_net_cancel(x->h->net, q->r, q->n);
    }
    free(q->r);
    q->r = NULL;
    q->n = q->cap = 0;
    return st;
}

static char *zh_at(const void *base, uint64_t elems, size_t sz)
{
    return (char *)(uintptr_t)base + elems * sz;
}

/* Element range of local rank l's slice of count on a host of n ranks. */
static void zh_slice(uint64_t count, int n, int l, uint64_t *lo, uint64_t *hi)
{
    *lo = count * (uint64_t)l / (uint64_t)n;
    *hi = count * (uint64_t)(l + 1) / (uint64_t)n;
}

/* ---- AllReduce and ReduceScatter -------------------------------------------------------- */

/* Step 2 of AllReduce on my slice [lo, hi) of out: post every chunk's
 * receives and sends (grouped by chunk), then reduce chunk by chunk. A chunk
 * is reduced in place only once its own sends are done: they read it. */
static int zh_allreduce_net(zh_hop_t *x, char *out, uint64_t count, uint64_t lo, uint64_t hi)
{
    zh_level_t *lv = ZH_LV(x);
    int nh = lv->ngroups;
    size_t sz = x->sz;
    uint64_t len = hi - lo;
    uint64_t ce = ZC_MAX(x->h->chunk / sz, 1u); /* elements per chunk */
    char *tmp = zh_hier_scratch(x->h, (size_t)(len * sz * (uint64_t)(nh - 1)) + 1);
    uint64_t k0 = lo / ce;
    uint64_t nk = len == 0 ? 0 : (hi - 1) / ce - k0 + 1;
    /* requests of chunk k: [first[k], first[k + 1]) of q, receives before sends */
    int *first = calloc((size_t)nk + 1, sizeof(int));
    const void **src = calloc((size_t)nh, sizeof(void *));
    zh_reqs_t q = {0};
    int st = tmp == NULL || first == NULL || src == NULL ? ZC_ERR_NOMEM : ZC_OK;
    for (uint64_t k = 0; k < nk && st == ZC_OK; k++) {
        uint64_t a0 = ZC_MAX((k0 + k) * ce, lo);
        uint64_t b0 = ZC_MIN((k0 + k + 1) * ce, hi);
        first[k] = q.n;
        for (int g = 0; g < nh && st == ZC_OK; g++) {
            int slot = g < lv->group ? g : g - 1;
            for (int i = 0; g != lv->group && i < zh_host_size(x->h, g) && st == ZC_OK; i++) {
                uint64_t plo;
                uint64_t phi;
                zh_slice(count, zh_host_size(x->h, g), i, &plo, &phi);
                uint64_t a = ZC_MAX(a0, plo);
                uint64_t b = ZC_MIN(b0, phi);
                int peer = zh_host_member(x->h, g, i);
                if (a < b) {
                    char *dst = tmp + ((uint64_t)slot * len + (a - lo)) * sz;
                    st = zh_post(x, &q, 0, peer, (uint32_t)(a / ce), dst, (b - a) * sz);
                    st = st == ZC_OK ? zh_post(x, &q, 1, peer, (uint32_t)(a / ce),
                                               zh_at(out, a, sz), (b - a) * sz)
                                     : st;
                }
            }
        }
    }
    if (st == ZC_OK) {
        first[nk] = q.n;
    } else if (tmp == NULL || first == NULL || src == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory for the inter-host phase", x->c->rank);
    }
    for (uint64_t k = 0; k < nk && st == ZC_OK; k++) {
        uint64_t a = ZC_MAX((k0 + k) * ce, lo);
        uint64_t b = ZC_MIN((k0 + k + 1) * ce, hi);
        st = zh_hier_wait(x, q.r + first[k], first[k + 1] - first[k]);
        for (int g = 0; g < nh && st == ZC_OK; g++) {
            int slot = g < lv->group ? g : g - 1;
            src[g] = g == lv->group ? (const void *)(out + a * sz)
                                    : (const void *)(tmp + ((uint64_t)slot * len + a - lo) * sz);
        }
        if (st == ZC_OK) {
            coll_reduce_n(out + a * sz, src, nh, b - a, x->op->dtype, x->op->redop);
        }
    }
    free(src);
    free(first);
    return zh_reqs_finish(x, &q, st);
}

/* AllReduce of count elements from send into out (out may be send). */
static int zh_allreduce(zh_hop_t *x, const void *send, void *out, uint64_t count)
{
    zh_comm_t *l = x->h->local;
    int nl = l->nranks;
    uint64_t lo;
    uint64_t hi;
    zh_slice(count, nl, l->rank, &lo, &hi);
    uint64_t *v = calloc(2 * (size_t)nl, sizeof(uint64_t));
    if (v == NULL) {
        return ZC_ERR_NOMEM;
    }
    for (int i = 0; i < nl; i++) {
        uint64_t a;
        uint64_t b;
        zh_slice(count, nl, i, &a, &b);
        v[i] = b - a;
        v[nl + i] = a;
    }
    size_t sz = x->sz;
    int st = ZC_OK;
    if (nl > 1) {
        zh_op_t rs = {ZH_OP_REDUCESCATTERV,
                      x->op->dtype,
                      x->op->redop,
                      0,
                      hi - lo,
                      send,
                      zh_at(out, lo, sz),
                      count * sz,
                      (hi - lo) * sz,
                      {v, v + nl, NULL, NULL}};
        st = zh_hier_local(x, &rs);
    } else if (send != out) {
        memcpy(out, send, count * sz);
    }
    if (st == ZC_OK) {
        st = zh_allreduce_net(x, zh_at(out, 0, sz), count, lo, hi);
    }
    if (st == ZC_OK && nl > 1) {
        zh_op_t ag = {ZH_OP_ALLGATHERV, x->op->dtype,           0,   0,
                      hi - lo,          zh_at(out, lo, sz),     out, (hi - lo) * sz,
                      count * sz,       {NULL, NULL, v, v + nl}};
        st = zh_hier_local(x, &ag);
    }
    free(v);
    return st;
}

/* Does [a, +na) overlap [b, +nb)? */
static int zh_overlap(const void *a, size_t na, const void *b, size_t nb)
{
    return na > 0 && nb > 0 && (const char *)a < (const char *)b + nb &&
           (const char *)b < (const char *)a + na;
}

/* The last step of ReduceScatter: recv holds my host's partial of my block,
 * tmp the raw blocks of mine from the ranks of other hosts (rank order,
 * blocks of bytes). Each other host's partial is its blocks in rank order
 * (stored in the dtype, in place over its first block), then the partials
 * combine in host order: the order of AllReduce, the same on every rank. */
static int zh_rs_combine(zh_hop_t *x, char *tmp, const void **src)
{
    zh_level_t *lv = ZH_LV(x);
    const zh_op_t *op = x->op;
    size_t bytes = op->count * x->sz;
    const void **part = calloc((size_t)lv->ngroups, sizeof(void *));
    if (part == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory combining host partials", x->c->rank);
        return ZC_ERR_NOMEM;
    }
    for (int g = 0, k = 0; g < lv->ngroups; g++) {
        int ng = zh_host_size(x->h, g);
        if (g == lv->group) {
            part[g] = op->recv;
            continue;
        }
        for (int i = 0; i < ng; i++) {
            src[i] = tmp + bytes * (size_t)(k + i);
        }
        if (ng > 1) {
            coll_reduce_n((void *)(uintptr_t)src[0], src, ng, op->count, op->dtype, op->redop);
        }
        part[g] = src[0];
        k += ng;
    }
    coll_reduce_n(op->recv, part, lv->ngroups, op->count, op->dtype, op->redop);
    free(part);
    return ZC_OK;
}

/* ReduceScatter: a local ReduceScatterV gives each local rank its host's
 * partial of its own block, in place in its recv (zero-copy on activated
 * memory); the ranks of other hosts send me their block of mine as it is;
 * I combine them as AllReduce does (zh_rs_combine). Each rank sends
 * count x (ranks on other hosts) elements. */
static int zh_reducescatter(zh_hop_t *x)
{
    zh_comm_t *c = x->c;
    zh_comm_t *l = x->h->local;
    zh_level_t *lv = ZH_LV(x);
    const zh_op_t *op = x->op;
    size_t bytes = op->count * x->sz;
    int n = c->nranks;
    int nrem = n - l->nranks;
    uint64_t *sv = calloc(2 * (size_t)n, sizeof(uint64_t));
    if (sv == NULL) {
        return ZC_ERR_NOMEM;
    }
    for (int r = 0; r < n; r++) {
        sv[r] = op->count;
        sv[n + r] = (uint64_t)r * op->count;
    }
    const uint64_t *sc = op->kind == ZH_OP_REDUCESCATTERV ? op->v[ZH_V_SEND_COUNTS] : sv;
    const uint64_t *sd = op->kind == ZH_OP_REDUCESCATTERV ? op->v[ZH_V_SEND_DISPLS] : sv + n;
    const char *send = op->send;
    char *copy = NULL;
    if (zh_overlap(op->recv, bytes, send, op->send_bytes) &&
        op->recv != send + sd[c->rank] * x->sz) {
        copy = malloc(op->send_bytes + 1); /* sends must not read what the local step writes */
        if (copy != NULL) {
            memcpy(copy, send, op->send_bytes);
        }
        send = copy;
    }
    char *tmp = zh_hier_scratch(x->h, bytes * (size_t)nrem + 1);
    uint64_t *v = calloc(2 * (size_t)l->nranks, sizeof(uint64_t));
    const void **src = calloc((size_t)nrem + 1, sizeof(void *));
    int st = tmp == NULL || v == NULL || src == NULL || send == NULL ? ZC_ERR_NOMEM : ZC_OK;
    zh_reqs_t q = {0};
    /* the raw blocks land host by host, members in rank order */
    for (int g = 0, k = 0; g < lv->ngroups && st == ZC_OK; g++) {
        for (int i = 0; g != lv->group && i < zh_host_size(x->h, g) && st == ZC_OK; i++) {
            int r = zh_host_member(x->h, g, i);
            st = zh_post(x, &q, 0, r, 0, tmp + bytes * (size_t)k++, bytes);
            st = st == ZC_OK
                     ? zh_post(x, &q, 1, r, 0, (void *)(send + sd[r] * x->sz), sc[r] * x->sz)
                     : st;
        }
    }
    if (st == ZC_OK && l->nranks > 1) {
        for (int i = 0; i < l->nranks; i++) {
            v[i] = sc[zh_host_member(x->h, lv->group, i)];
            v[l->nranks + i] = sd[zh_host_member(x->h, lv->group, i)];
        }
        zh_op_t rs = {ZH_OP_REDUCESCATTERV,
                      op->dtype,
                      op->redop,
                      0,
                      op->count,
                      op->send,
                      op->recv,
                      op->send_bytes,
                      bytes,
                      {v, v + l->nranks, NULL, NULL}};
        st = zh_hier_local(x, &rs);
    } else if (st == ZC_OK) {
        memmove(op->recv, (const char *)op->send + sd[c->rank] * x->sz, bytes);
    }
    st = zh_reqs_finish(x, &q, st);
    if (st == ZC_OK) {
        st = zh_rs_combine(x, tmp, src);
    }
    free(src);
    free(v);
    free(sv);
    free(copy);
    return st;
}

/* ---- rooted ones ---------------------------------------------------------------------- */

/* The rank of host g that stands for it towards root. */
static int zh_delegate(zh_hop_t *x, int g, int root)
{
    return g == ZH_LV(x)->group_of[root] ? root : zh_host_member(x->h, g, 0);
}

static int zh_broadcast(zh_hop_t *x)
{
    zh_level_t *lv = ZH_LV(x);
    int root = x->op->root;
    int me = x->c->rank;
    size_t bytes = x->op->count * x->sz;
    void *buf = x->op->recv;
    zh_reqs_t q = {0};
    int st = ZC_OK;
    if (me == root) {
        for (int g = 0; g < lv->ngroups && st == ZC_OK; g++) {
            if (g != lv->group) {
                st = zh_post(x, &q, 1, zh_delegate(x, g, root), 0, buf, bytes);
            }
        }
    } else if (lv->group != lv->group_of[root] && me == zh_delegate(x, lv->group, root)) {
        st = zh_post(x, &q, 0, root, 0, buf, bytes);
    }
    st = zh_reqs_finish(x, &q, st);
    if (st == ZC_OK && x->h->local->nranks > 1) {
        zh_op_t b = *x->op;
        b.root = lv->index_of[zh_delegate(x, lv->group, root)];
        st = zh_hier_local(x, &b);
    }
    return st;
}

static int zh_reduce(zh_hop_t *x)
{
    zh_level_t *lv = ZH_LV(x);
    int root = x->op->root;
    int me = x->c->rank;
    int nh = lv->ngroups;
    size_t bytes = x->op->count * x->sz;
    int dlg = zh_delegate(x, lv->group, root);
    char *tmp = NULL;
    if (me == root || me == dlg) {
        tmp = zh_hier_scratch(x->h, bytes * (size_t)nh + 1);
        if (tmp == NULL) {
            return ZC_ERR_NOMEM;
        }
    }
    /* my host's partial: at the root in its recv, at another delegate in tmp */
    const void *part = x->op->send;
    int st = ZC_OK;
    if (x->h->local->nranks > 1) {
        void *dst = me == root ? x->op->recv : me == dlg ? (void *)tmp : NULL;
        zh_op_t r = *x->op;
        r.root = lv->index_of[dlg];
        r.recv = dst;
        r.recv_bytes = dst != NULL ? bytes : 0;
        st = zh_hier_local(x, &r);
        part = dst;
    }
    zh_reqs_t q = {0};
    if (st == ZC_OK && me == dlg && me != root) {
        st = zh_post(x, &q, 1, root, 0, (void *)(uintptr_t)part, bytes);
    }
    const void **src = me == root ? calloc((size_t)nh, sizeof(void *)) : NULL;
    st = st == ZC_OK && me == root && src == NULL ? ZC_ERR_NOMEM : st;
    for (int g = 0; g < nh && st == ZC_OK && me == root; g++) {
        src[g] = g == lv->group ? part : tmp + bytes * (size_t)g;
        if (g != lv->group) {
            st = zh_post(x, &q, 0, zh_delegate(x, g, root), 0, tmp + bytes * (size_t)g, bytes);
        }
    }
    st = zh_reqs_finish(x, &q, st);
    if (st == ZC_OK && me == root) {
        coll_reduce_n(x->op->recv, src, nh, x->op->count, x->op->dtype, x->op->redop);
    }
    free(src);
    return st;
}

/* ---- copies ------------------------------------------------------------------------------ */

/* AllGather(V): post the receives of the other hosts' blocks. */
static int zh_ag_recvs(zh_hop_t *x, zh_reqs_t *q, const uint64_t *rc, const uint64_t *rd)
{
    int st = ZC_OK;
    for (int r = 0; r < x->c->nranks && st == ZC_OK; r++) {
        if (x->h->remote[r]) {
            st = zh_post(x, q, 0, r, 0, zh_at(x->op->recv, rd[r], x->sz), rc[r] * x->sz);
        }
    }
    return st;
}

/* AllGather(V): my block goes to every rank of the other hosts, theirs land
 * at their displacement; my host's blocks through a local AllGatherV. */
static int zh_allgather(zh_hop_t *x)
{
    zh_comm_t *l = x->h->local;
    zh_level_t *lv = ZH_LV(x);
    const zh_op_t *op = x->op;
    int n = x->c->nranks;
    int me = x->c->rank;
    size_t sz = x->sz;
    uint64_t *v = calloc(2 * (size_t)n, sizeof(uint64_t));
    if (v == NULL) {
        return ZC_ERR_NOMEM;
    }
    const uint64_t *rc = op->kind == ZH_OP_ALLGATHERV ? op->v[ZH_V_RECV_COUNTS] : v;
    const uint64_t *rd = op->kind == ZH_OP_ALLGATHERV ? op->v[ZH_V_RECV_DISPLS] : v + n;
    for (int r = 0; r < n; r++) {
        v[r] = op->count;
        v[n + r] = (uint64_t)r * op->count;
    }
    size_t bytes = op->count * sz;
    const void *send = op->send;
    char *copy = NULL;
    if (zh_overlap(send, bytes, op->recv, op->recv_bytes) && send != zh_at(op->recv, rd[me], sz)) {
        copy = malloc(bytes + 1); /* remote blocks may land on it before it is sent */
        if (copy != NULL) {
            memcpy(copy, send, bytes);
        }
        send = copy;
    }
    zh_reqs_t q = {0};
    int st = send == NULL && bytes > 0 ? ZC_ERR_NOMEM : ZC_OK;
    for (int r = 0; r < n && st == ZC_OK; r++) {
        if (x->h->remote[r]) {
            st = zh_post(x, &q, 1, r, 0, (void *)(uintptr_t)send, bytes);
        }
    }
    /* With my block copied, the local step still reads it where it is:
     * the receives, which may land on it, wait for the local step. */
    st = st == ZC_OK && copy == NULL ? zh_ag_recvs(x, &q, rc, rd) : st;
    int nl = l->nranks;
    uint64_t *lv2 = st == ZC_OK && nl > 1 ? calloc(2 * (size_t)nl, sizeof(uint64_t)) : NULL;
    st = st == ZC_OK && nl > 1 && lv2 == NULL ? ZC_ERR_NOMEM : st;
    if (st == ZC_OK && nl > 1) {
        for (int i = 0; i < nl; i++) {
            lv2[i] = rc[zh_host_member(x->h, lv->group, i)];
            lv2[nl + i] = rd[zh_host_member(x->h, lv->group, i)];
        }
        zh_op_t ag = {ZH_OP_ALLGATHERV,
                      op->dtype,
                      0,
                      0,
                      op->count,
                      op->send,
                      op->recv,
                      bytes,
                      op->recv_bytes,
                      {NULL, NULL, lv2, lv2 + nl}};
        st = zh_hier_local(x, &ag);
    } else if (st == ZC_OK && op->send != zh_at(op->recv, rd[me], sz)) {
        memmove(zh_at(op->recv, rd[me], sz), op->send, bytes);
    }
    st = st == ZC_OK && copy != NULL ? zh_ag_recvs(x, &q, rc, rd) : st;
    free(lv2);
    free(copy);
    free(v);
    return zh_reqs_finish(x, &q, st);
}

/* The receives (recv = 1) or the sends of an AlltoAllV's remote pairs. */
static int zh_a2a_post(zh_hop_t *x, zh_reqs_t *q, int recv, const void *rsend, const uint64_t *c,
                       const uint64_t *d)
{
    int st = ZC_OK;
    for (int r = 0; r < x->c->nranks && st == ZC_OK; r++) {
        if (x->h->remote[r] && c[r] > 0) {
            void *at = zh_at(recv ? x->op->recv : rsend, d[r], x->sz);
            st = zh_post(x, q, !recv, r, 0, at, c[r] * x->sz);
        }
    }
    return st;
}

/* AlltoAllV with global arrays sc/sd/rc/rd (elements): remote pairs on UCX
 * (sends read rsend), local pairs in a local AlltoAllV (reading op->send).
 * late: receives from other hosts are posted only after the local step (a
 * block they land on is read by it). A Scatter has only the root send. */
static int zh_alltoallv(zh_hop_t *x, const void *rsend, int late, const uint64_t *sc,
                        const uint64_t *sd, const uint64_t *rc, const uint64_t *rd)
{
    zh_comm_t *l = x->h->local;
    zh_level_t *lv = ZH_LV(x);
    size_t sz = x->sz;
    zh_reqs_t q = {0};
    int st = zh_a2a_post(x, &q, 0, rsend, sc, sd);
    st = st == ZC_OK && !late ? zh_a2a_post(x, &q, 1, NULL, rc, rd) : st;
    int nl = l->nranks;
    uint64_t *v = st == ZC_OK ? calloc(4 * (size_t)nl, sizeof(uint64_t)) : NULL;
    st = st == ZC_OK && v == NULL ? ZC_ERR_NOMEM : st;
    uint64_t sb = 0;
    uint64_t rb = 0;
    for (int i = 0; st == ZC_OK && i < nl; i++) {
        int g = zh_host_member(x->h, lv->group, i);
        v[i] = sc[g];
        v[nl + i] = sd[g];
        v[2 * nl + i] = rc[g];
        v[3 * nl + i] = rd[g];
        /* empty blocks reach nothing (a Scatter's non-root may pass NULL) */
        sb = sc[g] > 0 ? ZC_MAX(sb, (sd[g] + sc[g]) * sz) : sb;
        rb = rc[g] > 0 ? ZC_MAX(rb, (rd[g] + rc[g]) * sz) : rb;
    }
    if (st == ZC_OK) {
        zh_op_t a = {ZH_OP_ALLTOALLV, x->op->dtype, 0,  0,  0,
                     x->op->send,     x->op->recv,  sb, rb, {v, v + nl, v + 2 * nl, v + 3 * nl}};
        st = zh_hier_local(x, &a);
    }
    st = st == ZC_OK && late ? zh_a2a_post(x, &q, 1, NULL, rc, rd) : st;
    free(v);
    return zh_reqs_finish(x, &q, st);
}

/* In place (a block bound for another host overlaps recv, which receives
 * may overwrite before it is sent): every block bound for another host goes
 * from a copy (*copy, send_bytes large; the rest of it unused); the local
 * step reads send as it is (in place, zero-copy). *late when a receive from
 * another host lands on a block my host still reads. ZC_OK or ZC_ERR_NOMEM. */
static int zh_copy_sources(zh_hop_t *x, const uint64_t *sc, const uint64_t *sd, const uint64_t *rc,
                           const uint64_t *rd, char **copy, int *late)
{
    const zh_op_t *op = x->op;
    size_t sz = x->sz;
    *copy = NULL;
    *late = 0;
    if (!zh_overlap(op->send, op->send_bytes, op->recv, op->recv_bytes)) {
        return ZC_OK;
    }
    int need = 0;
    for (int r = 0; r < x->c->nranks; r++) {
        const char *blk = zh_at(op->send, sd[r], sz);
        need |= x->h->remote[r] && zh_overlap(blk, sc[r] * sz, op->recv, op->recv_bytes);
        for (int i = 0; !x->h->remote[r] && i < x->c->nranks; i++) {
            *late |= x->h->remote[i] &&
                     zh_overlap(blk, sc[r] * sz, zh_at(op->recv, rd[i], sz), rc[i] * sz);
        }
    }
    *copy = need ? malloc(op->send_bytes) : NULL;
    if (need && *copy == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory copying %llu bytes in place", x->c->rank,
                (unsigned long long)op->send_bytes);
        return ZC_ERR_NOMEM;
    }
    for (int r = 0; r < x->c->nranks && need; r++) {
        if (x->h->remote[r] && sc[r] > 0) {
            memcpy(*copy + sd[r] * sz, zh_at(op->send, sd[r], sz), sc[r] * sz);
        }
    }
    return ZC_OK;
}

/* The V arrays of AlltoAll and Scatter in global terms, then zh_alltoallv. */
static int zh_copy_op(zh_hop_t *x)
{
    int n = x->c->nranks;
    const zh_op_t *op = x->op;
    uint64_t *v = calloc(4 * (size_t)n, sizeof(uint64_t));
    if (v == NULL) {
        return ZC_ERR_NOMEM;
    }
    for (int r = 0; r < n; r++) {
        int scatter = op->kind == ZH_OP_SCATTER;
        int sends = !scatter || x->c->rank == op->root;
        v[r] = sends ? op->count : 0;
        v[n + r] = (uint64_t)r * op->count;
        v[2 * n + r] = !scatter ? op->count : r == op->root ? op->count : 0;
        v[3 * n + r] = scatter ? 0 : (uint64_t)r * op->count;
    }
    const uint64_t *sc = op->kind == ZH_OP_ALLTOALLV ? op->v[ZH_V_SEND_COUNTS] : v;
    const uint64_t *sd = op->kind == ZH_OP_ALLTOALLV ? op->v[ZH_V_SEND_DISPLS] : v + n;
    const uint64_t *rc = op->kind == ZH_OP_ALLTOALLV ? op->v[ZH_V_RECV_COUNTS] : v + 2 * n;
    const uint64_t *rd = op->kind == ZH_OP_ALLTOALLV ? op->v[ZH_V_RECV_DISPLS] : v + 3 * n;
    char *copy = NULL;
    int late = 0;
    int st = zh_copy_sources(x, sc, sd, rc, rd, &copy, &late);
    if (st == ZC_OK) {
        st = zh_alltoallv(x, copy != NULL ? copy : op->send, late, sc, sd, rc, rd);
    }
    free(copy);
    free(v);
    return st;
}

static int zh_barrier_op(zh_hop_t *x)
{
    zh_level_t *lv = ZH_LV(x);
    zh_op_t b = {.kind = ZH_OP_BARRIER, .dtype = HCCL_DATA_TYPE_INT8};
    int st = x->h->local->nranks > 1 ? zh_hier_local(x, &b) : ZC_OK;
    int me = x->c->rank;
    zh_reqs_t q = {0};
    static char none;
    for (int g = 0; g < lv->ngroups && st == ZC_OK && me == zh_host_member(x->h, lv->group, 0);
         g++) {
        if (g != lv->group) {
            st = zh_post(x, &q, 0, zh_host_member(x->h, g, 0), 0, &none, 0);
            st = st == ZC_OK ? zh_post(x, &q, 1, zh_host_member(x->h, g, 0), 0, &none, 0) : st;
        }
    }
    st = zh_reqs_finish(x, &q, st);
    if (st == ZC_OK && x->h->local->nranks > 1) {
        st = zh_hier_local(x, &b);
    }
    return st;
}

int zh_hier_run(zh_hop_t *x)
{
    atomic_fetch_add_explicit(&x->h->net_ops, 1, memory_order_relaxed);
    switch (x->op->kind) {
    case ZH_OP_BARRIER:
        return zh_barrier_op(x);
    case ZH_OP_ALLREDUCE:
        return zh_allreduce(x, x->op->send, x->op->recv, x->op->count);
    case ZH_OP_REDUCESCATTER:
    case ZH_OP_REDUCESCATTERV:
        return zh_reducescatter(x);
    case ZH_OP_BROADCAST:
        return zh_broadcast(x);
    case ZH_OP_REDUCE:
        return zh_reduce(x);
    case ZH_OP_ALLGATHER:
    case ZH_OP_ALLGATHERV:
        return zh_allgather(x);
    case ZH_OP_SCATTER:
    case ZH_OP_ALLTOALL:
    case ZH_OP_ALLTOALLV:
        return zh_copy_op(x);
    default:
        ZC_WARN(ZC_SUB_COLL, "rank %d: %s is not supported across hosts", x->c->rank,
                zh_op_name(x->op->kind));
        return ZC_ERR_NOT_SUPPORT;
    }
}

/* ---- point-to-point ---------------------------------------------------------------------- */

int zh_hier_p2p(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n, const uint32_t *seqs)
{
    zh_hier_t *h = c->hier;
    zh_level_t *lv = &h->level[ZH_LEVEL_HOST];
    zh_hop_t x = {c, h, NULL, 0, 1};
    HcclSendRecvItem *loc = malloc(sizeof(*loc) * n);
    zh_reqs_t q = {0};
    uint32_t nloc = 0;
    uint64_t staged = 0; /* sent to other hosts from memory that is not activated */
    uint64_t local0 = atomic_load_explicit(&h->local->staged_bytes, memory_order_relaxed);
    int st = loc == NULL ? ZC_ERR_NOMEM : ZC_OK;
    for (uint32_t i = 0; i < n && st == ZC_OK; i++) {
        const HcclSendRecvItem *it = &items[i];
        int peer = (int)it->remoteRank;
        size_t bytes = it->count * coll_dtype_size(it->dataType);
        if (!h->remote[peer]) {
            loc[nloc] = *it;
            loc[nloc++].remoteRank = (uint32_t)lv->index_of[peer];
            continue;
        }
        zh_net_req_t *r = zh_reqs_add(&q);
        if (r == NULL) {
            st = ZC_ERR_NOMEM;
        } else if (it->sendRecvType == HCCL_SEND) {
            atomic_fetch_add_explicit(&h->net_bytes, bytes, memory_order_relaxed);
            staged +=
                zh_mem_local_covers(h->local, (uint64_t)(uintptr_t)it->buf, bytes) ? 0 : bytes;
            st = zh_net_isend(h->net, peer, ZH_TAG_P2P(seqs[i], c->rank), it->buf, bytes, r);
        } else {
            st = zh_net_irecv(h->net, peer, ZH_TAG_P2P(seqs[i], peer), it->buf, bytes, r);
        }
    }
    if (st == ZC_OK && nloc > 0) {
        HcclResult r = zh_p2p_run_now(h->local, loc, nloc);
        st = r == HCCL_SUCCESS ? ZC_OK : r == HCCL_E_PARA ? ZC_ERR_INVAL : ZC_ERR_REMOTE;
    }
    free(loc);
    st = zh_reqs_finish(&x, &q, st);
    /* Counted as on one host: the local items' staging plus the copies UCX
     * makes of unregistered memory. */
    staged += atomic_load_explicit(&h->local->staged_bytes, memory_order_relaxed) - local0;
    atomic_fetch_add_explicit(&c->staged_bytes, staged, memory_order_relaxed);
    return st;
}
