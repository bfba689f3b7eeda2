/*
 * The stream task ring: adaptive waits for `done`, and the producer side
 * (reserve a slot, publish it, push a task). See vmm_stream.h.
 */
#include "stream/vmm_stream.h"

#include "zc/export.h"
#include "zc/log.h"
#include "zc/sync.h"

#include <sched.h>
#include <unistd.h>

/* ---- waiting ------------------------------------------------------------------------ */

/* The budget a spin starts with: small once workers outnumber cores, where a
 * spinner steals the core of the thread it waits for. */
/* A spin of b ns, cut short when this process has as many stream workers
 * as the host has cores (a spinner would take the core of the thread it
 * waits for). */
static unsigned vmm_spin_cap(unsigned b)
{
    static atomic_long vmm_ncpu;
    long ncpu = atomic_load_explicit(&vmm_ncpu, memory_order_relaxed);
    if (ncpu == 0) {
        ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        atomic_store_explicit(&vmm_ncpu, ncpu, memory_order_relaxed);
    }
    if (ncpu > 0 && atomic_load_explicit(&vmm_nworkers, memory_order_relaxed) >= ncpu) {
        b = ZC_MIN(b, VMM_SPIN_MIN_NS * 4);
    }
    return b;
}

unsigned vmm_spin_budget(vmm_stream_t *s)
{
    return vmm_spin_cap(atomic_load_explicit(&s->spin, memory_order_relaxed));
}

unsigned vmm_idle_budget(void)
{
    return vmm_spin_cap(VMM_IDLE_SPIN_NS);
}

/* Grow the budget after a spin that succeeded. After one that slept, the
 * wait took waited_ns: when that fits the longest spin, spin that long next
 * time (the work waited for takes about as long each time: an op of one
 * size in a loop), else shrink (a wait behind much queued work, or one
 * whose work could not run meanwhile). */
static void vmm_spin_learn(vmm_stream_t *s, int success, uint64_t waited_ns)
{
    unsigned b = atomic_load_explicit(&s->spin, memory_order_relaxed);
    if (success) {
        b = ZC_MIN(b * 2, VMM_SPIN_MAX_NS);
    } else if (waited_ns <= VMM_SPIN_MAX_NS) {
        b = (unsigned)ZC_MAX(waited_ns + waited_ns / 4, (uint64_t)VMM_SPIN_MIN_NS);
        b = ZC_MIN(b, VMM_SPIN_MAX_NS);
    } else {
        b = ZC_MAX(b / 2, VMM_SPIN_MIN_NS);
    }
    atomic_store_explicit(&s->spin, b, memory_order_relaxed);
}

int vmm_reached(vmm_stream_t *s, uint64_t target)
{
    return atomic_load_explicit(&s->done, memory_order_acquire) >= target;
}

/* Wake sleepers whose target `done` has reached. */
void vmm_stream_wake_done(vmm_stream_t *s, uint64_t done)
{
    uint64_t w = atomic_load_explicit(&s->want, memory_order_seq_cst);
    while (done >= w) {
        if (atomic_compare_exchange_weak_explicit(&s->want, &w, UINT64_MAX, memory_order_seq_cst,
                                                  memory_order_seq_cst)) {
            zc_futex_wake_private(&s->done32, INT32_MAX);
            break;
        }
    }
}

/* The end of a wait that went past its spin (t0: its start; 0 when it
 * did not spin, which teaches nothing). Returns rc. */
static int vmm_wait_slept(vmm_stream_t *s, uint64_t t0, int rc)
{
    if (t0 != 0) {
        vmm_spin_learn(s, 0, rc == 0 ? zc_time_ns() - t0 : UINT64_MAX);
    }
    return rc;
}

/* Wait until done >= target: spin (unless sleep_now), yield, then futex
 * sleeps. deadline_ns 0 = forever. Returns 0, or -1 at the deadline. */
int vmm_stream_wait_done(vmm_stream_t *s, uint64_t target, uint64_t deadline_ns, int sleep_now)
{
    uint64_t t0 = sleep_now ? 0 : zc_time_ns();
    uint64_t budget = sleep_now ? 0 : vmm_spin_budget(s);
    /* Busy polls for the first VMM_PAUSE_NS of the budget, polls that
     * yield the core for the rest (the thread waited for may need it). */
    uint64_t until = t0 + ZC_MIN(budget, VMM_PAUSE_NS);
    for (unsigned i = 1; budget != 0; i++) {
        if (vmm_reached(s, target)) {
            vmm_spin_learn(s, 1, 0);
            return 0;
        }
        zc_cpu_relax();
        if (i % 32 == 0 && zc_time_ns() > until) {
            break;
        }
    }
    until = t0 + budget;
    for (unsigned i = 0; budget != 0 && (i < VMM_YIELDS || zc_time_ns() < until); i++) {
        if (vmm_reached(s, target)) {
            if (zc_time_ns() >= until) {
                return vmm_wait_slept(s, t0, 0); /* past the budget: learn its length */
            }
            vmm_spin_learn(s, 1, 0);
            return 0;
        }
        sched_yield();
    }
    for (;;) {
        unsigned d32 = atomic_load_explicit(&s->done32, memory_order_seq_cst);
        if (vmm_reached(s, target)) {
            return vmm_wait_slept(s, t0, 0);
        }
        uint64_t w = atomic_load_explicit(&s->want, memory_order_seq_cst);
        while (target < w &&
               !atomic_compare_exchange_weak_explicit(&s->want, &w, target, memory_order_seq_cst,
                                                      memory_order_seq_cst)) {
        }
        if (atomic_load_explicit(&s->done, memory_order_seq_cst) >= target) {
            return vmm_wait_slept(s, t0, 0);
        }
        uint64_t slice = VMM_SLICE_NS;
        if (deadline_ns != 0) {
            uint64_t now = zc_time_ns();
            if (now >= deadline_ns) {
                return vmm_wait_slept(s, t0, -1);
            }
            slice = ZC_MIN(slice, deadline_ns - now);
        }
        (void)zc_futex_wait_private(&s->done32, d32, slice);
    }
}

/* ---- enqueue / synchronize --------------------------------------------------------- */

/* May work run on the caller's thread in place of a task of s? Only when
 * nothing is queued or running on s (event waits are tasks, so a pending one
 * counts) and s is not closing. The one place this decision lives. */
int vmm_stream_idle(vmm_stream_t *s)
{
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 && vmm_capture_on(s)) {
        return 0; /* its work is recorded for replays, never run here */
    }
    return !atomic_load_explicit(&s->closing, memory_order_relaxed) &&
           atomic_load_explicit(&s->done, memory_order_acquire) ==
               atomic_load_explicit(&s->tail, memory_order_acquire);
}

/* Reserve the next slot. With want_idle, take it only when the stream is
 * idle (*idle = 1), else reserve it anyway (*idle = 0). */
aclError vmm_stream_reserve(vmm_stream_t *s, int want_idle, uint64_t *pos, int *idle)
{
    int self = vmm_stream_is_self(s);
    atomic_fetch_add_explicit(&s->producers, 1, memory_order_seq_cst);
    for (;;) {
        if (atomic_load_explicit(&s->closing, memory_order_seq_cst)) {
            atomic_fetch_sub_explicit(&s->producers, 1, memory_order_seq_cst);
            vmm_stream_kick(s); /* the worker may wait for producers to leave */
            ZC_WARN(ZC_SUB_STREAM, "enqueue on stream %p: the stream is being destroyed",
                    (void *)s);
            return ACL_ERROR_RT_INVALID_HANDLE;
        }
        uint64_t t = atomic_load_explicit(&s->tail, memory_order_acquire);
        uint64_t seq =
            atomic_load_explicit(&s->ring[t & (VMM_STREAM_DEPTH - 1)].seq, memory_order_acquire);
        if (seq == t) {
            int was_idle = want_idle && vmm_stream_idle(s) &&
                           atomic_load_explicit(&s->done, memory_order_acquire) == t;
            /* seq_cst: a claimer finishing slot t - 1 reads tail after it
             * stored head (zccl_task_finish) and must see this reservation,
             * or this producer's later kick sees the worker past the claim */
            if (atomic_compare_exchange_weak_explicit(&s->tail, &t, t + 1, memory_order_seq_cst,
                                                      memory_order_relaxed)) {
                *pos = t;
                *idle = was_idle;
                return ACL_SUCCESS;
            }
            continue;
        }
        if ((int64_t)(seq - t) > 0) {
            continue; /* another producer took t */
        }
        if (self) {
            atomic_fetch_sub_explicit(&s->producers, 1, memory_order_seq_cst);
            ZC_WARN(ZC_SUB_STREAM,
                    "enqueue on stream %p from its own task: the queue is full "
                    "(%u tasks)",
                    (void *)s, VMM_STREAM_DEPTH);
            return ACL_ERROR_RT_NO_STREAM_RESOURCE;
        }
        /* Full: run the queued work here while the worker is not running it
         * (then the stream is idle again and small ops go back to the
         * caller's thread), else sleep until half the ring is free (the
         * worker needs the core more than a spinning producer does). */
        vmm_stream_help(s, t);
        (void)vmm_stream_wait_done(s, t - VMM_STREAM_DEPTH / 2, zc_time_ns() + VMM_SLICE_NS, 1);
    }
}

/* Publish reserved slot pos to the worker. */
void vmm_stream_publish(vmm_stream_t *s, uint64_t pos, zccl_task_fn fn, void *arg,
                        void (*dtor)(void *), struct vmm_issuer *who, int helpable)
{
    vmm_slot_t *t = &s->ring[pos & (VMM_STREAM_DEPTH - 1)];
    t->fn = fn;
    t->arg = arg;
    t->dtor = dtor;
    t->who = who;
    t->helpable = helpable;
    atomic_store_explicit(&t->seq, pos + 1, memory_order_seq_cst);
    atomic_fetch_sub_explicit(&s->producers, 1, memory_order_seq_cst);
    vmm_stream_kick(s);
}

aclError vmm_stream_push(vmm_stream_t *s, zccl_task_fn fn, void *arg, void (*dtor)(void *))
{
    aclError captured;
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 &&
        vmm_capture_push(s, fn, arg, dtor, &captured)) {
        return captured; /* kept by graph capture for replays, not run */
    }
    uint64_t pos;
    int idle;
    aclError rc = vmm_stream_reserve(s, 0, &pos, &idle);
    if (rc == ACL_SUCCESS) {
        vmm_stream_publish(s, pos, fn, arg, dtor, NULL, 0);
    }
    return rc;
}
