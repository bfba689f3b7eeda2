/*
 * The one mapping from zccl's internal status codes (zc/status.h) to ACL's
 * aclError, used at libascendcl's API edge, plus the monotonic-deadline
 * helper the blocking calls share.
 *
 * Choices: caller mistakes in values (pointers, sizes, states) are
 * ACL_ERROR_INVALID_PARAM, as CANN's ACL layer reports them; handles,
 * devices, alignment, permission and limits use the runtime (ACL_ERROR_RT_*)
 * codes CANN's runtime returns for them; broker/socket failures are
 * ACL_ERROR_RT_IPC_ERROR; anything unexpected is ACL_ERROR_RT_INTERNAL_ERROR.
 */
#include "core/vmm_internal.h"

#include <time.h>

aclError vmm_status_to_acl(int zc_status)
{
    switch (zc_status) {
    case ZC_OK:
        return ACL_SUCCESS;
    case ZC_ERR_INVAL:
    case ZC_ERR_PTR:
    case ZC_ERR_NOT_FOUND:
    case ZC_ERR_STATE:
        return ACL_ERROR_INVALID_PARAM;
    case ZC_ERR_NOMEM:
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    case ZC_ERR_TIMEOUT:
        return ACL_ERROR_RT_WAIT_TIMEOUT;
    case ZC_ERR_REMOTE:
    case ZC_ERR_IO:
    case ZC_ERR_CONNECT:
        return ACL_ERROR_RT_IPC_ERROR;
    case ZC_ERR_NOT_SUPPORT:
        return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    case ZC_ERR_PERM:
        return ACL_ERROR_RT_NO_PERMISSION;
    case ZC_ERR_UNAVAIL:
        return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    case ZC_ERR_HANDLE:
        return ACL_ERROR_RT_INVALID_HANDLE;
    case ZC_ERR_UNALIGNED:
        return ACL_ERROR_RT_ADDR_UNALIGNED;
    case ZC_ERR_DEVICE:
        return ACL_ERROR_RT_INVALID_DEVICEID;
    case ZC_ERR_UNINIT:
        return ACL_ERROR_UNINITIALIZE;
    case ZC_ERR_REPEAT:
        return ACL_ERROR_REPEAT_INITIALIZE;
    case ZC_ERR_OVERLIMIT:
        return ACL_ERROR_RT_OVER_LIMIT;
    case ZC_ERR_SYS:
    case ZC_ERR_INTERNAL:
    case ZC_ERR_AGAIN:
    default:
        return ACL_ERROR_RT_INTERNAL_ERROR;
    }
}

void vmm_deadline(struct timespec *ts, int64_t timeout_ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)(timeout_ms / 1000);
    ts->tv_nsec += (long)((timeout_ms % 1000) * 1000000);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec += 1;
        ts->tv_nsec -= 1000000000L;
    }
}
