/*
 * Stream capture into model run instances (acl/acl_mdl.h).
 *
 * Capture. aclmdlRICaptureBegin puts {stream, model} in the capture table.
 * While a stream is in it, vmm_stream_push hands every task for that stream
 * to this file's push hook (vmm_mdl_capture_hooks, which init/ installs in
 * the stream layer) instead of queueing it: a generic task {fn, arg, dtor}
 * (memory copies and fills, work libhccl queues) becomes a node that a
 * replay queues again as {fn, arg} (the model keeps arg and calls dtor when
 * it is destroyed); libhccl adds its ops as replay nodes through
 * zccl_stream_capture_add, so each replay submits the op afresh (a new
 * sequence number, matched across ranks). Event tasks are refused
 * (ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT): their generations belong to one
 * issue, not to a replay. A refused task invalidates the capture; its End
 * reports ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED and frees the model.
 *
 * Replay. aclmdlRIExecuteAsync queues the nodes in order on its stream from
 * the caller's thread, then a last task that marks the replay finished; a
 * model with replays in flight cannot be destroyed (ACL_ERROR_RT_MODEL_RUNNING),
 * so node arguments outlive every queued use of them.
 *
 * Cost: while no stream captures, streams call no hook (they look at
 * zccl_capture_count, vmm_stream_capture.c, with one relaxed load); the
 * hooks take vmm_mdl_mu. Models are validated against the list of live
 * ones, so a stale handle is an error, not a crash.
 */
#define _GNU_SOURCE
#include "core/vmm_internal.h"

#include "acl/acl_mdl.h"

#include "zc/export.h"
#include "zc/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VMM_MDL_MAX_CAPTURES 64

typedef struct {
    zccl_task_fn fn; /* generic task, or NULL for a replay node */
    void *arg;
    void (*dtor)(void *);
    zccl_replay_fn replay;
} vmm_mdl_node_t;

typedef enum { VMM_MDL_CAPTURING, VMM_MDL_INVALID, VMM_MDL_READY } vmm_mdl_state_t;

typedef struct vmm_mdl {
    struct vmm_mdl *next; /* live models */
    vmm_mdl_state_t state;
    aclmdlRICaptureMode mode;
    pthread_t thread; /* that began the capture */
    vmm_mdl_node_t *nodes;
    size_t n, cap;
    atomic_int running; /* replays queued, not yet finished */
    aclrtStream own;    /* stream of aclmdlRIExecute, created on first use */
    char name[128];     /* aclmdlRISetName */
} vmm_mdl_t;

static pthread_mutex_t vmm_mdl_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const vmm_stream_t *s;
    vmm_mdl_t *m;
} vmm_mdl_caps[VMM_MDL_MAX_CAPTURES];
static vmm_mdl_t *vmm_mdl_live;

/* ---- lookup (vmm_mdl_mu held) ------------------------------------------------------ */

static int vmm_mdl_cap_find(const vmm_stream_t *s)
{
    for (int i = 0; i < VMM_MDL_MAX_CAPTURES; i++) {
        if (vmm_mdl_caps[i].s == s && s != NULL) {
            return i;
        }
    }
    return -1;
}

static int vmm_mdl_is_live(const vmm_mdl_t *m)
{
    for (const vmm_mdl_t *x = vmm_mdl_live; x != NULL; x = x->next) {
        if (x == m) {
            return 1;
        }
    }
    return 0;
}

static void vmm_mdl_cap_drop(int i)
{
    vmm_mdl_caps[i].s = NULL;
    vmm_mdl_caps[i].m = NULL;
    atomic_fetch_sub_explicit(&zccl_capture_count, 1, memory_order_relaxed);
}

static void vmm_mdl_unlink(vmm_mdl_t *m)
{
    for (vmm_mdl_t **p = &vmm_mdl_live; *p != NULL; p = &(*p)->next) {
        if (*p == m) {
            *p = m->next;
            return;
        }
    }
}

static void vmm_mdl_free(vmm_mdl_t *m)
{
    if (m->own != NULL) {
        (void)aclrtDestroyStream(m->own);
    }
    for (size_t i = 0; i < m->n; i++) {
        if (m->nodes[i].dtor != NULL) {
            m->nodes[i].dtor(m->nodes[i].arg);
        }
    }
    free(m->nodes);
    free(m);
}

static aclError vmm_mdl_add(vmm_mdl_t *m, const vmm_mdl_node_t *node)
{
    if (m->n == m->cap) {
        size_t cap = m->cap != 0 ? 2 * m->cap : 16;
        vmm_mdl_node_t *v = realloc(m->nodes, cap * sizeof(*v));
        if (v == NULL) {
            ZC_WARN(ZC_SUB_STREAM, "capture: out of memory for %zu nodes", cap);
            return ACL_ERROR_RT_MEMORY_ALLOCATION;
        }
        m->nodes = v;
        m->cap = cap;
    }
    m->nodes[m->n++] = *node;
    return ACL_SUCCESS;
}

/* ---- hooks (vmm_stream_capture.c) ------------------------------------------------- */

static int vmm_mdl_capturing(const vmm_stream_t *s)
{
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) == 0) {
        return 0;
    }
    pthread_mutex_lock(&vmm_mdl_mu);
    int i = vmm_mdl_cap_find(s);
    pthread_mutex_unlock(&vmm_mdl_mu);
    return i >= 0;
}

static int vmm_mdl_capture_push(vmm_stream_t *s, zccl_task_fn fn, void *arg, void (*dtor)(void *),
                                aclError *rc)
{
    pthread_mutex_lock(&vmm_mdl_mu);
    int i = vmm_mdl_cap_find(s);
    if (i < 0) {
        pthread_mutex_unlock(&vmm_mdl_mu);
        return 0;
    }
    vmm_mdl_t *m = vmm_mdl_caps[i].m;
    if (vmm_event_is_task(fn)) {
        m->state = VMM_MDL_INVALID;
        *rc = ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
        ZC_WARN(ZC_SUB_STREAM,
                "stream %p is capturing: events cannot be captured (the "
                "capture is invalidated)",
                (void *)s);
    } else {
        vmm_mdl_node_t node = {.fn = fn, .arg = arg, .dtor = dtor};
        *rc = vmm_mdl_add(m, &node);
        if (*rc != ACL_SUCCESS) {
            m->state = VMM_MDL_INVALID;
        }
    }
    pthread_mutex_unlock(&vmm_mdl_mu);
    return 1;
}

static void vmm_mdl_stream_gone(const vmm_stream_t *s)
{
    pthread_mutex_lock(&vmm_mdl_mu);
    int i = vmm_mdl_cap_find(s);
    if (i >= 0) {
        /* The model stays (aclmdlRIDestroy frees it) but can never be run. */
        vmm_mdl_caps[i].m->state = VMM_MDL_INVALID;
        vmm_mdl_cap_drop(i);
    }
    pthread_mutex_unlock(&vmm_mdl_mu);
}

const vmm_capture_hooks_t vmm_mdl_capture_hooks = {
    .on = vmm_mdl_capturing,
    .push = vmm_mdl_capture_push,
    .gone = vmm_mdl_stream_gone,
};

void vmm_mdl_atfork_child(void)
{
    /* The child has no stream of the parent: no capture survives. */
    pthread_mutex_init(&vmm_mdl_mu, NULL);
    for (int i = 0; i < VMM_MDL_MAX_CAPTURES; i++) {
        if (vmm_mdl_caps[i].m != NULL) {
            vmm_mdl_caps[i].m->state = VMM_MDL_INVALID;
        }
        vmm_mdl_caps[i].s = NULL;
        vmm_mdl_caps[i].m = NULL;
    }
    atomic_store_explicit(&zccl_capture_count, 0, memory_order_relaxed);
}

/* ---- libhccl interface (vmm_ext.h) ------------------------------------------------- */

ZC_EXPORT int zccl_stream_capturing_lookup(aclrtStream stream)
{
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) == 0) {
        return 0;
    }
    vmm_stream_t *s;
    if (vmm_stream_get(stream, "zccl_stream_capturing", &s) != ACL_SUCCESS) {
        return 0; /* the enqueue reports the bad stream */
    }
    int r = vmm_mdl_capturing(s);
    vmm_stream_put(s);
    return r;
}

ZC_EXPORT aclError zccl_stream_capture_add(aclrtStream stream, zccl_replay_fn replay, void *arg,
                                           void (*release)(void *))
{
    if (replay == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "zccl_stream_capture_add: replay is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_stream_t *s;
    aclError rc = vmm_stream_get(stream, "zccl_stream_capture_add", &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    pthread_mutex_lock(&vmm_mdl_mu);
    int i = vmm_mdl_cap_find(s);
    if (i < 0) {
        rc = ACL_ERROR_RT_STREAM_NOT_CAPTURED;
        ZC_WARN(ZC_SUB_STREAM, "zccl_stream_capture_add: stream %p is not capturing", stream);
    } else {
        vmm_mdl_node_t node = {.arg = arg, .dtor = release, .replay = replay};
        rc = vmm_mdl_add(vmm_mdl_caps[i].m, &node);
    }
    pthread_mutex_unlock(&vmm_mdl_mu);
    vmm_stream_put(s);
    return rc;
}

/* ---- public API ------------------------------------------------------------------------ */

ZC_EXPORT aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode)
{
    if ((int)mode < ACL_MODEL_RI_CAPTURE_MODE_GLOBAL ||
        (int)mode > ACL_MODEL_RI_CAPTURE_MODE_RELAXED) {
        ZC_WARN(ZC_SUB_STREAM, "aclmdlRICaptureBegin: mode %d is not a capture mode", (int)mode);
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_stream_t *s;
    aclError rc = vmm_stream_get(stream, "aclmdlRICaptureBegin", &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    vmm_mdl_t *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        vmm_stream_put(s);
        ZC_WARN(ZC_SUB_STREAM, "aclmdlRICaptureBegin: out of memory");
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    m->mode = mode;
    m->thread = pthread_self();
    m->state = VMM_MDL_CAPTURING;
    atomic_init(&m->running, 0);
    pthread_mutex_lock(&vmm_mdl_mu);
    int free_slot = -1;
    for (int i = 0; i < VMM_MDL_MAX_CAPTURES && free_slot < 0; i++) {
        free_slot = vmm_mdl_caps[i].s == NULL ? i : -1;
    }
    if (vmm_mdl_cap_find(s) >= 0) {
        rc = ACL_ERROR_RT_STREAM_CAPTURED;
        ZC_WARN(ZC_SUB_STREAM, "aclmdlRICaptureBegin: stream %p is capturing already", stream);
    } else if (free_slot < 0) {
        rc = ACL_ERROR_RT_OVER_LIMIT;
        ZC_WARN(ZC_SUB_STREAM, "aclmdlRICaptureBegin: %d streams capture already",
                VMM_MDL_MAX_CAPTURES);
    } else {
        vmm_mdl_caps[free_slot].s = s;
        vmm_mdl_caps[free_slot].m = m;
        m->next = vmm_mdl_live;
        vmm_mdl_live = m;
        atomic_fetch_add_explicit(&zccl_capture_count, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&vmm_mdl_mu);
    vmm_stream_put(s);
    if (rc != ACL_SUCCESS) {
        free(m);
    }
    return rc;
}

ZC_EXPORT aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus *status,
                                          aclmdlRI *modelRI)
{
    if (status == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "aclmdlRICaptureGetInfo: status is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_stream_t *s;
    aclError rc = vmm_stream_get(stream, "aclmdlRICaptureGetInfo", &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    pthread_mutex_lock(&vmm_mdl_mu);
    int i = vmm_mdl_cap_find(s);
    vmm_mdl_t *m = i >= 0 ? vmm_mdl_caps[i].m : NULL;
    *status = m == NULL                     ? ACL_MODEL_RI_CAPTURE_STATUS_NONE
              : m->state == VMM_MDL_INVALID ? ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
                                            : ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
    if (modelRI != NULL) {
        *modelRI = m;
    }
    pthread_mutex_unlock(&vmm_mdl_mu);
    vmm_stream_put(s);
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI)
{
    if (modelRI == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "aclmdlRICaptureEnd: modelRI is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_stream_t *s;
    aclError rc = vmm_stream_get(stream, "aclmdlRICaptureEnd", &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    vmm_mdl_t *dead = NULL;
    pthread_mutex_lock(&vmm_mdl_mu);
    int i = vmm_mdl_cap_find(s);
    vmm_mdl_t *m = i >= 0 ? vmm_mdl_caps[i].m : NULL;
    if (m == NULL) {
        rc = ACL_ERROR_RT_STREAM_NOT_CAPTURED;
        ZC_WARN(ZC_SUB_STREAM, "aclmdlRICaptureEnd: stream %p is not capturing", stream);
    } else if (m->mode != ACL_MODEL_RI_CAPTURE_MODE_RELAXED &&
               !pthread_equal(m->thread, pthread_self())) {
        rc = ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD;
        ZC_WARN(ZC_SUB_STREAM,
                "aclmdlRICaptureEnd: stream %p: the capture began on another "
                "thread (mode %d is not RELAXED)",
                stream, (int)m->mode);
    } else {
        vmm_mdl_cap_drop(i);
        if (m->state == VMM_MDL_INVALID) {
            rc = ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
            ZC_WARN(ZC_SUB_STREAM,
                    "aclmdlRICaptureEnd: stream %p: the capture was invalidated "
                    "by an unsupported call; the model is destroyed",
                    stream);
            vmm_mdl_unlink(m);
            dead = m;
        } else {
            m->state = VMM_MDL_READY;
            *modelRI = m;
        }
    }
    pthread_mutex_unlock(&vmm_mdl_mu);
    vmm_stream_put(s);
    if (dead != NULL) {
        vmm_mdl_free(dead);
    }
    return rc;
}

static int vmm_mdl_done_task(void *arg)
{
    (void)arg;
    return 0;
}

static void vmm_mdl_done(void *arg)
{
    vmm_mdl_t *m = arg;
    atomic_fetch_sub_explicit(&m->running, 1, memory_order_release);
}

/* Queue every node of m on s (handle h); returns the first error. */
static aclError vmm_mdl_issue(vmm_mdl_t *m, vmm_stream_t *s, aclrtStream h)
{
    for (size_t i = 0; i < m->n; i++) {
        const vmm_mdl_node_t *nd = &m->nodes[i];
        aclError rc = nd->fn != NULL ? vmm_stream_push_tracked(s, nd->fn, nd->arg, NULL)
                                     : nd->replay(nd->arg, h);
        if (rc != ACL_SUCCESS) {
            ZC_WARN(ZC_SUB_STREAM,
                    "aclmdlRIExecuteAsync: node %zu of %zu failed to issue "
                    "(aclError %d); the nodes before it are queued",
                    i, m->n, (int)rc);
            return rc;
        }
    }
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream)
{
    vmm_mdl_t *m = modelRI;
    aclError rc = ACL_SUCCESS;
    pthread_mutex_lock(&vmm_mdl_mu);
    if (m == NULL || !vmm_mdl_is_live(m)) {
        rc = ACL_ERROR_INVALID_PARAM;
    } else if (m->state != VMM_MDL_READY) {
        rc = m->state == VMM_MDL_CAPTURING ? ACL_ERROR_RT_MODEL_CAPTURED
                                           : ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
    } else {
        atomic_fetch_add_explicit(&m->running, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&vmm_mdl_mu);
    if (rc != ACL_SUCCESS) {
        ZC_WARN(ZC_SUB_STREAM, "aclmdlRIExecuteAsync: model %p is %s", modelRI,
                rc == ACL_ERROR_INVALID_PARAM       ? "not a live model"
                : rc == ACL_ERROR_RT_MODEL_CAPTURED ? "still being captured"
                                                    : "invalidated");
        return rc;
    }
    vmm_stream_t *s;
    rc = vmm_stream_get(stream, "aclmdlRIExecuteAsync", &s);
    if (rc == ACL_SUCCESS && vmm_mdl_capturing(s)) {
        rc = ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
        ZC_WARN(ZC_SUB_STREAM, "aclmdlRIExecuteAsync: stream %p is capturing", stream);
        vmm_stream_put(s);
    } else if (rc == ACL_SUCCESS) {
        rc = vmm_mdl_issue(m, s, stream);
        if (vmm_stream_push(s, vmm_mdl_done_task, m, vmm_mdl_done) != ACL_SUCCESS) {
            vmm_mdl_done(m); /* the stream is going away: nothing more of ours is queued */
        }
        vmm_stream_put(s);
        return rc;
    }
    vmm_mdl_done(m);
    return rc;
}

ZC_EXPORT aclError aclmdlRIDestroy(aclmdlRI modelRI)
{
    vmm_mdl_t *m = modelRI;
    aclError rc = ACL_SUCCESS;
    pthread_mutex_lock(&vmm_mdl_mu);
    if (m == NULL || !vmm_mdl_is_live(m)) {
        rc = ACL_ERROR_INVALID_PARAM;
    } else if (m->state == VMM_MDL_CAPTURING) {
        rc = ACL_ERROR_RT_MODEL_CAPTURED;
    } else if (atomic_load_explicit(&m->running, memory_order_acquire) != 0) {
        rc = ACL_ERROR_RT_MODEL_RUNNING;
    } else {
        vmm_mdl_unlink(m);
    }
    pthread_mutex_unlock(&vmm_mdl_mu);
    if (rc != ACL_SUCCESS) {
        ZC_WARN(ZC_SUB_STREAM, "aclmdlRIDestroy: model %p is %s", modelRI,
                rc == ACL_ERROR_INVALID_PARAM       ? "not a live model"
                : rc == ACL_ERROR_RT_MODEL_CAPTURED ? "still being captured"
                                                    : "running (synchronize its stream first)");
        return rc;
    }
    vmm_mdl_free(m);
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclmdlRIExecute(aclmdlRI modelRI, int32_t timeout)
{
    vmm_mdl_t *m = modelRI;
    if (timeout < -1) {
        ZC_WARN(ZC_SUB_STREAM, "aclmdlRIExecute: timeout %d < -1", (int)timeout);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&vmm_mdl_mu);
    int live = m != NULL && vmm_mdl_is_live(m);
    aclrtStream own = live ? m->own : NULL;
    pthread_mutex_unlock(&vmm_mdl_mu);
    if (!live) {
        ZC_WARN(ZC_SUB_STREAM, "aclmdlRIExecute: model %p is not a live model", modelRI);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (own == NULL) {
        /* The model's own stream, on the caller's current device. */
        aclError rc = aclrtCreateStream(&own);
        if (rc != ACL_SUCCESS) {
            return rc;
        }
        pthread_mutex_lock(&vmm_mdl_mu);
        if (m->own == NULL) {
            m->own = own;
            own = NULL;
        }
        pthread_mutex_unlock(&vmm_mdl_mu);
        if (own != NULL) {
            (void)aclrtDestroyStream(own); /* another thread made it first */
        }
        own = m->own;
    }
    aclError rc = aclmdlRIExecuteAsync(m, own);
    if (rc == ACL_SUCCESS) {
        rc = aclrtSynchronizeStreamWithTimeout(own, timeout);
    }
    return rc;
}

ZC_EXPORT aclError aclmdlRISetName(aclmdlRI modelRI, const char *name)
{
    vmm_mdl_t *m = modelRI;
    aclError rc = ACL_SUCCESS;
    pthread_mutex_lock(&vmm_mdl_mu);
    if (m == NULL || name == NULL || !vmm_mdl_is_live(m)) {
        rc = ACL_ERROR_INVALID_PARAM;
    } else {
        snprintf(m->name, sizeof(m->name), "%s", name);
    }
    pthread_mutex_unlock(&vmm_mdl_mu);
    if (rc != ACL_SUCCESS) {
        ZC_WARN(ZC_SUB_STREAM, "aclmdlRISetName: model %p / name %s", modelRI,
                name == NULL ? "NULL" : "given, but the model is not live");
    }
    return rc;
}

ZC_EXPORT aclError aclmdlRIGetName(aclmdlRI modelRI, uint32_t maxLen, char *name)
{
    vmm_mdl_t *m = modelRI;
    aclError rc = ACL_SUCCESS;
    pthread_mutex_lock(&vmm_mdl_mu);
    if (m == NULL || name == NULL || !vmm_mdl_is_live(m) || maxLen <= strlen(m->name)) {
        rc = ACL_ERROR_INVALID_PARAM;
    } else {
        memcpy(name, m->name, strlen(m->name) + 1);
    }
    pthread_mutex_unlock(&vmm_mdl_mu);
    if (rc != ACL_SUCCESS) {
        ZC_WARN(ZC_SUB_STREAM,
                "aclmdlRIGetName: model %p, buffer %p of %u bytes (not a live "
                "model, or too small for the name)",
                modelRI, (void *)name, maxLen);
    }
    return rc;
}
