/*
 * Synchronize and query: a stream, a device's streams. A synchronize waits
 * for exactly the work reserved before it and collects the stream error.
 * See vmm_stream.h.
 */
#include "stream/vmm_stream.h"

#include "zc/export.h"
#include "zc/log.h"
#include "zc/sync.h"

#include <stdlib.h>

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
    if (timeout_ms < 0 && !vmm_reached(s, target)) {
        vmm_stream_help(s, target); /* no deadline: run what the worker has not started */
    }
    if (!vmm_reached(s, target) && vmm_stream_wait_done(s, target, deadline, 0) != 0) {
        uint64_t left = target - atomic_load_explicit(&s->done, memory_order_acquire);
        ZC_WARN(ZC_SUB_STREAM, "%s: stream %p still has %llu tasks after %lld ms", what, (void *)s,
                (unsigned long long)left, (long long)timeout_ms);
        return ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
    }
    /* Looked at before it is taken: the exchange is a locked instruction, and
     * a task's error is stored before its done count, which the wait read. */
    if (!collect || atomic_load_explicit(&s->err, memory_order_acquire) == 0) {
        return ACL_SUCCESS;
    }
    return atomic_exchange_explicit(&s->err, 0, memory_order_acq_rel);
}

static aclError vmm_stream_sync_api(aclrtStream stream, int64_t timeout_ms, const char *what)
{
    vmm_stream_t *s;
    aclError rc = vmm_stream_get(stream, what, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 && vmm_capture_on(s)) {
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
