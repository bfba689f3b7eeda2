/*
 * One thread per device in one process (C11): HcclCommInitAll makes one
 * communicator per device, then a thread per device sets its device, runs an
 * AllReduce (int64 sum) and an AllGather (uint8) on aclrtMalloc memory and
 * checks the results element by element. Usage: thread_per_device [ndev].
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"

#define MAX_DEV 64

typedef struct {
    HcclComm comm;
    int32_t device;
    int ndev;
    int result;
} ctx_t;

static int sample(ctx_t *c)
{
    const size_t count = 300007;
    ACLCHECK(aclrtSetDevice(c->device));
    aclrtStream stream = NULL;
    ACLCHECK(aclrtCreateStream(&stream));
    void *send = NULL;
    void *recv = NULL;
    ACLCHECK(aclrtMalloc(&send, count * 8, ACL_MEM_MALLOC_HUGE_FIRST));
    ACLCHECK(aclrtMalloc(&recv, count * 8 * (size_t)c->ndev, ACL_MEM_MALLOC_HUGE_FIRST));
    int64_t *s = send;
    for (size_t i = 0; i < count; i++) {
        s[i] = (int64_t)i * (c->device + 1) - 5000;
    }
    HCCLCHECK(
        HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_INT64, HCCL_REDUCE_SUM, c->comm, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    const int64_t *r = recv;
    int64_t tri = (int64_t)c->ndev * (c->ndev + 1) / 2;
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++) {
        wrong += r[i] != (int64_t)i * tri - 5000 * (int64_t)c->ndev;
    }
    int bad = compat_report(c->device, "allreduce int64 sum", wrong);
    uint8_t *b = send;
    for (size_t i = 0; i < count; i++) {
        b[i] = (uint8_t)(i * 31 + (size_t)c->device);
    }
    HCCLCHECK(HcclAllGather(send, recv, count, HCCL_DATA_TYPE_UINT8, c->comm, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    const uint8_t *g = recv;
    wrong = 0;
    for (int d = 0; d < c->ndev; d++) {
        for (size_t i = 0; i < count; i++) {
            wrong += g[(size_t)d * count + i] != (uint8_t)(i * 31 + (size_t)d);
        }
    }
    bad |= compat_report(c->device, "allgather uint8", wrong);
    ACLCHECK(aclrtFree(send));
    ACLCHECK(aclrtFree(recv));
    ACLCHECK(aclrtDestroyStream(stream));
    return bad;
}

static void *thread_main(void *arg)
{
    ctx_t *c = arg;
    c->result = sample(c);
    return NULL;
}

int main(int argc, char **argv)
{
    int ndev = argc > 1 ? atoi(argv[1]) : 8;
    if (ndev < 1 || ndev > MAX_DEV) {
        printf("usage: %s [ndev 1..%d]\n", argv[0], MAX_DEV);
        return 1;
    }
    ACLCHECK(aclInit(NULL));
    uint32_t count = 0;
    ACLCHECK(aclrtGetDeviceCount(&count));
    printf("Found %u device(s), using %d\n", count, ndev);
    int32_t devices[MAX_DEV];
    HcclComm comms[MAX_DEV];
    for (int i = 0; i < ndev; i++) {
        devices[i] = i;
    }
    HCCLCHECK(HcclCommInitAll((uint32_t)ndev, devices, comms));
    ctx_t ctx[MAX_DEV];
    pthread_t th[MAX_DEV];
    for (int i = 0; i < ndev; i++) {
        ctx[i] = (ctx_t){comms[i], devices[i], ndev, 1};
        if (pthread_create(&th[i], NULL, thread_main, &ctx[i]) != 0) {
            printf("pthread_create failed\n");
            return 1;
        }
    }
    int bad = 0;
    for (int i = 0; i < ndev; i++) {
        pthread_join(th[i], NULL);
        bad |= ctx[i].result;
    }
    for (int i = 0; i < ndev; i++) {
        char name[128] = {0};
        HCCLCHECK(HcclGetCommName(comms[i], name));
        compat_stats(comms[i], i, name);
        HCCLCHECK(HcclCommDestroy(comms[i]));
    }
    ACLCHECK(aclFinalize());
    return bad;
}
