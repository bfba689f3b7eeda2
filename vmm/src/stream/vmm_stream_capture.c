/*
 * Graph capture as streams see it: the count of capturing streams and the
 * hooks a push, an idle check, a synchronize and a destroy call through.
 * Streams know no model: graph capture (graph/vmm_mdl.c) supplies the hooks
 * and init/ installs them at load time. The count lives here, so a stream
 * path costs one relaxed load of it while no stream captures, and calls a
 * hook only when it is non-zero.
 */
#include "stream/vmm_stream.h"

#include "zc/export.h"

ZC_EXPORT atomic_int zccl_capture_count;
static const vmm_capture_hooks_t *vmm_capture_hooks; /* set at load time, before any stream */

void vmm_capture_install(const vmm_capture_hooks_t *hooks)
{
    vmm_capture_hooks = hooks;
}

int vmm_capture_on(const vmm_stream_t *s)
{
    return vmm_capture_hooks != NULL && vmm_capture_hooks->on(s);
}

int vmm_capture_push(vmm_stream_t *s, zccl_task_fn fn, void *arg, void (*dtor)(void *),
                     aclError *rc)
{
    return vmm_capture_hooks != NULL && vmm_capture_hooks->push(s, fn, arg, dtor, rc);
}

void vmm_capture_gone(const vmm_stream_t *s)
{
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 &&
        vmm_capture_hooks != NULL) {
        vmm_capture_hooks->gone(s);
    }
}
