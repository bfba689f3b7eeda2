/*
 * The op path: numbering, ordering, descriptor, agreement, path choice,
 * algorithm, exit handshake.
 *
 * Issue (the caller's thread). An HCCL collective call checks its local
 * arguments, enters the comm's issue window (one thread at a time: a second
 * thread overlapping the window is refused with HCCL_E_PARA and breaks the
 * comm, since the two threads' ops would interleave differently on each
 * rank), reserves a slot on the stream's task ring and takes the op's
 * sequence number there. Issuing from another thread after the first one
 * left the window is allowed (a hand-off under the program's own lock, as
 * DDP's autograd hooks do), and so it cannot be told from a race that never
 * overlaps: two threads issuing identical ops whose order differs between
 * ranks are indistinguishable, to any library, from one order. So ops
 * of one comm are numbered in issue order whatever streams carry them, and
 * op k of every rank is the k-th collective its caller issued.
 *
 * Order. Op k starts only when op k - 1 finished on this rank (exec_done);
 * an op that reaches the front of its stream early waits for it (spin, then
 * futex sleeps, bounded by the exec timeout, failing at once when the comm
 * broke). Post slots are by k & 1, so two ops of one comm never overlap.
 *
 * Per op every rank:
 *   1. publishes its descriptor and post line (slot k & 1);
 *   2. waits for every peer's post line of op k (entry);
 *   3. compares every post with rank 0's (same for all ranks, so every rank
 *      reaches the same verdict: a mismatch fails the op with HCCL_E_PARA
 *      everywhere, logged with the rank and field that differ);
 *   4. small AllReduce / AllGather on activated memory everywhere: finishes
 *      from the post slots (no exit barrier). Otherwise zero-copy if every
 *      rank's buffers lie wholly in activated memory, else buffered;
 *   5. resolves pointers (translation for zero-copy, CCL buffers otherwise)
 *      and runs the algorithm from collectives/;
 *   6. barrier (exit): nobody returns while a peer may still read its buffers.
 * A local failure (translation, mapping) raises the rank's error flag so that
 * peers fail their waits at once instead of timing out; the exit barrier is
 * still attempted so buffers are not released under a reader.
 *
 * The caller-thread path. A Barrier, or an op small enough for step 4, whose
 * stream is idle (nothing queued or running, vmm decides) and whose
 * predecessors are done, runs steps 1-4 on the caller's thread: it posts,
 * spins (then yields) at most ZH_INLINE_WAIT_NS for the peers and finishes.
 * If the peers are late, or the op turns out to need steps 5-6, the claimed
 * slot is handed to the stream worker, which goes on from step 2. Work that
 * other threads queue on the stream meanwhile lands behind that slot, so
 * stream order holds, and a program that relies on asynchronous streams
 * (rank 0 waits in an op on stream A while its peer first needs a Send that
 * rank 0 queued on stream B) still completes.
 */
#include "hccl_internal.h"
#include "hccl_capture.h"
#include "hccl_prof.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "zc/log.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"

/* How long the caller's thread waits for the peers before the worker takes
 * over (it spins spin_iters polls first, then yields the core). */
#define ZH_INLINE_WAIT_NS 50000ull
#define ZH_INLINE_BACKOFF_MAX 256u

enum { ZH_STEP_ISSUED, ZH_STEP_POSTED, ZH_STEP_RETIRED };

/* An op's task, in its stream slot's payload (no allocation per op). */
typedef struct {
    zh_comm_t *comm;
    zh_op_t op;
    uint64_t (*arrays)[ZH_MAX_RANKS]; /* V collectives only: copies of op.v */
    uint32_t seq;                     /* issue order on the comm */
    int step;                         /* ZH_STEP_*: how far it got */
    zh_prof_mark_t prof;
} zh_task_t;
_Static_assert(sizeof(zh_task_t) <= ZCCL_TASK_PAYLOAD, "an op task fits a stream slot");

typedef struct {
    coll_sync_t base;
    zh_comm_t *comm;
} zh_sync_t;

static int zh_sync_barrier(coll_sync_t *s)
{
    return zh_barrier(((zh_sync_t *)s)->comm);
}

static const char *const zh_op_names[ZH_OP_MAX] = {
    "?",          "Barrier",       "AllReduce",      "AllGather",
    "AllGatherV", "ReduceScatter", "ReduceScatterV", "Broadcast",
    "Reduce",     "Scatter",       "AlltoAll",       "AlltoAllV",
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
static int zh_op_agree(zh_comm_t *c, const zh_post_t *d0, const zh_post_t *dq, int q, uint32_t seq)
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
                c->rank, seq, d0->kind < ZH_OP_MAX ? zh_op_names[d0->kind] : "?", q, what, a, b);
    } else {
        ZC_WARN(ZC_SUB_COLL, "rank %d: op %u: ranks disagree (%s of rank %d); failing the op",
                c->rank, seq, what, q);
    }
    return 0;
}

const char *zh_op_name(int kind)
{
    return kind > 0 && kind < ZH_OP_MAX ? zh_op_names[kind] : "?";
}

/* ---- issue window ------------------------------------------------------------------- */

static _Thread_local char zh_thread_tag; /* its address names the calling thread */

HcclResult zh_issue_enter(zh_comm_t *c, const char *fn)
{
    uintptr_t me = (uintptr_t)&zh_thread_tag;
    if (atomic_exchange_explicit(&c->issuing, 1, memory_order_acquire) != 0) {
        ZC_WARN(ZC_SUB_COLL,
                "%s: rank %d: another thread is issuing on communicator %s at the same time "
                "(one thread at a time per communicator); the communicator is now unusable",
                fn, c->rank, c->name);
        zh_comm_fail(c, HCCL_E_PARA);
        return HCCL_E_PARA;
    }
    c->issuer = me;
    return HCCL_SUCCESS;
}

void zh_issue_leave(zh_comm_t *c)
{
    atomic_store_explicit(&c->issuing, 0, memory_order_release);
}

/* ---- posting and agreement ------------------------------------------------------------ */

/* Bytes an op carries in its post slot, or ZH_INLINE_MAX + 1 if it cannot. */
static size_t zh_op_inline_bytes(const zh_op_t *op)
{
    return op->kind == ZH_OP_ALLREDUCE || op->kind == ZH_OP_ALLGATHER ? op->send_bytes
                                                                      : ZH_INLINE_MAX + 1;
}

/* Publish my descriptor and post line of op t->seq (step 1 of every op). */
static void zh_op_post(zh_comm_t *c, const zh_task_t *t)
{
    const zh_op_t *op = &t->op;
    uint32_t seq = t->seq;
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
    size_t inline_bytes = zh_op_inline_bytes(op);
    uint8_t *inl = inline_bytes <= ZH_POST_DATA ? post->data : c->ctrl->idata[seq & 1u];
    if (inline_bytes <= ZH_INLINE_MAX && inline_bytes > 0 && zc_ok) {
        memcpy(inl, op->send, inline_bytes);
    }
    zh_flag_post((zh_flag_t *)(void *)post, seq); /* release: everything above first */
}

static size_t zh_post_offset(uint32_t seq)
{
    return offsetof(zh_ctrl_t, post) + (seq & 1u) * sizeof(zh_post_t);
}

/* Has every peer posted op seq? (no waiting) */
static int zh_op_all_posted(zh_comm_t *c, uint32_t seq)
{
    for (int q = 0; q < c->nranks; q++) {
        const atomic_uint *v = &c->peers[q].ctrl->post[seq & 1u].value;
        if ((int32_t)(atomic_load_explicit(v, memory_order_acquire) - seq) < 0) {
            return 0;
        }
    }
    return 1;
}

/* ---- the steps after the posts ------------------------------------------------------- */

/* Inline finish: inputs come from the peers' post slots. */
static void zh_op_inline(zh_comm_t *c, const zh_op_t *op, uint32_t seq, size_t bytes)
{
    const void *src[ZH_MAX_RANKS];
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
    atomic_fetch_add_explicit(&c->zc_ops, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->inline_ops, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->inline_bytes, bytes, memory_order_relaxed);
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
            (result != ZC_OK && zh_wait_check(c, q, zc_time_ns()) == ZC_ERR_REMOTE)) {
            result = ZC_ERR_REMOTE;
        }
    }
    if (result == ZC_OK) {
        result = zh_ops[op->kind].direct(a);
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

/* Run the algorithm on user buffers (zero-copy) or CCL buffers, then exit. */
static int zh_op_algorithm(zh_comm_t *c, const zh_op_t *op, uint32_t seq, const zh_post_t **p,
                           int zc)
{
    const zh_desc_t *d[ZH_MAX_RANKS];
    const void *in[ZH_MAX_RANKS];
    void *out[ZH_MAX_RANKS];
    void *ccl[ZH_MAX_RANKS];
    const uint64_t *arr[4][ZH_MAX_RANKS];
    uint64_t each[ZH_MAX_RANKS];
    uint64_t staged = 0;
    zh_sync_t sync = {{zh_sync_barrier}, c};
    for (int q = 0; q < c->nranks; q++) {
        d[q] = &c->peers[q].ctrl->desc[seq & 1u];
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
    int result = zc ? zh_op_direct(c, op, d, &a, in, out) : zh_op_staged(c, op, &a, ccl);
    /* Argument disagreements the algorithms find (V arrays) are seen by
     * every rank alike and leave the comm usable; other failures break it. */
    if (result != ZC_OK && result != ZC_ERR_REMOTE && result != ZC_ERR_TIMEOUT &&
        result != ZC_ERR_INVAL) {
        zh_comm_fail(c, zh_result(result));
    }
    if (result == ZC_ERR_REMOTE || result == ZC_ERR_TIMEOUT) {
        return result; /* the comm is broken; peers are not coming */
    }
    int st = zh_barrier(c);
    return result != ZC_OK ? result : st;
}

/* Every post of op seq is in: agree, choose the path, run it. *inline_only:
 * in = 1 asks to stop (returning 1) unless the op finishes without another
 * wait; the caller then hands it to the stream worker. */
static int zh_op_complete(zh_comm_t *c, const zh_task_t *t, int inline_only)
{
    const zh_op_t *op = &t->op;
    uint32_t seq = t->seq;
    const zh_post_t *p[ZH_MAX_RANKS];
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
    size_t bytes = zh_op_inline_bytes(op);
    if (zc && bytes <= ZH_INLINE_MAX) {
        zh_op_inline(c, op, seq, bytes);
        return ZC_OK;
    }
    if (inline_only) {
        return 1;
    }
    return zh_op_algorithm(c, op, seq, p, zc);
}

/* ---- ordering: op seq runs after op seq - 1 of this comm ------------------------------- */

static int zh_op_turn(zh_comm_t *c, uint32_t seq)
{
    return (int32_t)(atomic_load_explicit(&c->exec_done, memory_order_acquire) - (seq - 1u)) >= 0;
}

/* Wait until every op issued before seq finished here (they may run on
 * other streams), bounded by the exec timeout, failing at once when the
 * comm broke or a peer failed. */
static int zh_op_wait_turn(zh_comm_t *c, uint32_t seq)
{
    for (uint32_t i = 0; i < c->spin_iters + 256u; i++) {
        if (zh_op_turn(c, seq)) {
            return ZC_OK;
        }
        if (i < c->spin_iters) {
            zc_cpu_relax();
        } else {
            sched_yield();
        }
    }
    uint64_t start = zc_time_ns();
    for (;;) {
        unsigned v = atomic_load_explicit(&c->exec_done, memory_order_seq_cst);
        if (zh_op_turn(c, seq)) {
            return ZC_OK;
        }
        if (atomic_load_explicit(&c->async_error, memory_order_acquire) != HCCL_SUCCESS) {
            return ZC_ERR_REMOTE;
        }
        int st = zh_wait_check(c, -1, start);
        if (st != ZC_OK) {
            ZC_WARN(ZC_SUB_COLL,
                    "rank %d: op %u gave up waiting for op %u (issued before it "
                    "on another stream)",
                    c->rank, seq, seq - 1u);
            return st;
        }
        atomic_fetch_add_explicit(&c->exec_sleepers, 1, memory_order_seq_cst);
        if (!zh_op_turn(c, seq)) {
            (void)zc_futex_wait_private(&c->exec_done, v, 100000000ull);
        }
        atomic_fetch_sub_explicit(&c->exec_sleepers, 1, memory_order_seq_cst);
    }
}

/* Op seq is over here (done, failed or dropped): let op seq + 1 start. */
static void zh_op_retire(zh_comm_t *c, uint32_t seq)
{
    unsigned v = atomic_load_explicit(&c->exec_done, memory_order_relaxed);
    while ((int32_t)(seq - v) > 0 &&
           !atomic_compare_exchange_weak_explicit(&c->exec_done, &v, seq, memory_order_seq_cst,
                                                  memory_order_relaxed)) {
    }
    if (atomic_load_explicit(&c->exec_sleepers, memory_order_seq_cst) != 0) {
        zc_futex_wake_private(&c->exec_done, INT32_MAX);
    }
}

/* ---- the stream task ------------------------------------------------------------------ */

/* Map an op's internal status to its result; a lost peer or a timeout
 * breaks the comm and says who is late. */
static HcclResult zh_op_result(zh_comm_t *c, uint32_t seq, int st)
{
    HcclResult r = zh_result(st);
    int err = atomic_load_explicit(&c->async_error, memory_order_acquire);
    if (err != HCCL_SUCCESS) {
        /* Broken meanwhile (another op, a misuse): that is why it failed, and
         * an op that ran while a second thread issued may have been matched
         * with the wrong op of a peer, so it must not report success. */
        return (HcclResult)err;
    }
    if (st == ZC_ERR_REMOTE || st == ZC_ERR_TIMEOUT) {
        zh_diag_report(c, seq, st == ZC_ERR_TIMEOUT ? "timed out" : "lost a peer");
        zh_comm_fail(c, r);
    }
    return r;
}

static int zh_op_task(void *arg)
{
    zh_task_t *t = arg;
    zh_comm_t *c = t->comm;
    int prev_rank = zc_log_get_rank();
    zc_log_set_rank(c->rank);
    int st = t->step == ZH_STEP_POSTED ? ZC_OK : zh_op_wait_turn(c, t->seq);
    int err = atomic_load_explicit(&c->async_error, memory_order_acquire);
    HcclResult r;
    if (err != HCCL_SUCCESS) {
        r = (HcclResult)err; /* a broken comm fails every later op at once */
    } else if (st != ZC_OK) {
        r = zh_op_result(c, t->seq, st);
    } else {
        zh_prof_snap_t snap;
        zh_prof_begin(c, &snap);
        if (t->step != ZH_STEP_POSTED) {
            zh_op_post(c, t);
        }
        atomic_store_explicit(&c->waiting_seq, t->seq, memory_order_relaxed);
        st = c->nranks == 1 ? ZC_OK : zh_wait_peers(c, zh_post_offset(t->seq), t->seq);
        atomic_store_explicit(&c->waiting_seq, 0, memory_order_relaxed);
        if (st == ZC_OK) {
            st = zh_op_complete(c, t, 0);
        }
        r = zh_op_result(c, t->seq, st);
        zh_prof_end(c, &t->op, &t->prof, &snap, r);
    }
    t->step = ZH_STEP_RETIRED;
    zh_op_retire(c, t->seq);
    zc_log_set_rank(prev_rank);
    return (int)r;
}

static void zh_op_task_free(void *arg)
{
    zh_task_t *t = arg;
    zh_comm_t *c = t->comm;
    if (t->step != ZH_STEP_RETIRED) {
        /* Dropped by its stream (force destroy, stop-on-failure): the peers
         * will never see this rank's op, and ops after it cannot be matched. */
        ZC_WARN(ZC_SUB_COLL,
                "rank %d: op %u (%s) was dropped by its stream; the communicator "
                "is now unusable",
                c->rank, t->seq, zh_op_name(t->op.kind));
        zh_comm_fail(c, HCCL_E_INTERNAL);
        zh_op_retire(c, t->seq);
    }
    free(t->arrays);
    atomic_fetch_sub_explicit(&c->inflight, 1, memory_order_release);
}

/* ---- issue ------------------------------------------------------------------------------ */

/* Bounded wait on the caller's thread for every peer's post of seq. */
static int zh_op_spin_posts(zh_comm_t *c, uint32_t seq)
{
    uint64_t start = 0;
    for (uint32_t i = 0;; i++) {
        if (zh_op_all_posted(c, seq)) {
            return 1;
        }
        if (i < c->spin_iters) {
            zc_cpu_relax();
            continue;
        }
        if (start == 0) {
            start = zc_time_ns();
        } else if (zc_time_ns() - start > ZH_INLINE_WAIT_NS) {
            return 0;
        }
        sched_yield(); /* a peer may need this core (more ranks than cores) */
    }
}

/* Run t on the caller's thread: post, wait a bounded time for the peers,
 * finish. Returns 1 when done (result in *r), 0 when the worker must go on
 * from the step reached (t->step says which). */
static int zh_op_try_inline(zh_comm_t *c, zh_task_t *t, HcclResult *r)
{
    if (c->inline_skip > 0) {
        c->inline_skip--; /* the peers were late lately: queue without trying */
        return 0;
    }
    if (!zh_op_turn(c, t->seq) ||
        atomic_load_explicit(&c->async_error, memory_order_acquire) != HCCL_SUCCESS) {
        return 0;
    }
    int prev_rank = zc_log_get_rank();
    zc_log_set_rank(c->rank);
    zh_prof_snap_t snap;
    zh_prof_begin(c, &snap);
    zh_op_post(c, t);
    t->step = ZH_STEP_POSTED;
    int done = 0;
    if (zh_op_spin_posts(c, t->seq)) {
        int st = zh_op_complete(c, t, 1);
        if (st != 1) {
            *r = zh_op_result(c, t->seq, st);
            zh_prof_end(c, &t->op, &t->prof, &snap, *r);
            t->step = ZH_STEP_RETIRED;
            zh_op_retire(c, t->seq);
            done = 1;
        }
    }
    /* Peers that run behind (their ops queued on busy streams) would make
     * every attempt spin in vain: after a miss skip 1, 2, 4 ... attempts. */
    c->inline_backoff = done ? 0 : ZC_MIN(ZC_MAX(2 * c->inline_backoff, 1u), ZH_INLINE_BACKOFF_MAX);
    c->inline_skip = c->inline_backoff;
    zc_log_set_rank(prev_rank);
    return done;
}

/* Copy the V arrays: the caller may reuse them once the call returns. */
static HcclResult zh_op_copy_arrays(zh_comm_t *c, const zh_op_t *op, zh_task_t *t)
{
    t->arrays = NULL;
    if (op->v[0] == NULL && op->v[2] == NULL) {
        return HCCL_SUCCESS;
    }
    t->arrays = calloc(4, sizeof(*t->arrays));
    if (t->arrays == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory queueing an op", c->rank);
        return HCCL_E_MEMORY;
    }
    for (int i = 0; i < 4; i++) {
        if (op->v[i] != NULL) {
            memcpy(t->arrays[i], op->v[i], sizeof(uint64_t) * (size_t)c->nranks);
        }
    }
    return HCCL_SUCCESS;
}

static HcclResult zh_stream_error(zh_comm_t *c, const char *what, aclrtStream stream, aclError e)
{
    ZC_WARN(ZC_SUB_COLL, "rank %d: cannot enqueue %s on stream %p (aclError %d)", c->rank, what,
            stream, (int)e);
    return e == ACL_ERROR_RT_PARAM_INVALID || e == ACL_ERROR_INVALID_PARAM ||
                   e == ACL_ERROR_RT_INVALID_HANDLE
               ? HCCL_E_PARA
               : HCCL_E_RUNTIME;
}

/* The op's number and its slot on the stream: inline when it may. */
static HcclResult zh_op_issue(zh_comm_t *c, const zh_op_t *op, aclrtStream stream)
{
    int small = op->kind == ZH_OP_BARRIER || zh_op_inline_bytes(op) <= ZH_INLINE_MAX;
    zccl_task_t rt;
    aclError e = zccl_task_reserve(stream, small, &rt);
    if (e != ACL_SUCCESS) {
        return zh_stream_error(c, zh_op_name(op->kind), stream, e);
    }
    zh_task_t *t = rt.payload;
    t->comm = c;
    t->op = *op;
    t->step = ZH_STEP_ISSUED;
    zh_prof_issue(&t->prof, stream);
    HcclResult r = zh_op_copy_arrays(c, op, t);
    if (r != HCCL_SUCCESS) {
        t->seq = 0; /* takes no number: a no-op slot */
        zccl_task_commit(&rt, NULL, NULL);
        return r;
    }
    t->seq = atomic_fetch_add_explicit(&c->issue_seq, 1, memory_order_relaxed) + 1u;
    atomic_store_explicit(&c->ctrl->issued.value, t->seq, memory_order_release);
    atomic_fetch_add_explicit(&c->inflight, 1, memory_order_relaxed);
    if (rt.idle && zh_op_try_inline(c, t, &r)) {
        zccl_task_finish(&rt, (int)r);
        free(t->arrays);
        atomic_fetch_sub_explicit(&c->inflight, 1, memory_order_release);
        return HCCL_SUCCESS; /* its result comes from the stream, as a task's would */
    }
    zccl_task_commit(&rt, zh_op_task, zh_op_task_free);
    return HCCL_SUCCESS;
}

HcclResult zh_op_submit(zh_comm_t *c, const zh_op_t *op, aclrtStream stream)
{
    if (zccl_stream_capturing(stream)) {
        return zh_capture_op(c, op, stream); /* recorded for aclmdlRI replays, not run */
    }
    const char *fn = zh_op_name(op->kind);
    ZH_CHECK_RESULT(zh_check_extent(c, fn, "sendBuf", op->send, op->send_bytes));
    ZH_CHECK_RESULT(zh_check_extent(c, fn, "recvBuf", op->recv, op->recv_bytes));
    ZH_CHECK_RESULT(zh_issue_enter(c, fn));
    HcclResult r = zh_op_issue(c, op, stream);
    zh_issue_leave(c);
    return r;
}

/* An extent past this is checked against the address space (one syscall). */
#define ZH_EXTENT_CHECK_MIN (64ull << 20)

HcclResult zh_check_extent(zh_comm_t *c, const char *fn, const char *what, const void *p,
                           uint64_t bytes)
{
    if (p == NULL || bytes < ZH_EXTENT_CHECK_MIN) {
        return HCCL_SUCCESS;
    }
    /* msync(MS_ASYNC) does no I/O: it fails with ENOMEM when part of the
     * range is not mapped, which is what an absurd count gives. */
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)4095;
    uintptr_t end = (uintptr_t)p + bytes;
    if (end < (uintptr_t)p || msync((void *)lo, end - lo, MS_ASYNC) != 0) {
        ZC_WARN(ZC_SUB_COLL,
                "%s: rank %d: %s %p with %llu bytes to move is not mapped memory "
                "(count too large?)",
                fn, c->rank, what, p, (unsigned long long)bytes);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}
