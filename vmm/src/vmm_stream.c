/*
 * Streams: one FIFO worker thread per stream, fed through a preallocated ring.
 *
 * Protocol. A stream is a ring of VMM_STREAM_DEPTH slots {seq, fn, arg, dtor,
 * payload}. Positions only grow: `tail` counts the slots reserved by
 * producers, `head` the next slot the worker will run, `done` the tasks
 * finished. A producer (any thread) reserves position p with a CAS on `tail`
 * (the slot is free when its seq equals p), fills it and publishes it by
 * storing seq = p + 1; the worker runs slot `head` once it is published,
 * then frees it (seq = p + DEPTH) and counts it done. No lock, no allocation
 * and no condition variable on this path: waits are spins followed by
 * futex sleeps, and wakes are only issued when the other side said it sleeps
 * (`w_sleeping` for the worker, `want` for synchronizers).
 *
 * A synchronize waits until `done` reaches the `tail` it saw, so it waits for
 * exactly the work reserved before it. The first non-zero task result since
 * the last synchronize is kept in `err` and handed (and cleared) by the next
 * synchronize. In ACL_STOP_ON_FAILURE mode the tasks that follow a failure
 * are dropped (dtor only) until that error is collected. A producer that
 * finds the ring full waits for the worker (the worker itself cannot: a task
 * that fills its own stream gets an error), which bounds memory.
 *
 * Claims (the caller-thread path of libhccl). zccl_task_reserve hands the
 * caller a reserved slot; when the stream was idle (vmm_stream_idle: nothing
 * queued or running, which includes pending event waits, as they are tasks)
 * the caller may run the task itself and then release the slot as done
 * (zccl_task_finish: the caller does the worker's bookkeeping for that one
 * slot, which the worker cannot touch because it is never published), or
 * hand it to the worker at any time (zccl_task_commit). Work queued by other
 * threads meanwhile lands behind the claimed slot, so stream order holds.
 *
 * Spinning adapts: each stream keeps a spin budget (time, 0.5-20 us) that
 * grows when a synchronize's spin ended in success and shrinks when it ended
 * in a sleep (as it does when runnable threads outnumber cores and the work
 * waited for cannot run meanwhile), and it stays small when the host has no
 * more cores than this process has stream workers. A worker spins at most
 * 5 us for new work: longer would take the core from the thread producing it.
 *
 * Handles. A handle is the stream's address, but it is only dereferenced
 * after it has been found in the registry of live streams (so a bogus or
 * stale handle is an error, not a crash); lookups take a reference and the
 * memory is freed when the last reference goes. The NULL handle is the
 * calling thread's current device's default stream, created on first use and
 * kept outside the registry (it cannot be destroyed by handle).
 *
 * Destroy: the stream leaves the registry, refuses new work (producers in
 * the middle of a push are waited for), runs what is queued (or drops it,
 * for the force variant, which also makes blocking event waits give up), and
 * its worker is joined. A task cannot destroy or synchronize its own stream
 * (that would wait for itself).
 *
 * Lock order: the registry mutex is the only lock; streams have none.
 */
#define _GNU_SOURCE
#include "vmm_internal.h"

#include "zc/export.h"
#include "zc/log.h"
#include "zc/sync.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VMM_STREAM_DEPTH 1024u /* a power of two */
#define VMM_SPIN_MAX_NS 20000u /* the longest a wait spins before it yields */
#define VMM_SPIN_MIN_NS 500u
#define VMM_IDLE_SPIN_NS 5000u /* a worker spins at most this long for new work */
#define VMM_YIELDS 64u         /* sched_yield polls between spinning and sleeping */
#define VMM_SLICE_NS 100000000ull

typedef struct {
    atomic_uint_fast64_t seq;
    zccl_task_fn fn;
    void *arg;
    void (*dtor)(void *);
    struct vmm_issuer *who; /* counts the task as its issuer's queued work (or NULL) */
    _Alignas(16) unsigned char payload[ZCCL_TASK_PAYLOAD];
} vmm_slot_t;

struct vmm_issuer;
static struct vmm_issuer *vmm_issuer_mine(void);
static void vmm_issuer_done(struct vmm_issuer *w);

struct vmm_stream {
    int dev;
    int is_default;
    uint32_t priority;
    uint32_t flags;
    int refs; /* guarded by vmm_reg_mu */
    pthread_t thread;

    _Alignas(64) atomic_uint_fast64_t tail; /* producers */
    atomic_int producers;                   /* threads inside a push */
    atomic_int closing;
    atomic_int aborting;
    atomic_int stop_on_failure;
    atomic_int err;

    _Alignas(64) atomic_uint_fast64_t head; /* the worker (or a claimer, for its slot) */
    atomic_uint_fast64_t done;
    atomic_uint done32;            /* futex word: low bits of done */
    atomic_uint_fast64_t want;     /* least `done` a sleeper waits for (UINT64_MAX: none) */
    _Alignas(64) atomic_uint kick; /* futex word of the worker's sleep */
    atomic_int w_sleeping;
    atomic_uint spin; /* adaptive spin budget, in ns */

    vmm_slot_t ring[VMM_STREAM_DEPTH];
};

static pthread_mutex_t vmm_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static vmm_stream_t **vmm_reg; /* live user streams */
static size_t vmm_nreg, vmm_reg_cap;
static vmm_stream_t **vmm_defaults; /* per device, lazily allocated */
static int vmm_ndefaults;
static atomic_int vmm_nworkers; /* stream workers alive in this process */

/* ---- waiting ------------------------------------------------------------------------ */

/* The budget a spin starts with: small once workers outnumber cores, where a
 * spinner steals the core of the thread it waits for. */
static unsigned vmm_spin_budget(vmm_stream_t *s)
{
    static atomic_long vmm_ncpu;
    long ncpu = atomic_load_explicit(&vmm_ncpu, memory_order_relaxed);
    if (ncpu == 0) {
        ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        atomic_store_explicit(&vmm_ncpu, ncpu, memory_order_relaxed);
    }
    unsigned b = atomic_load_explicit(&s->spin, memory_order_relaxed);
    if (ncpu > 0 && atomic_load_explicit(&vmm_nworkers, memory_order_relaxed) >= ncpu) {
        b = ZC_MIN(b, VMM_SPIN_MIN_NS * 4);
    }
    return b;
}

/* Grow the budget after a spin that succeeded, shrink it after one that slept. */
static void vmm_spin_learn(vmm_stream_t *s, int success)
{
    unsigned b = atomic_load_explicit(&s->spin, memory_order_relaxed);
    b = success ? ZC_MIN(b * 2, VMM_SPIN_MAX_NS) : ZC_MAX(b / 2, VMM_SPIN_MIN_NS);
    atomic_store_explicit(&s->spin, b, memory_order_relaxed);
}

static int vmm_reached(vmm_stream_t *s, uint64_t target)
{
    return atomic_load_explicit(&s->done, memory_order_acquire) >= target;
}

/* Wake sleepers whose target `done` has reached. */
static void vmm_stream_wake_done(vmm_stream_t *s, uint64_t done)
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

/* Wait until done >= target: spin (unless sleep_now), yield, then futex
 * sleeps. deadline_ns 0 = forever. Returns 0, or -1 at the deadline. */
static int vmm_stream_wait_done(vmm_stream_t *s, uint64_t target, uint64_t deadline_ns,
                                int sleep_now)
{
    uint64_t until = sleep_now ? 0 : zc_time_ns() + vmm_spin_budget(s);
    for (unsigned i = 1; until != 0; i++) {
        if (vmm_reached(s, target)) {
            vmm_spin_learn(s, 1);
            return 0;
        }
        zc_cpu_relax();
        if (i % 32 == 0 && zc_time_ns() > until) {
            break;
        }
    }
    for (unsigned i = 0; i < (sleep_now ? 0 : VMM_YIELDS); i++) {
        if (vmm_reached(s, target)) {
            return 0;
        }
        sched_yield();
    }
    if (!sleep_now) {
        vmm_spin_learn(s, 0);
    }
    for (;;) {
        unsigned d32 = atomic_load_explicit(&s->done32, memory_order_seq_cst);
        if (vmm_reached(s, target)) {
            return 0;
        }
        uint64_t w = atomic_load_explicit(&s->want, memory_order_seq_cst);
        while (target < w &&
               !atomic_compare_exchange_weak_explicit(&s->want, &w, target, memory_order_seq_cst,
                                                      memory_order_seq_cst)) {
        }
        if (atomic_load_explicit(&s->done, memory_order_seq_cst) >= target) {
            return 0;
        }
        uint64_t slice = VMM_SLICE_NS;
        if (deadline_ns != 0) {
            uint64_t now = zc_time_ns();
            if (now >= deadline_ns) {
                return -1;
            }
            slice = ZC_MIN(slice, deadline_ns - now);
        }
        (void)zc_futex_wait_private(&s->done32, d32, slice);
    }
}

/* ---- worker ---------------------------------------------------------------------- */

/* Count slot pos done (by the worker, or by a claimer for its own slot). */
static void vmm_stream_retire(vmm_stream_t *s, uint64_t pos, int rc)
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

static void vmm_stream_run_slot(vmm_stream_t *s, uint64_t pos)
{
    vmm_slot_t *t = &s->ring[pos & (VMM_STREAM_DEPTH - 1)];
    int skip = (atomic_load_explicit(&s->stop_on_failure, memory_order_relaxed) &&
                atomic_load_explicit(&s->err, memory_order_relaxed) != 0) ||
               atomic_load_explicit(&s->aborting, memory_order_acquire);
    int rc = skip || t->fn == NULL ? 0 : t->fn(t->arg);
    if (t->dtor != NULL) {
        t->dtor(t->arg);
    }
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

/* Nothing to run: 1 when the stream is closed and drained (the worker exits). */
static int vmm_stream_drained(vmm_stream_t *s)
{
    return atomic_load_explicit(&s->closing, memory_order_seq_cst) &&
           atomic_load_explicit(&s->producers, memory_order_seq_cst) == 0 &&
           atomic_load_explicit(&s->done, memory_order_seq_cst) ==
               atomic_load_explicit(&s->tail, memory_order_seq_cst);
}

/* Spin briefly for new work, then sleep until a producer kicks. */
static void vmm_stream_idle_wait(vmm_stream_t *s)
{
    uint64_t pos;
    uint64_t until = zc_time_ns() + ZC_MIN(vmm_spin_budget(s), VMM_IDLE_SPIN_NS);
    for (unsigned i = 1;; i++) {
        if (vmm_slot_ready(s, &pos)) {
            return;
        }
        zc_cpu_relax();
        if (i % 32 == 0 && zc_time_ns() > until) {
            break;
        }
    }
    unsigned k = atomic_load_explicit(&s->kick, memory_order_seq_cst);
    atomic_store_explicit(&s->w_sleeping, 1, memory_order_seq_cst);
    if (!vmm_slot_ready(s, &pos) && !vmm_stream_drained(s)) {
        (void)zc_futex_wait_private(&s->kick, k, VMM_SLICE_NS);
    }
    atomic_store_explicit(&s->w_sleeping, 0, memory_order_relaxed);
}

/* After a seq_cst store that made work visible (a slot's seq, or head):
 * the worker stores w_sleeping (seq_cst) before it looks again, so one of
 * the two sides sees the other. */
static void vmm_stream_kick(vmm_stream_t *s)
{
    if (atomic_load_explicit(&s->w_sleeping, memory_order_seq_cst)) {
        atomic_fetch_add_explicit(&s->kick, 1, memory_order_seq_cst);
        zc_futex_wake_private(&s->kick, 1);
    }
}

static void *vmm_stream_worker(void *p)
{
    vmm_stream_t *s = p;
    char name[16];
    snprintf(name, sizeof(name), "zccl-s%d", s->dev);
    pthread_setname_np(pthread_self(), name);
    (void)vmm_device_bind_thread(s->dev);
    for (;;) {
        uint64_t pos;
        if (vmm_slot_ready(s, &pos)) {
            vmm_stream_run_slot(s, pos);
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

static void vmm_stream_free(vmm_stream_t *s)
{
    free(s);
}

static aclError vmm_stream_new(int dev, int is_default, uint32_t priority, uint32_t flags,
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
    s->refs = 1;
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

void vmm_stream_put(vmm_stream_t *s)
{
    pthread_mutex_lock(&vmm_reg_mu);
    int last = --s->refs == 0;
    pthread_mutex_unlock(&vmm_reg_mu);
    if (last) {
        vmm_stream_free(s);
    }
}

/* Stop taking work, run (or drop) what is queued, join the worker. The caller has
 * already made the stream unreachable and still holds a reference. */
static void vmm_stream_shutdown(vmm_stream_t *s, int force)
{
    if (force) {
        /* Set before closing so the worker drops what is still queued; event waits
         * sleep on the event condition, so wake them to see it. */
        atomic_store_explicit(&s->aborting, 1, memory_order_release);
        vmm_event_wake_all();
    }
    atomic_store_explicit(&s->closing, 1, memory_order_seq_cst);
    atomic_store_explicit(&s->w_sleeping, 1, memory_order_seq_cst);
    vmm_stream_kick(s);
    /* Producers blocked on a full ring see `closing` within a wait slice. */
    pthread_join(s->thread, NULL);
}

static int vmm_stream_is_self(const vmm_stream_t *s)
{
    return pthread_equal(pthread_self(), s->thread);
}

/* ---- lookup ---------------------------------------------------------------------------- */

static ssize_t vmm_reg_find(const void *h)
{
    for (size_t i = 0; i < vmm_nreg; i++) {
        if ((const void *)vmm_reg[i] == h) {
            return (ssize_t)i;
        }
    }
    return -1;
}

aclError vmm_stream_get(aclrtStream handle, const char *what, vmm_stream_t **out)
{
    if (handle != NULL) {
        pthread_mutex_lock(&vmm_reg_mu);
        ssize_t i = vmm_reg_find(handle);
        if (i >= 0) {
            vmm_reg[i]->refs++;
            *out = vmm_reg[i];
        }
        pthread_mutex_unlock(&vmm_reg_mu);
        if (i < 0) {
            ZC_WARN(ZC_SUB_STREAM, "%s: stream %p is not a live stream", what, handle);
            return ACL_ERROR_RT_INVALID_HANDLE;
        }
        return ACL_SUCCESS;
    }
    int dev = vmm_device_current();
    if (dev < 0) {
        ZC_WARN(ZC_SUB_STREAM,
                "%s: NULL (default) stream but this thread has no current "
                "device",
                what);
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    aclError rc = ACL_SUCCESS;
    pthread_mutex_lock(&vmm_reg_mu);
    if (vmm_defaults == NULL) {
        int n = vmm_device_count();
        vmm_defaults = calloc((size_t)n, sizeof(*vmm_defaults));
        vmm_ndefaults = vmm_defaults != NULL ? n : 0;
    }
    if (dev >= vmm_ndefaults) {
        ZC_WARN(ZC_SUB_STREAM, "%s: no memory for the default stream table", what);
        rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
    } else if (vmm_defaults[dev] == NULL) {
        rc = vmm_stream_new(dev, 1, 0, 0, &vmm_defaults[dev]);
    }
    if (rc == ACL_SUCCESS) {
        vmm_defaults[dev]->refs++;
        *out = vmm_defaults[dev];
    }
    pthread_mutex_unlock(&vmm_reg_mu);
    return rc;
}

int vmm_stream_aborting(const vmm_stream_t *s)
{
    return atomic_load_explicit(&((vmm_stream_t *)s)->aborting, memory_order_acquire);
}

/* ---- enqueue / synchronize --------------------------------------------------------- */

/* May work run on the caller's thread in place of a task of s? Only when
 * nothing is queued or running on s (event waits are tasks, so a pending one
 * counts) and s is not closing. The one place this decision lives. */
int vmm_stream_idle(vmm_stream_t *s)
{
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 &&
        vmm_mdl_capturing(s)) {
        return 0; /* its work is recorded for replays, never run here */
    }
    return !atomic_load_explicit(&s->closing, memory_order_relaxed) &&
           atomic_load_explicit(&s->done, memory_order_acquire) ==
               atomic_load_explicit(&s->tail, memory_order_acquire);
}

/* Reserve the next slot. With want_idle, take it only when the stream is
 * idle (*idle = 1), else reserve it anyway (*idle = 0). */
static aclError vmm_stream_reserve(vmm_stream_t *s, int want_idle, uint64_t *pos, int *idle)
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
            if (atomic_compare_exchange_weak_explicit(&s->tail, &t, t + 1, memory_order_acq_rel,
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
        /* Full: sleep until half the ring is free (the worker needs the core
         * more than a spinning producer does; one wake per half ring). */
        (void)vmm_stream_wait_done(s, t - VMM_STREAM_DEPTH / 2, zc_time_ns() + VMM_SLICE_NS, 1);
    }
}

/* Publish reserved slot pos to the worker. */
static void vmm_stream_publish(vmm_stream_t *s, uint64_t pos, zccl_task_fn fn, void *arg,
                               void (*dtor)(void *), struct vmm_issuer *who)
{
    vmm_slot_t *t = &s->ring[pos & (VMM_STREAM_DEPTH - 1)];
    t->fn = fn;
    t->arg = arg;
    t->dtor = dtor;
    t->who = who;
    atomic_store_explicit(&t->seq, pos + 1, memory_order_seq_cst);
    atomic_fetch_sub_explicit(&s->producers, 1, memory_order_seq_cst);
    vmm_stream_kick(s);
}

aclError vmm_stream_push(vmm_stream_t *s, zccl_task_fn fn, void *arg, void (*dtor)(void *))
{
    aclError captured;
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 &&
        vmm_mdl_capture_push(s, fn, arg, dtor, &captured)) {
        return captured; /* kept for aclmdlRI replays, not run (vmm_mdl.c) */
    }
    uint64_t pos;
    int idle;
    aclError rc = vmm_stream_reserve(s, 0, &pos, &idle);
    if (rc == ACL_SUCCESS) {
        vmm_stream_publish(s, pos, fn, arg, dtor, NULL);
    }
    return rc;
}

/* Wait for the work enqueued so far; timeout_ms < 0 waits forever. With collect,
 * return and clear the stream error; a timeout leaves it in place. */
static aclError vmm_stream_sync(vmm_stream_t *s, int64_t timeout_ms, int collect, const char *what)
{
    if (vmm_stream_is_self(s)) {
        ZC_WARN(ZC_SUB_STREAM, "%s: called from a task of stream %p (it would wait for itself)",
                what, (void *)s);
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    uint64_t target = atomic_load_explicit(&s->tail, memory_order_acquire);
    uint64_t deadline = timeout_ms >= 0 ? zc_time_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
    if (timeout_ms == 0) {
        deadline = 1; /* already passed: one look */
    }
    if (!vmm_reached(s, target) && vmm_stream_wait_done(s, target, deadline, 0) != 0) {
        uint64_t left = target - atomic_load_explicit(&s->done, memory_order_acquire);
        ZC_WARN(ZC_SUB_STREAM, "%s: stream %p still has %llu tasks after %lld ms", what, (void *)s,
                (unsigned long long)left, (long long)timeout_ms);
        return ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
    }
    return collect ? atomic_exchange_explicit(&s->err, 0, memory_order_acq_rel) : ACL_SUCCESS;
}

/* ---- public API ---------------------------------------------------------------------- */

static aclError vmm_stream_create_api(aclrtStream *stream, uint32_t priority, uint32_t flag,
                                      const char *what)
{
    if (stream == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "%s: stream is NULL", what);
        return ACL_ERROR_INVALID_PARAM;
    }
    int dev = vmm_device_current();
    if (dev < 0) {
        ZC_WARN(ZC_SUB_STREAM, "%s: this thread has no current device (call aclrtSetDevice)", what);
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    pthread_mutex_lock(&vmm_reg_mu);
    if (vmm_nreg == vmm_reg_cap) {
        size_t cap = vmm_reg_cap != 0 ? 2 * vmm_reg_cap : 16;
        vmm_stream_t **r = realloc(vmm_reg, cap * sizeof(*r));
        if (r == NULL) {
            pthread_mutex_unlock(&vmm_reg_mu);
            ZC_WARN(ZC_SUB_STREAM, "%s: out of memory for the stream registry", what);
            return ACL_ERROR_RT_MEMORY_ALLOCATION;
        }
        vmm_reg = r;
        vmm_reg_cap = cap;
    }
    vmm_stream_t *s = NULL;
    aclError rc = vmm_stream_new(dev, 0, priority, flag, &s);
    if (rc == ACL_SUCCESS) {
        vmm_reg[vmm_nreg++] = s;
        *stream = s;
    }
    pthread_mutex_unlock(&vmm_reg_mu);
    return rc;
}

ZC_EXPORT aclError aclrtCreateStream(aclrtStream *stream)
{
    return vmm_stream_create_api(stream, 0, 0, "aclrtCreateStream");
}

ZC_EXPORT aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority,
                                               uint32_t flag)
{
    const uint32_t known = ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC | ACL_STREAM_PERSISTENT |
                           ACL_STREAM_HUGE | ACL_STREAM_CPU_SCHEDULE | ACL_STREAM_DEVICE_USE_ONLY;
    if (priority > 7) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtCreateStreamWithConfig: priority %u out of range [0, 7]",
                priority);
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((flag & ~known) != 0) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtCreateStreamWithConfig: unknown flag bits 0x%x",
                flag & ~known);
        return ACL_ERROR_INVALID_PARAM;
    }
    return vmm_stream_create_api(stream, priority, flag, "aclrtCreateStreamWithConfig");
}

static aclError vmm_stream_destroy_api(aclrtStream stream, int force, const char *what)
{
    if (stream == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "%s: stream is NULL (the default stream cannot be destroyed)", what);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&vmm_reg_mu);
    ssize_t i = vmm_reg_find(stream);
    vmm_stream_t *s = i >= 0 ? vmm_reg[i] : NULL;
    if (s != NULL && vmm_stream_is_self(s)) {
        pthread_mutex_unlock(&vmm_reg_mu);
        ZC_WARN(ZC_SUB_STREAM, "%s: called from a task of stream %p", what, stream);
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    if (s != NULL) {
        vmm_reg[i] = vmm_reg[--vmm_nreg]; /* the registry's reference moves to us */
    }
    pthread_mutex_unlock(&vmm_reg_mu);
    if (s == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "%s: stream %p is not a live stream", what, stream);
        return ACL_ERROR_RT_INVALID_HANDLE;
    }
    vmm_mdl_stream_gone(s);
    vmm_stream_shutdown(s, force);
    vmm_stream_put(s);
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtDestroyStream(aclrtStream stream)
{
    return vmm_stream_destroy_api(stream, 0, "aclrtDestroyStream");
}

ZC_EXPORT aclError aclrtDestroyStreamForce(aclrtStream stream)
{
    return vmm_stream_destroy_api(stream, 1, "aclrtDestroyStreamForce");
}

static aclError vmm_stream_sync_api(aclrtStream stream, int64_t timeout_ms, const char *what)
{
    vmm_stream_t *s;
    aclError rc = vmm_stream_get(stream, what, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 &&
        vmm_mdl_capturing(s)) {
        vmm_stream_put(s);
        ZC_WARN(ZC_SUB_STREAM, "%s: stream %p is capturing (end the capture first)", what, stream);
        return ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
    }
    rc = vmm_stream_sync(s, timeout_ms, 1, what);
    vmm_stream_put(s);
    return rc;
}

ZC_EXPORT aclError aclrtSynchronizeStream(aclrtStream stream)
{
    return vmm_stream_sync_api(stream, -1, "aclrtSynchronizeStream");
}

ZC_EXPORT aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)
{
    if (timeout < -1) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtSynchronizeStreamWithTimeout: timeout %d < -1", (int)timeout);
        return ACL_ERROR_INVALID_PARAM;
    }
    return vmm_stream_sync_api(stream, timeout, "aclrtSynchronizeStreamWithTimeout");
}

ZC_EXPORT aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status)
{
    if (status == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtStreamQuery: status is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_stream_t *s;
    aclError rc = vmm_stream_get(stream, "aclrtStreamQuery", &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *status = vmm_reached(s, atomic_load_explicit(&s->tail, memory_order_acquire))
                  ? ACL_STREAM_STATUS_COMPLETE
                  : ACL_STREAM_STATUS_NOT_READY;
    vmm_stream_put(s);
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode)
{
    if (stream == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtSetStreamFailureMode: stream is NULL (the default "
                               "stream's mode cannot be changed)");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (mode != ACL_CONTINUE_ON_FAILURE && mode != ACL_STOP_ON_FAILURE) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtSetStreamFailureMode: mode %llu is not a failure mode",
                (unsigned long long)mode);
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_stream_t *s;
    aclError rc = vmm_stream_get(stream, "aclrtSetStreamFailureMode", &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    atomic_store_explicit(&s->stop_on_failure, mode == ACL_STOP_ON_FAILURE, memory_order_relaxed);
    vmm_stream_put(s);
    return ACL_SUCCESS;
}

/* The live streams of device dev (every device when dev < 0: registry and
 * defaults), each with a reference the caller puts; NULL when out of memory. */
static vmm_stream_t **vmm_stream_snapshot(int dev, size_t *count)
{
    pthread_mutex_lock(&vmm_reg_mu);
    size_t n = 0;
    vmm_stream_t **v = malloc((vmm_nreg + (size_t)vmm_ndefaults + 1) * sizeof(*v));
    for (size_t i = 0; v != NULL && i < vmm_nreg; i++) {
        if (dev < 0 || vmm_reg[i]->dev == dev) {
            vmm_reg[i]->refs++;
            v[n++] = vmm_reg[i];
        }
    }
    for (int d = 0; v != NULL && d < vmm_ndefaults; d++) {
        if (vmm_defaults[d] != NULL && (dev < 0 || d == dev)) {
            vmm_defaults[d]->refs++;
            v[n++] = vmm_defaults[d];
        }
    }
    pthread_mutex_unlock(&vmm_reg_mu);
    *count = n;
    return v;
}

/* Synchronize every stream of device dev (registry and default) within timeout_ms. */
static aclError vmm_device_sync(int dev, int64_t timeout_ms, const char *what)
{
    size_t n = 0;
    vmm_stream_t **v = vmm_stream_snapshot(dev, &n);
    if (v == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "%s: out of memory", what);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    aclError first = ACL_SUCCESS;
    uint64_t t0 = zc_time_ns();
    for (size_t i = 0; i < n; i++) {
        int64_t left = -1;
        if (timeout_ms >= 0) {
            int64_t spent = (int64_t)((zc_time_ns() - t0) / 1000000u);
            left = spent < timeout_ms ? timeout_ms - spent : 0;
        }
        aclError rc = vmm_stream_sync(v[i], left, 1, what);
        if (rc != ACL_SUCCESS && first == ACL_SUCCESS) {
            first = rc;
        }
        vmm_stream_put(v[i]);
    }
    free(v);
    return first;
}

/* ---- frees ordered after the caller's queued work ------------------------------------ */

/* Tasks a thread queued that have not finished (pending), shared by those
 * tasks and the thread (refs), so a thread may exit with work queued. */
typedef struct vmm_issuer {
    atomic_uint pending;
    atomic_int refs;
} vmm_issuer_t;

typedef struct {
    zccl_task_fn fn;
    void *arg;
    void (*dtor)(void *);
    vmm_issuer_t *who;
} vmm_tracked_t;

static pthread_once_t vmm_issuer_once = PTHREAD_ONCE_INIT;
static pthread_key_t vmm_issuer_key;
static _Thread_local vmm_issuer_t *vmm_issuer_self;

static void vmm_issuer_put(void *p)
{
    vmm_issuer_t *w = p;
    if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) == 1) {
        free(w);
    }
}

static void vmm_issuer_key_make(void)
{
    (void)pthread_key_create(&vmm_issuer_key, vmm_issuer_put);
}

static int vmm_tracked_run(void *p)
{
    vmm_tracked_t *t = p;
    return t->fn(t->arg);
}

static void vmm_tracked_done(void *p)
{
    vmm_tracked_t *t = p;
    if (t->dtor != NULL) {
        t->dtor(t->arg);
    }
    vmm_issuer_t *w = t->who;
    if (atomic_fetch_sub_explicit(&w->pending, 1, memory_order_acq_rel) == 1) {
        zc_futex_wake(&w->pending, INT32_MAX);
    }
    vmm_issuer_put(w);
    free(t);
}

/* The calling thread's issuer record, with one more pending task and
 * reference for it; NULL when it cannot be made (the task is then untracked). */
static vmm_issuer_t *vmm_issuer_mine(void)
{
    if (vmm_issuer_self == NULL) {
        pthread_once(&vmm_issuer_once, vmm_issuer_key_make);
        vmm_issuer_t *w = calloc(1, sizeof(*w));
        if (w == NULL) {
            return NULL;
        }
        atomic_init(&w->refs, 1);
        (void)pthread_setspecific(vmm_issuer_key, w);
        vmm_issuer_self = w;
    }
    atomic_fetch_add_explicit(&vmm_issuer_self->refs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&vmm_issuer_self->pending, 1, memory_order_relaxed);
    return vmm_issuer_self;
}

/* A tracked task finished or was dropped. */
static void vmm_issuer_done(vmm_issuer_t *w)
{
    if (atomic_fetch_sub_explicit(&w->pending, 1, memory_order_acq_rel) == 1) {
        zc_futex_wake(&w->pending, INT32_MAX);
    }
    vmm_issuer_put(w);
}

aclError vmm_stream_push_tracked(vmm_stream_t *s, zccl_task_fn fn, void *arg, void (*dtor)(void *))
{
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 &&
        vmm_mdl_capturing(s)) {
        /* Captured, not queued: it is pending only when a replay queues it. */
        return vmm_stream_push(s, fn, arg, dtor);
    }
    if (vmm_issuer_self == NULL) {
        pthread_once(&vmm_issuer_once, vmm_issuer_key_make);
        vmm_issuer_t *w = calloc(1, sizeof(*w));
        if (w == NULL) {
            ZC_WARN(ZC_SUB_STREAM, "enqueue on stream %p: out of memory", (void *)s);
            return ACL_ERROR_RT_MEMORY_ALLOCATION;
        }
        atomic_init(&w->refs, 1);
        (void)pthread_setspecific(vmm_issuer_key, w);
        vmm_issuer_self = w;
    }
    vmm_tracked_t *t = malloc(sizeof(*t));
    if (t == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "enqueue on stream %p: out of memory", (void *)s);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *t = (vmm_tracked_t){fn, arg, dtor, vmm_issuer_self};
    atomic_fetch_add_explicit(&t->who->refs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->who->pending, 1, memory_order_relaxed);
    aclError rc = vmm_stream_push(s, vmm_tracked_run, t, vmm_tracked_done);
    if (rc != ACL_SUCCESS) {
        atomic_fetch_sub_explicit(&t->who->pending, 1, memory_order_relaxed);
        vmm_issuer_put(t->who);
        free(t); /* the caller keeps arg; its dtor is not called */
    }
    return rc;
}

aclError vmm_stream_drain_mine(const char *what)
{
    if (zccl_stream_in_task()) {
        ZC_WARN(ZC_SUB_STREAM,
                "%s: called from a stream task, which cannot wait for the work queued on the "
                "streams; call it outside stream tasks",
                what);
        return ACL_ERROR_RT_STREAM_CONTEXT;
    }
    vmm_issuer_t *w = vmm_issuer_self;
    for (unsigned v;
         w != NULL && (v = atomic_load_explicit(&w->pending, memory_order_acquire)) != 0;) {
        (void)zc_futex_wait(&w->pending, v, 0);
    }
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtSynchronizeDevice(void)
{
    int dev = vmm_device_current();
    if (dev < 0) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtSynchronizeDevice: this thread has no current device");
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    return vmm_device_sync(dev, -1, "aclrtSynchronizeDevice");
}

ZC_EXPORT aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout)
{
    if (timeout < -1) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtSynchronizeDeviceWithTimeout: timeout %d < -1", (int)timeout);
        return ACL_ERROR_INVALID_PARAM;
    }
    int dev = vmm_device_current();
    if (dev < 0) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtSynchronizeDeviceWithTimeout: this thread has no current "
                               "device");
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    return vmm_device_sync(dev, timeout, "aclrtSynchronizeDeviceWithTimeout");
}

void vmm_stream_drop_defaults(int dev)
{
    int lo = dev >= 0 ? dev : 0;
    pthread_mutex_lock(&vmm_reg_mu);
    int hi = dev >= 0 ? ZC_MIN(dev + 1, vmm_ndefaults) : vmm_ndefaults;
    pthread_mutex_unlock(&vmm_reg_mu);
    for (int d = lo; d < hi; d++) {
        pthread_mutex_lock(&vmm_reg_mu);
        vmm_stream_t *s = vmm_defaults[d];
        vmm_defaults[d] = NULL; /* its table reference moves to us */
        pthread_mutex_unlock(&vmm_reg_mu);
        if (s != NULL) {
            if (vmm_stream_is_self(s)) {
                /* A task of this stream reset the device: the worker cannot join
                 * itself, so leave the stream running (detached from the table). */
                ZC_WARN(ZC_SUB_STREAM,
                        "device %d reset from its default stream's own task: "
                        "the old default stream is left running",
                        d);
                continue;
            }
            vmm_stream_shutdown(s, 0);
            vmm_stream_put(s);
        }
    }
}

/* ---- libhccl interface (vmm_ext.h) -------------------------------------------------- */

ZC_EXPORT aclError zccl_stream_enqueue(aclrtStream stream, zccl_task_fn fn, void *arg,
                                       void (*dtor)(void *))
{
    if (fn == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "zccl_stream_enqueue: fn is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_stream_t *s;
    aclError rc = vmm_stream_get(stream, "zccl_stream_enqueue", &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = vmm_stream_push_tracked(s, fn, arg, dtor);
    vmm_stream_put(s);
    return rc;
}

ZC_EXPORT int zccl_stream_in_task(void)
{
    size_t n = 0;
    int in = 0;
    vmm_stream_t **v = vmm_stream_snapshot(-1, &n);
    for (size_t i = 0; v != NULL && i < n; i++) {
        in |= vmm_stream_is_self(v[i]);
        vmm_stream_put(v[i]);
    }
    free(v);
    return in;
}

ZC_EXPORT aclError zccl_task_reserve(aclrtStream stream, int want_idle, zccl_task_t *t)
{
    vmm_stream_t *s;
    aclError rc = vmm_stream_get(stream, "zccl_task_reserve", &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = vmm_stream_reserve(s, want_idle, &t->pos, &t->idle);
    if (rc != ACL_SUCCESS) {
        vmm_stream_put(s);
        return rc;
    }
    t->stream = s; /* the reference travels with the claim */
    t->payload = s->ring[t->pos & (VMM_STREAM_DEPTH - 1)].payload;
    return ACL_SUCCESS;
}

ZC_EXPORT void zccl_task_commit(zccl_task_t *t, zccl_task_fn fn, void (*dtor)(void *))
{
    vmm_stream_t *s = t->stream;
    /* Counted as the caller's queued work, which its frees wait for (no
     * allocation: the issuer record is the thread's, made once). */
    vmm_stream_publish(s, t->pos, fn, t->payload, dtor, fn != NULL ? vmm_issuer_mine() : NULL);
    t->stream = NULL;
    vmm_stream_put(s);
}

ZC_EXPORT void zccl_task_finish(zccl_task_t *t, int rc)
{
    vmm_stream_t *s = t->stream;
    vmm_stream_retire(s, t->pos, rc);
    atomic_fetch_sub_explicit(&s->producers, 1, memory_order_seq_cst);
    vmm_stream_kick(s); /* work other threads queued behind the claim */
    t->stream = NULL;
    vmm_stream_put(s);
}

ZC_EXPORT int zccl_stream_device(aclrtStream stream)
{
    if (stream == NULL) {
        return vmm_device_current();
    }
    int dev = -1;
    pthread_mutex_lock(&vmm_reg_mu);
    ssize_t i = vmm_reg_find(stream);
    if (i >= 0) {
        dev = vmm_reg[i]->dev;
    }
    pthread_mutex_unlock(&vmm_reg_mu);
    return dev;
}

/* ---- fork ---------------------------------------------------------------------------- */

void vmm_stream_atfork_prepare(void)
{
    pthread_mutex_lock(&vmm_reg_mu);
}

void vmm_stream_atfork_parent(void)
{
    pthread_mutex_unlock(&vmm_reg_mu);
}

void vmm_stream_atfork_child(void)
{
    pthread_mutex_unlock(&vmm_reg_mu);
    /* No worker thread exists in the child: forget every stream (their memory is
     * abandoned, as their mutexes may be held by threads that are not there). */
    vmm_nreg = 0;
    for (int d = 0; d < vmm_ndefaults; d++) {
        vmm_defaults[d] = NULL;
    }
    vmm_issuer_self = NULL; /* the parent's queued tasks never finish here */
}
