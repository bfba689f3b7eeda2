/*
 * libhccl's task interface (vmm_ext.h): enqueue, claims for the caller-thread
 * path (reserve, then run and finish it here, or commit it to the worker), and
 * tasks tracked as their issuing thread's queued work (vmm_stream_issuer.c),
 * which frees wait for. See vmm_stream.h.
 */
#include "stream/vmm_stream.h"

#include "zc/export.h"
#include "zc/log.h"

#include <stdlib.h>

/* ---- frees ordered after the caller's queued work ------------------------------------ */

typedef struct {
    zccl_task_fn fn;
    void *arg;
    void (*dtor)(void *);
    struct vmm_issuer *who;
} vmm_tracked_t;

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
    vmm_issuer_done(t->who);
    free(t);
}

aclError vmm_stream_push_tracked(vmm_stream_t *s, zccl_task_fn fn, void *arg, void (*dtor)(void *))
{
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 && vmm_capture_on(s)) {
        /* Captured, not queued: it is pending only when a replay queues it. */
        return vmm_stream_push(s, fn, arg, dtor);
    }
    vmm_tracked_t *t = malloc(sizeof(*t));
    struct vmm_issuer *w = t != NULL ? vmm_issuer_mine() : NULL;
    if (w == NULL) {
        free(t);
        ZC_WARN(ZC_SUB_STREAM, "enqueue on stream %p: out of memory", (void *)s);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *t = (vmm_tracked_t){fn, arg, dtor, w};
    aclError rc = vmm_stream_push(s, vmm_tracked_run, t, vmm_tracked_done);
    if (rc != ACL_SUCCESS) {
        vmm_issuer_done(w); /* never queued: it counts no more */
        free(t);            /* the caller keeps arg; its dtor is not called */
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
    vmm_issuer_drain();
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
