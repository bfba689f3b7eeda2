// One device per process, root info through MPI, per-communicator config: the
// shape of CANN's one-device-per-process sample, with four collectives on
// aclrtMalloc memory, each result checked element by element.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "compat_mpi.h"
#include "hccl/hccl_types.h"

namespace
{

int RunCollectives(HcclComm comm, aclrtStream stream, int rank, int size)
{
    const size_t count = 1024 * 1024 + 3;
    const size_t bytes = count * sizeof(float);
    void *send = nullptr;
    void *recv = nullptr;
    ACLCHECK(aclrtMalloc(&send, bytes * size, ACL_MEM_MALLOC_HUGE_FIRST));
    ACLCHECK(aclrtMalloc(&recv, bytes * size, ACL_MEM_MALLOC_HUGE_FIRST));
    std::vector<float> host(count * size);
    int bad = 0;

    // AllReduce: rank r contributes r + i % 7; the sum is n(n-1)/2 + n(i % 7).
    for (size_t i = 0; i < count; ++i) {
        host[i] = static_cast<float>(rank + static_cast<int>(i % 7));
    }
    ACLCHECK(aclrtMemcpy(send, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    HCCLCHECK(HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    ACLCHECK(aclrtMemcpy(host.data(), bytes, recv, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
        float want = static_cast<float>(size * (size - 1) / 2 + size * static_cast<int>(i % 7));
        wrong += host[i] != want;
    }
    bad |= compat_report(rank, "allreduce fp32 sum", wrong);

    // AllGather int32: block r holds r * 1000003 + i.
    std::vector<int32_t> ibuf(count * size);
    for (size_t i = 0; i < count; ++i) {
        ibuf[i] = static_cast<int32_t>(rank * 1000003 + static_cast<int32_t>(i));
    }
    ACLCHECK(aclrtMemcpy(send, bytes, ibuf.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    HCCLCHECK(HcclAllGather(send, recv, count, HCCL_DATA_TYPE_INT32, comm, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    ACLCHECK(aclrtMemcpy(ibuf.data(), bytes * size, recv, bytes * size, ACL_MEMCPY_DEVICE_TO_HOST));
    wrong = 0;
    for (int r = 0; r < size; ++r) {
        for (size_t i = 0; i < count; ++i) {
            wrong +=
                ibuf[r * count + i] != static_cast<int32_t>(r * 1000003 + static_cast<int32_t>(i));
        }
    }
    bad |= compat_report(rank, "allgather int32", wrong);

    // Broadcast from the last rank.
    const uint32_t root = static_cast<uint32_t>(size - 1);
    for (size_t i = 0; i < count; ++i) {
        ibuf[i] = static_cast<int32_t>(rank == static_cast<int>(root) ? 7 * i + 1 : 0);
    }
    ACLCHECK(aclrtMemcpy(send, bytes, ibuf.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    HCCLCHECK(HcclBroadcast(send, count, HCCL_DATA_TYPE_INT32, root, comm, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    ACLCHECK(aclrtMemcpy(ibuf.data(), bytes, send, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    wrong = 0;
    for (size_t i = 0; i < count; ++i) {
        wrong += ibuf[i] != static_cast<int32_t>(7 * i + 1);
    }
    bad |= compat_report(rank, "broadcast int32", wrong);

    // ReduceScatter int32 max: element j of block b is b + j + rank.
    for (int b = 0; b < size; ++b) {
        for (size_t i = 0; i < count; ++i) {
            ibuf[b * count + i] = static_cast<int32_t>(b + static_cast<int>(i % 100) + rank);
        }
    }
    ACLCHECK(aclrtMemcpy(send, bytes * size, ibuf.data(), bytes * size, ACL_MEMCPY_HOST_TO_DEVICE));
    HCCLCHECK(
        HcclReduceScatter(send, recv, count, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, comm, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    ACLCHECK(aclrtMemcpy(ibuf.data(), bytes, recv, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    wrong = 0;
    for (size_t i = 0; i < count; ++i) {
        wrong += ibuf[i] != static_cast<int32_t>(rank + static_cast<int>(i % 100) + size - 1);
    }
    bad |= compat_report(rank, "reducescatter int32 max", wrong);

    ACLCHECK(aclrtFree(send));
    ACLCHECK(aclrtFree(recv));
    return bad;
}

} // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ACLCHECK(aclInit(nullptr));
    uint32_t devices = 0;
    ACLCHECK(aclrtGetDeviceCount(&devices));
    if (rank == 0) {
        std::printf("Found %u device(s)\n", devices);
    }
    ACLCHECK(aclrtSetDevice(rank % static_cast<int>(devices)));

    HcclRootInfo rootInfo;
    if (compat_root_info(rank, &rootInfo) != 0) {
        return 1;
    }

    HcclCommConfig config;
    HcclCommConfigInit(&config);
    config.hcclBufferSize = 50;
    std::strcpy(config.hcclCommName, "compat_root_info");
    HcclComm comm = nullptr;
    HCCLCHECK(HcclCommInitRootInfoConfig(static_cast<uint32_t>(size), &rootInfo,
                                         static_cast<uint32_t>(rank), &config, &comm));
    char name[128] = {0};
    HCCLCHECK(HcclGetCommName(comm, name));
    aclrtStream stream = nullptr;
    ACLCHECK(aclrtCreateStream(&stream));

    int bad = RunCollectives(comm, stream, rank, size);

    compat_stats(comm, rank, name);
    ACLCHECK(aclrtDestroyStream(stream));
    HCCLCHECK(HcclCommDestroy(comm));
    ACLCHECK(aclrtResetDevice(rank % static_cast<int>(devices)));
    ACLCHECK(aclFinalize());
    MPI_Finalize();
    return bad;
}
