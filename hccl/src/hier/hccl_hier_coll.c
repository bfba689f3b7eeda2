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
 * Broadcast: the root sends once to one rank of each other host (its
 * first), which broadcasts locally; the root's host broadcasts locally.
 * Reduce: local Reduce to each host's delegate (the root on its host, the
 * first rank elsewhere), delegates send their partials to the root, which
 * combines them in host order.
 * ReduceScatter: a local ReduceScatterV for my own block, the raw blocks of
 * the other hosts' ranks, each host's combined in rank order, then the host
 * partials in host order (AllReduce's order).
 * The copies (AllGather, Scatter, AlltoAll) are hccl_hier_copy.c.
 * Barrier: local barrier, delegates exchange empty messages, local barrier.
 */
#include "hier/hccl_hier.h"

#include <stdlib.h>
#include <string.h>

#include "zc/export.h"
#include "zc/log.h"

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
    const zh_level_t *lv = ZH_LV(x);
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
    zh_hier_reqs_t q = {0};
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
                    st = zh_hier_post(x, &q, 0, peer, (uint32_t)(a / ce), dst, (b - a) * sz);
                    st = st == ZC_OK ? zh_hier_post(x, &q, 1, peer, (uint32_t)(a / ce),
                                                    zh_hier_at(out, a, sz), (b - a) * sz)
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
    return zh_hier_reqs_finish(x, &q, st);
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
                      zh_hier_at(out, lo, sz),
                      count * sz,
                      (hi - lo) * sz,
                      {v, v + nl, NULL, NULL}};
        st = zh_hier_local(x, &rs);
    } else if (send != out) {
        memcpy(out, send, count * sz);
    }
    if (st == ZC_OK) {
        st = zh_allreduce_net(x, zh_hier_at(out, 0, sz), count, lo, hi);
    }
    if (st == ZC_OK && nl > 1) {
        zh_op_t ag = {ZH_OP_ALLGATHERV,
                      x->op->dtype,
                      0,
                      0,
                      hi - lo,
                      zh_hier_at(out, lo, sz),
                      out,
                      (hi - lo) * sz,
                      count * sz,
                      {NULL, NULL, v, v + nl}};
        st = zh_hier_local(x, &ag);
    }
    free(v);
    return st;
}

/* The last step of ReduceScatter: recv holds my host's partial of my block,
 * tmp the raw blocks of mine from the ranks of other hosts (rank order,
 * blocks of bytes). Each other host's partial is its blocks in rank order
 * (stored in the dtype, in place over its first block), then the partials
 * combine in host order: the order of AllReduce, the same on every rank. */
static int zh_rs_combine(zh_hop_t *x, char *tmp, const void **src)
{
    const zh_level_t *lv = ZH_LV(x);
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
    const zh_level_t *lv = ZH_LV(x);
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
    if (zh_hier_overlap(op->recv, bytes, send, op->send_bytes) &&
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
    zh_hier_reqs_t q = {0};
    /* the raw blocks land host by host, members in rank order */
    for (int g = 0, k = 0; g < lv->ngroups && st == ZC_OK; g++) {
        for (int i = 0; g != lv->group && i < zh_host_size(x->h, g) && st == ZC_OK; i++) {
            int r = zh_host_member(x->h, g, i);
            st = zh_hier_post(x, &q, 0, r, 0, tmp + bytes * (size_t)k++, bytes);
            st = st == ZC_OK
                     ? zh_hier_post(x, &q, 1, r, 0, (void *)(send + sd[r] * x->sz), sc[r] * x->sz)
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
    st = zh_hier_reqs_finish(x, &q, st);
    if (st == ZC_OK) {
        st = zh_rs_combine(x, tmp, src);
    }
    free(src);
    free(v);
    free(sv);
    free(copy);
    return st;
}

/* A local ReduceScatterV of the blocks blk[i] (global ranks, -1: none) of
 * ReduceScatter's send: local rank i gets its host's partial of block
 * blk[i] in its recv (in place on activated memory). */
static int zh_rs_local(zh_hop_t *x, const int *blk, uint64_t *v)
{
    int nl = x->h->local->nranks;
    const zh_op_t *op = x->op;
    for (int i = 0; i < nl; i++) {
        v[i] = blk[i] >= 0 ? op->count : 0;
        v[nl + i] = blk[i] >= 0 ? (uint64_t)blk[i] * op->count : 0;
    }
    uint64_t mine = v[x->h->local->rank];
    zh_op_t rs = {ZH_OP_REDUCESCATTERV,
                  op->dtype,
                  op->redop,
                  0,
                  mine,
                  op->send,
                  op->recv,
                  op->send_bytes,
                  mine * x->sz,
                  {v, v + nl, NULL, NULL}};
    return zh_hier_local(x, &rs);
}

/* Rounds of zh_rs_hosts: my host's partials of the blocks of the other
 * hosts' ranks (list, nlist), one block per local rank per round, each
 * sent to its rank from my recv before the next round overwrites it. A
 * host of one rank sends the raw blocks at once. */
static int zh_rs_rounds(zh_hop_t *x, const int *list, int nlist, int *blk, uint64_t *v)
{
    zh_comm_t *l = x->h->local;
    size_t bytes = x->op->count * x->sz;
    int st = ZC_OK;
    zh_hier_reqs_t q = {0};
    for (int t = 0; t < nlist && st == ZC_OK; t += l->nranks) {
        for (int i = 0; i < l->nranks; i++) {
            blk[i] = t + i < nlist ? list[t + i] : -1;
        }
        int p = t + l->rank;
        char *from = l->nranks > 1 ? (char *)x->op->recv : NULL;
        if (from == NULL && p < nlist) {
            from = zh_hier_at(x->op->send, (uint64_t)list[p] * x->op->count, x->sz);
        }
        st = l->nranks > 1 ? zh_rs_local(x, blk, v) : ZC_OK;
        st = st == ZC_OK && p < nlist ? zh_hier_post(x, &q, 1, list[p], 0, from, bytes) : st;
        if (l->nranks > 1) {
            st = zh_hier_reqs_finish(x, &q, st);
        }
    }
    return zh_hier_reqs_finish(x, &q, st);
}

/* ReduceScatter (equal blocks) with host partials: each host reduces the
 * block of every rank of another host and sends that partial once, to its
 * rank (zh_hier_pos); I combine my host's partial of my block (local
 * ReduceScatterV, kept in scratch) with the other hosts' in host order.
 * Each host sends count x (ranks on other hosts) elements, the least. */
static int zh_rs_hosts(zh_hop_t *x)
{
    zh_comm_t *l = x->h->local;
    const zh_level_t *lv = ZH_LV(x);
    const zh_op_t *op = x->op;
    int n = x->c->nranks;
    int nh = lv->ngroups;
    int me = x->c->rank;
    size_t bytes = op->count * x->sz;
    char *tmp = zh_hier_scratch(x->h, bytes * (size_t)nh + 1); /* host g's partial at g */
    int *list = malloc(sizeof(int) * (size_t)n);
    int *blk = malloc(sizeof(int) * (size_t)l->nranks);
    uint64_t *v = calloc(2 * (size_t)l->nranks, sizeof(uint64_t));
    const void **src = calloc((size_t)nh, sizeof(void *));
    int st = tmp == NULL || list == NULL || blk == NULL || v == NULL || src == NULL ? ZC_ERR_NOMEM
                                                                                    : ZC_OK;
    int nlist = st == ZC_OK ? zh_hier_list(x, list) : 0;
    zh_hier_reqs_t q = {0};
    for (int g = 0; g < nh && st == ZC_OK; g++) {
        src[g] = tmp + bytes * (size_t)g;
        if (g != lv->group) {
            int from = zh_host_member(x->h, g, zh_hier_pos(x, g, me) % zh_host_size(x->h, g));
            st = zh_hier_post(x, &q, 0, from, 0, tmp + bytes * (size_t)g, bytes);
        }
    }
    for (int i = 0; i < l->nranks && st == ZC_OK; i++) {
        blk[i] = zh_host_member(x->h, lv->group, i);
    }
    if (st == ZC_OK && l->nranks > 1) {
        st = zh_rs_local(x, blk, v);
        memcpy(tmp + bytes * (size_t)lv->group, op->recv, bytes);
    } else if (st == ZC_OK) {
        memcpy(tmp + bytes * (size_t)lv->group, zh_hier_at(op->send, me * op->count, x->sz), bytes);
    }
    st = st == ZC_OK ? zh_rs_rounds(x, list, nlist, blk, v) : st;
    st = zh_hier_reqs_finish(x, &q, st);
    if (st == ZC_OK) {
        coll_reduce_n(op->recv, src, nh, op->count, op->dtype, op->redop);
    }
    free(src);
    free(v);
    free(blk);
    free(list);
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
    const zh_level_t *lv = ZH_LV(x);
    int root = x->op->root;
    int me = x->c->rank;
    size_t bytes = x->op->count * x->sz;
    void *buf = x->op->recv;
    zh_hier_reqs_t q = {0};
    int st = ZC_OK;
    if (me == root) {
        for (int g = 0; g < lv->ngroups && st == ZC_OK; g++) {
            if (g != lv->group) {
                st = zh_hier_post(x, &q, 1, zh_delegate(x, g, root), 0, buf, bytes);
            }
        }
    } else if (lv->group != lv->group_of[root] && me == zh_delegate(x, lv->group, root)) {
        st = zh_hier_post(x, &q, 0, root, 0, buf, bytes);
    }
    st = zh_hier_reqs_finish(x, &q, st);
    if (st == ZC_OK && x->h->local->nranks > 1) {
        zh_op_t b = *x->op;
        b.root = lv->index_of[zh_delegate(x, lv->group, root)];
        st = zh_hier_local(x, &b);
    }
    return st;
}

static int zh_reduce(zh_hop_t *x)
{
    const zh_level_t *lv = ZH_LV(x);
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
    zh_hier_reqs_t q = {0};
    if (st == ZC_OK && me == dlg && me != root) {
        st = zh_hier_post(x, &q, 1, root, 0, (void *)(uintptr_t)part, bytes);
    }
    const void **src = me == root ? calloc((size_t)nh, sizeof(void *)) : NULL;
    st = st == ZC_OK && me == root && src == NULL ? ZC_ERR_NOMEM : st;
    for (int g = 0; g < nh && st == ZC_OK && me == root; g++) {
        src[g] = g == lv->group ? part : tmp + bytes * (size_t)g;
        if (g != lv->group) {
            st = zh_hier_post(x, &q, 0, zh_delegate(x, g, root), 0, tmp + bytes * (size_t)g, bytes);
        }
    }
    st = zh_hier_reqs_finish(x, &q, st);
    if (st == ZC_OK && me == root) {
        coll_reduce_n(x->op->recv, src, nh, x->op->count, x->op->dtype, x->op->redop);
    }
    free(src);
    return st;
}

static int zh_barrier_op(zh_hop_t *x)
{
    const zh_level_t *lv = ZH_LV(x);
    zh_op_t b = {.kind = ZH_OP_BARRIER, .dtype = HCCL_DATA_TYPE_INT8};
    int st = x->h->local->nranks > 1 ? zh_hier_local(x, &b) : ZC_OK;
    int me = x->c->rank;
    zh_hier_reqs_t q = {0};
    static char none;
    for (int g = 0; g < lv->ngroups && st == ZC_OK && me == zh_host_member(x->h, lv->group, 0);
         g++) {
        if (g != lv->group) {
            st = zh_hier_post(x, &q, 0, zh_host_member(x->h, g, 0), 0, &none, 0);
            st = st == ZC_OK ? zh_hier_post(x, &q, 1, zh_host_member(x->h, g, 0), 0, &none, 0) : st;
        }
    }
    st = zh_hier_reqs_finish(x, &q, st);
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
        return x->rs_raw ? zh_reducescatter(x) : zh_rs_hosts(x);
    case ZH_OP_REDUCESCATTERV:
        return zh_reducescatter(x);
    case ZH_OP_BROADCAST:
        return zh_broadcast(x);
    case ZH_OP_REDUCE:
        return zh_reduce(x);
    case ZH_OP_ALLGATHER:
    case ZH_OP_ALLGATHERV:
        return zh_hier_allgather(x);
    case ZH_OP_SCATTER:
    case ZH_OP_ALLTOALL:
    case ZH_OP_ALLTOALLV:
        return zh_hier_copy_op(x);
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
    const zh_level_t *lv = &h->level[ZH_LEVEL_HOST];
    zh_hop_t x = {c, h, NULL, 0, 1, 0};
    HcclSendRecvItem *loc = malloc(sizeof(*loc) * n);
    zh_hier_reqs_t q = {0};
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
        zh_net_req_t *r = zh_hier_reqs_add(&q);
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
    st = zh_hier_reqs_finish(&x, &q, st);
    /* Counted as on one host: the local items' staging plus the copies UCX
     * makes of unregistered memory. */
    staged += atomic_load_explicit(&h->local->staged_bytes, memory_order_relaxed) - local0;
    atomic_fetch_add_explicit(&c->staged_bytes, staged, memory_order_relaxed);
    return st;
}
