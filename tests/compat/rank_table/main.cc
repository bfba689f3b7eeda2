// Rank-table init, the shape of CANN's one-device-per-process rank-table
// sample: MPI starts the processes and gives each its rank; the communicator
// comes from the rank table alone (HcclCommInitClusterInfoConfig), no root
// info crosses MPI. Each rank's data is 0..n-1; after AllReduce every
// element i is n * i. Usage: rank_table [rank_table.json].
#include <cstdio>
#include <cstring>
#include <vector>

#include "compat_mpi.h"
#include "hccl/hccl_types.h"

int main(int argc, char **argv)
{
    int procSize = 0;
    int procRank = 0;
    if (compat_mpi_start(&argc, &argv, &procRank, &procSize) != 0) {
        return 1;
    }
    const char *rankTableFile = argc > 1 ? argv[1] : "./rank_table.json";

    HcclCommConfig config;
    HcclCommConfigInit(&config);
    config.hcclBufferSize = 50;
    std::strcpy(config.hcclCommName, "comm_1");
    HcclComm hcclComm = nullptr;
    HCCLCHECK(HcclCommInitClusterInfoConfig(rankTableFile, static_cast<uint32_t>(procRank), &config,
                                            &hcclComm));
    uint32_t rankSize = 0;
    HCCLCHECK(HcclGetRankSize(hcclComm, &rankSize));

    const size_t count = static_cast<size_t>(procSize) * 4096;
    const size_t bytes = count * sizeof(float);
    void *sendBuf = nullptr;
    void *recvBuf = nullptr;
    ACLCHECK(aclrtMalloc(&sendBuf, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    ACLCHECK(aclrtMalloc(&recvBuf, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    std::vector<float> host(count);
    for (size_t i = 0; i < count; ++i) {
        host[i] = static_cast<float>(i % 1000);
    }
    ACLCHECK(aclrtMemcpy(sendBuf, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    aclrtStream stream = nullptr;
    ACLCHECK(aclrtCreateStream(&stream));
    HCCLCHECK(HcclAllReduce(sendBuf, recvBuf, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, hcclComm,
                            stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    ACLCHECK(aclrtMemcpy(host.data(), bytes, recvBuf, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    size_t wrong = rankSize == static_cast<uint32_t>(procSize) ? 0 : 1;
    for (size_t i = 0; i < count; ++i) {
        wrong += host[i] != static_cast<float>(procSize) * static_cast<float>(i % 1000);
    }
    std::printf("rankId: %d, output: [ %g %g %g ... ]\n", procRank, host[0], host[1], host[2]);
    int bad = compat_report(procRank, "rank-table allreduce fp32", wrong);

    compat_stats(hcclComm, procRank, "comm_1");
    ACLCHECK(aclrtFree(sendBuf));
    ACLCHECK(aclrtFree(recvBuf));
    ACLCHECK(aclrtDestroyStream(stream));
    HCCLCHECK(HcclCommDestroy(hcclComm));
    ACLCHECK(aclFinalize());
    MPI_Finalize();
    return bad;
}
