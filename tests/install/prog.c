/* An outside program: built against the installed headers and libraries only. */
#include <stdio.h>

#include "acl/acl.h"
#include "hccl/hccl.h"
#ifdef ZT_PROF
#include "acl/acl_prof.h"
#endif

int main(void)
{
    uint32_t n = 0;
    if (aclInit(NULL) != ACL_SUCCESS || aclrtGetDeviceCount(&n) != ACL_SUCCESS || n == 0) {
        return 1;
    }
    HcclRootInfo info;
    if (HcclGetRootInfo(&info) != HCCL_SUCCESS || info.internal[0] == '\0') {
        return 1;
    }
#ifdef ZT_PROF
    /* libmsprofiler: a config can be made and freed (no aclprofInit needed). */
    uint32_t dev = 0;
    aclprofConfig *cfg = aclprofCreateConfig(&dev, 1, ACL_AICORE_NONE, NULL, ACL_PROF_HCCL_TRACE);
    if (cfg == NULL || aclprofDestroyConfig(cfg) != ACL_SUCCESS ||
        aclprofStart(NULL) != ACL_ERROR_INVALID_PARAM) {
        return 1;
    }
#endif
    printf("installed zccl works: %u devices, root at %s\n", n, info.internal);
    return aclFinalize() == ACL_SUCCESS ? 0 : 1;
}
