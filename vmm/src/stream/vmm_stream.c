/*
 * Streams: the registry of live streams and the default streams, lifetime
 * (create, reference, shut down), handle lookup, the create API, taking a
 * stream out for a destroy (vmm_stream_destroy.c) and fork. The protocol is
 * described in vmm_stream.h.
 */
#define _GNU_SOURCE
#include "stream/vmm_stream.h"

#include "zc/export.h"
#include "zc/log.h"
#include "zc/sync.h"

#include <stdlib.h>
#include <string.h>

static pthread_mutex_t vmm_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static vmm_stream_t **vmm_reg; /* live user streams */
static size_t vmm_nreg, vmm_reg_cap;
static vmm_stream_t **vmm_defaults; /* per device, lazily allocated */
static int vmm_ndefaults;
/* Bumped (under vmm_reg_mu) whenever a stream leaves the registry or the
 * default table: a thread's cached lookup is good while it is unchanged. */
static atomic_uint_fast64_t vmm_reg_gen;

/* The calling thread's last lookup, so that an op and its synchronize find
 * their stream without the registry lock. The cache holds a reference, so
 * the stream's memory outlives a destroy until the cache moves on (next
 * lookup of another stream, or thread exit). */
typedef struct {
    vmm_stream_t *s;
    const void *handle;
    int dev; /* the current device, for the NULL handle */
    uint64_t gen;
} vmm_cache_t;
static _Thread_local vmm_cache_t vmm_cache;
static pthread_once_t vmm_cache_once = PTHREAD_ONCE_INIT;
static pthread_key_t vmm_cache_key; /* its destructor drops an exiting thread's cache */

void vmm_stream_put(vmm_stream_t *s)
{
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
        vmm_stream_free(s);
    }
}

static void vmm_cache_drop(void *p)
{
    (void)p;
    vmm_stream_t *s = vmm_cache.s;
    vmm_cache.s = NULL;
    if (s != NULL) {
        vmm_stream_put(s);
    }
}

static void vmm_cache_key_make(void)
{
    (void)pthread_key_create(&vmm_cache_key, vmm_cache_drop);
}

/* After a locked lookup found s (gen read under the lock): cache it. */
static void vmm_cache_fill(vmm_stream_t *s, const void *handle, int dev, uint64_t gen)
{
    if (vmm_cache.s == s && vmm_cache.handle == handle && vmm_cache.dev == dev) {
        vmm_cache.gen = gen;
        return;
    }
    pthread_once(&vmm_cache_once, vmm_cache_key_make);
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed); /* the cache's */
    vmm_cache_drop(NULL);
    vmm_cache = (vmm_cache_t){s, handle, dev, gen};
    (void)pthread_setspecific(vmm_cache_key, &vmm_cache);
}

/* Lock-free lookup: the cached stream, if nothing left the tables since. */
static vmm_stream_t *vmm_cache_hit(const void *handle, int dev)
{
    vmm_stream_t *s = vmm_cache.s;
    if (s == NULL || vmm_cache.handle != handle || vmm_cache.dev != dev ||
        vmm_cache.gen != atomic_load_explicit(&vmm_reg_gen, memory_order_acquire)) {
        return NULL;
    }
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    return s;
}

static void vmm_reg_changed(void)
{
    atomic_fetch_add_explicit(&vmm_reg_gen, 1, memory_order_release);
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
    int cur = handle == NULL ? vmm_device_current() : -1;
    vmm_stream_t *hit = vmm_cache_hit(handle, cur);
    if (hit != NULL) {
        *out = hit;
        return ACL_SUCCESS;
    }
    if (handle != NULL) {
        pthread_mutex_lock(&vmm_reg_mu);
        ssize_t i = vmm_reg_find(handle);
        if (i >= 0) {
            atomic_fetch_add_explicit(&vmm_reg[i]->refs, 1, memory_order_relaxed);
            *out = vmm_reg[i];
            vmm_cache_fill(vmm_reg[i], handle, -1,
                           atomic_load_explicit(&vmm_reg_gen, memory_order_relaxed));
        }
        pthread_mutex_unlock(&vmm_reg_mu);
        if (i < 0) {
            ZC_WARN(ZC_SUB_STREAM, "%s: stream %p is not a live stream", what, handle);
            return ACL_ERROR_RT_INVALID_HANDLE;
        }
        return ACL_SUCCESS;
    }
    int dev = cur;
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
        atomic_fetch_add_explicit(&vmm_defaults[dev]->refs, 1, memory_order_relaxed);
        *out = vmm_defaults[dev];
        vmm_cache_fill(vmm_defaults[dev], NULL, dev,
                       atomic_load_explicit(&vmm_reg_gen, memory_order_relaxed));
    }
    pthread_mutex_unlock(&vmm_reg_mu);
    return rc;
}

int vmm_stream_aborting(const vmm_stream_t *s)
{
    return atomic_load_explicit(&((vmm_stream_t *)s)->aborting, memory_order_acquire);
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

/* Take stream (not NULL) out of the registry for a destroy; the registry's
 * reference moves to *out. Refused from a task of that stream. */
aclError vmm_stream_unregister(aclrtStream stream, const char *what, vmm_stream_t **out)
{
    pthread_mutex_lock(&vmm_reg_mu);
    ssize_t i = vmm_reg_find(stream);
    vmm_stream_t *s = i >= 0 ? vmm_reg[i] : NULL;
    if (s != NULL && vmm_stream_is_self(s)) {
        pthread_mutex_unlock(&vmm_reg_mu);
        ZC_WARN(ZC_SUB_STREAM, "%s: called from a task of stream %p", what, stream);
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    if (s != NULL) {
        vmm_reg[i] = vmm_reg[--vmm_nreg]; /* the registry's reference moves to the caller */
        vmm_reg_changed();
    }
    pthread_mutex_unlock(&vmm_reg_mu);
    if (s == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "%s: stream %p is not a live stream", what, stream);
        return ACL_ERROR_RT_INVALID_HANDLE;
    }
    *out = s;
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
vmm_stream_t **vmm_stream_snapshot(int dev, size_t *count)
{
    pthread_mutex_lock(&vmm_reg_mu);
    size_t n = 0;
    vmm_stream_t **v = malloc((vmm_nreg + (size_t)vmm_ndefaults + 1) * sizeof(*v));
    for (size_t i = 0; v != NULL && i < vmm_nreg; i++) {
        if (dev < 0 || vmm_reg[i]->dev == dev) {
            atomic_fetch_add_explicit(&vmm_reg[i]->refs, 1, memory_order_relaxed);
            v[n++] = vmm_reg[i];
        }
    }
    for (int d = 0; v != NULL && d < vmm_ndefaults; d++) {
        if (vmm_defaults[d] != NULL && (dev < 0 || d == dev)) {
            atomic_fetch_add_explicit(&vmm_defaults[d]->refs, 1, memory_order_relaxed);
            v[n++] = vmm_defaults[d];
        }
    }
    pthread_mutex_unlock(&vmm_reg_mu);
    *count = n;
    return v;
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
        vmm_reg_changed();
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
            vmm_stream_shutdown(s);
            vmm_stream_put(s);
        }
    }
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
    vmm_reg_changed();
    vmm_cache.s = NULL; /* abandoned with the rest, not put */
    vmm_issuer_forget();
}
