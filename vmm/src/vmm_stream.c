/*
 * Streams: one FIFO worker thread per stream.
 *
 * Protocol. A stream is a queue of tasks {fn, arg, dtor} guarded by the
 * stream's mutex; producers (any thread) append and signal the worker, which
 * pops in order, runs fn(arg) without the lock, then calls dtor(arg) and
 * counts the task done. `enq` and `done` only grow; a synchronize waits until
 * `done` reaches the `enq` it saw, so it waits for exactly the work enqueued
 * before it. The first non-zero task result since the last synchronize is
 * kept in `err` and handed (and cleared) by the next synchronize. In
 * ACL_STOP_ON_FAILURE mode the tasks that follow a failure are dropped (dtor
 * only) until that error is collected. The queue holds at most
 * VMM_STREAM_DEPTH waiting tasks: a producer blocks when it is full (the
 * worker itself never blocks on its own queue), which bounds memory.
 *
 * Handles. A handle is the stream's address, but it is only dereferenced
 * after it has been found in the registry of live streams (so a bogus or
 * stale handle is an error, not a crash); lookups take a reference and the
 * memory is freed when the last reference goes. The NULL handle is the
 * calling thread's current device's default stream, created on first use and
 * kept outside the registry (it cannot be destroyed by handle).
 *
 * Destroy: the stream leaves the registry, refuses new work, runs what is
 * queued (or drops it, for the force variant, which also makes blocking event
 * waits give up), and its worker is joined. A task cannot destroy or
 * synchronize its own stream (that would wait for itself).
 *
 * Lock order: registry mutex, then a stream mutex; never the reverse.
 */
#define _GNU_SOURCE
#include "vmm_internal.h"

#include "zc/export.h"
#include "zc/log.h"
#include "zc/sync.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VMM_STREAM_DEPTH 1024

typedef struct vmm_task {
    struct vmm_task *next;
    zccl_task_fn fn;
    void *arg;
    void (*dtor)(void *);
} vmm_task_t;

struct vmm_stream {
    int dev;
    int is_default;
    uint32_t priority;
    uint32_t flags;
    int refs; /* guarded by vmm_reg_mu */

    pthread_mutex_t mu;
    pthread_cond_t cv_work;  /* worker: a task arrived or closing */
    pthread_cond_t cv_done;  /* synchronizers: done advanced */
    pthread_cond_t cv_space; /* producers: the queue has room */
    uint64_t done_want;      /* smallest `done` a synchronizer waits for (UINT64_MAX: none) */
    int space_waiters;       /* producers blocked on a full queue */
    vmm_task_t *head, *tail;
    size_t depth;
    uint64_t enq, done;
    int err;
    int stop_on_failure;
    int closing;
    atomic_int aborting;
    pthread_t thread;
};

static pthread_mutex_t vmm_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static vmm_stream_t **vmm_reg; /* live user streams */
static size_t vmm_nreg, vmm_reg_cap;
static vmm_stream_t **vmm_defaults; /* per device, lazily allocated */
static int vmm_ndefaults;

/* ---- worker ---------------------------------------------------------------------- */

static void *vmm_stream_worker(void *p)
{
    vmm_stream_t *s = p;
    char name[16];
    snprintf(name, sizeof(name), "zccl-s%d", s->dev);
    pthread_setname_np(pthread_self(), name);
    (void)vmm_device_bind_thread(s->dev);

    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->head == NULL && !s->closing) {
            pthread_cond_wait(&s->cv_work, &s->mu);
        }
        if (s->head == NULL) {
            break;
        }
        vmm_task_t *t = s->head;
        s->head = t->next;
        if (s->head == NULL) {
            s->tail = NULL;
        }
        s->depth--;
        /* Wake blocked producers only once half the queue is free: waking
         * one per task would cost two context switches per task. */
        if (s->space_waiters > 0 && s->depth <= VMM_STREAM_DEPTH / 2) {
            pthread_cond_broadcast(&s->cv_space);
        }
        int skip = (s->stop_on_failure && s->err != 0) ||
                   atomic_load_explicit(&s->aborting, memory_order_acquire);
        pthread_mutex_unlock(&s->mu);

        int rc = skip ? 0 : t->fn(t->arg);
        if (t->dtor != NULL) {
            t->dtor(t->arg);
        }
        free(t);

        pthread_mutex_lock(&s->mu);
        if (rc != 0 && s->err == 0) {
            s->err = rc;
            ZC_INFO(ZC_SUB_STREAM, "stream %p (device %d): task failed with %d", (void *)s, s->dev,
                    rc);
        }
        s->done++;
        /* Wake synchronizers only when the one waiting for the least has
         * its work done, not after every task. */
        if (s->done >= s->done_want) {
            s->done_want = UINT64_MAX;
            pthread_cond_broadcast(&s->cv_done);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- lifetime ----------------------------------------------------------------------- */

static void vmm_stream_free(vmm_stream_t *s)
{
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_done);
    pthread_cond_destroy(&s->cv_space);
    free(s);
}

static aclError vmm_stream_new(int dev, int is_default, uint32_t priority, uint32_t flags,
                               vmm_stream_t **out)
{
    vmm_stream_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "stream create on device %d: out of memory", dev);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    s->dev = dev;
    s->is_default = is_default;
    s->priority = priority;
    s->flags = flags;
    s->refs = 1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_cond_init(&s->cv_done, &ca);
    pthread_cond_init(&s->cv_space, NULL);
    s->done_want = UINT64_MAX;
    pthread_condattr_destroy(&ca);
    atomic_init(&s->aborting, 0);
    int rc = pthread_create(&s->thread, NULL, vmm_stream_worker, s);
    if (rc != 0) {
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
    pthread_mutex_lock(&s->mu);
    s->closing = 1;
    pthread_cond_signal(&s->cv_work);
    pthread_cond_broadcast(&s->cv_space);
    pthread_mutex_unlock(&s->mu);
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

aclError vmm_stream_push(vmm_stream_t *s, zccl_task_fn fn, void *arg, void (*dtor)(void *))
{
    aclError captured;
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 &&
        vmm_mdl_capture_push(s, fn, arg, dtor, &captured)) {
        return captured; /* kept for aclmdlRI replays, not run (vmm_mdl.c) */
    }
    vmm_task_t *t = malloc(sizeof(*t));
    if (t == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "enqueue on stream %p: out of memory", (void *)s);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    t->next = NULL;
    t->fn = fn;
    t->arg = arg;
    t->dtor = dtor;
    int self = vmm_stream_is_self(s);
    pthread_mutex_lock(&s->mu);
    while (!self && !s->closing && s->depth >= VMM_STREAM_DEPTH) {
        s->space_waiters++;
        pthread_cond_wait(&s->cv_space, &s->mu);
        s->space_waiters--;
    }
    if (s->closing) {
        pthread_mutex_unlock(&s->mu);
        free(t);
        ZC_WARN(ZC_SUB_STREAM, "enqueue on stream %p: the stream is being destroyed", (void *)s);
        return ACL_ERROR_RT_INVALID_HANDLE;
    }
    if (s->tail != NULL) {
        s->tail->next = t;
    } else {
        s->head = t;
    }
    s->tail = t;
    s->depth++;
    s->enq++;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    return ACL_SUCCESS;
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
    struct timespec dl;
    if (timeout_ms >= 0) {
        vmm_deadline(&dl, timeout_ms);
    }
    aclError rc = ACL_SUCCESS;
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->enq;
    while (s->done < target) {
        if (target < s->done_want) {
            s->done_want = target;
        }
        if (timeout_ms < 0) {
            pthread_cond_wait(&s->cv_done, &s->mu);
        } else if (pthread_cond_timedwait(&s->cv_done, &s->mu, &dl) == ETIMEDOUT &&
                   s->done < target) {
            rc = ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
            break;
        }
    }
    if (rc == ACL_SUCCESS && collect) {
        rc = s->err;
        s->err = 0;
    }
    uint64_t left = target - s->done;
    pthread_mutex_unlock(&s->mu);
    if (rc == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) {
        ZC_WARN(ZC_SUB_STREAM, "%s: stream %p still has %llu tasks after %lld ms", what, (void *)s,
                (unsigned long long)left, (long long)timeout_ms);
    }
    return rc;
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
    if (vmm_mdl_capturing(s)) {
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
    pthread_mutex_lock(&s->mu);
    *status = s->done >= s->enq ? ACL_STREAM_STATUS_COMPLETE : ACL_STREAM_STATUS_NOT_READY;
    pthread_mutex_unlock(&s->mu);
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
    pthread_mutex_lock(&s->mu);
    s->stop_on_failure = mode == ACL_STOP_ON_FAILURE;
    pthread_mutex_unlock(&s->mu);
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
typedef struct {
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
