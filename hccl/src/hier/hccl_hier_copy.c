/*
 * The copies across hosts (hccl_hier.h): AllGather(V), Scatter and
 * AlltoAll(V, VC); the reductions and rooted ones are hccl_hier_coll.c.
 *
 * AllGather(V): each block crosses to each other host once, to one rank of
 * it (zh_hier_pos), which spreads it on its host in a local AllGatherV in
 * place on recv; my host's own blocks go through a local AllGatherV too.
 * Scatter, AlltoAll(V): remote blocks go straight to their rank; the local
 * part is a local AlltoAllV with the global displacements.
 */
#include "hier/hccl_hier.h"

#include <stdlib.h>
#include <string.h>

#include "zc/log.h"

/* Post my block's sends (one per other host) or my receives. */
static int zh_ag_net(zh_hop_t *x, zh_hier_reqs_t *q, int recv, const void *send, const uint64_t *rc,
                     const uint64_t *rd, const int *list, int nlist)
{
    const zh_level_t *lv = ZH_LV(x);
    int me = x->c->rank;
    int st = ZC_OK;
    for (int g = 0; !recv && g < lv->ngroups && st == ZC_OK; g++) {
        if (g != lv->group) {
            int to = zh_host_member(x->h, g, zh_hier_pos(x, g, me) % zh_host_size(x->h, g));
            st = zh_hier_post(x, q, 1, to, 0, (void *)(uintptr_t)send, rc[me] * x->sz);
        }
    }
    int nl = x->h->local->nranks;
    for (int p = x->h->local->rank; recv && p < nlist && st == ZC_OK; p += nl) {
        int s = list[p];
        st = zh_hier_post(x, q, 0, s, 0, zh_hier_at(x->op->recv, rd[s], x->sz), rc[s] * x->sz);
    }
    return st;
}

/* A local AllGatherV in place on recv: local rank i gives block blk[i] (-1: none). */
static int zh_ag_local(zh_hop_t *x, const int *blk, const uint64_t *rc, const uint64_t *rd,
                       const void *mine)
{
    int nl = x->h->local->nranks;
    uint64_t *v = calloc(2 * (size_t)nl, sizeof(uint64_t));
    if (v == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory for a local step", x->c->rank);
        return ZC_ERR_NOMEM;
    }
    for (int i = 0; i < nl; i++) {
        v[i] = blk[i] >= 0 ? rc[blk[i]] : 0;
        v[nl + i] = blk[i] >= 0 ? rd[blk[i]] : 0;
    }
    int b = blk[x->h->local->rank];
    const void *send = mine != NULL ? mine
                       : b >= 0     ? zh_hier_at(x->op->recv, rd[b], x->sz)
                                    : x->op->recv;
    uint64_t cnt = v[x->h->local->rank];
    zh_op_t ag = {
        ZH_OP_ALLGATHERV,  x->op->dtype,           0, 0, cnt, send, x->op->recv, cnt * x->sz,
        x->op->recv_bytes, {NULL, NULL, v, v + nl}};
    int st = zh_hier_local(x, &ag);
    free(v);
    return st;
}

/* The local steps: my host's own blocks (from send), then the other hosts'
 * blocks, one round per (local ranks) of them, each from the local rank
 * that received it. */
static int zh_ag_spread(zh_hop_t *x, zh_hier_reqs_t *q, int late, const void *rsend,
                        const uint64_t *rc, const uint64_t *rd, const int *list, int nlist)
{
    zh_comm_t *l = x->h->local;
    int *blk = malloc(sizeof(int) * (size_t)l->nranks);
    int st = blk == NULL ? ZC_ERR_NOMEM : ZC_OK;
    for (int i = 0; i < l->nranks && st == ZC_OK; i++) {
        blk[i] = zh_host_member(x->h, ZH_LV(x)->group, i);
    }
    st = st == ZC_OK ? zh_ag_local(x, blk, rc, rd, x->op->send) : st;
    st = st == ZC_OK && late ? zh_ag_net(x, q, 1, rsend, rc, rd, list, nlist) : st;
    st = zh_hier_reqs_finish(x, q, st);
    for (int t = 0; t < nlist && st == ZC_OK; t += l->nranks) {
        for (int i = 0; i < l->nranks; i++) {
            blk[i] = t + i < nlist ? list[t + i] : -1;
        }
        st = zh_ag_local(x, blk, rc, rd, NULL);
    }
    free(blk);
    return st;
}

/* AllGather(V): my block goes to one rank of each other host (zh_hier_pos),
 * which spreads it on its host in a local AllGatherV, zero-copy on
 * activated memory; my host's own blocks through a local AllGatherV too.
 * Each block crosses to each other host once. */
int zh_hier_allgather(zh_hop_t *x)
{
    const zh_op_t *op = x->op;
    int n = x->c->nranks;
    int me = x->c->rank;
    size_t sz = x->sz;
    uint64_t *v = calloc(2 * (size_t)n, sizeof(uint64_t));
    int *list = malloc(sizeof(int) * (size_t)n);
    if (v == NULL || list == NULL) {
        free(v);
        free(list);
        return ZC_ERR_NOMEM;
    }
    const uint64_t *rc = op->kind == ZH_OP_ALLGATHERV ? op->v[ZH_V_RECV_COUNTS] : v;
    const uint64_t *rd = op->kind == ZH_OP_ALLGATHERV ? op->v[ZH_V_RECV_DISPLS] : v + n;
    for (int r = 0; r < n; r++) {
        v[r] = op->count;
        v[n + r] = (uint64_t)r * op->count;
    }
    int nlist = zh_hier_list(x, list);
    size_t bytes = op->count * sz;
    const void *send = op->send;
    char *copy = NULL;
    if (zh_hier_overlap(send, bytes, op->recv, op->recv_bytes) &&
        send != zh_hier_at(op->recv, rd[me], sz)) {
        copy = malloc(bytes + 1); /* remote blocks may land on it before it is sent */
        if (copy != NULL) {
            memcpy(copy, send, bytes);
        }
        send = copy;
    }
    zh_hier_reqs_t q = {0};
    int st = send == NULL && bytes > 0 ? ZC_ERR_NOMEM : ZC_OK;
    st = st == ZC_OK ? zh_ag_net(x, &q, 0, send, rc, rd, list, nlist) : st;
    /* With my block copied, the local step still reads it where it is:
     * the receives, which may land on it, wait for the local step. */
    st = st == ZC_OK && copy == NULL ? zh_ag_net(x, &q, 1, send, rc, rd, list, nlist) : st;
    if (x->h->local->nranks > 1) {
        st = st == ZC_OK ? zh_ag_spread(x, &q, copy != NULL, send, rc, rd, list, nlist)
                         : zh_hier_reqs_finish(x, &q, st);
    } else {
        if (st == ZC_OK && op->send != zh_hier_at(op->recv, rd[me], sz)) {
            memmove(zh_hier_at(op->recv, rd[me], sz), op->send, bytes);
        }
        st = st == ZC_OK && copy != NULL ? zh_ag_net(x, &q, 1, send, rc, rd, list, nlist) : st;
        st = zh_hier_reqs_finish(x, &q, st);
    }
    free(list);
    free(copy);
    free(v);
    return st;
}

/* The receives (recv = 1) or the sends of an AlltoAllV's remote pairs. */
static int zh_a2a_post(zh_hop_t *x, zh_hier_reqs_t *q, int recv, const void *rsend,
                       const uint64_t *c, const uint64_t *d)
{
    int st = ZC_OK;
    for (int r = 0; r < x->c->nranks && st == ZC_OK; r++) {
        if (x->h->remote[r] && c[r] > 0) {
            void *at = zh_hier_at(recv ? x->op->recv : rsend, d[r], x->sz);
            st = zh_hier_post(x, q, !recv, r, 0, at, c[r] * x->sz);
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
    const zh_level_t *lv = ZH_LV(x);
    size_t sz = x->sz;
    zh_hier_reqs_t q = {0};
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
    return zh_hier_reqs_finish(x, &q, st);
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
    if (!zh_hier_overlap(op->send, op->send_bytes, op->recv, op->recv_bytes)) {
        return ZC_OK;
    }
    int need = 0;
    for (int r = 0; r < x->c->nranks; r++) {
        const char *blk = zh_hier_at(op->send, sd[r], sz);
        need |= x->h->remote[r] && zh_hier_overlap(blk, sc[r] * sz, op->recv, op->recv_bytes);
        for (int i = 0; !x->h->remote[r] && i < x->c->nranks; i++) {
            *late |= x->h->remote[i] &&
                     zh_hier_overlap(blk, sc[r] * sz, zh_hier_at(op->recv, rd[i], sz), rc[i] * sz);
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
            memcpy(*copy + sd[r] * sz, zh_hier_at(op->send, sd[r], sz), sc[r] * sz);
        }
    }
    return ZC_OK;
}

/* The V arrays of AlltoAll and Scatter in global terms, then zh_alltoallv. */
int zh_hier_copy_op(zh_hop_t *x)
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
