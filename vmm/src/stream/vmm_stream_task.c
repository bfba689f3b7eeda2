/*
 * libhccl's task interface (vmm_ext.h): enqueue, claims for the caller-thread
 * path (reserve, then run and finish it here, or commit it to the worker), and
 * tasks tracked as their issuing thread's queued work, which frees wait for.
 * See vmm_stream.h.
 */
#include "stream/vmm_stream.h"

#include "zc/export.h"
#include "zc/log.h"
#include "zc/sync.h"

#include <pthread.h>
#include <stdlib.h>

/* ---- frees ordered after the caller's queued work ------------------------------------ */

/* Tasks a thread queued that have not finished (pending), shared by those
 * tasks and the thread (refs), so a thread may exit with work queued. */
typedef struct vmm_issuer {
    atomic_uint pending;
    atomic_uint draining; /* the thread sleeps in a drain: wake it at 0 */
    atomic_int refs;
} vmm_issuer_t;

/* One of w's tasks is over; the last one wakes a draining thread (no
 * syscall per task otherwise). */
static void vmm_issuer_dec(vmm_issuer_t *w)
{
    if (atomic_fetch_sub_explicit(&w->pending, 1, memory_order_seq_cst) == 1 &&
        atomic_load_explicit(&w->draining, memory_order_seq_cst) != 0) {
        zc_futex_wake(&w->pending, INT32_MAX);
    }
}

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
    vmm_issuer_dec(w);
    vmm_issuer_put(w);
    free(t);
}

/* The calling thread's issuer record, with one more pending task and
 * reference for it; NULL when it cannot be made (the task is then untracked). */
vmm_issuer_t *vmm_issuer_mine(void)
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
void vmm_issuer_done(vmm_issuer_t *w)
{
    vmm_issuer_dec(w);
    vmm_issuer_put(w);
}

aclError vmm_stream_push_tracked(vmm_stream_t *s, zccl_task_fn fn, void *arg, void (*dtor)(void *))
{
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 && vmm_capture_on(s)) {
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
    if (w == NULL) {
        return ACL_SUCCESS;
    }
    /* draining is raised before pending is read again (both seq_cst), so
     * the task that takes pending to 0 either is seen here or sees it. */
    atomic_fetch_add_explicit(&w->draining, 1, memory_order_seq_cst);
    for (unsigned v; (v = atomic_load_explicit(&w->pending, memory_order_seq_cst)) != 0;) {
        (void)zc_futex_wait(&w->pending, v, 0);
    }
    atomic_fetch_sub_explicit(&w->draining, 1, memory_order_seq_cst);
    return ACL_SUCCESS;
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
    return vmm_stream_running_any();
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
    vmm_stream_publish(s, t->pos, fn, t->payload, dtor, fn != NULL ? vmm_issuer_mine() : NULL, 1);
    t->stream = NULL;
    vmm_stream_put(s);
}

ZC_EXPORT void zccl_task_finish(zccl_task_t *t, int rc)
{
    vmm_stream_t *s = t->stream;
    vmm_stream_retire(s, t->pos, rc);
    atomic_fetch_sub_explicit(&s->producers, 1, memory_order_seq_cst);
    /* Work other threads queued behind the claim: its producer kicked a
     * worker that found the claim unpublished, so kick again. Nothing
     * behind it (the usual case): no wake, no syscall. A producer that
     * reserves after this look sees head past the claim (retire stored it
     * seq_cst) and kicks for itself. */
    if (atomic_load_explicit(&s->tail, memory_order_seq_cst) != t->pos + 1) {
        vmm_stream_kick(s);
    }
    t->stream = NULL;
    vmm_stream_put(s);
}

void vmm_issuer_forget(void)
{
    vmm_issuer_self = NULL;
}
