/*
 * A test tool's zero-copy mode (C11): one reserved range, set once; as the
 * message size grows (8 B .. 4 MiB, x8), the buffers grow block by block:
 * each new 2 MiB block is mapped and activated on its own, so the send and
 * receive buffers span several activated blocks. Every size runs AllReduce
 * (int32 sum) and AllGather (int8), checked element by element; every op
 * must run zero-copy. MPI only hands out the root info.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat_mpi.h"

#define MAX_BLOCKS 64

typedef struct {
    HcclComm comm;
    int device;
    char *va;
    size_t reserved;
    size_t block;
    size_t mapped;
    int nblocks;
    aclrtDrvMemHandle h[MAX_BLOCKS];
} arena_t;

/* Map and activate blocks one at a time until bytes are covered. */
static int arena_grow(arena_t *a, size_t bytes)
{
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof(prop));
    compat_phys_prop(&prop, (uint32_t)a->device);
    while (a->mapped < bytes) {
        if (a->nblocks == MAX_BLOCKS || a->mapped + a->block > a->reserved) {
            printf("arena full at %zu bytes\n", a->mapped);
            return 1;
        }
        aclrtDrvMemHandle h = NULL;
        ACLCHECK(aclrtMallocPhysical(&h, a->block, &prop, 0));
        ACLCHECK(aclrtMapMem(a->va + a->mapped, a->block, 0, h, 0));
        HCCLCHECK(HcclCommActivateCommMemory(a->comm, a->va + a->mapped, a->block, 0, h, 0));
        a->h[a->nblocks++] = h;
        a->mapped += a->block;
    }
    return 0;
}

static int arena_free(arena_t *a)
{
    for (int i = 0; i < a->nblocks; i++) {
        HCCLCHECK(HcclCommDeactivateCommMemory(a->comm, a->va + (size_t)i * a->block));
        ACLCHECK(aclrtUnmapMem(a->va + (size_t)i * a->block));
        ACLCHECK(aclrtFreePhysical(a->h[i]));
    }
    HCCLCHECK(HcclCommUnsetMemoryRange(a->comm, a->va));
    ACLCHECK(aclrtReleaseMemAddress(a->va));
    return 0;
}

static int run_size(arena_t *a, aclrtStream stream, int rank, int size, size_t bytes)
{
    /* send at the start, receive right after it: both cross block edges. */
    char *send = a->va + 4;
    char *recv = send + bytes;
    if (arena_grow(a, 4 + bytes + bytes * (size_t)size) != 0) {
        return 1;
    }
    size_t n = bytes / 4;
    int32_t *s = (int32_t *)send;
    for (size_t i = 0; i < n; i++) {
        s[i] = (int32_t)(i * 3 + (size_t)rank);
    }
    HCCLCHECK(HcclAllReduce(send, recv, n, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, a->comm, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    size_t wrong = 0;
    const int32_t *r = (const int32_t *)recv;
    for (size_t i = 0; i < n; i++) {
        wrong += r[i] != (int32_t)(i * 3 * (size_t)size + (size_t)(size * (size - 1) / 2));
    }
    for (size_t i = 0; i < bytes; i++) {
        send[i] = (char)(i * 7 + (size_t)rank * 13);
    }
    HCCLCHECK(HcclAllGather(send, recv, bytes, HCCL_DATA_TYPE_INT8, a->comm, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    for (int q = 0; q < size; q++) {
        for (size_t i = 0; i < bytes; i++) {
            wrong += recv[(size_t)q * bytes + i] != (char)(i * 7 + (size_t)q * 13);
        }
    }
    char what[64];
    snprintf(what, sizeof(what), "%zu bytes, %d blocks active", bytes, a->nblocks);
    return compat_report(rank, what, wrong);
}

int main(int argc, char **argv)
{
    int rank = 0;
    int size = 0;
    if (compat_mpi_start(&argc, &argv, &rank, &size) != 0) {
        return 1;
    }
    HcclRootInfo root;
    if (compat_root_info(rank, &root) != 0) {
        return 1;
    }
    arena_t a;
    memset(&a, 0, sizeof(a));
    a.device = rank;
    a.block = (size_t)2 << 20;
    HCCLCHECK(HcclCommInitRootInfo((uint32_t)size, &root, (uint32_t)rank, &a.comm));
    aclrtStream stream = NULL;
    ACLCHECK(aclrtCreateStream(&stream));
    const size_t max_bytes = (size_t)4 << 20;
    a.reserved = ((4 + max_bytes * (size_t)(size + 1)) / a.block + 1) * a.block;
    void *va = NULL;
    ACLCHECK(aclrtReserveMemAddress(&va, a.reserved, 0, NULL, 1));
    a.va = va;
    HCCLCHECK(HcclCommSetMemoryRange(a.comm, a.va, a.reserved, 0, 0));
    int bad = 0;
    for (size_t bytes = 8; bytes <= max_bytes; bytes *= 8) {
        bad |= run_size(&a, stream, rank, size, bytes);
    }
    bad |= run_size(&a, stream, rank, size, max_bytes);
    char name[128] = {0};
    HCCLCHECK(HcclGetCommName(a.comm, name));
    compat_stats(a.comm, rank, name);
    bad |= arena_free(&a);
    ACLCHECK(aclrtDestroyStream(stream));
    HCCLCHECK(HcclCommDestroy(a.comm));
    ACLCHECK(aclFinalize());
    MPI_Finalize();
    return bad;
}
