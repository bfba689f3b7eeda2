/*
 * Destroying a stream by handle (aclrtDestroyStream[Force]). It sits above
 * events: a force destroy makes blocked event waits give up, so it wakes
 * them. See vmm_stream.h.
 */
#include "stream/vmm_stream.h"

#include "zc/export.h"
#include "zc/log.h"

static aclError vmm_stream_destroy_api(aclrtStream stream, int force, const char *what)
{
    if (stream == NULL) {
        ZC_WARN(ZC_SUB_STREAM, "%s: stream is NULL (the default stream cannot be destroyed)", what);
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_stream_t *s;
    aclError rc = vmm_stream_unregister(stream, what, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    vmm_capture_gone(s);
    if (force) {
        /* Set before closing so the worker drops what is still queued; event waits
         * sleep on the event condition, so wake them to see it. */
        atomic_store_explicit(&s->aborting, 1, memory_order_release);
        vmm_event_wake_all();
    }
    vmm_stream_shutdown(s);
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
