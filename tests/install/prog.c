/* An outside program: built against the installed headers and libraries only. */
#include <stdio.h>

#include "acl/acl.h"
#include "hccl/hccl.h"

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
    printf("installed zccl works: %u devices, root at %s\n", n, info.internal);
    return aclFinalize() == ACL_SUCCESS ? 0 : 1;
}
