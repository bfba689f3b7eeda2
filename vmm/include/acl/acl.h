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

#endif /* ZCCL_ACL_ACL_H */
