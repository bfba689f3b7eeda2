/*
 * The stream worker: one thread per stream, started with the stream and
 * joined at its shutdown, runs its published slots in order, retires them,
 * and sleeps when there is nothing to run. See vmm_stream.h.
 */
#define _GNU_SOURCE
#include "stream/vmm_stream.h"

#include "zc/export.h"
#include "zc/log.h"
#include "zc/sync.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- worker ---------------------------------------------------------------------- */

/* Count slot pos done (by the worker, or by a claimer for its own slot). */
void vmm_stream_retire(vmm_stream_t *s, uint64_t pos, int rc)
{
    if (rc != 0) {
        int expect = 0;
        if (atomic_compare_exchange_strong_explicit(&s->err, &expect, rc, memory_order_relaxed,
                                                    memory_order_relaxed)) {
            ZC_INFO(ZC_SUB_STREAM, "stream %p (device %d): task failed with %d", (void *)s, s->dev,
                    rc);
        }
    }
    atomic_store_explicit(&s->ring[pos & (VMM_STREAM_DEPTH - 1)].seq, pos + VMM_STREAM_DEPTH,
                          memory_order_release);
    atomic_store_explicit(&s->head, pos + 1, memory_order_seq_cst);
    uint64_t d = atomic_fetch_add_explicit(&s->done, 1, memory_order_seq_cst) + 1;
    atomic_store_explicit(&s->done32, (unsigned)d, memory_order_seq_cst);
    vmm_stream_wake_done(s, d);
}

/* The stream whose slot this thread runs (its worker, or a helper). */
static _Thread_local vmm_stream_t *vmm_running;

static void vmm_stream_run_slot(vmm_stream_t *s, uint64_t pos)
{
    vmm_slot_t *t = &s->ring[pos & (VMM_STREAM_DEPTH - 1)];
    int skip = (atomic_load_explicit(&s->stop_on_failure, memory_order_relaxed) &&
                atomic_load_explicit(&s->err, memory_order_relaxed) != 0) ||
               atomic_load_explicit(&s->aborting, memory_order_acquire);
    vmm_stream_t *outer = vmm_running;
    vmm_running = s;
    int rc = skip || t->fn == NULL ? 0 : t->fn(t->arg);
    if (t->dtor != NULL) {
        t->dtor(t->arg);
    }
    vmm_running = outer;
    if (t->who != NULL) {
        vmm_issuer_done(t->who);
    }
    vmm_stream_retire(s, pos, rc);
}

static int vmm_slot_ready(vmm_stream_t *s, uint64_t *pos)
{
    uint64_t h = atomic_load_explicit(&s->head, memory_order_seq_cst);
    *pos = h;
    return atomic_load_explicit(&s->ring[h & (VMM_STREAM_DEPTH - 1)].seq, memory_order_seq_cst) ==
           h + 1;
}

/* Run slot pos if this thread becomes the executor and pos is still the
 * published head then (another executor may have run it meanwhile). */
static int vmm_run_next(vmm_stream_t *s, uint64_t pos)
{
    int expect = 0;
    if (atomic_load_explicit(&s->runner, memory_order_relaxed) != 0 ||
        !atomic_compare_exchange_strong_explicit(&s->runner, &expect, 1, memory_order_seq_cst,
                                                 memory_order_relaxed)) {
        return 0;
    }
    uint64_t now;
    int ran = vmm_slot_ready(s, &now) && now == pos;
    if (ran) {
        atomic_store_explicit(&s->run_pos, pos + 1, memory_order_seq_cst);
        vmm_stream_run_slot(s, pos);
    }
    atomic_store_explicit(&s->runner, 0, memory_order_seq_cst);
    return ran;
}

/* Work for the worker: a published slot, no helper, nobody running one. */
static int vmm_worker_runnable(vmm_stream_t *s)
{
    uint64_t pos;
    return vmm_slot_ready(s, &pos) &&
           atomic_load_explicit(&s->helpers, memory_order_seq_cst) == 0 &&
           atomic_load_explicit(&s->runner, memory_order_seq_cst) == 0;
}

/* Nothing to run: 1 when the stream is closed and drained (the worker exits). */
static int vmm_stream_drained(vmm_stream_t *s)
{
    return atomic_load_explicit(&s->closing, memory_order_seq_cst) &&
           atomic_load_explicit(&s->producers, memory_order_seq_cst) == 0 &&
           atomic_load_explicit(&s->done, memory_order_seq_cst) ==
               atomic_load_explicit(&s->tail, memory_order_seq_cst);
}

/* Spin briefly for new work, then sleep until a producer (or a helper
 * that stopped with work left) kicks. */
static void vmm_stream_idle_wait(vmm_stream_t *s)
{
    uint64_t until = zc_time_ns() + vmm_idle_budget();
    for (unsigned i = 1;; i++) {
        if (vmm_worker_runnable(s)) {
            return;
        }
        zc_cpu_relax();
        if (i % 32 == 0 && zc_time_ns() > until) {
            break;
        }
    }
    unsigned k = atomic_load_explicit(&s->kick, memory_order_seq_cst);
    atomic_store_explicit(&s->w_sleeping, 1, memory_order_seq_cst);
    if (!vmm_worker_runnable(s) && !vmm_stream_drained(s)) {
        (void)zc_futex_wait_private(&s->kick, k, VMM_SLICE_NS);
    }
    atomic_store_explicit(&s->w_sleeping, 0, memory_order_relaxed);
}

/* After a seq_cst store that made work visible (a slot's seq, head, or
 * the end of a helper's turn): the worker stores w_sleeping (seq_cst)
 * before it looks again, so one of the two sides sees the other. */
void vmm_stream_kick(vmm_stream_t *s)
{
    if (atomic_load_explicit(&s->w_sleeping, memory_order_seq_cst)) {
        atomic_fetch_add_explicit(&s->kick, 1, memory_order_seq_cst);
        zc_futex_wake_private(&s->kick, 1);
    }
}

/* May this thread run s's slot at pos? Only slots libhccl committed (an
 * op or a send/recv, which a blocked caller may run as well as the worker;
 * a host callback or an event wait stays with the worker), and only on
 * the stream's device (the worker's thread is bound to it). */
static int vmm_help_ok(vmm_stream_t *s, uint64_t pos)
{
    return s->ring[pos & (VMM_STREAM_DEPTH - 1)].helpable && vmm_device_current() == s->dev;
}

void vmm_stream_help(vmm_stream_t *s, uint64_t target)
{
    if (vmm_running != NULL) {
        return; /* inside a task: waits stay plain */
    }
    atomic_fetch_add_explicit(&s->helpers, 1, memory_order_seq_cst);
    while (!vmm_reached(s, target) && !atomic_load_explicit(&s->closing, memory_order_relaxed)) {
        uint64_t pos;
        if (!vmm_slot_ready(s, &pos) || !vmm_help_ok(s, pos)) {
            break; /* not published yet (being filled, or another thread's claim) */
        }
        if (vmm_run_next(s, pos)) {
            continue;
        }
        if (atomic_load_explicit(&s->run_pos, memory_order_seq_cst) == pos + 1) {
            /* Another executor (the worker) took pos: wait for it to
             * retire; the worker then sees helpers and leaves the rest. */
            (void)vmm_stream_wait_done(s, pos + 1, 0, 0);
        } else {
            zc_cpu_relax(); /* an executor between slots: look again */
        }
    }
    atomic_fetch_sub_explicit(&s->helpers, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&s->done, memory_order_seq_cst) !=
        atomic_load_explicit(&s->tail, memory_order_seq_cst)) {
        vmm_stream_kick(s); /* work left: the worker stood by for us */
    }
}

/* The stack a worker touches: at most 12 kB resident per thread (smaps)
 * after a sweep of AllReduce to 16 MiB, whose algorithms keep an 8 kB
 * reduce block on the stack; 32 kB leaves more than twice that. */
#define VMM_STACK_PREFAULT (32u << 10)

/* Touch the stack the worker's tasks will use, page by page, before the
 * first task: the first op that the worker (rather than the caller's
 * thread) finishes would otherwise fault its pages in, a few microseconds
 * on that op and a resident-memory step in the middle of a program's run. */
__attribute__((noinline)) static void vmm_stack_prefault(void)
{
    volatile char pages[VMM_STACK_PREFAULT];
    for (size_t i = 0; i < sizeof(pages); i += 4096) {
        pages[i] = 0;
    }
}

static void *vmm_stream_worker(void *p)
{
    vmm_stream_t *s = p;
    vmm_stack_prefault();
    char name[16];
    snprintf(name, sizeof(name), "zccl-s%d", s->dev);
    pthread_setname_np(pthread_self(), name);
    (void)vmm_device_bind_thread(s->dev);
    for (;;) {
        uint64_t pos;
        if (vmm_slot_ready(s, &pos) &&
            atomic_load_explicit(&s->helpers, memory_order_seq_cst) == 0 && vmm_run_next(s, pos)) {
            continue;
        }
        if (vmm_stream_drained(s)) {
            break;
        }
        vmm_stream_idle_wait(s);
    }
    atomic_fetch_sub_explicit(&vmm_nworkers, 1, memory_order_relaxed);
    return NULL;
}

/* ---- lifetime ----------------------------------------------------------------------- */

void vmm_stream_free(vmm_stream_t *s)
{
    free(s);
}

aclError vmm_stream_new(int dev, int is_default, uint32_t priority, uint32_t flags,
                        vmm_stream_t **out)
{
    vmm_stream_t *s = aligned_alloc(64, ZC_ALIGN_UP(sizeof(*s), 64));
    if (s == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "stream create on device %d: out of memory", dev);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    memset(s, 0, sizeof(*s));
    s->dev = dev;
    s->is_default = is_default;
    s->priority = priority;
    s->flags = flags;
    atomic_init(&s->refs, 1);
    atomic_init(&s->want, UINT64_MAX);
    atomic_init(&s->spin, VMM_SPIN_MAX_NS / 4);
    for (uint64_t i = 0; i < VMM_STREAM_DEPTH; i++) {
        atomic_init(&s->ring[i].seq, i);
    }
    atomic_fetch_add_explicit(&vmm_nworkers, 1, memory_order_relaxed);
    int rc = pthread_create(&s->thread, NULL, vmm_stream_worker, s);
    if (rc != 0) {
        atomic_fetch_sub_explicit(&vmm_nworkers, 1, memory_order_relaxed);
        ZC_WARN(ZC_SUB_STREAM, "stream create on device %d: worker thread failed: %s", dev,
                strerror(rc));
        vmm_stream_free(s);
        return ACL_ERROR_RT_NO_STREAM_RESOURCE;
    }
    *out = s;
    return ACL_SUCCESS;
}

/* Stop taking work, run what is queued (or drop it, once aborting is set),
 * join the worker. The caller has already made the stream unreachable and
 * still holds a reference. */
void vmm_stream_shutdown(vmm_stream_t *s)
{
    atomic_store_explicit(&s->closing, 1, memory_order_seq_cst);
    atomic_store_explicit(&s->w_sleeping, 1, memory_order_seq_cst);
    vmm_stream_kick(s);
    /* Producers blocked on a full ring see `closing` within a wait slice. */
    pthread_join(s->thread, NULL);
}

int vmm_stream_is_self(const vmm_stream_t *s)
{
    return vmm_running == s || pthread_equal(pthread_self(), s->thread);
}

int vmm_stream_running_any(void)
{
    return vmm_running != NULL;
}
