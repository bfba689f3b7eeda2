/*
 * aclInit / aclFinalize and libascendcl's fork handlers.
 *
 * aclrtGetVersion reports the ACL interface version of acl/acl.h.
 *
 * aclInit is once per process until aclFinalize (a second call is
 * ACL_ERROR_REPEAT_INITIALIZE, as in CANN). The runtime calls do not require
 * it (devices, memory and streams work before aclInit, which only builds the
 * device table early and checks the config file); aclFinalize drains and
 * destroys the default streams. As in CANN's runtime, aclFinalize is refused
 * only when it follows another aclFinalize with no aclInit between them
 * (ACL_ERROR_REPEAT_FINALIZE): a finalize before any aclInit succeeds, so a
 * tool that prints its usage and finalizes exits 0.
 *
 * Fork: the handlers are registered when the library is loaded. The prepare
 * handler takes every global lock of the library (in the fixed order device,
 * stream registry, events, memory table) so no lock is copied in a held
 * state; the child handlers release them and reset the state that cannot
 * survive a fork: stream workers do not exist in the child, so stream and
 * event handles of the parent become invalid, device use counts and the
 * aclInit state start from zero (a child may call aclInit itself).
 *
 * Upward calls: a lower layer that must reach a higher one offers a
 * registration, and this file, above them all, fills each when the library
 * is loaded, before any call: graph capture's hooks for the streams, the
 * dropping of a device's default stream when the device is reset, and the
 * withdrawing of broker offers when memory that was shared is freed.
 */
#define _GNU_SOURCE
#include "core/vmm_internal.h"
#include "mem/vmm_registry.h"
#include "share/vmm_share.h"

#include "acl/acl.h"

#include "zc/config.h"
#include "zc/export.h"
#include "zc/log.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t vmm_init_mu = PTHREAD_MUTEX_INITIALIZER;
static int vmm_inited;
static int vmm_finalized; /* the last of aclInit / aclFinalize was aclFinalize */

ZC_EXPORT aclError aclInit(const char *configPath)
{
    if (configPath != NULL && configPath[0] != '\0' && access(configPath, R_OK) != 0) {
        ZC_WARN(ZC_SUB_INIT, "aclInit: config file '%s' is not readable: %s", configPath,
                strerror(errno));
        return ACL_ERROR_INVALID_FILE;
    }
    pthread_mutex_lock(&vmm_init_mu);
    int again = vmm_inited;
    vmm_inited = 1;
    vmm_finalized = 0;
    pthread_mutex_unlock(&vmm_init_mu);
    if (again) {
        ZC_WARN(ZC_SUB_INIT, "aclInit: already initialised (call aclFinalize first)");
        return ACL_ERROR_REPEAT_INITIALIZE;
    }
    /* The first zc_config() of the process prints the table when asked. */
    (void)zc_config();
    ZC_INFO(ZC_SUB_INIT, "aclInit: %d devices, config %s", vmm_device_count(),
            configPath != NULL && configPath[0] != '\0' ? configPath : "(none)");
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclFinalize(void)
{
    pthread_mutex_lock(&vmm_init_mu);
    int again = vmm_finalized;
    vmm_inited = 0;
    vmm_finalized = 1;
    pthread_mutex_unlock(&vmm_init_mu);
    if (again) {
        ZC_WARN(ZC_SUB_INIT, "aclFinalize: already finalised (no aclInit since the last one)");
        return ACL_ERROR_REPEAT_FINALIZE;
    }
    vmm_stream_drop_defaults(-1);
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion,
                                   int32_t *patchVersion)
{
    if (majorVersion == NULL || minorVersion == NULL || patchVersion == NULL) {
        ZC_WARN(ZC_SUB_INIT, "aclrtGetVersion: NULL %s",
                majorVersion == NULL   ? "majorVersion"
                : minorVersion == NULL ? "minorVersion"
                                       : "patchVersion");
        return ACL_ERROR_INVALID_PARAM;
    }
    *majorVersion = ACL_MAJOR_VERSION;
    *minorVersion = ACL_MINOR_VERSION;
    *patchVersion = ACL_PATCH_VERSION;
    return ACL_SUCCESS;
}

/* ---- fork handlers ------------------------------------------------------------------- */

static void vmm_atfork_prepare(void)
{
    pthread_mutex_lock(&vmm_init_mu);
    vmm_device_atfork_prepare();
    vmm_stream_atfork_prepare();
    vmm_event_atfork_prepare();
    vmm_mem_atfork_prepare();
}

static void vmm_atfork_parent(void)
{
    vmm_mem_atfork_parent();
    vmm_event_atfork_parent();
    vmm_stream_atfork_parent();
    vmm_device_atfork_parent();
    pthread_mutex_unlock(&vmm_init_mu);
}

static void vmm_atfork_child(void)
{
    vmm_mem_atfork_child();
    vmm_event_atfork_child();
    vmm_stream_atfork_child();
    vmm_device_atfork_child();
    vmm_mdl_atfork_child();
    vmm_inited = 0;
    vmm_finalized = 0;
    pthread_mutex_unlock(&vmm_init_mu);
}

__attribute__((constructor)) static void vmm_init_register(void)
{
    vmm_capture_install(&vmm_mdl_capture_hooks);
    vmm_device_on_reset(vmm_stream_drop_defaults);
    vmm_mem_on_free(vmm_ipc_mem_freed);
    vmm_phys_on_release(vmm_export_released);
    if (pthread_atfork(vmm_atfork_prepare, vmm_atfork_parent, vmm_atfork_child) != 0) {
        ZC_ERROR(ZC_SUB_INIT, "pthread_atfork failed: forked children may inherit held locks");
    }
}
