/* The physical memory helpers of zt_phys.h, compiled once into the test library. */
#include "zt_phys.h"

#include <stdio.h>
#include <string.h>

aclrtPhysicalMemProp zt_phys_prop(int device, aclrtMemAttr attr)
{
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = attr;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (uint32_t)device;
    return prop;
}

size_t zt_granularity(int device)
{
    aclrtPhysicalMemProp prop = zt_phys_prop(device, ACL_HBM_MEM_HUGE);
    size_t g = 0;
    if (aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g) !=
            ACL_SUCCESS ||
        g == 0) {
        return 2u << 20;
    }
    return g;
}

aclrtDrvMemHandle zt_phys_alloc(int device, size_t bytes)
{
    aclrtPhysicalMemProp prop = zt_phys_prop(device, ACL_HBM_MEM_HUGE);
    aclrtDrvMemHandle h = NULL;
    aclError e = aclrtMallocPhysical(&h, bytes, &prop, 0);
    if (e != ACL_SUCCESS) {
        fprintf(stderr, "aclrtMallocPhysical(%zu) failed: %d\n", bytes, (int)e);
        return NULL;
    }
    return h;
}
