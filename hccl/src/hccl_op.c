/*
 * The op path: descriptor, agreement, path choice, algorithm, exit handshake.
 *
 * An HCCL collective call checks its local arguments on the caller's thread,
 * then enqueues a task on the aclrtStream; the task runs on the stream worker
 * in order with the stream's other work. Per op every rank:
 *   1. publishes its descriptor in its control segment (slot seq & 1);
 *   2. barrier (entry): every descriptor of this op is now readable;
 *   3. compares every descriptor with rank 0's (same for all ranks, so every
 *      rank reaches the same verdict: a mismatch fails the op with
 *      HCCL_E_PARA everywhere, logged with the rank and field that differ);
 *   4. zero-copy if every rank's buffers lie wholly in activated memory (all
 *      ranks read the same flags, so they agree), else buffered;
 *   5. resolves pointers (translation for zero-copy, CCL buffers otherwise)
 *      and runs the algorithm from collectives/;
 *   6. barrier (exit): nobody returns while a peer may still read its buffers.
 * A local failure (translation, mapping) raises the rank's error flag so that
 * peers fail their waits at once instead of timing out; the exit barrier is
 * still attempted so buffers are not released under a reader.
 */
#include "hccl_internal.h"
#include "hccl_capture.h"
#include "hccl_prof.h"

#include <stdlib.h>
#include <string.h>

#include "zc/log.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"

typedef struct {
    zh_comm_t *comm;
    zh_op_t op;
    uint64_t (*arrays)[ZH_MAX_RANKS]; /* V collectives only: copies of op.v */
    zh_prof_mark_t prof;
} zh_task_t;

typedef struct {
    coll_sync_t base;
    zh_comm_t *comm;
} zh_sync_t;

static int zh_sync_barrier(coll_sync_t *s)
{
    return zh_barrier(((zh_sync_t *)s)->comm);
}

static const char *const zh_op_names[ZH_OP_MAX] = {
    "?", "Barrier", "AllReduce", "AllGather", "AllGatherV", "ReduceScatter", "ReduceScatterV",
    "Broadcast", "Reduce", "Scatter", "AlltoAll", "AlltoAllV",
};

typedef int (*zh_coll_fn)(const coll_args_t *a);

static const struct {
    zh_coll_fn direct;
    zh_coll_fn staged;
    unsigned has_root : 1;
    unsigned has_redop : 1;
    unsigned count_equal : 1; /* count must match across ranks */
} zh_ops[ZH_OP_MAX] = {
    [ZH_OP_ALLREDUCE] = {coll_allreduce_direct, coll_allreduce_staged, 0, 1, 1},
    [ZH_OP_ALLGATHER] = {coll_allgather_direct, coll_allgather_staged, 0, 0, 1},
    [ZH_OP_ALLGATHERV] = {coll_allgatherv_direct, coll_allgatherv_staged, 0, 0, 0},
    [ZH_OP_REDUCESCATTER] = {coll_reducescatter_direct, coll_reducescatter_staged, 0, 1, 1},
    [ZH_OP_REDUCESCATTERV] = {coll_reducescatterv_direct, coll_reducescatterv_staged, 0, 1, 0},
    [ZH_OP_BROADCAST] = {coll_broadcast_direct, coll_broadcast_staged, 1, 0, 1},
    [ZH_OP_REDUCE] = {coll_reduce_direct, coll_reduce_staged, 1, 1, 1},
    [ZH_OP_SCATTER] = {coll_scatter_direct, coll_scatter_staged, 1, 0, 1},
    [ZH_OP_ALLTOALL] = {coll_alltoall_direct, coll_alltoall_staged, 0, 0, 1},
    [ZH_OP_ALLTOALLV] = {coll_alltoallv_direct, coll_alltoallv_staged, 0, 0, 0},
};

/* Does rank q's descriptor agree with rank 0's? Logs the first difference. */
static int zh_op_agree(zh_comm_t *c, const zh_post_t *d0, const zh_post_t *dq, int q,
                       uint32_t seq)
{
    const char *what = NULL;
    long long a = 0;
    long long b = 0;
    if (dq->kind != d0->kind) {
        what = "collective";
        a = dq->kind;
        b = d0->kind;
    } else if (dq->dtype != d0->dtype) {
        what = "dtype";
        a = dq->dtype;
        b = d0->dtype;
    } else if (zh_ops[d0->kind].has_redop && dq->redop != d0->redop) {
        what = "reduce op";
        a = dq->redop;
        b = d0->redop;
    } else if (zh_ops[d0->kind].has_root && dq->root != d0->root) {
        what = "root";
        a = dq->root;
        b = d0->root;
    } else if (zh_ops[d0->kind].count_equal && dq->count != d0->count) {
        what = "count";
        a = (long long)dq->count;
        b = (long long)d0->count;
    }
    if (what == NULL) {
        return 1;
    }
    if (c->rank == 0 || c->rank == q) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: op %u (%s): rank %d passed %s %lld but rank 0 passed %lld",
                c->rank, seq, d0->kind < ZH_OP_MAX ? zh_op_names[d0->kind] : "?", q, what, a,
                b);
    } else {
        ZC_WARN(ZC_SUB_COLL, "rank %d: op %u: ranks disagree (%s of rank %d); failing the op",
                c->rank, seq, what, q);
    }
    return 0;
}

static int zh_op_exec(zh_comm_t *c, const zh_task_t *t)
{
    const zh_op_t *op = &t->op;
    uint32_t seq = ++c->seq;
    zh_desc_t *mine = &c->ctrl->desc[seq & 1u];
    mine->send_va = (uint64_t)(uintptr_t)op->send;
    mine->recv_va = (uint64_t)(uintptr_t)op->recv;
    mine->send_bytes = op->send_bytes;
    mine->recv_bytes = op->recv_bytes;
    int zc_ok = zh_mem_local_covers(c, mine->send_va, op->send_bytes) &&
                zh_mem_local_covers(c, mine->recv_va, op->recv_bytes);
    for (int i = 0; i < 4; i++) {
        if (op->v[i] != NULL) {
            memcpy(mine->v[i], t->arrays[i], sizeof(uint64_t) * (size_t)c->nranks);
        }
    }
    zh_post_t *post = &c->ctrl->post[seq & 1u];
    post->kind = (uint8_t)op->kind;
    post->dtype = (uint8_t)op->dtype;
    post->redop = (uint8_t)op->redop;
    post->zc_ok = (uint8_t)zc_ok;
    post->root = op->root;
    post->count = op->count;
    /* Small AllReduce / AllGather: my input travels with my post (used only
     * if every rank is on activated memory, which we learn from the posts). */
    size_t inline_bytes = op->kind == ZH_OP_ALLREDUCE || op->kind == ZH_OP_ALLGATHER
                              ? op->send_bytes
                              : ZH_INLINE_MAX + 1;
    uint8_t *inl = inline_bytes <= ZH_POST_DATA ? post->data : c->ctrl->idata[seq & 1u];
    if (inline_bytes <= ZH_INLINE_MAX && inline_bytes > 0 && zc_ok) {
        memcpy(inl, op->send, inline_bytes);
    }
    /* Entry: my post (release) and every peer's post of this op. */
    zh_flag_post((zh_flag_t *)(void *)post, seq);
    int st = c->nranks == 1 ? ZC_OK
                            : zh_wait_peers(c, offsetof(zh_ctrl_t, post) +
                                                   (seq & 1u) * sizeof(zh_post_t),
                                            seq);
    if (st != ZC_OK) {
        return st;
    }
    const zh_post_t *p[ZH_MAX_RANKS];
    int agree = 1;
    int zc = 1;
    for (int q = 0; q < c->nranks; q++) {
        p[q] = &c->peers[q].ctrl->post[seq & 1u];
        zc &= p[q]->zc_ok != 0;
    }
    for (int q = 1; q < c->nranks && agree; q++) {
        agree = zh_op_agree(c, p[0], p[q], q, seq);
    }
    if (!agree) {
        return ZC_ERR_INVAL; /* every rank saw the same posts: no exit needed */
    }
    if (op->kind == ZH_OP_BARRIER) {
        return ZC_OK; /* everyone arrived */
    }
    if (zc && inline_bytes <= ZH_INLINE_MAX) {
        const void *src[ZH_MAX_RANKS];
        for (int q = 0; q < c->nranks; q++) {
            zh_ctrl_t *pc = c->peers[q].ctrl;
            src[q] = inline_bytes <= ZH_POST_DATA ? pc->post[seq & 1u].data : pc->idata[seq & 1u];
        }
        if (inline_bytes > 0 && op->kind == ZH_OP_ALLREDUCE) {
            coll_reduce_n(op->recv, src, c->nranks, op->count, op->dtype, op->redop);
        } else if (inline_bytes > 0) {
            for (int q = 0; q < c->nranks; q++) {
                /* memmove: in place, my own block is already where it goes */
                memmove((char *)op->recv + (size_t)q * inline_bytes, src[q], inline_bytes);
            }
        }
        atomic_fetch_add_explicit(&c->zc_ops, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->inline_ops, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->inline_bytes, inline_bytes, memory_order_relaxed);
        return ZC_OK;
    }
    const zh_desc_t *d[ZH_MAX_RANKS];
    for (int q = 0; q < c->nranks; q++) {
        d[q] = &c->peers[q].ctrl->desc[seq & 1u];
    }
    int result = ZC_OK;
    {
        const void *in[ZH_MAX_RANKS];
        void *out[ZH_MAX_RANKS];
        void *ccl[ZH_MAX_RANKS];
        const uint64_t *arr[4][ZH_MAX_RANKS];
        uint64_t staged = 0;
        uint64_t each[ZH_MAX_RANKS];
        zh_sync_t sync = {{zh_sync_barrier}, c};
        for (int q = 0; q < c->nranks; q++) {
            each[q] = p[q]->count;
            for (int i = 0; i < 4; i++) {
                arr[i][q] = d[q]->v[i];
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
            .send_counts = op->v[0] != NULL ? arr[0] : NULL,
            .send_displs = op->v[1] != NULL ? arr[1] : NULL,
            .recv_counts = op->v[2] != NULL ? arr[2] : NULL,
            .recv_displs = op->v[3] != NULL ? arr[3] : NULL,
            .recv_count_each = op->kind == ZH_OP_REDUCESCATTERV ? each : NULL,
            .sync = &sync.base,
            .staged_bytes = &staged,
            .tune = &c->tune,
        };
        if (zc) {
            for (int q = 0; q < c->nranks && result == ZC_OK; q++) {
                void *src = NULL;
                result = zh_mem_translate(c, q, d[q]->send_va, d[q]->send_bytes, &src);
                in[q] = src;
                if (result == ZC_OK) {
                    result = zh_mem_translate(c, q, d[q]->recv_va, d[q]->recv_bytes, &out[q]);
                }
                /* A live peer serves the blocks it published for as long as
                 * the op runs: a fetch that fails means it died (its broker
                 * goes before its pidfd says so) or is broken. */
                if (result == ZC_ERR_NOT_FOUND || result == ZC_ERR_IO ||
                    result == ZC_ERR_CONNECT ||
                    (result != ZC_OK && zh_wait_check(c, q, zc_time_ns()) == ZC_ERR_REMOTE)) {
                    result = ZC_ERR_REMOTE;
                }
            }
            if (result == ZC_OK) {
                result = zh_ops[op->kind].direct(&a);
            }
            atomic_fetch_add_explicit(&c->zc_ops, 1, memory_order_relaxed);
        } else {
            result = zh_ccl_ensure(c);
            if (result == ZC_OK) {
                for (int q = 0; q < c->nranks; q++) {
                    ccl[q] = c->peers[q].ccl;
                }
                a.ccl_bytes = c->ccl_bytes;
                result = zh_ops[op->kind].staged(&a);
            }
            atomic_fetch_add_explicit(&c->buf_ops, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&c->staged_bytes, staged, memory_order_relaxed);
        }
        /* Argument disagreements the algorithms find (V arrays) are seen by
         * every rank alike and leave the comm usable; other failures break it. */
        if (result != ZC_OK && result != ZC_ERR_REMOTE && result != ZC_ERR_TIMEOUT &&
            result != ZC_ERR_INVAL) {
            zh_comm_fail(c, zh_result(result));
        }
    }
    if (result == ZC_ERR_REMOTE || result == ZC_ERR_TIMEOUT) {
        return result; /* the comm is broken; peers are not coming */
    }
    st = zh_barrier(c);
    return result != ZC_OK ? result : st;
}

static int zh_op_task(void *arg)
{
    zh_task_t *t = arg;
    zh_comm_t *c = t->comm;
    int prev_rank = zc_log_get_rank();
    zc_log_set_rank(c->rank);
    int err = atomic_load_explicit(&c->async_error, memory_order_acquire);
    HcclResult r;
    if (err != HCCL_SUCCESS) {
        r = (HcclResult)err; /* a broken comm fails every later op at once */
    } else {
        zh_prof_snap_t snap;
        zh_prof_begin(c, &snap);
        int st = zh_op_exec(c, t);
        r = zh_result(st);
        if (st == ZC_ERR_REMOTE || st == ZC_ERR_TIMEOUT) {
            zh_comm_fail(c, r);
        }
        zh_prof_end(c, &t->op, &t->prof, &snap, r);
    }
    zc_log_set_rank(prev_rank);
    return (int)r;
}

static void zh_op_task_free(void *arg)
{
    zh_task_t *t = arg;
    atomic_fetch_sub_explicit(&t->comm->inflight, 1, memory_order_release);
    free(t->arrays);
    free(t);
}

HcclResult zh_op_submit(zh_comm_t *c, const zh_op_t *op, aclrtStream stream)
{
    if (zccl_stream_capturing(stream)) {
        return zh_capture_op(c, op, stream); /* recorded for aclmdlRI replays, not run */
    }
    zh_task_t *t = malloc(sizeof(*t));
    if (t == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory queueing an op", c->rank);
        return HCCL_E_MEMORY;
    }
    t->comm = c;
    t->op = *op;
    t->arrays = NULL;
    zh_prof_issue(&t->prof, stream);
    if (op->v[0] != NULL || op->v[2] != NULL) {
        /* The caller may reuse its count arrays once the call returns. */
        t->arrays = calloc(4, sizeof(*t->arrays));
        if (t->arrays == NULL) {
            free(t);
            ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory queueing an op", c->rank);
            return HCCL_E_MEMORY;
        }
        for (int i = 0; i < 4; i++) {
            if (op->v[i] != NULL) {
                memcpy(t->arrays[i], op->v[i], sizeof(uint64_t) * (size_t)c->nranks);
            }
        }
    }
    atomic_fetch_add_explicit(&c->inflight, 1, memory_order_relaxed);
    aclError e = zccl_stream_enqueue(stream, zh_op_task, t, zh_op_task_free);
    if (e != ACL_SUCCESS) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: cannot enqueue %s on stream %p (aclError %d)", c->rank,
                zh_op_names[op->kind], stream, (int)e);
        zh_op_task_free(t); /* a refused task is not the stream's to free */
        return e == ACL_ERROR_RT_PARAM_INVALID || e == ACL_ERROR_INVALID_PARAM ||
                       e == ACL_ERROR_RT_INVALID_HANDLE
                   ? HCCL_E_PARA
                   : HCCL_E_RUNTIME;
    }
    return HCCL_SUCCESS;
}
