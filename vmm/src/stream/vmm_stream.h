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
 * Helping. A thread that waits for the stream with nothing else to do (a
 * synchronize without a deadline, a producer facing a full ring) runs the
 * stream's published slots itself, in order, while the worker is not
 * running one: `runner` makes one thread at a time the executor, and the
 * worker claims no new slot while `helpers` is non-zero (a helper that
 * finds the worker mid-task waits for that slot to retire, then goes on).
 * Only slots libhccl committed may be helped (vmm_stream_help says why);
 * the helper stops at any other slot, at one not yet published, or at its
 * target, and kicks the worker when work is left. So a loop of queued ops
 * followed by a synchronize runs on the caller's thread once the ring
 * filled, and the stream is idle again for the caller-thread path.
 *
 * Spinning adapts: each stream keeps a spin budget (time, 0.5-20 us) that
 * grows when a synchronize's spin ended in success; after a wait that went
 * past it, the budget becomes that wait's length when it fit 20 us (an op
 * of one size in a loop takes about as long each time) and halves
 * otherwise (a wait behind much queued work). Past its first 2 us a spin
 * yields the core between polls, as the thread waited for may need it, and
 * the budget stays small when the host has no more cores than this process
 * has stream workers. A worker spins at most 5 us for new work: longer
 * would take the core from the thread producing it.
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
 *
 * Files, lowest first: vmm_stream_capture.c (the count of capturing streams
 * and graph capture's hooks), vmm_stream_wait.c (waits for `done`),
 * vmm_stream_issuer.c (each thread's tracked tasks, which its frees wait
 * for), vmm_stream_worker.c (the worker thread: start, run, stop),
 * vmm_stream_ring.c (the task ring: reserve, publish), vmm_stream.c
 * (registry, lifetime, lookup, create API, fork), vmm_stream_task.c
 * (libhccl's task interface: claims for the caller-thread path, tracked
 * pushes), vmm_stream_sync.c (synchronize and query), and above events
 * vmm_stream_destroy.c (the destroy API: a force destroy wakes event
 * waits). This header is private to those files.
 */
#ifndef VMM_STREAM_H
#define VMM_STREAM_H

#include "core/vmm_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define VMM_STREAM_DEPTH 1024u /* a power of two */
#define VMM_SPIN_MAX_NS 20000u /* the longest a wait spins before it yields */
#define VMM_SPIN_MIN_NS 500u
#define VMM_PAUSE_NS 2000u     /* the part of a wait's spin that polls without yielding */
#define VMM_IDLE_SPIN_NS 5000u /* a worker spins at most this long for new work */
#define VMM_YIELDS 64u         /* sched_yield polls between spinning and sleeping */
#define VMM_SLICE_NS 100000000ull

typedef struct {
    atomic_uint_fast64_t seq;
    zccl_task_fn fn;
    void *arg;
    void (*dtor)(void *);
    struct vmm_issuer *who; /* counts the task as its issuer's queued work (or NULL) */
    int helpable;           /* a waiting thread may run it (libhccl's committed claims) */
    _Alignas(16) unsigned char payload[ZCCL_TASK_PAYLOAD];
} vmm_slot_t;

struct vmm_issuer;

struct vmm_stream {
    int dev;
    int is_default;
    uint32_t priority;
    uint32_t flags;
    atomic_int refs; /* lookups, the registry or default table, threads' caches */
    pthread_t thread;

    _Alignas(64) atomic_uint_fast64_t tail; /* producers */
    atomic_int producers;                   /* threads inside a push */
    atomic_int closing;
    atomic_int aborting;
    atomic_int stop_on_failure;
    atomic_int err;

    _Alignas(64) atomic_uint_fast64_t head; /* the worker (or a claimer, for its slot) */
    atomic_int runner;                      /* 1: a thread is the executor of published slots */
    atomic_uint_fast64_t run_pos;           /* 1 + the last slot an executor took */
    atomic_int helpers;                     /* waiting threads running slots: worker stands by */
    atomic_uint_fast64_t done;
    atomic_uint done32;            /* futex word: low bits of done */
    atomic_uint_fast64_t want;     /* least `done` a sleeper waits for (UINT64_MAX: none) */
    _Alignas(64) atomic_uint kick; /* futex word of the worker's sleep */
    atomic_int w_sleeping;
    atomic_uint spin; /* adaptive spin budget, in ns */

    vmm_slot_t ring[VMM_STREAM_DEPTH];
};

extern atomic_int vmm_nworkers; /* stream workers alive in this process (vmm_stream_wait.c) */

/* vmm_stream.c */
/* Take a live stream out of the registry for a destroy (its reference moves to *out). */
aclError vmm_stream_unregister(aclrtStream stream, const char *what, vmm_stream_t **out);
/* The live streams of device dev (every device when dev < 0), each referenced. */
vmm_stream_t **vmm_stream_snapshot(int dev, size_t *count);

/* vmm_stream_wait.c */
unsigned vmm_spin_budget(vmm_stream_t *s);
/* How long an idle worker spins for new work. Not the synchronize budget:
 * that one shrinks after long waits (a synchronize behind much queued work
 * ends in a sleep anyway), while a worker that slept between ops queued
 * back to back would make every push pay a futex wake. */
unsigned vmm_idle_budget(void);
int vmm_reached(vmm_stream_t *s, uint64_t target);
void vmm_stream_wake_done(vmm_stream_t *s, uint64_t done);
int vmm_stream_wait_done(vmm_stream_t *s, uint64_t target, uint64_t deadline_ns, int sleep_now);

/* vmm_stream_ring.c */
aclError vmm_stream_reserve(vmm_stream_t *s, int want_idle, uint64_t *pos, int *idle);
void vmm_stream_publish(vmm_stream_t *s, uint64_t pos, zccl_task_fn fn, void *arg,
                        void (*dtor)(void *), struct vmm_issuer *who, int helpable);

/* vmm_stream_worker.c */
void vmm_stream_retire(vmm_stream_t *s, uint64_t pos, int rc);
void vmm_stream_kick(vmm_stream_t *s);
void vmm_stream_free(vmm_stream_t *s);
/* A new stream with its worker running (one reference, the caller's). */
aclError vmm_stream_new(int dev, int is_default, uint32_t priority, uint32_t flags,
                        vmm_stream_t **out);
/* Stop taking work, run (or drop, once aborting) what is queued, join the worker. */
void vmm_stream_shutdown(vmm_stream_t *s);
int vmm_stream_is_self(const vmm_stream_t *s);
/* A thread about to wait for done >= target runs the stream's published
 * helpable slots itself, in order, while the worker is not running one.
 * It stops at target, at a slot it may not run, or at one not yet
 * published; the plain wait covers the rest. */
void vmm_stream_help(vmm_stream_t *s, uint64_t target);
int vmm_stream_running_any(void); /* this thread runs a task of some stream */

/* vmm_stream_capture.c: graph capture's hooks, called only while
 * zccl_capture_count is non-zero (vmm_capture_gone looks at it itself). */
int vmm_capture_on(const vmm_stream_t *s);
int vmm_capture_push(vmm_stream_t *s, zccl_task_fn fn, void *arg, void (*dtor)(void *),
                     aclError *rc);
void vmm_capture_gone(const vmm_stream_t *s);

/* vmm_stream_issuer.c */
/* The calling thread's issuer record, with one more pending task and
 * reference for it; NULL when it cannot be made. */
struct vmm_issuer *vmm_issuer_mine(void);
void vmm_issuer_done(struct vmm_issuer *w); /* a tracked task finished or was dropped */
void vmm_issuer_drain(void);  /* wait until the calling thread's tracked tasks finished */
void vmm_issuer_forget(void); /* fork child: the parent's queued tasks never finish here */

#endif
