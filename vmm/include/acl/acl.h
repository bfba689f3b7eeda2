/*
 * zccl's ACL umbrella header: include this to get the whole ACL runtime
 * subset (acl_base.h: codes and handles; acl_rt.h: devices, streams, events,
 * memory, VMM, IPC; acl_mdl.h: stream capture into aclmdlRI models). The
 * profiling API (acl_prof.h, libmsprofiler) is included separately, as in
 * CANN.
 */
#ifndef ZCCL_ACL_ACL_H
#define ZCCL_ACL_ACL_H

#include "acl_base.h"
#include "acl_rt.h"
#include "acl_mdl.h"

/* ACL interface version this subset follows. */
#define ACL_MAJOR_VERSION 1
#define ACL_MINOR_VERSION 17
#define ACL_PATCH_VERSION 0

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief The ACL interface version the library implements: the
 *        ACL_MAJOR_VERSION, ACL_MINOR_VERSION and ACL_PATCH_VERSION it was
 *        built with (a program can compare them with the header it compiled
 *        against). zccl's own release is in zccl/version.h.
 * @param majorVersion receives the major version
 * @param minorVersion receives the minor version
 * @param patchVersion receives the patch version
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM a pointer is NULL (nothing is written)
 */
ACL_FUNC_VISIBILITY aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion,
                                             int32_t *patchVersion);

#ifdef __cplusplus
}
#endif

#endif /* ZCCL_ACL_ACL_H */
