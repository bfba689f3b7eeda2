/*
 * Ops: issue. An HCCL collective call checks its arguments, enters the
 * comm's issue window, takes its stream slot and sequence number, and runs
 * on the caller's thread when it may (otherwise the stream task runs it).
 * The protocol is described in hccl_op.h.
 */
#include "op/hccl_op.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "zc/log.h"
#include "zc/place.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"

/* How long the caller's thread waits for the peers' posts before the
 * worker takes over (a core per rank; oversubscribed), how long of it may
 * be a busy spin (at most spin_iters polls too), and, oversubscribed, until
 * when it polls with yields; the rest sleeps. With a core per rank a peer
 * late by more than the spin was mostly held up by the host for some tens
 * of us, and waiting on costs less than a handoff to the worker. */
#define ZH_INLINE_WAIT_CORE_NS 200000ull
#define ZH_INLINE_WAIT_NS 50000ull
/* The same wait while yields are off (zc_yield_is_off: a busy task shares
 * the core): after the spin it sleeps, as a yield would hand the busy task
 * a slice; the peers' posts come late by a wake each, and a handoff to the
 * worker would add two more (its own and the caller's). */
#define ZH_INLINE_SLEEP_WAIT_NS 1000000ull
#define ZH_INLINE_SPIN_NS 20000ull
#define ZH_INLINE_YIELD_NS 25000ull
#define ZH_INLINE_BACKOFF_MAX 256u
#define ZH_SPIN_BACKOFF_MAX 64u

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
        zh_comm_fail(c, ZC_ERR_INVAL);
        return HCCL_E_PARA;
    }
    c->issuer = me;
    return HCCL_SUCCESS;
}

void zh_issue_leave(zh_comm_t *c)
{
    atomic_store_explicit(&c->issuing, 0, memory_order_release);
}

/* ---- issue ------------------------------------------------------------------------------ */

/* Is this attempt one to skip (a miss's skips not yet used up)? */
static int zh_skips_take(zh_skips_t *s)
{
    if (s->skip == 0) {
        return 0;
    }
    s->skip--;
    return 1;
}

/* After an attempt: a hit ends the skips; a miss skips the next 1, 2, 4 ...
 * attempts, doubling with each miss in a row up to max. */
static void zh_skips_note(zh_skips_t *s, int hit, uint32_t max)
{
    s->backoff = hit ? 0 : ZC_MIN(ZC_MAX(2 * s->backoff, 1u), max);
    s->skip = s->backoff;
}

/* Spin on the peers' posts of seq for up to ZH_INLINE_SPIN_NS (and
 * c->spin_iters polls): 1 when all are in, else 0 with *q the first peer
 * missing and *start when the spin began (0: the clock was not read). The
 * clock is first read after 64 polls: on a VM a read costs as much as the
 * whole wait of most ops. */
static int zh_op_spin_posts(zh_comm_t *c, uint32_t seq, int *q, uint64_t *start)
{
    for (uint32_t i = 1; i < c->spin_iters; i++) {
        zc_cpu_relax();
        if ((*q = zh_op_unposted(c, seq)) < 0) {
            return 1;
        }
        if (i % 64 == 0) {
            uint64_t now = zc_time_ns();
            *start = *start != 0 ? *start : now;
            if (now - *start > ZH_INLINE_SPIN_NS) {
                break;
            }
        }
    }
    return 0;
}

/* Publish the CPU the caller's thread posts from, for the peers' fences
 * (zh_comm_sleep); a store only when it changed, so the line stays in this
 * core's cache. */
static void zh_op_note_cpu(zh_comm_t *c)
{
    int cpu = zc_cpu_now();
    if (cpu != c->cpu) {
        c->cpu = cpu;
        atomic_store_explicit(&c->ctrl->cpu, cpu, memory_order_relaxed);
    }
}

/* With yields on and no more ranks than cores: when peer q, which has not
 * posted yet, last posted from the CPU this thread runs on, a wake put the
 * two on one CPU (a sleep outside zccl: a Gloo barrier, I/O, the GIL) and
 * the peer runs only while this thread yields. The balancer does not part
 * two threads that both ran microseconds ago, so the ranks stay stacked,
 * each op paying a spin in vain and a turn on the CPU (perf log
 * 2026-12-07, "Quiet cores: ranks stacked after a sleep"). Step off that
 * CPU once: the affinity mask loses it for one call, which moves the
 * thread at once, and gets it back, which does not move it again; then
 * publish the new CPU, so the peer does not step over here. */
static void zh_op_unstack(zh_comm_t *c, int q)
{
    int cpu = zc_cpu_now();
    if (cpu < 0 || atomic_load_explicit(&c->peers[q].ctrl->cpu, memory_order_relaxed) != cpu) {
        return;
    }
    zc_cpu_fence_t fence;
    if (zc_cpu_fence_up(&fence, cpu)) {
        zc_cpu_fence_lift(&fence);
        zh_op_note_cpu(c);
    }
}

/* Bounded wait on the caller's thread for every peer's post of seq: a
 * spin, then polls that yield the core (while yields are short: zc_yield)
 * up to the bound. On an oversubscribed host the polls end at
 * ZH_INLINE_YIELD_NS and the rest sleeps on the post line of the first peer
 * missing, whose post wakes a counted sleeper: a peer that shares this core
 * runs at the first yield, and sleeping at once would cost more than it
 * saves there, as a wake that finds the core idle takes longer than most
 * small ops; a peer that is later than that waits for a core somewhere else,
 * and polls would keep it off this one. With a core per rank the polls go on
 * to the bound: a peer late by more than the spin was held up by the host
 * (an interrupt, a kernel thread), nobody waits for this core, and a sleep
 * would make this rank late by a wake (tens of us on a VM) for the peers'
 * next op.
 *
 * While a busy task shares the core (yields off) the spin runs too, then
 * the wait sleeps: the peers are due within the spin most of the time, and
 * a sleeper's wake can wait milliseconds behind the busy task. But the
 * scheduler gives the busy task its share: every microsecond spun in vain
 * comes back as a microsecond queued behind it. So after a spin that
 * missed there, the next 1, 2, 4 ... ZH_SPIN_BACKOFF_MAX waits sleep at
 * once, and a spin that finds the posts ends the skips. */
static int zh_op_wait_posts(zh_comm_t *c, uint32_t seq)
{
    int q = zh_op_unposted(c, seq);
    if (q < 0) {
        return 1;
    }
    uint64_t start = 0;
    if (zc_yield_is_off() && zh_skips_take(&c->spin_skips)) {
        /* spins missed lately: sleep at once */
    } else if (zh_op_spin_posts(c, seq, &q, &start)) {
        zh_skips_note(&c->spin_skips, 1, ZH_SPIN_BACKOFF_MAX);
        return 1;
    } else if (zc_yield_is_off()) {
        zh_skips_note(&c->spin_skips, 0, ZH_SPIN_BACKOFF_MAX);
    } else if (c->spread) {
        zh_op_unstack(c, q);
    }
    start = start != 0 ? start : zc_time_ns();
    uint64_t bound = zc_yield_is_off() ? ZH_INLINE_SLEEP_WAIT_NS
                     : c->oversub      ? ZH_INLINE_WAIT_NS
                                       : ZH_INLINE_WAIT_CORE_NS;
    for (;;) {
        uint64_t spent = zc_time_ns() - start;
        if (spent >= bound) {
            return 0;
        }
        if ((!c->oversub || spent < ZH_INLINE_YIELD_NS) && zc_yield()) {
            if ((q = zh_op_unposted(c, seq)) < 0) {
                return 1;
            }
            continue;
        }
        zh_comm_sleep(c, q, (zh_flag_t *)(void *)&c->peers[q].ctrl->post[seq & 1u], seq,
                      bound - spent);
        if ((q = zh_op_unposted(c, seq)) < 0) {
            return 1;
        }
    }
}

/* Run t on the caller's thread: post, wait a bounded time for the peers,
 * finish. Returns 1 when done (result in *r), 0 when the worker must go on
 * from the step reached (t->step says which). */
static int zh_op_try_inline(zh_comm_t *c, zh_task_t *t, HcclResult *r)
{
    if (zh_skips_take(&c->inline_skips)) {
        return 0; /* the peers were late lately: queue without trying */
    }
    if (!zh_op_turn(c, t->seq) ||
        atomic_load_explicit(&c->async_error, memory_order_acquire) != HCCL_SUCCESS) {
        return 0;
    }
    int prev_rank = zc_log_rank_enter(c->rank);
    zh_prof_snap_t snap;
    zh_prof_begin(c, &snap);
    if (c->spread) {
        zh_op_note_cpu(c);
    }
    zh_op_post(c, t);
    t->step = ZH_STEP_POSTED;
    int done = 0;
    if (zh_op_wait_posts(c, t->seq)) {
        int st = zh_op_complete(c, t, 1);
        if (st != 1) {
            *r = zh_op_result(c, t->seq, st);
            zh_prof_end(c, &t->op, &t->prof, &snap, *r);
            t->step = ZH_STEP_RETIRED;
            zh_op_retire(c, t->seq);
            zh_count(&c->caller_ops, 1);
            done = 1;
        }
    }
    /* Peers that run behind (their ops queued on busy streams) would make
     * every attempt spin in vain: after a miss skip 1, 2, 4 ... attempts. */
    zh_skips_note(&c->inline_skips, done, ZH_INLINE_BACKOFF_MAX);
    zc_log_rank_leave(prev_rank, c->rank);
    return done;
}

/* Copy the V arrays: the caller may reuse them once the call returns. */
static HcclResult zh_op_copy_arrays(zh_comm_t *c, const zh_op_t *op, zh_task_t *t)
{
    t->arrays = NULL;
    if (op->v[ZH_V_SEND_COUNTS] == NULL && op->v[ZH_V_RECV_COUNTS] == NULL) {
        return HCCL_SUCCESS;
    }
    t->arrays = calloc((size_t)ZH_V_ARRAYS * (size_t)c->nranks, sizeof(*t->arrays));
    if (t->arrays == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory queueing an op", c->rank);
        return HCCL_E_MEMORY;
    }
    for (int i = 0; i < ZH_V_ARRAYS; i++) {
        if (op->v[i] != NULL) {
            memcpy(t->arrays + (size_t)i * (size_t)c->nranks, op->v[i],
                   sizeof(uint64_t) * (size_t)c->nranks);
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
    int small = op->kind == ZH_OP_BARRIER || zh_op_inlinable(op) || zh_op_caller_ok(c, op);
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
    if (rt.idle && zh_op_try_inline(c, t, &r)) {
        zccl_task_finish(&rt, (int)r);
        free(t->arrays);
        return HCCL_SUCCESS; /* its result comes from the stream, as a task's would */
    }
    /* Counted only once queued (zh_op_task_free uncounts it): an op done
     * here is over before the call returns, so nothing can wait for it. */
    atomic_fetch_add_explicit(&c->inflight, 1, memory_order_relaxed);
    zccl_task_commit(&rt, zh_op_task, zh_op_task_free);
    return HCCL_SUCCESS;
}

HcclResult zh_op_submit(zh_comm_t *c, const zh_op_t *op, aclrtStream stream)
{
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

/* The hierarchical tier's local steps: op on c, numbered now and run on this
 * thread (a stream task of the communicator that spans hosts, whose ops run
 * one at a time, so c's ops keep their issue order). */
HcclResult zh_op_run_now(zh_comm_t *c, const zh_op_t *op)
{
    zh_task_t t;
    memset(&t, 0, sizeof(t));
    t.comm = c;
    t.op = *op;
    t.step = ZH_STEP_ISSUED;
    zh_prof_issue(&t.prof, NULL);
    ZH_CHECK_RESULT(zh_op_copy_arrays(c, op, &t));
    t.seq = atomic_fetch_add_explicit(&c->issue_seq, 1, memory_order_relaxed) + 1u;
    atomic_store_explicit(&c->ctrl->issued.value, t.seq, memory_order_release);
    HcclResult r = (HcclResult)zh_op_task(&t);
    free(t.arrays);
    return r;
}
