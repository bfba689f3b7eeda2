// Profiling on around a few collectives: one device per process, MPI hands out
// the root info, aclprof* collects HCCL traces into the directory named on the
// command line, and each rank then checks its trace file holds one event per
// collective it issued.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_prof.h"
#include "hccl/hccl.h"

#define ACLCHECK(ret)                                                                              \
    do {                                                                                           \
        if ((ret) != ACL_SUCCESS) {                                                                \
            std::printf("acl error %d at %s:%d\n", (int)(ret), __FILE__, __LINE__);                \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

#define HCCLCHECK(ret)                                                                             \
    do {                                                                                           \
        if ((ret) != HCCL_SUCCESS) {                                                               \
            std::printf("hccl error %d at %s:%d\n", (int)(ret), __FILE__, __LINE__);               \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

static size_t Count(const std::string &text, const std::string &what)
{
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
        n++;
    }
    return n;
}

int main(int argc, char *argv[])
{
    MPI_Init(&argc, &argv);
    int rankId = 0;
    int rankSize = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rankId);
    MPI_Comm_size(MPI_COMM_WORLD, &rankSize);
    const char *dir = argc > 1 ? argv[1] : "./prof_out";

    ACLCHECK(aclInit(NULL));
    int32_t devId = rankId;
    ACLCHECK(aclrtSetDevice(devId));
    aclrtStream stream;
    ACLCHECK(aclrtCreateStream(&stream));

    HcclRootInfo rootInfo;
    if (rankId == 0) {
        HCCLCHECK(HcclGetRootInfo(&rootInfo));
    }
    MPI_Bcast(&rootInfo, HCCL_ROOT_INFO_BYTES, MPI_CHAR, 0, MPI_COMM_WORLD);
    HcclComm hcclComm;
    HCCLCHECK(HcclCommInitRootInfo(rankSize, &rootInfo, rankId, &hcclComm));

    ACLCHECK(aclprofInit(dir, std::strlen(dir)));
    uint32_t devList[1] = {static_cast<uint32_t>(devId)};
    aclprofConfig *config = aclprofCreateConfig(devList, 1, ACL_AICORE_NONE, NULL,
                                                ACL_PROF_HCCL_TRACE | ACL_PROF_TASK_TIME);
    if (config == NULL) {
        std::printf("aclprofCreateConfig failed\n");
        return 1;
    }
    ACLCHECK(aclprofStart(config));

    const uint64_t count = 1024;
    const size_t bytes = count * sizeof(float);
    void *sendBuf = NULL;
    void *recvBuf = NULL;
    ACLCHECK(aclrtMalloc(&sendBuf, bytes * rankSize, ACL_MEM_MALLOC_HUGE_FIRST));
    ACLCHECK(aclrtMalloc(&recvBuf, bytes * rankSize, ACL_MEM_MALLOC_HUGE_FIRST));
    std::vector<float> host(count * rankSize, static_cast<float>(rankId + 1));
    ACLCHECK(aclrtMemcpy(sendBuf, bytes * rankSize, host.data(), bytes * rankSize,
                         ACL_MEMCPY_HOST_TO_DEVICE));
    const int iters = 3;
    for (int i = 0; i < iters; i++) {
        HCCLCHECK(HcclAllReduce(sendBuf, recvBuf, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM,
                                hcclComm, stream));
    }
    HCCLCHECK(HcclAllGather(sendBuf, recvBuf, count, HCCL_DATA_TYPE_FP32, hcclComm, stream));
    HCCLCHECK(HcclBroadcast(recvBuf, count, HCCL_DATA_TYPE_FP32, 0, hcclComm, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));

    ACLCHECK(aclprofStop(config));
    ACLCHECK(aclprofDestroyConfig(config));
    ACLCHECK(aclprofFinalize());

    std::ostringstream name;
    name << dir << "/zccl-rank" << rankId << "-pid" << getpid() << "-0.trace.json";
    std::ifstream in(name.str().c_str());
    std::stringstream text;
    text << in.rdbuf();
    const std::string trace = text.str();
    int bad = 0;
    if (Count(trace, "\"ph\":\"X\"") != static_cast<size_t>(iters + 2) ||
        Count(trace, "\"name\":\"HcclAllReduce\"") != static_cast<size_t>(iters) ||
        Count(trace, "\"name\":\"HcclAllGather\"") != 1 ||
        Count(trace, "\"name\":\"HcclBroadcast\"") != 1 ||
        Count(trace, "\"path\":\"buffered\"") != static_cast<size_t>(iters + 2) ||
        trace.compare(trace.size() - 3, 3, "]}\n") != 0) {
        std::printf("rank %d: trace %s does not hold the %d ops issued\n", rankId,
                    name.str().c_str(), iters + 2);
        bad = 1;
    }
    std::vector<float> out(count);
    ACLCHECK(aclrtMemcpy(out.data(), bytes, recvBuf, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    for (uint64_t i = 0; i < count && !bad; i++) {
        if (out[i] != 1.0f) { // the broadcast of rank 0's gathered block
            std::printf("rank %d: element %llu is %f, want 1\n", rankId, (unsigned long long)i,
                        out[i]);
            bad = 1;
        }
    }
    ACLCHECK(aclrtFree(sendBuf));
    ACLCHECK(aclrtFree(recvBuf));
    HCCLCHECK(HcclCommDestroy(hcclComm));
    ACLCHECK(aclrtDestroyStream(stream));
    ACLCHECK(aclrtResetDevice(devId));
    ACLCHECK(aclFinalize());
    int anyBad = 0;
    MPI_Allreduce(&bad, &anyBad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rankId == 0 && anyBad == 0) {
        std::printf("prof_on: %d ranks, every trace holds its %d ops\n", rankSize, iters + 2);
    }
    MPI_Finalize();
    return anyBad;
}
