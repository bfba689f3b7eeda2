/*
 * Ops, steps 1 and 3: every rank publishes its descriptor and post line, and
 * compares every peer's post with rank 0's. See hccl_op.h.
 */
#include "op/hccl_op.h"

#include <string.h>

#include "zc/log.h"
#include "zc/sync.h"

/* Bytes (send + receive, this rank) from which a post is stamped with the
 * time. A trial's op holds at least W/2 of data over all ranks, 1 MiB and
 * up: up to 4 ranks each rank's share is stamped; with more ranks a smaller
 * share is not, and its samples start at each rank's own choice. */
#define ZH_STAMP_MIN ((uint64_t)256 << 10)

const zh_op_info_t zh_ops[ZH_OP_MAX] = {
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
int zh_op_agree(zh_comm_t *c, const zh_post_t *d0, const zh_post_t *dq, int q, uint32_t seq)
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
                c->rank, seq, zh_op_name(d0->kind), q, what, a, b);
    } else {
        ZC_WARN(ZC_SUB_COLL, "rank %d: op %u: ranks disagree (%s of rank %d); failing the op",
                c->rank, seq, what, q);
    }
    return 0;
}

void zh_op_key(const zh_op_t *op, uint64_t key[ZH_OP_KEY_WORDS])
{
    int k = op->kind > 0 && op->kind < ZH_OP_MAX ? (int)op->kind : 0;
    key[0] = (uint64_t)op->kind;
    key[1] = (uint64_t)(uint32_t)op->dtype;
    key[2] = zh_ops[k].has_redop ? (uint64_t)(uint32_t)op->redop : 0;
    key[3] = zh_ops[k].has_root ? (uint64_t)(uint32_t)op->root : 0;
    key[4] = zh_ops[k].count_equal ? op->count : 0;
}

/* ---- posting and agreement ------------------------------------------------------------ */

/* Can op travel in its post slot (a small AllReduce / AllGather)? Its
 * send_bytes are then what it carries. */
int zh_op_inlinable(const zh_op_t *op)
{
    return (op->kind == ZH_OP_ALLREDUCE || op->kind == ZH_OP_ALLGATHER) &&
           op->send_bytes <= ZH_INLINE_MAX;
}

/* May op run whole on the caller's thread (steps 1-6) when its stream is
 * idle and every rank's buffers are activated? Zero-copy collectives whose
 * buffers are at most c->caller_max bytes each: ZH_CALLER_MAX, where the
 * algorithm is a few microseconds of copying and reducing, less than a
 * hand-off to the stream worker costs; any size where the host has no core
 * to spare per rank, so the worker could only run on the caller's own core
 * (ZCCL_CALLER_MAX overrides). The V collectives keep the worker (their
 * arrays are copied for it). */
int zh_op_caller_ok(const zh_comm_t *c, const zh_op_t *op)
{
    switch (op->kind) {
    case ZH_OP_ALLREDUCE:
    case ZH_OP_ALLGATHER:
    case ZH_OP_REDUCESCATTER:
    case ZH_OP_BROADCAST:
    case ZH_OP_REDUCE:
    case ZH_OP_SCATTER:
    case ZH_OP_ALLTOALL:
        return op->send_bytes <= c->caller_max && op->recv_bytes <= c->caller_max;
    default:
        return 0;
    }
}

/* Publish my descriptor and post line of op t->seq (step 1 of every op). */
void zh_op_post(zh_comm_t *c, const zh_task_t *t)
{
    const zh_op_t *op = &t->op;
    uint32_t seq = t->seq;
    zh_desc_t *mine = &c->ctrl->desc[seq & 1u];
    mine->send_va = (uint64_t)(uintptr_t)op->send;
    mine->recv_va = (uint64_t)(uintptr_t)op->recv;
    mine->send_bytes = op->send_bytes;
    mine->recv_bytes = op->recv_bytes;
    /* The op's common start, for the store-kind trial's timings (coll_nt.c):
     * a clock read (20-40 ns on a VM) only where that is under 0.3 % */
    mine->posted_ns = op->send_bytes + op->recv_bytes >= ZH_STAMP_MIN ? zc_time_ns() : 0;
    /* AllGather asks to pull as its form trial says (coll_form.c), which
     * this steps. Op k - 1 is done here (zh_op_turn): the history and the
     * trial are op k's to read and step. */
    mine->pull = op->kind == ZH_OP_ALLGATHER
                     ? (uint64_t)coll_allgather_pull_want(&c->reuse, &c->tune, c->nranks,
                                                          op->send_bytes, op->recv_bytes, op->recv)
                     : 0;
    int zc_ok = zh_mem_local_covers(c, mine->send_va, op->send_bytes) &&
                zh_mem_local_covers(c, mine->recv_va, op->recv_bytes);
    for (int i = 0; i < ZH_V_ARRAYS; i++) {
        if (op->v[i] != NULL) {
            memcpy(zh_ctrl_v(c, c->ctrl, seq & 1u, i), t->arrays + (size_t)i * (size_t)c->nranks,
                   sizeof(uint64_t) * (size_t)c->nranks);
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
    if (zh_op_inlinable(op) && op->send_bytes > 0 && zc_ok) {
        uint8_t *inl = op->send_bytes <= ZH_POST_DATA ? post->data : c->ctrl->idata[seq & 1u];
        memcpy(inl, op->send, op->send_bytes);
    }
    zh_flag_post((zh_flag_t *)(void *)post, seq); /* release: everything above first */
}

size_t zh_post_offset(uint32_t seq)
{
    return offsetof(zh_ctrl_t, post) + (seq & 1u) * sizeof(zh_post_t);
}

/* The first rank that has not posted op seq, -1 when every rank has (no waiting). */
int zh_op_unposted(zh_comm_t *c, uint32_t seq)
{
    for (int q = 0; q < c->nranks; q++) {
        const atomic_uint *v = &c->peers[q].ctrl->post[seq & 1u].value;
        if ((int32_t)(atomic_load_explicit(v, memory_order_acquire) - seq) < 0) {
            return q;
        }
    }
    return -1;
}
