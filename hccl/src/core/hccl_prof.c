/*
 * Profiling records and path statistics of communicators.
 *
 * A record is built only when the recorder is on (hccl_prof.h's inline
 * checks): it names the communicator and rank, the op under CANN's API name,
 * its dtype, count and bytes, the path (from the change of the comm's path
 * counters across the op), the stream it was issued on and its issue, start
 * and end times. libmsprofiler turns the records into trace files.
 *
 * ZCCL_PRINT_STATS prints one line per communicator at destroy, in words
 * scripts can match: zero-copy ops (direct algorithms over mapped user
 * buffers), inline ops (small ops whose data rode in the post line), buffered
 * ops (CCL buffer path) and the bytes staged through CCL or send buffers.
 */
#include "core/hccl_prof.h"

#include <stdio.h>
#include <string.h>

#include "zc/config.h"

static const char *const zh_prof_names[ZH_OP_MAX] = {
    [ZH_OP_BARRIER] = "HcclBarrier",
    [ZH_OP_ALLREDUCE] = "HcclAllReduce",
    [ZH_OP_ALLGATHER] = "HcclAllGather",
    [ZH_OP_ALLGATHERV] = "HcclAllGatherV",
    [ZH_OP_REDUCESCATTER] = "HcclReduceScatter",
    [ZH_OP_REDUCESCATTERV] = "HcclReduceScatterV",
    [ZH_OP_BROADCAST] = "HcclBroadcast",
    [ZH_OP_REDUCE] = "HcclReduce",
    [ZH_OP_SCATTER] = "HcclScatter",
    [ZH_OP_ALLTOALL] = "HcclAlltoAll",
    [ZH_OP_ALLTOALLV] = "HcclAlltoAllV",
};

static uint64_t zh_prof_load(atomic_uint_fast64_t *v)
{
    return (uint64_t)atomic_load_explicit(v, memory_order_relaxed);
}

void zh_prof_snap(zh_comm_t *c, zh_prof_snap_t *s)
{
    s->zc = zh_prof_load(&c->zc_ops);
    s->inl = zh_prof_load(&c->inline_ops);
    s->buf = zh_prof_load(&c->buf_ops);
    s->t0 = zc_time_ns();
}

/* The common part of a record: who, when, where, which path. */
static void zh_prof_fill(zh_comm_t *c, const zh_prof_mark_t *m, const zh_prof_snap_t *s,
                         HcclResult r, zccl_prof_rec_t *rec)
{
    memset(rec, 0, sizeof(*rec));
    rec->t_start = s->t0;
    rec->t_end = zc_time_ns();
    rec->t_enq = m->t_enq != 0 && m->t_enq <= s->t0 ? m->t_enq : s->t0;
    rec->stream = (uint64_t)(uintptr_t)m->stream;
    /* Collectives run one at a time in issue order and are recorded before
     * they retire: the running one is exec_done + 1 (for a send/recv, the
     * collective that comes next). */
    rec->seq = atomic_load_explicit(&c->exec_done, memory_order_relaxed) + 1u;
    rec->rank = c->rank;
    rec->nranks = c->nranks;
    rec->device = c->device;
    rec->peer = -1;
    rec->result = (int32_t)r;
    if (zh_prof_load(&c->buf_ops) != s->buf) {
        rec->path = ZCCL_PROF_PATH_BUFFERED;
    } else if (zh_prof_load(&c->inline_ops) != s->inl) {
        rec->path = ZCCL_PROF_PATH_INLINE;
    } else if (zh_prof_load(&c->zc_ops) != s->zc) {
        rec->path = ZCCL_PROF_PATH_ZERO_COPY;
    } else {
        rec->path = ZCCL_PROF_PATH_NONE;
    }
    snprintf(rec->comm, sizeof(rec->comm), "%s", c->name);
}

void zh_prof_op(zh_comm_t *c, const zh_op_t *op, const zh_prof_mark_t *m, const zh_prof_snap_t *s,
                HcclResult r)
{
    zccl_prof_rec_t rec;
    zh_prof_fill(c, m, s, r, &rec);
    rec.count = op->count;
    rec.dtype = op->dtype;
    rec.send_bytes = op->send_bytes;
    rec.recv_bytes = op->recv_bytes;
    if (op->kind == ZH_OP_BROADCAST || op->kind == ZH_OP_REDUCE || op->kind == ZH_OP_SCATTER) {
        rec.peer = op->root;
    }
    const char *name = op->kind > 0 && op->kind < ZH_OP_MAX ? zh_prof_names[op->kind] : NULL;
    snprintf(rec.op, sizeof(rec.op), "%s", name != NULL ? name : "Hccl?");
    zccl_prof_record(&rec, ZCCL_PROF_HCCL);
}

void zh_prof_p2p(zh_comm_t *c, const HcclSendRecvItem *items, size_t stride, uint32_t n,
                 const zh_prof_mark_t *m, const zh_prof_snap_t *s, HcclResult r)
{
    zccl_prof_rec_t rec;
    zh_prof_fill(c, m, s, r, &rec);
    const HcclSendRecvItem *first = items;
    rec.dtype = n > 0 ? (int32_t)first->dataType : -1;
    for (uint32_t i = 0; i < n; i++) {
        const HcclSendRecvItem *it =
            (const HcclSendRecvItem *)(const void *)((const char *)items + i * stride);
        uint64_t bytes = it->count * coll_dtype_size(it->dataType);
        rec.count += it->count;
        if (it->sendRecvType == HCCL_SEND) {
            rec.send_bytes += bytes;
        } else {
            rec.recv_bytes += bytes;
        }
        if (it->dataType != first->dataType) {
            rec.dtype = -1; /* mixed */
        }
    }
    const char *name = "HcclBatchSendRecv";
    if (n == 1) {
        name = first->sendRecvType == HCCL_SEND ? "HcclSend" : "HcclRecv";
        rec.peer = (int32_t)first->remoteRank;
    }
    snprintf(rec.op, sizeof(rec.op), "%s", name);
    zccl_prof_record(&rec, ZCCL_PROF_HCCL);
}

void zh_stats_print(zh_comm_t *c)
{
    if (!zc_config()->print_stats) {
        return;
    }
    uint64_t zc = zh_prof_load(&c->zc_ops);
    uint64_t inl = zh_prof_load(&c->inline_ops);
    /* zc_ops counts every op that ran on activated memory, inline ones too */
    printf("zccl stats: rank %d comm %s: %llu zero-copy ops, %llu inline ops, %llu buffered ops, "
           "%llu bytes staged; %llu ops finished on the caller's thread\n",
           c->rank, c->name, (unsigned long long)(zc - ZC_MIN(inl, zc)), (unsigned long long)inl,
           (unsigned long long)zh_prof_load(&c->buf_ops),
           (unsigned long long)zh_prof_load(&c->staged_bytes),
           (unsigned long long)zh_prof_load(&c->caller_ops));
    fflush(stdout);
}
