// The public headers compile as C++11 and the basic calls link.
#include "acl/acl.h"
#include "hccl/hccl.h"

#include <cstdio>
#include <cstring>

int main()
{
    HcclRootInfo info;
    HcclCommConfig cfg;
    HcclCommConfigInit(&cfg);
    if (sizeof(info.internal) != HCCL_ROOT_INFO_BYTES || cfg.magicWord != 0xf0f0f0f0u) {
        return 1;
    }
    if (std::strcmp(HcclGetErrorString(HCCL_E_TIMEOUT), "timeout") != 0) {
        return 1;
    }
    uint32_t n = 0;
    if (aclrtGetDeviceCount(&n) != ACL_SUCCESS || n == 0) {
        return 1;
    }
    std::printf("C++11 headers ok, %u devices\n", n);
    return 0;
}
