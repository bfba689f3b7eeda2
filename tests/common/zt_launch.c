/*
 * Test rank launchers (see zt_launch.h): N ranks from one root info, as
 * forked processes or as threads of this process. Rank 0 calls
 * HcclGetRootInfo and hands the root info to the others through a shared
 * page (processes) or plain memory (threads), with a release/acquire flag.
 *
 * Also each rank's environment as CANN programs build it (aclInit, device
 * rank % count, a stream, HcclCommInitRootInfo) and its case arenas: plain
 * aclrtMalloc memory for the buffered path and a reserved range with mapped,
 * activated physical blocks for the zero-copy path.
 */
#include "zt_launch.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int zt_child_pids[64];

typedef struct {
    atomic_int ready; /* 1 = root info valid, -1 = rank 0 failed to get it */
    HcclRootInfo root;
} zt_shared_root_t;

static int zt_root_get(zt_shared_root_t *sh, int rank)
{
    if (rank == 0) {
        HcclResult r = HcclGetRootInfo(&sh->root);
        atomic_store_explicit(&sh->ready, r == HCCL_SUCCESS ? 1 : -1, memory_order_release);
        if (r != HCCL_SUCCESS) {
            fprintf(stderr, "rank 0: HcclGetRootInfo failed: %d\n", (int)r);
            return -1;
        }
        return 0;
    }
    while (atomic_load_explicit(&sh->ready, memory_order_acquire) == 0) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load_explicit(&sh->ready, memory_order_acquire) == 1 ? 0 : -1;
}

int zt_launch_procs(int nranks, zt_rank_fn fn, void *arg, int timeout_s)
{
    if (nranks <= 0 || nranks > 64) {
        return -1;
    }
    zt_shared_root_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        return -1;
    }
    atomic_init(&sh->ready, 0);
    fflush(stdout);
    fflush(stderr);
    /* done[r]: rank r was reaped, so its pid may be reused and must not be killed. */
    int done[64] = {0};
    int started = 0;
    for (int r = 0; r < nranks; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "zt_launch: fork of rank %d failed: %s\n", r, strerror(errno));
            break;
        }
        if (pid == 0) {
            int rc = zt_root_get(sh, r) == 0 ? fn(r, nranks, &sh->root, arg) : 1;
            fflush(stdout);
            fflush(stderr);
            _exit(rc == 0 ? 0 : 1);
        }
        zt_child_pids[r] = pid;
        started++;
    }
    int failed = nranks - started;
    int left = started;
    /* Ranks that never started leave the others waiting at init: give up now. */
    time_t deadline = started < nranks ? time(NULL) : time(NULL) + timeout_s;
    while (left > 0) {
        int status = 0;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            int rank = -1;
            for (int r = 0; r < started; r++) {
                if (zt_child_pids[r] == p) {
                    rank = r;
                }
            }
            if (rank < 0) {
                continue;
            }
            done[rank] = 1;
            left--;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                failed++;
                if (WIFSIGNALED(status)) {
                    fprintf(stderr, "zt_launch: rank %d killed by signal %d\n", rank,
                            WTERMSIG(status));
                } else {
                    fprintf(stderr, "zt_launch: rank %d exited %d\n", rank,
                            WEXITSTATUS(status));
                }
            }
            continue;
        }
        if (time(NULL) > deadline) {
            fprintf(stderr, "zt_launch: timeout after %d s, killing %d ranks\n", timeout_s, left);
            for (int r = 0; r < started; r++) {
                if (!done[r]) {
                    kill(zt_child_pids[r], SIGKILL);
                }
            }
            for (int r = 0; r < started; r++) {
                if (!done[r]) {
                    waitpid(zt_child_pids[r], NULL, 0);
                }
            }
            failed += left;
            break;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    munmap(sh, sizeof(*sh));
    return failed;
}

typedef struct {
    int rank;
    int nranks;
    zt_rank_fn fn;
    void *arg;
    zt_shared_root_t *sh;
    int rc;
} zt_thread_arg_t;

static void *zt_thread_main(void *p)
{
    zt_thread_arg_t *t = p;
    t->rc = zt_root_get(t->sh, t->rank) == 0 ? t->fn(t->rank, t->nranks, &t->sh->root, t->arg)
                                             : 1;
    return NULL;
}

int zt_launch_threads(int nranks, zt_rank_fn fn, void *arg)
{
    if (nranks <= 0 || nranks > 64) {
        return -1;
    }
    zt_shared_root_t sh;
    memset(&sh, 0, sizeof(sh));
    atomic_init(&sh.ready, 0);
    pthread_t th[64];
    zt_thread_arg_t ta[64];
    int started = 0;
    for (int r = 0; r < nranks; r++) {
        ta[r] = (zt_thread_arg_t){r, nranks, fn, arg, &sh, 0};
        int e = pthread_create(&th[r], NULL, zt_thread_main, &ta[r]);
        if (e != 0) {
            /* The started ranks would wait for this one at init; they fail there. */
            fprintf(stderr, "zt_launch_threads: thread of rank %d: %s\n", r, strerror(e));
            if (r == 0) {
                atomic_store_explicit(&sh.ready, -1, memory_order_release);
            }
            break;
        }
        started++;
    }
    int failed = nranks - started;
    for (int r = 0; r < started; r++) {
        pthread_join(th[r], NULL);
        if (ta[r].rc != 0) {
            fprintf(stderr, "zt_launch_threads: rank %d returned %d\n", r, ta[r].rc);
            failed++;
        }
    }
    return failed;
}

/* ---- second root info -------------------------------------------------------- */

struct zt_root_slot {
    zt_shared_root_t sh;
};

zt_root_slot_t *zt_root_slot_create(void)
{
    zt_root_slot_t *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) {
        return NULL;
    }
    atomic_init(&s->sh.ready, 0);
    return s;
}

void zt_root_slot_destroy(zt_root_slot_t *slot)
{
    if (slot != NULL) {
        munmap(slot, sizeof(*slot));
    }
}

int zt_root_slot_get(zt_root_slot_t *slot, int rank, HcclRootInfo *out)
{
    if (rank == 0) {
        HcclResult r = HcclGetRootInfo(&slot->sh.root);
        atomic_store_explicit(&slot->sh.ready, r == HCCL_SUCCESS ? 1 : -1, memory_order_release);
        if (r != HCCL_SUCCESS) {
            fprintf(stderr, "rank 0: HcclGetRootInfo (second) failed: %d\n", (int)r);
            return -1;
        }
    } else {
        time_t deadline = time(NULL) + 60;
        while (atomic_load_explicit(&slot->sh.ready, memory_order_acquire) == 0) {
            if (time(NULL) > deadline) {
                fprintf(stderr, "rank %d: no second root info after 60 s\n", rank);
                return -1;
            }
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        if (atomic_load_explicit(&slot->sh.ready, memory_order_acquire) != 1) {
            return -1;
        }
    }
    memcpy(out, &slot->sh.root, sizeof(*out));
    return 0;
}

/* ---- rank environment -------------------------------------------------------- */

#define ZT_ENV_FAIL(env, what, code)                                                        \
    fprintf(stderr, "[rank %d/%d] %s failed: %d (%s:%d)\n", (env)->rank, (env)->nranks,     \
            what, (int)(code), __FILE__, __LINE__)

int zt_env_open(zt_env_t *env, int rank, int nranks, const HcclRootInfo *root,
                const HcclCommConfig *cfg)
{
    memset(env, 0, sizeof(*env));
    env->rank = rank;
    env->nranks = nranks;
    aclError e = aclInit(NULL);
    if (e != ACL_SUCCESS && e != ACL_ERROR_REPEAT_INITIALIZE) {
        ZT_ENV_FAIL(env, "aclInit", e);
        return -1;
    }
    uint32_t ndev = 0;
    e = aclrtGetDeviceCount(&ndev);
    if (e != ACL_SUCCESS || ndev == 0) {
        ZT_ENV_FAIL(env, "aclrtGetDeviceCount", e);
        return -1;
    }
    env->device = rank % (int)ndev;
    e = aclrtSetDevice(env->device);
    if (e != ACL_SUCCESS) {
        ZT_ENV_FAIL(env, "aclrtSetDevice", e);
        return -1;
    }
    e = aclrtCreateStream(&env->stream);
    if (e != ACL_SUCCESS) {
        ZT_ENV_FAIL(env, "aclrtCreateStream", e);
        return -1;
    }
    HcclResult r = cfg != NULL ? HcclCommInitRootInfoConfig((uint32_t)nranks, root, (uint32_t)rank,
                                                            cfg, &env->comm)
                               : HcclCommInitRootInfo((uint32_t)nranks, root, (uint32_t)rank,
                                                      &env->comm);
    if (r != HCCL_SUCCESS) {
        ZT_ENV_FAIL(env, "HcclCommInitRootInfo", r);
        aclrtDestroyStream(env->stream);
        env->stream = NULL;
        env->comm = NULL;
        return -1;
    }
    return 0;
}

size_t zt_granularity(int device)
{
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (uint32_t)device;
    size_t g = 0;
    if (aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g) !=
            ACL_SUCCESS ||
        g == 0) {
        return 2u << 20;
    }
    return g;
}

aclrtDrvMemHandle zt_phys_alloc(int device, size_t bytes)
{
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (uint32_t)device;
    aclrtDrvMemHandle h = NULL;
    aclError e = aclrtMallocPhysical(&h, bytes, &prop, 0);
    if (e != ACL_SUCCESS) {
        fprintf(stderr, "aclrtMallocPhysical(%zu) failed: %d\n", bytes, (int)e);
        return NULL;
    }
    return h;
}

int zt_zc_open(zt_zc_t *z, HcclComm comm, int device, size_t block, int nblocks, int activate)
{
    memset(z, 0, sizeof(*z));
    if (nblocks <= 0 || nblocks > ZT_ZC_MAX_BLOCKS) {
        return -1;
    }
    size_t g = zt_granularity(device);
    z->block = (block + g - 1) / g * g;
    z->nblocks = nblocks;
    size_t total = z->block * (size_t)nblocks;
    aclError e = aclrtReserveMemAddress(&z->va, total, 0, NULL, 0);
    if (e != ACL_SUCCESS) {
        fprintf(stderr, "aclrtReserveMemAddress(%zu) failed: %d\n", total, (int)e);
        z->va = NULL;
        return -1;
    }
    for (int b = 0; b < nblocks; b++) {
        z->h[b] = zt_phys_alloc(device, z->block);
        if (z->h[b] == NULL) {
            return -1;
        }
        e = aclrtMapMem((char *)z->va + (size_t)b * z->block, z->block, 0, z->h[b], 0);
        if (e != ACL_SUCCESS) {
            fprintf(stderr, "aclrtMapMem(block %d) failed: %d\n", b, (int)e);
            aclrtFreePhysical(z->h[b]);
            z->h[b] = NULL;
            return -1;
        }
    }
    HcclResult r = HcclCommSetMemoryRange(comm, z->va, total, 0, 0);
    if (r != HCCL_SUCCESS) {
        fprintf(stderr, "HcclCommSetMemoryRange(%zu) failed: %d\n", total, (int)r);
        return -1;
    }
    z->range_set = 1;
    for (int b = 0; activate && b < nblocks; b++) {
        r = HcclCommActivateCommMemory(comm, (char *)z->va + (size_t)b * z->block, z->block, 0,
                                       z->h[b], 0);
        if (r != HCCL_SUCCESS) {
            fprintf(stderr, "HcclCommActivateCommMemory(block %d) failed: %d\n", b, (int)r);
            return -1;
        }
        z->active[b] = 1;
    }
    return 0;
}

int zt_zc_close(zt_zc_t *z, HcclComm comm)
{
    int rc = 0;
    if (z->va == NULL) {
        return 0;
    }
    for (int b = 0; b < z->nblocks; b++) {
        char *p = (char *)z->va + (size_t)b * z->block;
        if (z->active[b]) {
            HcclResult r = HcclCommDeactivateCommMemory(comm, p);
            if (r != HCCL_SUCCESS) {
                fprintf(stderr, "HcclCommDeactivateCommMemory(block %d) failed: %d\n", b, (int)r);
                rc = -1;
            }
            z->active[b] = 0;
        }
    }
    if (z->range_set) {
        HcclResult r = HcclCommUnsetMemoryRange(comm, z->va);
        if (r != HCCL_SUCCESS) {
            fprintf(stderr, "HcclCommUnsetMemoryRange failed: %d\n", (int)r);
            rc = -1;
        }
        z->range_set = 0;
    }
    for (int b = 0; b < z->nblocks; b++) {
        if (z->h[b] != NULL) {
            if (aclrtUnmapMem((char *)z->va + (size_t)b * z->block) != ACL_SUCCESS ||
                aclrtFreePhysical(z->h[b]) != ACL_SUCCESS) {
                fprintf(stderr, "unmap/free of block %d failed\n", b);
                rc = -1;
            }
            z->h[b] = NULL;
        }
    }
    if (aclrtReleaseMemAddress(z->va) != ACL_SUCCESS) {
        fprintf(stderr, "aclrtReleaseMemAddress failed\n");
        rc = -1;
    }
    z->va = NULL;
    return rc;
}

int zt_env_arena(zt_env_t *env, size_t half_bytes)
{
    if (zt_zc_open(&env->zc, env->comm, env->device, half_bytes, 2, 1) != 0) {
        ZT_ENV_FAIL(env, "zero-copy arena", -1);
        return -1;
    }
    env->half = env->zc.block;
    void *p = NULL;
    aclError e = aclrtMalloc(&p, 2 * env->half, ACL_MEM_MALLOC_HUGE_FIRST);
    if (e != ACL_SUCCESS) {
        ZT_ENV_FAIL(env, "aclrtMalloc(arena)", e);
        return -1;
    }
    env->plain = p;
    return 0;
}

int zt_env_close(zt_env_t *env)
{
    int rc = 0;
    if (env->comm != NULL && zt_zc_close(&env->zc, env->comm) != 0) {
        rc = -1;
    }
    if (env->plain != NULL) {
        if (aclrtFree(env->plain) != ACL_SUCCESS) {
            ZT_ENV_FAIL(env, "aclrtFree(arena)", -1);
            rc = -1;
        }
        env->plain = NULL;
    }
    if (env->comm != NULL) {
        HcclResult r = HcclCommDestroy(env->comm);
        if (r != HCCL_SUCCESS) {
            ZT_ENV_FAIL(env, "HcclCommDestroy", r);
            rc = -1;
        }
        env->comm = NULL;
    }
    if (env->stream != NULL) {
        aclError e = aclrtDestroyStream(env->stream);
        if (e != ACL_SUCCESS) {
            ZT_ENV_FAIL(env, "aclrtDestroyStream", e);
            rc = -1;
        }
        env->stream = NULL;
    }
    return rc;
}
