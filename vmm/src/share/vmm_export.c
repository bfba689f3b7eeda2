/*
 * Shareable handles: export, trust, import.
 *
 * Protocol: the exporter offers the handle's memfd to its broker
 * (zccl_broker_offer) and hands out the offer's token. A DEFAULT shareable
 * handle is that uint64_t token (pid, broker nonce, offer serial: see
 * vmm_share.h); a FABRIC
 * handle is a vmm_fabric_t (magic, version, token, host id, size) in the
 * 128-byte aclrtMemFabricHandle. SetPid adds pids to the offer's allow list
 * (the broker enforces it unless the export disabled pid validation). An
 * importer fetches the fd through the exporter's broker (SCM_RIGHTS) and
 * wraps it in a new physical handle of its own, usable with aclrtMapMem.
 *
 * Lifetime: one shareable handle per physical handle (a second export fails)
 * until the handle is freed; freeing withdraws the offer, so later imports
 * fail while earlier ones keep their memory (their own fd, their mappings),
 * also after the exporter exits. Each import gives a new handle.
 *
 * Error codes (acl_rt.h): a NULL or bad argument, an unknown share type,
 * flags, a second export, a shareable handle this process did not export
 * (SetPid), or a FABRIC handle whose magic is wrong -> ACL_ERROR_INVALID_PARAM;
 * an unknown physical handle -> ACL_ERROR_RT_INVALID_HANDLE; a bad deviceId
 * -> ACL_ERROR_RT_INVALID_DEVICEID; an importer not on the allow list or of
 * another uid -> ACL_ERROR_RT_NO_PERMISSION; importing a handle this same
 * process exported, or a FABRIC handle made on another host ->
 * ACL_ERROR_RT_FEATURE_NOT_SUPPORT; the exporter gone, not knowing the handle
 * or not answering in time -> ACL_ERROR_RT_IPC_ERROR.
 */
#include "core/vmm_internal.h"
#include "mem/vmm_registry.h"
#include "share/vmm_share.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zc/export.h"
#include "zc/log.h"
#include "zc/sync.h"

/* Offer handle's memfd and remember the token. */
static aclError vmm_export_offer(aclrtDrvMemHandle handle, uint64_t flags, const char *what,
                                 uint64_t *token, size_t *size)
{
    if (handle == NULL) {
        ZC_WARN(ZC_SUB_VMM, "%s: handle is NULL", what);
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((flags & ~(uint64_t)ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION) != 0) {
        ZC_WARN(ZC_SUB_VMM, "%s: flags 0x%llx has unknown bits", what, (unsigned long long)flags);
        return ACL_ERROR_INVALID_PARAM;
    }
    aclError err = ACL_SUCCESS;
    vmm_lock();
    vmm_phys_t *p = vmm_phys_find(handle);
    if (p == NULL) {
        ZC_WARN(ZC_SUB_VMM, "%s: handle %p is not a live physical handle", what, handle);
        err = ACL_ERROR_RT_INVALID_HANDLE;
    } else if (vmm_token_is_mine(p->token)) {
        ZC_WARN(ZC_SUB_VMM, "%s: handle %p was exported already (shareable handle 0x%016llx)", what,
                handle, (unsigned long long)p->token);
        err = ACL_ERROR_INVALID_PARAM;
    } else {
        int validate = (flags & ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION) == 0;
        int st = zccl_broker_offer(p->fd, p->size, validate, &p->token);
        if (st != ZC_OK) {
            p->token = 0;
            err = vmm_status_to_acl(st);
        } else {
            *token = p->token;
            *size = p->size;
        }
    }
    vmm_unlock();
    return err;
}

ZC_EXPORT aclError aclrtMemExportToShareableHandle(aclrtDrvMemHandle handle,
                                                   aclrtMemHandleType handleType, uint64_t flags,
                                                   uint64_t *shareableHandle)
{
    if (shareableHandle == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMemExportToShareableHandle: shareableHandle is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (handleType != ACL_MEM_HANDLE_TYPE_NONE && handleType != ACL_MEM_HANDLE_TYPE_POSIX) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMemExportToShareableHandle: handleType %d is not NONE or POSIX",
                (int)handleType);
        return ACL_ERROR_INVALID_PARAM;
    }
    uint64_t token;
    size_t size;
    aclError err =
        vmm_export_offer(handle, flags, "aclrtMemExportToShareableHandle", &token, &size);
    if (err == ACL_SUCCESS) {
        *shareableHandle = token;
    }
    return err;
}

ZC_EXPORT aclError aclrtMemExportToShareableHandleV2(aclrtDrvMemHandle handle, uint64_t flags,
                                                     aclrtMemSharedHandleType shareType,
                                                     void *shareableHandle)
{
    const char *what = "aclrtMemExportToShareableHandleV2";
    if (shareableHandle == NULL) {
        ZC_WARN(ZC_SUB_VMM, "%s: shareableHandle is NULL", what);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (shareType != ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT &&
        shareType != ACL_MEM_SHARE_HANDLE_TYPE_FABRIC) {
        ZC_WARN(ZC_SUB_VMM, "%s: shareType %d is not DEFAULT or FABRIC", what, (int)shareType);
        return ACL_ERROR_INVALID_PARAM;
    }
    uint64_t token;
    size_t size;
    aclError err = vmm_export_offer(handle, flags, what, &token, &size);
    if (err != ACL_SUCCESS) {
        return err;
    }
    if (shareType == ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT) {
        memcpy(shareableHandle, &token, sizeof(token));
    } else {
        vmm_fabric_t fab;
        memset(&fab, 0, sizeof(fab));
        fab.magic = VMM_FABRIC_MAGIC;
        fab.version = VMM_FABRIC_VERSION;
        fab.token = token;
        fab.host_id = zc_host_id();
        fab.size = size;
        memcpy(shareableHandle, &fab, sizeof(fab));
    }
    return ACL_SUCCESS;
}

/*
 * The token inside a V2 shareable handle. A FABRIC handle must carry our
 * magic and name this host.
 */
static aclError vmm_v2_token(const void *sh, aclrtMemSharedHandleType shareType, const char *what,
                             uint64_t *token)
{
    if (shareType == ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT) {
        memcpy(token, sh, sizeof(*token));
        return ACL_SUCCESS;
    }
    if (shareType != ACL_MEM_SHARE_HANDLE_TYPE_FABRIC) {
        ZC_WARN(ZC_SUB_VMM, "%s: shareType %d is not DEFAULT or FABRIC", what, (int)shareType);
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_fabric_t fab;
    memcpy(&fab, sh, sizeof(fab));
    if (fab.magic != VMM_FABRIC_MAGIC || fab.version != VMM_FABRIC_VERSION) {
        ZC_WARN(ZC_SUB_VMM, "%s: not a zccl FABRIC handle (magic 0x%08x, version %u)", what,
                fab.magic, fab.version);
        return ACL_ERROR_INVALID_PARAM;
    }
    uint64_t here = zc_host_id();
    if (fab.host_id != here) {
        ZC_WARN(ZC_SUB_VMM,
                "%s: FABRIC handle was exported on host 0x%016llx, this is host 0x%016llx: "
                "zccl shares memory within one host only",
                what, (unsigned long long)fab.host_id, (unsigned long long)here);
        return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    }
    *token = fab.token;
    return ACL_SUCCESS;
}

void vmm_export_released(uint64_t token)
{
    /* Later imports fail; earlier ones keep their own fds and mappings. */
    if (vmm_token_is_mine(token)) {
        (void)zccl_broker_withdraw(token);
    }
}

/* ---- trust ---------------------------------------------------------------------------- */

static aclError vmm_set_pid(uint64_t token, int32_t *pid, size_t pidNum, const char *what)
{
    if (pid == NULL || pidNum == 0) {
        ZC_WARN(ZC_SUB_VMM, "%s: pid %p or pidNum %zu is NULL/0", what, (void *)pid, pidNum);
        return ACL_ERROR_INVALID_PARAM;
    }
    for (size_t i = 0; i < pidNum; i++) {
        if (pid[i] <= 0) {
            ZC_WARN(ZC_SUB_VMM, "%s: pid[%zu] = %d is not a pid", what, i, (int)pid[i]);
            return ACL_ERROR_INVALID_PARAM;
        }
    }
    aclError err = ACL_SUCCESS;
    vmm_lock();
    /* Only live physical handles' exports: not IPC keys, not libhccl's offers. */
    if (!vmm_token_is_mine(token) || vmm_phys_find_token(token) == NULL) {
        ZC_WARN(ZC_SUB_VMM, "%s: 0x%016llx is not a shareable handle exported by this process",
                what, (unsigned long long)token);
        err = ACL_ERROR_INVALID_PARAM;
    } else {
        err = vmm_status_to_acl(zccl_broker_allow(token, pid, pidNum));
    }
    vmm_unlock();
    return err;
}

ZC_EXPORT aclError aclrtMemSetPidToShareableHandle(uint64_t shareableHandle, int32_t *pid,
                                                   size_t pidNum)
{
    return vmm_set_pid(shareableHandle, pid, pidNum, "aclrtMemSetPidToShareableHandle");
}

ZC_EXPORT aclError aclrtMemSetPidToShareableHandleV2(void *shareableHandle,
                                                     aclrtMemSharedHandleType shareType,
                                                     int32_t *pid, size_t pidNum)
{
    const char *what = "aclrtMemSetPidToShareableHandleV2";
    if (shareableHandle == NULL) {
        ZC_WARN(ZC_SUB_VMM, "%s: shareableHandle is NULL", what);
        return ACL_ERROR_INVALID_PARAM;
    }
    uint64_t token;
    aclError err = vmm_v2_token(shareableHandle, shareType, what, &token);
    if (err == ACL_ERROR_RT_FEATURE_NOT_SUPPORT) {
        err = ACL_ERROR_INVALID_PARAM; /* our own exports always name this host */
    }
    if (err != ACL_SUCCESS) {
        return err;
    }
    return vmm_set_pid(token, pid, pidNum, what);
}

/* ---- import ----------------------------------------------------------------------------- */

static aclError vmm_import(uint64_t token, int dev, const char *what, aclrtDrvMemHandle *handle)
{
    int32_t owner = zccl_broker_token_pid(token);
    if (owner <= 0 || (token & VMM_TOKEN_OFFER_MASK) == 0) {
        ZC_WARN(ZC_SUB_VMM, "%s: 0x%016llx is not a shareable handle", what,
                (unsigned long long)token);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (owner == (int32_t)getpid()) {
        ZC_WARN(ZC_SUB_VMM,
                "%s: shareable handle 0x%016llx was exported by this process: "
                "same-process import is not supported (use the address)",
                what, (unsigned long long)token);
        return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    }
    int fd = -1;
    size_t size = 0;
    int st = zccl_broker_fetch(token, &fd, &size);
    if (st != ZC_OK) {
        /* zccl_broker_fetch logged why; the exporter being gone, not knowing
         * the handle or not answering is one thing to the caller. */
        if (st == ZC_ERR_NOT_FOUND || st == ZC_ERR_TIMEOUT || st == ZC_ERR_CONNECT ||
            st == ZC_ERR_IO || st == ZC_ERR_REMOTE || st == ZC_ERR_INVAL) {
            return ACL_ERROR_RT_IPC_ERROR;
        }
        return vmm_status_to_acl(st);
    }
    long page = sysconf(_SC_PAGESIZE);
    if (size == 0 || (page > 0 && size % (size_t)page != 0)) {
        ZC_WARN(ZC_SUB_VMM, "%s: exporter of 0x%016llx offered %zu bytes, not whole pages", what,
                (unsigned long long)token, size);
        close(fd);
        return ACL_ERROR_RT_IPC_ERROR;
    }
    return vmm_phys_wrap(fd, size, dev, vmm_device_numa(dev), token, handle);
}

ZC_EXPORT aclError aclrtMemImportFromShareableHandle(uint64_t shareableHandle, int32_t deviceId,
                                                     aclrtDrvMemHandle *handle)
{
    const char *what = "aclrtMemImportFromShareableHandle";
    if (handle == NULL) {
        ZC_WARN(ZC_SUB_VMM, "%s: handle is NULL", what);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (!vmm_device_valid(deviceId)) {
        ZC_WARN(ZC_SUB_VMM, "%s: deviceId %d is not a device (count %d)", what, (int)deviceId,
                vmm_device_count());
        return ACL_ERROR_RT_INVALID_DEVICEID;
    }
    return vmm_import(shareableHandle, deviceId, what, handle);
}

ZC_EXPORT aclError aclrtMemImportFromShareableHandleV2(void *shareableHandle,
                                                       aclrtMemSharedHandleType shareType,
                                                       uint64_t flags, aclrtDrvMemHandle *handle)
{
    const char *what = "aclrtMemImportFromShareableHandleV2";
    if (shareableHandle == NULL || handle == NULL) {
        ZC_WARN(ZC_SUB_VMM, "%s: shareableHandle %p or handle %p is NULL", what, shareableHandle,
                (void *)handle);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (flags != 0) {
        ZC_WARN(ZC_SUB_VMM, "%s: flags 0x%llx must be 0", what, (unsigned long long)flags);
        return ACL_ERROR_INVALID_PARAM;
    }
    uint64_t token;
    aclError err = vmm_v2_token(shareableHandle, shareType, what, &token);
    if (err != ACL_SUCCESS) {
        return err;
    }
    /* V2 imports for the calling thread's current device (CANN does the same). */
    int dev = vmm_device_current();
    return vmm_import(token, dev >= 0 ? dev : 0, what, handle);
}
