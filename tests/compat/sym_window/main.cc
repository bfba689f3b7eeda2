// Symmetric windows, the shape of CANN's HcclCommSymWinRegister sample
// (C++11): the per-rank heap set through HcclCommConfig, memory reserved,
// backed and mapped, one window registered by every rank together, an
// AllGather and an in-place AllReduce inside it (checked element by element,
// zero-copy), HcclCommSymWinGet giving the window and offset back.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "compat_mpi.h"
#include "hccl/hccl_types.h"

int main(int argc, char **argv)
{
    int rank = 0;
    int size = 0;
    if (compat_mpi_start(&argc, &argv, &rank, &size) != 0) {
        return 1;
    }
    int32_t deviceId = -1;
    ACLCHECK(aclrtGetDevice(&deviceId));

    HcclCommConfig config;
    HcclCommConfigInit(&config);
    config.hcclSymWinMaxMemSizePerRank = 10; // GB
    HcclRootInfo rootInfo;
    if (compat_root_info(rank, &rootInfo) != 0) {
        return 1;
    }
    HcclComm hcclComm = nullptr;
    HCCLCHECK(HcclCommInitRootInfoConfig(static_cast<uint32_t>(size), &rootInfo,
                                         static_cast<uint32_t>(rank), &config, &hcclComm));
    aclrtStream stream = nullptr;
    ACLCHECK(aclrtCreateStream(&stream));

    aclrtPhysicalMemProp prop;
    std::memset(&prop, 0, sizeof(prop));
    compat_phys_prop(&prop, static_cast<uint32_t>(deviceId));
    size_t granularity = 0;
    ACLCHECK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
                                              &granularity));
    const size_t sendBytes = static_cast<size_t>(1) << 20;
    const size_t recvBytes = static_cast<size_t>(size) * sendBytes;
    size_t need = sendBytes + recvBytes;
    size_t allocSize = (need + granularity - 1) / granularity * granularity;
    void *virPtr = nullptr;
    ACLCHECK(aclrtReserveMemAddress(&virPtr, allocSize, 0, nullptr, 1));
    aclrtDrvMemHandle memHandle = nullptr;
    ACLCHECK(aclrtMallocPhysical(&memHandle, allocSize, &prop, 0));
    ACLCHECK(aclrtMapMem(virPtr, allocSize, 0, memHandle, 0));

    HcclCommSymWindow symWin = nullptr;
    HCCLCHECK(HcclCommSymWinRegister(hcclComm, virPtr, need, &symWin, HCCL_WIN_COLL_SYMMETRIC));
    char *sendBuff = static_cast<char *>(virPtr);
    char *recvBuff = sendBuff + sendBytes;
    HcclCommSymWindow got = nullptr;
    size_t offset = 0;
    HCCLCHECK(HcclCommSymWinGet(hcclComm, recvBuff, recvBytes, &got, &offset));
    int bad = compat_report(rank, "window get", got == symWin && offset == sendBytes ? 0 : 1);

    for (size_t i = 0; i < sendBytes; ++i) {
        sendBuff[i] = static_cast<char>(i * 5 + static_cast<size_t>(rank));
    }
    HCCLCHECK(HcclAllGather(sendBuff, recvBuff, sendBytes, HCCL_DATA_TYPE_INT8, hcclComm, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    size_t wrong = 0;
    for (int q = 0; q < size; ++q) {
        for (size_t i = 0; i < sendBytes; ++i) {
            wrong += recvBuff[static_cast<size_t>(q) * sendBytes + i] !=
                     static_cast<char>(i * 5 + static_cast<size_t>(q));
        }
    }
    bad |= compat_report(rank, "allgather in the window", wrong);

    int32_t *v = reinterpret_cast<int32_t *>(recvBuff);
    const size_t count = recvBytes / sizeof(int32_t);
    for (size_t i = 0; i < count; ++i) {
        v[i] = static_cast<int32_t>(i % 1000) - rank;
    }
    HCCLCHECK(HcclAllReduce(v, v, count, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, hcclComm, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    wrong = 0;
    for (size_t i = 0; i < count; ++i) {
        wrong += v[i] != static_cast<int32_t>(i % 1000) * size - size * (size - 1) / 2;
    }
    bad |= compat_report(rank, "in-place allreduce in the window", wrong);

    compat_stats(hcclComm, rank, "sym_window");
    HCCLCHECK(HcclCommSymWinDeregister(symWin));
    ACLCHECK(aclrtUnmapMem(virPtr));
    ACLCHECK(aclrtFreePhysical(memHandle));
    ACLCHECK(aclrtReleaseMemAddress(virPtr));
    ACLCHECK(aclrtDestroyStream(stream));
    HCCLCHECK(HcclCommDestroy(hcclComm));
    ACLCHECK(aclFinalize());
    MPI_Finalize();
    return bad;
}
