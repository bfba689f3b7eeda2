/*
 * Events: markers that streams complete and timestamp.
 *
 * State (all guarded by one mutex, vmm_ev_mu, with one condition variable
 * every change is broadcast on; events are few and changes rare, so a
 * single lock keeps waits simple and lets a force-destroyed stream wake all
 * waiters at once):
 *   rec_enq   generation of the latest record enqueued (0 = never recorded)
 *   done_gen  highest generation whose record has run
 *   reset_gen done_gen when the latest reset ran (records up to it no longer count)
 * aclrtRecordEvent takes the next generation and enqueues a record task;
 * when it runs, done_gen advances and the time is taken (an older record that
 * runs late on another stream changes nothing). A record dropped by its
 * stream (force destroy, stop-on-failure) still advances done_gen so nobody
 * waits forever, but leaves no valid timestamp.
 *
 * Complete = recorded, the latest record has run, and no reset since.
 * A stream wait targets the latest record at the time of the call; with no
 * record yet, a classic event (aclrtCreateEvent[WithFlag], CANN's semantics)
 * waits for the next record to run, while a reusable event
 * (aclrtCreateEventExWithFlag, CUDA-like) does not wait at all.
 *
 * aclrtSynchronizeEvent spins 10 us (then yields a few times) on done_gen,
 * an atomic, before it sleeps on the condition.
 *
 * Handles are validated against the registry of live events; tasks hold a
 * reference so an event destroyed while recorded or waited on stays valid
 * memory (a pending wait then fails with ACL_ERROR_RT_INVALID_HANDLE).
 */
#define _GNU_SOURCE
#include "core/vmm_internal.h"

#include "zc/export.h"
#include "zc/log.h"
#include "zc/sync.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define VMM_EV_SPIN_NS 10000u /* how long aclrtSynchronizeEvent spins before it sleeps */

typedef struct vmm_event {
    uint32_t flags;
    int reusable;
    int refs;
    int dead;
    int ts_valid;
    uint64_t rec_enq;
    _Atomic uint64_t done_gen; /* written under vmm_ev_mu; read without it by a spinning sync */
    uint64_t reset_gen;
    uint64_t ts_ns;
} vmm_event_t;

static pthread_mutex_t vmm_ev_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t vmm_ev_cv;
static pthread_once_t vmm_ev_once = PTHREAD_ONCE_INIT;
static vmm_event_t **vmm_evs;
static size_t vmm_nevs, vmm_evs_cap;

static void vmm_event_cv_init(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&vmm_ev_cv, &ca);
    pthread_condattr_destroy(&ca);
}

void vmm_event_wake_all(void)
{
    pthread_once(&vmm_ev_once, vmm_event_cv_init);
    pthread_mutex_lock(&vmm_ev_mu);
    pthread_cond_broadcast(&vmm_ev_cv);
    pthread_mutex_unlock(&vmm_ev_mu);
}

/* ---- registry (callers hold vmm_ev_mu) ------------------------------------------- */

static ssize_t vmm_event_find(const void *h)
{
    for (size_t i = 0; i < vmm_nevs; i++) {
        if ((const void *)vmm_evs[i] == h) {
            return (ssize_t)i;
        }
    }
    return -1;
}

static void vmm_event_unref_locked(vmm_event_t *ev)
{
    if (--ev->refs == 0) {
        free(ev);
    }
}

static aclError vmm_event_get(aclrtEvent h, const char *what, vmm_event_t **out)
{
    pthread_once(&vmm_ev_once, vmm_event_cv_init);
    if (h == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "%s: event is NULL", what);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&vmm_ev_mu);
    ssize_t i = vmm_event_find(h);
    if (i >= 0) {
        vmm_evs[i]->refs++;
        *out = vmm_evs[i];
    }
    pthread_mutex_unlock(&vmm_ev_mu);
    if (i < 0) {
        ZC_WARN(ZC_SUB_STREAM, "%s: event %p is not a live event", what, h);
        return ACL_ERROR_RT_INVALID_HANDLE;
    }
    return ACL_SUCCESS;
}

static void vmm_event_put(vmm_event_t *ev)
{
    pthread_mutex_lock(&vmm_ev_mu);
    vmm_event_unref_locked(ev);
    pthread_mutex_unlock(&vmm_ev_mu);
}

static int vmm_event_complete_locked(const vmm_event_t *ev)
{
    return ev->rec_enq > 0 && ev->done_gen >= ev->rec_enq && ev->done_gen > ev->reset_gen;
}

/* ---- create / destroy ----------------------------------------------------------------- */

static aclError vmm_event_create(aclrtEvent *event, uint32_t flag, int reusable, const char *what)
{
    const uint32_t known = ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS |
                           ACL_EVENT_TIME_LINE | ACL_EVENT_DEVICE_USE_ONLY | ACL_EVENT_EXTERNAL |
                           ACL_EVENT_IPC;
    pthread_once(&vmm_ev_once, vmm_event_cv_init);
    if (event == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "%s: event is NULL", what);
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((flag & ~known) != 0) {
        ZC_WARN(ZC_SUB_STREAM, "%s: unknown flag bits 0x%x", what, flag & ~known);
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((flag & ACL_EVENT_IPC) != 0) {
        ZC_WARN(ZC_SUB_STREAM,
                "%s: ACL_EVENT_IPC (flag 0x%x) is not supported: events are "
                "process-local in zccl",
                what, flag);
        return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    }
    vmm_event_t *ev = calloc(1, sizeof(*ev));
    if (ev == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "%s: out of memory", what);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    ev->flags = flag;
    ev->reusable = reusable;
    ev->refs = 1;
    pthread_mutex_lock(&vmm_ev_mu);
    if (vmm_nevs == vmm_evs_cap) {
        size_t cap = vmm_evs_cap != 0 ? 2 * vmm_evs_cap : 16;
        vmm_event_t **v = realloc(vmm_evs, cap * sizeof(*v));
        if (v == NULL) {
            pthread_mutex_unlock(&vmm_ev_mu);
            free(ev);
            ZC_WARN(ZC_SUB_STREAM, "%s: out of memory for the event registry", what);
            return ACL_ERROR_RT_MEMORY_ALLOCATION;
        }
        vmm_evs = v;
        vmm_evs_cap = cap;
    }
    vmm_evs[vmm_nevs++] = ev;
    pthread_mutex_unlock(&vmm_ev_mu);
    *event = ev;
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtCreateEvent(aclrtEvent *event)
{
    return vmm_event_create(event, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE, 0, "aclrtCreateEvent");
}

ZC_EXPORT aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag)
{
    return vmm_event_create(event, flag, 0, "aclrtCreateEventWithFlag");
}

ZC_EXPORT aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag)
{
    return vmm_event_create(event, flag, 1, "aclrtCreateEventExWithFlag");
}

ZC_EXPORT aclError aclrtDestroyEvent(aclrtEvent event)
{
    pthread_once(&vmm_ev_once, vmm_event_cv_init);
    pthread_mutex_lock(&vmm_ev_mu);
    ssize_t i = event != NULL ? vmm_event_find(event) : -1;
    if (i >= 0) {
        vmm_event_t *ev = vmm_evs[i];
        vmm_evs[i] = vmm_evs[--vmm_nevs];
        ev->dead = 1;
        pthread_cond_broadcast(&vmm_ev_cv);
        vmm_event_unref_locked(ev);
    }
    pthread_mutex_unlock(&vmm_ev_mu);
    if (event == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtDestroyEvent: event is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (i < 0) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtDestroyEvent: event %p is not a live event", event);
        return ACL_ERROR_RT_INVALID_HANDLE;
    }
    return ACL_SUCCESS;
}

/* ---- stream tasks -------------------------------------------------------------------- */

typedef struct {
    vmm_event_t *ev;
    vmm_stream_t *s; /* valid while the task exists: a stream outlives its tasks */
    uint64_t gen;    /* record: this record's generation; wait: the target (0 = next) */
    int ran;
} vmm_ev_task_t;

static int vmm_event_record_task(void *p)
{
    vmm_ev_task_t *t = p;
    uint64_t now = zc_time_ns();
    pthread_mutex_lock(&vmm_ev_mu);
    if (t->gen >= t->ev->done_gen) {
        t->ev->done_gen = t->gen;
        t->ev->ts_ns = now;
        t->ev->ts_valid = 1;
    }
    pthread_cond_broadcast(&vmm_ev_cv);
    pthread_mutex_unlock(&vmm_ev_mu);
    t->ran = 1;
    return 0;
}

static void vmm_event_record_dtor(void *p)
{
    vmm_ev_task_t *t = p;
    pthread_mutex_lock(&vmm_ev_mu);
    if (!t->ran && t->gen >= t->ev->done_gen) {
        /* Dropped by its stream: complete it so no waiter hangs, without a time. */
        t->ev->done_gen = t->gen;
        t->ev->ts_valid = 0;
        pthread_cond_broadcast(&vmm_ev_cv);
    }
    vmm_event_unref_locked(t->ev);
    pthread_mutex_unlock(&vmm_ev_mu);
    free(t);
}

static int vmm_event_reset_task(void *p)
{
    vmm_ev_task_t *t = p;
    pthread_mutex_lock(&vmm_ev_mu);
    t->ev->reset_gen = t->ev->done_gen;
    pthread_cond_broadcast(&vmm_ev_cv);
    pthread_mutex_unlock(&vmm_ev_mu);
    return 0;
}

static int vmm_event_wait_passes_locked(const vmm_event_t *ev, uint64_t target)
{
    return target > 0 ? ev->done_gen >= target : ev->done_gen > ev->reset_gen;
}

static int vmm_event_wait_task(void *p)
{
    vmm_ev_task_t *t = p;
    int rc = 0;
    pthread_mutex_lock(&vmm_ev_mu);
    while (!vmm_event_wait_passes_locked(t->ev, t->gen)) {
        if (t->ev->dead) {
            rc = ACL_ERROR_RT_INVALID_HANDLE;
            break;
        }
        if (vmm_stream_aborting(t->s)) {
            break;
        }
        pthread_cond_wait(&vmm_ev_cv, &vmm_ev_mu);
    }
    pthread_mutex_unlock(&vmm_ev_mu);
    if (rc != 0) {
        ZC_WARN(ZC_SUB_STREAM,
                "stream wait: event %p was destroyed while a stream waited on "
                "it",
                (void *)t->ev);
    }
    return rc;
}

int vmm_event_is_task(zccl_task_fn fn)
{
    return fn == vmm_event_record_task || fn == vmm_event_reset_task || fn == vmm_event_wait_task;
}

static void vmm_event_task_dtor(void *p)
{
    vmm_ev_task_t *t = p;
    vmm_event_put(t->ev);
    free(t);
}

typedef enum { VMM_EV_RECORD, VMM_EV_RESET, VMM_EV_WAIT } vmm_ev_op_t;

/* Resolve event and stream, then enqueue the op's task. */
static aclError vmm_event_enqueue(aclrtEvent event, aclrtStream stream, vmm_ev_op_t op,
                                  const char *what)
{
    vmm_event_t *ev;
    aclError rc = vmm_event_get(event, what, &ev);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    vmm_stream_t *s;
    rc = vmm_stream_get(stream, what, &s);
    if (rc != ACL_SUCCESS) {
        vmm_event_put(ev);
        return rc;
    }
    vmm_ev_task_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "%s: out of memory", what);
        vmm_stream_put(s);
        vmm_event_put(ev);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    t->ev = ev;
    t->s = s;
    pthread_mutex_lock(&vmm_ev_mu);
    if (op == VMM_EV_RECORD) {
        t->gen = ++ev->rec_enq;
    } else if (op == VMM_EV_WAIT) {
        t->gen = ev->rec_enq;
    }
    pthread_mutex_unlock(&vmm_ev_mu);
    if (op == VMM_EV_WAIT && ev->reusable && t->gen == 0) {
        /* A reusable event never recorded: nothing to wait for. */
        free(t);
        vmm_stream_put(s);
        vmm_event_put(ev);
        return ACL_SUCCESS;
    }
    zccl_task_fn fn = op == VMM_EV_RECORD  ? vmm_event_record_task
                      : op == VMM_EV_RESET ? vmm_event_reset_task
                                           : vmm_event_wait_task;
    rc = vmm_stream_push(s, fn, t,
                         op == VMM_EV_RECORD ? vmm_event_record_dtor : vmm_event_task_dtor);
    if (rc != ACL_SUCCESS) {
        if (op == VMM_EV_RECORD) {
            pthread_mutex_lock(&vmm_ev_mu);
            if (ev->rec_enq == t->gen) {
                ev->rec_enq--; /* never enqueued: take the generation back */
            }
            pthread_mutex_unlock(&vmm_ev_mu);
        }
        free(t);
        vmm_event_put(ev);
    }
    vmm_stream_put(s);
    return rc;
}

ZC_EXPORT aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)
{
    return vmm_event_enqueue(event, stream, VMM_EV_RECORD, "aclrtRecordEvent");
}

ZC_EXPORT aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream)
{
    return vmm_event_enqueue(event, stream, VMM_EV_RESET, "aclrtResetEvent");
}

ZC_EXPORT aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)
{
    return vmm_event_enqueue(event, stream, VMM_EV_WAIT, "aclrtStreamWaitEvent");
}

/* ---- host side ------------------------------------------------------------------------- */

/* Before sleeping on the condition: spin (then yield) a short while for the
 * record, which often runs within microseconds. */
static void vmm_event_spin(vmm_event_t *ev, uint64_t target)
{
    uint64_t until = zc_time_ns() + VMM_EV_SPIN_NS;
    for (unsigned i = 1; atomic_load_explicit(&ev->done_gen, memory_order_acquire) < target; i++) {
        if (i % 32 == 0 && (zc_time_ns() > until || zc_yield_is_off())) {
            for (int y = 0; y < 16; y++) {
                if (atomic_load_explicit(&ev->done_gen, memory_order_acquire) >= target) {
                    return;
                }
                if (!zc_yield()) {
                    return;
                }
            }
            return;
        }
        zc_cpu_relax();
    }
}

static aclError vmm_event_sync(aclrtEvent event, int64_t timeout_ms, const char *what)
{
    vmm_event_t *ev;
    aclError rc = vmm_event_get(event, what, &ev);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    struct timespec dl;
    if (timeout_ms >= 0) {
        vmm_deadline(&dl, timeout_ms);
    }
    pthread_mutex_lock(&vmm_ev_mu);
    uint64_t target = ev->rec_enq;
    pthread_mutex_unlock(&vmm_ev_mu);
    vmm_event_spin(ev, target);
    pthread_mutex_lock(&vmm_ev_mu);
    while (ev->done_gen < target && !ev->dead) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&vmm_ev_cv, &vmm_ev_mu);
        } else if (pthread_cond_timedwait(&vmm_ev_cv, &vmm_ev_mu, &dl) == ETIMEDOUT &&
                   ev->done_gen < target) {
            rc = ACL_ERROR_RT_EVENT_SYNC_TIMEOUT;
            break;
        }
    }
    int dead = ev->dead && ev->done_gen < target;
    vmm_event_unref_locked(ev);
    pthread_mutex_unlock(&vmm_ev_mu);
    if (dead) {
        ZC_WARN(ZC_SUB_STREAM, "%s: event %p was destroyed while waited on", what, event);
        return ACL_ERROR_RT_INVALID_HANDLE;
    }
    if (rc != ACL_SUCCESS) {
        ZC_WARN(ZC_SUB_STREAM, "%s: event %p not complete after %lld ms", what, event,
                (long long)timeout_ms);
    }
    return rc;
}

ZC_EXPORT aclError aclrtSynchronizeEvent(aclrtEvent event)
{
    return vmm_event_sync(event, -1, "aclrtSynchronizeEvent");
}

ZC_EXPORT aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout)
{
    if (timeout < -1) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtSynchronizeEventWithTimeout: timeout %d < -1", (int)timeout);
        return ACL_ERROR_INVALID_PARAM;
    }
    return vmm_event_sync(event, timeout, "aclrtSynchronizeEventWithTimeout");
}

/* Evaluate a predicate on the event state under the lock. which: 0 complete, 1 wait. */
static aclError vmm_event_query(aclrtEvent event, const void *status, int which, int *yes,
                                const char *what)
{
    if (status == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "%s: status is NULL", what);
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_event_t *ev;
    aclError rc = vmm_event_get(event, what, &ev);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    pthread_mutex_lock(&vmm_ev_mu);
    if (which == 0) {
        *yes = vmm_event_complete_locked(ev);
    } else if (ev->reusable && ev->rec_enq == 0) {
        *yes = 1;
    } else {
        *yes = vmm_event_wait_passes_locked(ev, ev->rec_enq);
    }
    vmm_event_unref_locked(ev);
    pthread_mutex_unlock(&vmm_ev_mu);
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status)
{
    int yes = 0;
    aclError rc = vmm_event_query(event, status, 0, &yes, "aclrtQueryEventStatus");
    if (rc == ACL_SUCCESS) {
        *status = yes ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    }
    return rc;
}

ZC_EXPORT aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status)
{
    int yes = 0;
    aclError rc = vmm_event_query(event, status, 0, &yes, "aclrtQueryEvent");
    if (rc == ACL_SUCCESS) {
        *status = yes ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
    }
    return rc;
}

ZC_EXPORT aclError aclrtQueryEventWaitStatus(aclrtEvent event, aclrtEventWaitStatus *status)
{
    int yes = 0;
    aclError rc = vmm_event_query(event, status, 1, &yes, "aclrtQueryEventWaitStatus");
    if (rc == ACL_SUCCESS) {
        *status = yes ? ACL_EVENT_WAIT_STATUS_COMPLETE : ACL_EVENT_WAIT_STATUS_NOT_READY;
    }
    return rc;
}

/* The time of an event's completed record, or the aclError saying why there is none. */
static aclError vmm_event_time_locked(const vmm_event_t *ev, aclrtEvent h, uint64_t *ts)
{
    if ((ev->flags & ACL_EVENT_TIME_LINE) == 0) {
        ZC_WARN(ZC_SUB_STREAM,
                "aclrtEventElapsedTime: event %p was created without "
                "ACL_EVENT_TIME_LINE (flags 0x%x)",
                h, ev->flags);
        return ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID;
    }
    if (ev->rec_enq == 0) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtEventElapsedTime: event %p was never recorded", h);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (ev->done_gen < ev->rec_enq) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtEventElapsedTime: event %p's record has not run yet", h);
        return ACL_ERROR_RT_EVENT_NOT_COMPLETE;
    }
    if (!ev->ts_valid) {
        ZC_WARN(ZC_SUB_STREAM,
                "aclrtEventElapsedTime: event %p's record was dropped by its "
                "stream (no timestamp)",
                h);
        return ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID;
    }
    *ts = ev->ts_ns;
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent)
{
    if (ms == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "aclrtEventElapsedTime: ms is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_event_t *a, *b;
    aclError rc = vmm_event_get(startEvent, "aclrtEventElapsedTime", &a);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = vmm_event_get(endEvent, "aclrtEventElapsedTime", &b);
    if (rc != ACL_SUCCESS) {
        vmm_event_put(a);
        return rc;
    }
    uint64_t t0 = 0, t1 = 0;
    pthread_mutex_lock(&vmm_ev_mu);
    rc = vmm_event_time_locked(a, startEvent, &t0);
    if (rc == ACL_SUCCESS) {
        rc = vmm_event_time_locked(b, endEvent, &t1);
    }
    vmm_event_unref_locked(a);
    vmm_event_unref_locked(b);
    pthread_mutex_unlock(&vmm_ev_mu);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (t1 < t0) {
        ZC_WARN(ZC_SUB_STREAM,
                "aclrtEventElapsedTime: end event %p ran %llu ns before start "
                "event %p",
                endEvent, (unsigned long long)(t0 - t1), startEvent);
        return ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL;
    }
    *ms = (float)((double)(t1 - t0) / 1e6);
    return ACL_SUCCESS;
}

/* ---- fork ------------------------------------------------------------------------------ */

void vmm_event_atfork_prepare(void)
{
    pthread_mutex_lock(&vmm_ev_mu);
}

void vmm_event_atfork_parent(void)
{
    pthread_mutex_unlock(&vmm_ev_mu);
}

void vmm_event_atfork_child(void)
{
    pthread_mutex_unlock(&vmm_ev_mu);
    /* Waiters of the parent do not exist here: start with a fresh condition and
     * no live events (their memory is abandoned). */
    vmm_event_cv_init();
    vmm_nevs = 0;
}
