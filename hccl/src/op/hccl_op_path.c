/*
 * Ops, steps 4-6: with every post in, choose the path (inline from the post
 * slots, zero-copy on translated user buffers, or buffered through the CCL
 * buffers), run the algorithm from collectives/, and exit. See hccl_op.h.
 */
#include "op/hccl_op.h"
#include "topo/hccl_topo.h"

#include <string.h>

#include "zc/log.h"
#include "zc/sync.h"

typedef struct {
    coll_sync_t base;
    zh_comm_t *comm;
} zh_sync_t;

static int zh_sync_barrier(coll_sync_t *s)
{
    return zh_barrier(((zh_sync_t *)s)->comm);
}

/* ---- the steps after the posts ------------------------------------------------------- */

/* Inline finish: inputs come from the peers' post slots. */
static void zh_op_inline(zh_comm_t *c, const zh_op_t *op, uint32_t seq, size_t bytes)
{
    const void **src = c->scratch.in;
    for (int q = 0; q < c->nranks; q++) {
        zh_ctrl_t *pc = c->peers[q].ctrl;
        src[q] = bytes <= ZH_POST_DATA ? pc->post[seq & 1u].data : pc->idata[seq & 1u];
    }
    if (bytes > 0 && op->kind == ZH_OP_ALLREDUCE) {
        coll_reduce_n(op->recv, src, c->nranks, op->count, op->dtype, op->redop);
    } else if (bytes > 0) {
        for (int q = 0; q < c->nranks; q++) {
            /* memmove: in place, my own block is already where it goes */
            memmove((char *)op->recv + (size_t)q * bytes, src[q], bytes);
        }
    }
    atomic_fetch_add_explicit(&c->zc_ops, 1, memory_order_relaxed); /* send/recv count too */
    zh_count(&c->inline_ops, 1);
    zh_count(&c->inline_bytes, bytes);
}

/* The hierarchical algorithm's kind for op kind, -1 when it has none. */
static int zh_hier_kind(int kind)
{
    switch (kind) {
    case ZH_OP_ALLREDUCE:
        return COLL_HIER_ALLREDUCE;
    case ZH_OP_ALLGATHER:
        return COLL_HIER_ALLGATHER;
    case ZH_OP_REDUCESCATTER:
        return COLL_HIER_REDUCESCATTER;
    case ZH_OP_BROADCAST:
        return COLL_HIER_BROADCAST;
    case ZH_OP_REDUCE:
        return COLL_HIER_REDUCE;
    default:
        return -1;
    }
}

/* Should op run hierarchically? ZCCL_HIER allows it, the comm has a level
 * to group by (zh_levels_hier_pick) and coll_hier_worth says so; then the
 * scratch it needs (*need). Only values every rank shares decide. */
static int zh_hier_wanted(const zh_comm_t *c, const zh_op_t *op, size_t *need)
{
    int kind = zh_hier_kind(op->kind);
    const zh_levels_t *lv = c->levels;
    if (!c->hier_on || kind < 0 || lv == NULL || lv->hier == NULL) {
        return 0;
    }
    const coll_groups_t *g = &lv->hier_groups;
    return coll_hier_worth(g, kind, (size_t)op->count * coll_dtype_size(op->dtype)) &&
           coll_hier_scratch_bytes(kind, g, (size_t)op->count, op->dtype, need) == ZC_OK;
}

/* The algorithm of the zero-copy path: hierarchical, with every rank's CCL
 * buffer (unused by zero-copy ops; created collectively here, on the first
 * op every rank finds wanted that needs scratch) as scratch when it is
 * large enough on every rank, else flat. */
static int zh_op_direct_run(zh_comm_t *c, const zh_op_t *op, coll_args_t *a)
{
    size_t need = 0;
    int hier = zh_hier_wanted(c, op, &need);
    int result = hier && need > 0 ? zh_ccl_ensure(c) : ZC_OK; /* need: alike on every rank */
    hier = hier && result == ZC_OK && need <= c->ccl_bytes;   /* ccl_bytes: the min of all ranks' */
    zh_levels_log_algo(c->levels, op->kind, op->send_bytes, hier ? c->levels->hier : NULL,
                       "zero-copy");
    if (result != ZC_OK || !hier) {
        return result != ZC_OK ? result : zh_ops[op->kind].direct(a);
    }
    for (int q = 0; q < c->nranks; q++) {
        c->scratch.ccl[q] = c->peers[q].ccl;
    }
    coll_hier_t h = {&c->levels->hier_groups, c->scratch.ccl, c->ccl_bytes};
    atomic_fetch_add_explicit(&c->hier_ops, 1, memory_order_relaxed);
    switch (zh_hier_kind(op->kind)) {
    case COLL_HIER_ALLREDUCE:
        return coll_hier_allreduce(a, &h);
    case COLL_HIER_ALLGATHER:
        return coll_hier_allgather(a, &h);
    case COLL_HIER_REDUCESCATTER:
        return coll_hier_reducescatter(a, &h);
    case COLL_HIER_BROADCAST:
        return coll_hier_broadcast(a, &h);
    default:
        return coll_hier_reduce(a, &h);
    }
}

/* Zero-copy: translate every rank's buffers, run the direct algorithm. */
static int zh_op_direct(zh_comm_t *c, const zh_op_t *op, const zh_desc_t *const *d, coll_args_t *a,
                        const void **in, void **out)
{
    int result = ZC_OK;
    for (int q = 0; q < c->nranks && result == ZC_OK; q++) {
        void *src = NULL;
        result = zh_mem_translate(c, q, d[q]->send_va, d[q]->send_bytes, &src);
        in[q] = src;
        if (result == ZC_OK) {
            result = zh_mem_translate(c, q, d[q]->recv_va, d[q]->recv_bytes, &out[q]);
        }
        /* A live peer serves the blocks it published for as long as the op
         * runs: a fetch that fails means it died (its broker goes before its
         * pidfd says so) or is broken. */
        if (result == ZC_ERR_NOT_FOUND || result == ZC_ERR_IO || result == ZC_ERR_CONNECT ||
            (result != ZC_OK &&
             (zh_peer_gone(c, q) || zh_wait_check(c, q, zc_time_ns()) == ZC_ERR_REMOTE))) {
            result = ZC_ERR_REMOTE;
        }
    }
    if (result == ZC_OK) {
        result = zh_op_direct_run(c, op, a);
    }
    atomic_fetch_add_explicit(&c->zc_ops, 1, memory_order_relaxed);
    return result;
}

/* Buffered: through the CCL buffers. */
static int zh_op_staged(zh_comm_t *c, const zh_op_t *op, coll_args_t *a, void **ccl)
{
    int result = zh_ccl_ensure(c);
    if (result == ZC_OK) {
        for (int q = 0; q < c->nranks; q++) {
            ccl[q] = c->peers[q].ccl;
        }
        a->ccl_bytes = c->ccl_bytes;
        result = zh_ops[op->kind].staged(a);
    }
    atomic_fetch_add_explicit(&c->buf_ops, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->staged_bytes, *a->staged_bytes, memory_order_relaxed);
    return result;
}

/* Step 6, after the algorithm ran with result: the exit barrier, so nobody
 * returns while a peer may still read its buffers. */
static int zh_op_exit(zh_comm_t *c, int result)
{
    /* Argument disagreements the algorithms find (V arrays) are seen by
     * every rank alike and leave the comm usable; other failures break it. */
    if (result != ZC_OK && result != ZC_ERR_REMOTE && result != ZC_ERR_TIMEOUT &&
        result != ZC_ERR_INVAL) {
        zh_comm_fail(c, result);
    }
    if (result == ZC_ERR_REMOTE || result == ZC_ERR_TIMEOUT) {
        return result; /* the comm is broken; peers are not coming */
    }
    int st = zh_barrier(c);
    return result != ZC_OK ? result : st;
}

/* When the last rank posted the op: the latest of the posts' stamps, 0 when
 * one has none. */
static uint64_t zh_op_start(const zh_desc_t *const *d, int nranks)
{
    uint64_t start = 0;
    for (int q = 0; q < nranks; q++) {
        if (d[q]->posted_ns == 0) {
            return 0;
        }
        start = d[q]->posted_ns > start ? d[q]->posted_ns : start;
    }
    return start;
}

/* Does the AllGather pull, as the ranks' posts say? When none vetoes and
 * more than half ask (coll_form_pulls, which *majority gets): the same
 * answers on every rank. */
static int zh_op_pull(const zh_desc_t *const *d, int nranks, int *majority)
{
    int pulls = 0;
    int veto = 0;
    for (int q = 0; q < nranks; q++) {
        veto |= (d[q]->pull & COLL_FORM_VETO) != 0;
        pulls += (d[q]->pull & COLL_FORM_PULL) != 0;
    }
    *majority = coll_form_pulls(pulls, nranks);
    return !veto && *majority;
}

/* Run the algorithm on user buffers (zero-copy) or CCL buffers, then exit. */
static int zh_op_algorithm(zh_comm_t *c, const zh_op_t *op, uint32_t seq, const zh_post_t **p,
                           int zc)
{
    zh_op_scratch_t *s = &c->scratch;
    const zh_desc_t **d = s->desc;
    const void **in = s->in;
    void **out = s->out;
    void **ccl = s->ccl;
    const uint64_t **const *arr = s->v;
    uint64_t *each = s->each;
    uint64_t staged = 0;
    zh_sync_t sync = {{zh_sync_barrier}, c};
    int majority = 0;
    for (int q = 0; q < c->nranks; q++) {
        const zh_ctrl_t *pc = c->peers[q].ctrl;
        d[q] = &pc->desc[seq & 1u];
        each[q] = p[q]->count;
        for (int i = 0; i < ZH_V_ARRAYS; i++) {
            s->v[i][q] = zh_ctrl_v(c, pc, seq & 1u, i);
        }
    }
    coll_args_t a = {
        .rank = c->rank,
        .nranks = c->nranks,
        .root = op->root,
        .dtype = op->dtype,
        .op = op->redop,
        .count = op->count,
        .in = in,
        .out = out,
        .send = op->send,
        .recv = op->recv,
        .ccl = ccl,
        .send_counts = op->v[ZH_V_SEND_COUNTS] != NULL ? arr[ZH_V_SEND_COUNTS] : NULL,
        .send_displs = op->v[ZH_V_SEND_DISPLS] != NULL ? arr[ZH_V_SEND_DISPLS] : NULL,
        .recv_counts = op->v[ZH_V_RECV_COUNTS] != NULL ? arr[ZH_V_RECV_COUNTS] : NULL,
        .recv_displs = op->v[ZH_V_RECV_DISPLS] != NULL ? arr[ZH_V_RECV_DISPLS] : NULL,
        .recv_count_each = op->kind == ZH_OP_REDUCESCATTERV ? each : NULL,
        .sync = &sync.base,
        .staged_bytes = &staged,
        .tune = &c->tune,
        .reuse = &c->reuse,
        .start_ns = zh_op_start(d, c->nranks),
        .pull = op->kind == ZH_OP_ALLGATHER && zh_op_pull(d, c->nranks, &majority),
    };
    if (op->kind == ZH_OP_ALLGATHER) {
        coll_form_agree(&c->reuse, a.pull, majority); /* whichever path runs it */
    }
    int result = zc ? zh_op_direct(c, op, d, &a, in, out) : zh_op_staged(c, op, &a, ccl);
    result = zh_op_exit(c, result);
    if (zc && result == ZC_OK) {
        coll_nt_done(&c->reuse); /* through the exit barrier: alike on every rank */
    }
    return result;
}

/* Every post of op seq is in: agree, choose the path, run it. inline_only
 * (the caller's thread) asks to stop, returning 1, unless the op finishes
 * from the post slots or is a zero-copy op the caller may run whole
 * (zh_op_caller_ok); the caller then hands it to the stream worker. Once
 * every post is in, every rank runs op seq to its end without waiting for
 * anything but op seq's own steps, so the algorithm's waits and the exit
 * barrier cannot block on work this thread has yet to issue. */
int zh_op_complete(zh_comm_t *c, const zh_task_t *t, int inline_only)
{
    const zh_op_t *op = &t->op;
    uint32_t seq = t->seq;
    const zh_post_t **p = c->scratch.post;
    int zc = 1;
    for (int q = 0; q < c->nranks; q++) {
        p[q] = &c->peers[q].ctrl->post[seq & 1u];
        zc &= p[q]->zc_ok != 0;
    }
    for (int q = 1; q < c->nranks; q++) {
        if (!zh_op_agree(c, p[0], p[q], q, seq)) {
            return ZC_ERR_INVAL; /* every rank saw the same posts: no exit needed */
        }
    }
    if (op->kind == ZH_OP_BARRIER) {
        return ZC_OK; /* everyone arrived */
    }
    if (zc && zh_op_inlinable(op)) {
        zh_levels_log_algo(c->levels, op->kind, op->send_bytes, NULL, "inline");
        zh_op_inline(c, op, seq, op->send_bytes);
        return ZC_OK;
    }
    if (inline_only && !(zc && zh_op_caller_ok(c, op))) {
        return 1;
    }
    if (!zc) {
        zh_levels_log_algo(c->levels, op->kind, op->send_bytes, NULL, "buffered");
    }
    return zh_op_algorithm(c, op, seq, p, zc);
}
