/*
 * Physical device memory for tests (in the test library, zt_phys.c): the
 * properties of pinned device memory, the allocation granularity and one
 * allocation. Only ACL, so the vmm tests use it as well as the HCCL ones.
 */
#ifndef ZT_PHYS_H
#define ZT_PHYS_H

#include <stddef.h>

#include "acl/acl.h"

/**
 * Properties of pinned physical memory of kind attr (ACL_HBM_MEM_HUGE,
 * ACL_MEM_NORMAL, ...) on device, with no shareable handle type.
 */
aclrtPhysicalMemProp zt_phys_prop(int device, aclrtMemAttr attr);

/** Allocation granularity of huge-page physical memory on device (2 MiB if it cannot tell). */
size_t zt_granularity(int device);

/**
 * Huge-page physical allocation of bytes (granularity multiple) on device;
 * NULL on failure, after printing aclrtMallocPhysical's code.
 */
aclrtDrvMemHandle zt_phys_alloc(int device, size_t bytes);

#endif /* ZT_PHYS_H */
