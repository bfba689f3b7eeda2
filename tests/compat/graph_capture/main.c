/*
 * Graph capture of collectives: one device per process, MPI hands out the
 * root info; each rank captures a host-to-device copy, an AllReduce and an
 * AllGather on its stream into an aclmdlRI model, then replays it with new
 * input each time and checks every element of both results.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

#include "acl/acl.h"
#include "hccl/hccl.h"

#define ACLCHECK(ret)                                                                              \
    do {                                                                                           \
        if ((ret) != ACL_SUCCESS) {                                                                \
            printf("acl error %d at %s:%d\n", (int)(ret), __FILE__, __LINE__);                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define HCCLCHECK(ret)                                                                             \
    do {                                                                                           \
        if ((ret) != HCCL_SUCCESS) {                                                               \
            printf("hccl error %d at %s:%d\n", (int)(ret), __FILE__, __LINE__);                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define COUNT 8192
#define REPLAYS 10

int main(int argc, char *argv[])
{
    MPI_Init(&argc, &argv);
    int rankId = 0;
    int rankSize = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rankId);
    MPI_Comm_size(MPI_COMM_WORLD, &rankSize);

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

    size_t bytes = COUNT * sizeof(int32_t);
    int32_t *host = NULL;
    int32_t *out = NULL;
    void *input = NULL;
    void *sum = NULL;
    void *gathered = NULL;
    ACLCHECK(aclrtMallocHost((void **)&host, bytes));
    ACLCHECK(aclrtMallocHost((void **)&out, bytes * rankSize));
    ACLCHECK(aclrtMalloc(&input, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    ACLCHECK(aclrtMalloc(&sum, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    ACLCHECK(aclrtMalloc(&gathered, bytes * rankSize, ACL_MEM_MALLOC_HUGE_FIRST));

    aclmdlRI model = NULL;
    ACLCHECK(aclmdlRICaptureBegin(stream, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    ACLCHECK(aclrtMemcpyAsync(input, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    HCCLCHECK(
        HcclAllReduce(input, sum, COUNT, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, hcclComm, stream));
    HCCLCHECK(HcclAllGather(input, gathered, COUNT, HCCL_DATA_TYPE_INT32, hcclComm, stream));
    ACLCHECK(aclmdlRICaptureEnd(stream, &model));

    int bad = 0;
    for (int k = 0; k < REPLAYS && !bad; k++) {
        for (int i = 0; i < COUNT; i++) {
            host[i] = (rankId + 1) * (k + 1) + i;
        }
        ACLCHECK(aclmdlRIExecuteAsync(model, stream));
        ACLCHECK(aclrtSynchronizeStream(stream));
        ACLCHECK(aclrtMemcpy(out, bytes, sum, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
        int32_t ranks_sum = rankSize * (rankSize + 1) / 2;
        for (int i = 0; i < COUNT && !bad; i++) {
            int32_t want = ranks_sum * (k + 1) + rankSize * i;
            if (out[i] != want) {
                printf("rank %d replay %d: sum[%d] = %d, want %d\n", rankId, k, i, (int)out[i],
                       (int)want);
                bad = 1;
            }
        }
        ACLCHECK(aclrtMemcpy(out, bytes * rankSize, gathered, bytes * rankSize,
                             ACL_MEMCPY_DEVICE_TO_HOST));
        for (int r = 0; r < rankSize && !bad; r++) {
            for (int i = 0; i < COUNT && !bad; i++) {
                int32_t want = (r + 1) * (k + 1) + i;
                if (out[(size_t)r * COUNT + i] != want) {
                    printf("rank %d replay %d: gathered[%d][%d] = %d, want %d\n", rankId, k, r, i,
                           (int)out[(size_t)r * COUNT + i], (int)want);
                    bad = 1;
                }
            }
        }
    }
    ACLCHECK(aclmdlRIDestroy(model));
    ACLCHECK(aclrtFree(input));
    ACLCHECK(aclrtFree(sum));
    ACLCHECK(aclrtFree(gathered));
    ACLCHECK(aclrtFreeHost(host));
    ACLCHECK(aclrtFreeHost(out));
    HCCLCHECK(HcclCommDestroy(hcclComm));
    ACLCHECK(aclrtDestroyStream(stream));
    ACLCHECK(aclrtResetDevice(devId));
    ACLCHECK(aclFinalize());
    int anyBad = 0;
    MPI_Allreduce(&bad, &anyBad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rankId == 0 && anyBad == 0) {
        printf("graph_capture: %d ranks, %d replays, every element right\n", rankSize, REPLAYS);
    }
    MPI_Finalize();
    return anyBad;
}
