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
#include <inttypes.h>
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

#include "core/hccl_test_api.h"
#include "zt_check.h"

int zt_child_pids[ZT_MAX_PROCS];
int (*zt_launch_child_hook)(int rank);

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
    if (nranks <= 0 || nranks > ZT_MAX_PROCS) {
        return -1;
    }
    zt_shared_root_t *sh =
        mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        return -1;
    }
    atomic_init(&sh->ready, 0);
    fflush(stdout);
    fflush(stderr);
    /* done[r]: rank r was reaped, so its pid may be reused and must not be killed. */
    int done[ZT_MAX_PROCS] = {0};
    int started = 0;
    for (int r = 0; r < nranks; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "zt_launch: fork of rank %d failed: %s\n", r, strerror(errno));
            break;
        }
        if (pid == 0) {
            int rc = 1;
            if (zt_launch_child_hook != NULL && zt_launch_child_hook(r) != 0) {
                /* Rank 0 fails the root info, so the others do not wait for it. */
                if (r == 0) {
                    atomic_store_explicit(&sh->ready, -1, memory_order_release);
                }
            } else {
                rc = zt_root_get(sh, r) == 0 ? fn(r, nranks, &sh->root, arg) : 1;
            }
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
        /* Each rank by its pid, never waitpid(-1): a test's other thread may
         * run system() meanwhile, and reaping its shell made that return -1
         * (multihost_fault_2x2's link-down, which then left the link down). */
        int status = 0;
        int rank = -1;
        for (int r = 0; r < started && rank < 0; r++) {
            if (!done[r] && waitpid(zt_child_pids[r], &status, WNOHANG) == zt_child_pids[r]) {
                rank = r;
            }
        }
        if (rank >= 0) {
            done[rank] = 1;
            left--;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                failed++;
                if (WIFSIGNALED(status)) {
                    fprintf(stderr, "zt_launch: rank %d killed by signal %d\n", rank,
                            WTERMSIG(status));
                } else {
                    fprintf(stderr, "zt_launch: rank %d exited %d\n", rank, WEXITSTATUS(status));
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

int zt_fork_call(int (*fn)(void *), void *arg)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = fn(arg);
        fflush(stdout);
        fflush(stderr);
        _exit(rc & 0xff);
    }
    if (pid < 0) {
        fprintf(stderr, "zt_fork_call: fork failed: %s\n", strerror(errno));
    }
    return (int)pid;
}

int zt_fork_reap(int pid, int timeout_s)
{
    if (pid <= 0) {
        return -1;
    }
    time_t deadline = time(NULL) + timeout_s;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (time(NULL) > deadline) {
            fprintf(stderr, "zt_fork_reap: pid %d still runs after %d s: killed\n", pid, timeout_s);
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return -1;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
    t->rc = zt_root_get(t->sh, t->rank) == 0 ? t->fn(t->rank, t->nranks, &t->sh->root, t->arg) : 1;
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
    zt_root_slot_t *s =
        mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
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

#define ZT_ENV_FAIL(env, what, code)                                                               \
    fprintf(stderr, "[rank %d/%d] %s failed: %d (%s:%d)\n", (env)->rank, (env)->nranks, what,      \
            (int)(code), __FILE__, __LINE__)

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
    HcclResult r =
        cfg != NULL
            ? HcclCommInitRootInfoConfig((uint32_t)nranks, root, (uint32_t)rank, cfg, &env->comm)
            : HcclCommInitRootInfo((uint32_t)nranks, root, (uint32_t)rank, &env->comm);
    if (r != HCCL_SUCCESS) {
        ZT_ENV_FAIL(env, "HcclCommInitRootInfo", r);
        aclrtDestroyStream(env->stream);
        env->stream = NULL;
        env->comm = NULL;
        return -1;
    }
    return 0;
}

HcclResult zt_ramp_allreduce(zt_env_t *env, float *buf, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        buf[i] = (float)(env->rank + 1 + (int)(i % 7));
    }
    HcclResult r = HcclAllReduce(buf, buf, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, env->comm,
                                 env->stream);
    /* The stream reports an op's failure as an aclError; the comm keeps its HcclResult. */
    if (r == HCCL_SUCCESS && aclrtSynchronizeStream(env->stream) != ACL_SUCCESS) {
        HcclResult a = HCCL_SUCCESS;
        HcclGetCommAsyncError(env->comm, &a);
        r = a != HCCL_SUCCESS ? a : HCCL_E_INTERNAL;
    }
    return r;
}

float zt_ramp_sum(int n, size_t i)
{
    return (float)(n * (n + 1) / 2 + n * (int)(i % 7));
}

int zt_ramp_checked(zt_env_t *env, float *buf, size_t count)
{
    HcclResult r = zt_ramp_allreduce(env, buf, count);
    if (r != HCCL_SUCCESS) {
        fprintf(stderr, "rank %d: AllReduce of %zu floats: %d\n", env->rank, count, (int)r);
        return 1;
    }
    for (size_t i = 0; i < count; i++) {
        if (buf[i] != zt_ramp_sum(env->nranks, i)) {
            fprintf(stderr, "rank %d: AllReduce [%zu] = %g, want %g\n", env->rank, i,
                    (double)buf[i], (double)zt_ramp_sum(env->nranks, i));
            return 1;
        }
    }
    return 0;
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

/* ---- scenarios ------------------------------------------------------------------- */

static const int zt_dtypes[] = {HCCL_DATA_TYPE_INT8,   HCCL_DATA_TYPE_UINT8,  HCCL_DATA_TYPE_INT16,
                                HCCL_DATA_TYPE_UINT16, HCCL_DATA_TYPE_INT32,  HCCL_DATA_TYPE_UINT32,
                                HCCL_DATA_TYPE_INT64,  HCCL_DATA_TYPE_UINT64, HCCL_DATA_TYPE_FP16,
                                HCCL_DATA_TYPE_BFP16,  HCCL_DATA_TYPE_FP32,   HCCL_DATA_TYPE_FP64};
#define ZT_NDTYPES ((int)(sizeof(zt_dtypes) / sizeof(zt_dtypes[0])))
static const int zt_ops[] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD, HCCL_REDUCE_MAX, HCCL_REDUCE_MIN};
/* 4099 elements of 4+ bytes pass ZCCL_ONESHOT_MAX's default, so both AllReduce
 * algorithms run at small counts. */
static const size_t zt_counts[] = {0, 1, 7, 1000, 4099};
#define ZT_SMALL_MAX 4099

/* Runs a case: counts it and its failure; returns 1 when the comm may be out
 * of step (the caller stops). */
static int zt_step(zt_env_t *env, const zt_case_t *c, int *cases, int *fails)
{
    (*cases)++;
    int rc = zt_case_run(env, c);
    if (rc != 0) {
        (*fails)++;
    }
    return rc == 2;
}

static uint64_t zt_next_seed(uint64_t *seq, uint64_t base)
{
    return zt_pattern(base, 0, (*seq)++);
}

/* Both paths' staged-byte totals and CCL buffer state after a phase. */
static int zt_check_phase(zt_env_t *env, int zero_copy_only)
{
    uint64_t st = zccl_comm_staged_bytes(env->comm);
    int ccl = zccl_comm_ccl_allocated(env->comm);
    if (zero_copy_only && (st != 0 || ccl != 0)) {
        zt_report(env,
                  "after zero-copy ops only: staged bytes %" PRIu64 " (want 0), CCL "
                  "buffer allocated %d (want 0: created on first buffered use)",
                  st, ccl);
        return 1;
    }
    /* A rank with no peer on its host has no local path to stage for. */
    int local = zt_ref_host_ranks(env->rank, env->nranks);
    if (!zero_copy_only && local > 1 && (st == 0 || ccl != 1)) {
        zt_report(env,
                  "after buffered ops: staged bytes %" PRIu64 " (want > 0), CCL buffer "
                  "allocated %d (want 1)",
                  st, ccl);
        return 1;
    }
    return 0;
}

/* INT128 and the 8-bit float types are copy-only: AllGather must work (and is
 * checked), every AllReduce must be refused with HCCL_E_NOT_SUPPORT. */
static int zt_exotic_run(zt_env_t *env, int coll, uint64_t base, uint64_t *seq, int *cases,
                         int *fails)
{
    static const int types[] = {HCCL_DATA_TYPE_INT128, HCCL_DATA_TYPE_HIF8, HCCL_DATA_TYPE_FP8E4M3,
                                HCCL_DATA_TYPE_FP8E5M2, HCCL_DATA_TYPE_FP8E8M0};
    for (int zc = 1; zc >= 0; zc--) {
        for (int t = 0; t < (int)(sizeof(types) / sizeof(types[0])); t++) {
            int i128 = types[t] == HCCL_DATA_TYPE_INT128;
            for (int o = 0; o < 4; o++) {
                int op = zt_ops[o];
                if (coll == ZT_ALLGATHER
                        ? o > 0
                        : !i128 && op != HCCL_REDUCE_MAX && op != HCCL_REDUCE_MIN) {
                    continue;
                }
                for (int k = 2; k <= 3; k++) {
                    zt_case_t c = {.coll = coll,
                                   .dtype = types[t],
                                   .op = op,
                                   .count = zt_counts[k],
                                   .zero_copy = zc,
                                   .misalign = 1,
                                   .expect_unsupported = coll == ZT_ALLREDUCE,
                                   .same_data = coll == ZT_ALLREDUCE && !i128};
                    c.seed = zt_next_seed(seq, base);
                    if (zt_step(env, &c, cases, fails)) {
                        return 1;
                    }
                }
            }
        }
    }
    return 0;
}

int zt_matrix_run(zt_env_t *env, const zt_matrix_t *m)
{
    int n = env->nranks;
    int ag = m->coll == ZT_ALLGATHER;
    size_t maxc = m->big_count > ZT_SMALL_MAX ? m->big_count : ZT_SMALL_MAX;
    size_t half = zt_case_bytes(m->coll, HCCL_DATA_TYPE_FP64, maxc, n);
    size_t half16 = zt_case_bytes(m->coll, HCCL_DATA_TYPE_INT128, ZT_SMALL_MAX, n);
    if (zt_env_arena(env, half > half16 ? half : half16) != 0) {
        return 1;
    }
    int cases = 0;
    int fails = 0;
    uint64_t seq = 0;
    int nops = ag ? 1 : 4;
    /* Zero-copy first: staged bytes must still be 0 when that phase is done. */
    for (int zc = 1; zc >= 0; zc--) {
        zt_case_t c = {.coll = m->coll, .zero_copy = zc, .misalign = 1};
        for (int d = 0; d < ZT_NDTYPES; d++) {
            for (int o = 0; o < nops; o++) {
                for (int k = 0; k < (int)(sizeof(zt_counts) / sizeof(zt_counts[0])); k++) {
                    for (int ip = 0; ip < 2; ip++) {
                        c.dtype = zt_dtypes[d];
                        c.op = zt_ops[o];
                        c.count = zt_counts[k];
                        c.in_place = ip;
                        c.seed = zt_next_seed(&seq, m->seed);
                        if (zt_step(env, &c, &cases, &fails)) {
                            goto out;
                        }
                    }
                }
            }
        }
        for (int d = 0; m->big_count > 0 && d < ZT_NDTYPES + m->n_big_all_ops; d++) {
            int all = d >= ZT_NDTYPES;
            c.dtype = all ? m->big_all_ops[d - ZT_NDTYPES] : zt_dtypes[d];
            c.count = m->big_count;
            for (int o = all ? 1 : 0; o < (all ? nops : 1); o++) {
                for (int ip = 0; ip < 2; ip++) {
                    c.op = zt_ops[o];
                    c.in_place = ip;
                    c.seed = zt_next_seed(&seq, m->seed);
                    if (zt_step(env, &c, &cases, &fails)) {
                        goto out;
                    }
                }
            }
        }
        fails += zt_check_phase(env, zc);
    }
    /* Aligned buffers (the vector paths' common case). */
    for (int zc = 1; zc >= 0; zc--) {
        for (int d = 0; d < ZT_NDTYPES; d++) {
            for (int ip = 0; ip < 2; ip++) {
                zt_case_t c = {.coll = m->coll,
                               .dtype = zt_dtypes[d],
                               .op = HCCL_REDUCE_SUM,
                               .count = ZT_SMALL_MAX,
                               .zero_copy = zc,
                               .in_place = ip};
                c.seed = zt_next_seed(&seq, m->seed);
                if (zt_step(env, &c, &cases, &fails)) {
                    goto out;
                }
            }
        }
    }
    /* Values that need rounding: the reduction order and fp32 accumulation show. */
    static const int fps[] = {HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_BFP16, HCCL_DATA_TYPE_FP32,
                              HCCL_DATA_TYPE_FP64};
    for (int zc = 1; !ag && zc >= 0; zc--) {
        for (int d = 0; d < 4; d++) {
            for (int o = 0; o < 2; o++) {
                for (int k = 3; k <= 4; k++) {
                    zt_case_t c = {.coll = m->coll,
                                   .dtype = fps[d],
                                   .op = zt_ops[o],
                                   .count = zt_counts[k],
                                   .zero_copy = zc,
                                   .misalign = 1,
                                   .mode = ZT_FILL_ROUNDING};
                    c.seed = zt_next_seed(&seq, m->seed);
                    if (zt_step(env, &c, &cases, &fails)) {
                        goto out;
                    }
                }
            }
        }
    }
    zt_exotic_run(env, m->coll, m->seed, &seq, &cases, &fails);
out:
    if (env->rank == 0) {
        printf("matrix %s np=%d: %d cases, %d failed on rank 0\n", ag ? "allgather" : "allreduce",
               n, cases, fails);
        fflush(stdout);
    }
    return fails;
}

int zt_rank_matrix(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = zt_matrix_run(&env, arg);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

/* Replace block b of env's zero-copy arena by new physical memory (deactivating
 * it first); the old handle goes to old[] so stale mappings stay valid memory
 * and would show as wrong data rather than a crash. */
static int zt_swap_block(zt_env_t *env, int b, aclrtDrvMemHandle *old, int *nold, int fill)
{
    zt_zc_t *z = &env->zc;
    char *p = (char *)z->va + (size_t)b * z->block;
    HcclResult r = HcclCommDeactivateCommMemory(env->comm, p);
    if (r != HCCL_SUCCESS) {
        zt_report(env, "HcclCommDeactivateCommMemory(block %d) returned %d", b, (int)r);
        return 1;
    }
    z->active[b] = 0;
    if (aclrtUnmapMem(p) != ACL_SUCCESS) {
        zt_report(env, "aclrtUnmapMem(block %d) failed", b);
        return 1;
    }
    old[(*nold)++] = z->h[b];
    z->h[b] = zt_phys_alloc(env->device, z->block);
    if (z->h[b] == NULL || aclrtMapMem(p, z->block, 0, z->h[b], 0) != ACL_SUCCESS) {
        zt_report(env, "mapping new memory at block %d failed", b);
        return 1;
    }
    memset(p, fill, z->block);
    return 0;
}

static int zt_activate_block(zt_env_t *env, int b)
{
    zt_zc_t *z = &env->zc;
    char *p = (char *)z->va + (size_t)b * z->block;
    HcclResult r = HcclCommActivateCommMemory(env->comm, p, z->block, 0, z->h[b], 0);
    if (r != HCCL_SUCCESS) {
        zt_report(env, "HcclCommActivateCommMemory(block %d) returned %d", b, (int)r);
        return 1;
    }
    z->active[b] = 1;
    return 0;
}

int zt_reactivate_run(zt_env_t *env, int coll)
{
    zt_case_t c = {.coll = coll,
                   .dtype = HCCL_DATA_TYPE_FP32,
                   .op = HCCL_REDUCE_SUM,
                   .count = ZT_SMALL_MAX,
                   .zero_copy = 1,
                   .misalign = 1};
    if (zt_env_arena(env, zt_case_bytes(coll, c.dtype, c.count, env->nranks)) != 0) {
        return 1;
    }
    aclrtDrvMemHandle old[16];
    int nold = 0;
    int cases = 0;
    int fails = 0;
    uint64_t seq = 0;
    c.seed = zt_next_seed(&seq, 77);
    if (zt_step(env, &c, &cases, &fails)) {
        return fails;
    }
    /* Round 1: every rank swaps and re-activates at once. Round 2: every rank
     * swaps; an op runs before re-activation. Round 3: rank 0 alone swaps. */
    for (int round = 1; round <= 3; round++) {
        int swap = round != 3 || env->rank == 0;
        for (int b = 0; swap && b < 2; b++) {
            if (zt_swap_block(env, b, old, &nold, 0x30 + round)) {
                return fails + 1;
            }
        }
        if (round >= 2) {
            /* Some rank's memory is not activated: buffered on its host (on
             * every rank of a one-host comm); across hosts the other hosts'
             * ranks stay zero-copy (each host decides for its own ranks). */
            c.expect_buffered = round == 2 || zt_ref_same_host(0, env->rank, env->nranks);
            c.in_place = 0;
            c.seed = zt_next_seed(&seq, 77);
            if (zt_step(env, &c, &cases, &fails)) {
                return fails;
            }
            c.expect_buffered = 0;
        }
        for (int b = 0; swap && b < 2; b++) {
            if (zt_activate_block(env, b)) {
                return fails + 1;
            }
        }
        for (int ip = 0; ip < 2; ip++) {
            c.in_place = ip;
            c.seed = zt_next_seed(&seq, 77);
            if (zt_step(env, &c, &cases, &fails)) {
                return fails;
            }
        }
    }
    for (int i = 0; i < nold; i++) {
        if (aclrtFreePhysical(old[i]) != ACL_SUCCESS) {
            zt_report(env, "aclrtFreePhysical(old handle %d) failed", i);
            fails++;
        }
    }
    return fails;
}

int zt_rank_reactivate(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = zt_reactivate_run(&env, *(const int *)arg);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

int zt_mismatch_run(zt_env_t *env, int coll)
{
    if (env->nranks < 2) {
        return 0;
    }
    const size_t count = 1000;
    if (zt_env_arena(env, zt_case_bytes(coll, HCCL_DATA_TYPE_FP64, count + 1, env->nranks)) != 0) {
        return 1;
    }
    int cases = 0;
    int fails = 0;
    uint64_t seq = 0;
    int deviant = env->rank == env->nranks - 1;
    int kinds = coll == ZT_ALLREDUCE ? 4 : 3;
    for (int zc = 1; zc >= 0; zc--) {
        for (int kind = 0; kind < kinds; kind++) {
            zt_case_t c = {.coll = coll,
                           .dtype = HCCL_DATA_TYPE_INT32,
                           .op = HCCL_REDUCE_SUM,
                           .count = count,
                           .zero_copy = zc,
                           .misalign = 1,
                           .expect_para = 1,
                           .skip_counters = 1};
            c.seed = zt_next_seed(&seq, 99);
            if (deviant) {
                if (kind == 0) {
                    c.count = count + 1;
                } else if (kind == 1) {
                    c.dtype = HCCL_DATA_TYPE_FP32; /* same size, other type */
                } else if (kind == 2) {
                    c.dtype = HCCL_DATA_TYPE_INT16; /* other size */
                } else {
                    c.op = HCCL_REDUCE_MAX;
                }
            }
            if (zt_step(env, &c, &cases, &fails)) {
                return fails;
            }
            /* The communicator must still work, and agree, afterwards. */
            zt_case_t ok = {.coll = coll,
                            .dtype = HCCL_DATA_TYPE_INT32,
                            .op = HCCL_REDUCE_SUM,
                            .count = count,
                            .zero_copy = zc,
                            .misalign = 1};
            ok.seed = zt_next_seed(&seq, 99);
            if (zt_step(env, &ok, &cases, &fails)) {
                return fails;
            }
        }
    }
    return fails;
}

int zt_rank_mismatch(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = zt_mismatch_run(&env, *(const int *)arg);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

/* The second communicator: reversed rank ids, checked names and ids. */
static int zt_second_comm(zt_env_t *env, zt_env_t *e2, const HcclRootInfo *root2)
{
    memset(e2, 0, sizeof(*e2));
    e2->rank = env->nranks - 1 - env->rank;
    e2->nranks = env->nranks;
    e2->device = env->device;
    e2->stream = env->stream; /* both comms on one stream */
    HcclResult r = HcclCommInitRootInfo((uint32_t)e2->nranks, root2, (uint32_t)e2->rank, &e2->comm);
    if (r != HCCL_SUCCESS) {
        zt_report(env, "second HcclCommInitRootInfo as rank %d returned %d", e2->rank, (int)r);
        e2->comm = NULL;
        return 1;
    }
    char n1[COMM_NAME_MAX_LENGTH] = "";
    char n2[COMM_NAME_MAX_LENGTH] = "";
    uint32_t id = 0;
    if (HcclGetCommName(env->comm, n1) != HCCL_SUCCESS ||
        HcclGetCommName(e2->comm, n2) != HCCL_SUCCESS || strcmp(n1, n2) == 0 ||
        HcclGetRankId(e2->comm, &id) != HCCL_SUCCESS || id != (uint32_t)e2->rank) {
        zt_report(env, "two comms: names '%s' / '%s' (want different), rank id %u (want %d)", n1,
                  n2, id, e2->rank);
        return 1;
    }
    return 0;
}

int zt_two_comms_run(zt_env_t *env, const HcclRootInfo *root2, int coll)
{
    static const int dts[] = {HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_BFP16,
                              HCCL_DATA_TYPE_INT64};
    size_t half = zt_case_bytes(coll, HCCL_DATA_TYPE_INT64, ZT_SMALL_MAX, env->nranks);
    zt_env_t e2;
    int fails = zt_second_comm(env, &e2, root2);
    if (fails == 0 && (env->half == 0 && zt_env_arena(env, half) != 0)) {
        fails++;
    }
    if (fails == 0 && zt_env_arena(&e2, half) != 0) {
        fails++;
    }
    int cases = 0;
    uint64_t seq = 0;
    zt_env_t *envs[2] = {env, &e2};
    for (int zc = 1; fails == 0 && zc >= 0; zc--) {
        for (int it = 0; it < 4; it++) {
            for (int k = 0; k < 2; k++) {
                zt_case_t c = {.coll = coll,
                               .dtype = dts[it],
                               .op = zt_ops[it],
                               .count = zt_counts[3 + (it & 1)],
                               .zero_copy = zc,
                               .in_place = it >> 1,
                               .misalign = 1};
                c.seed = zt_next_seed(&seq, 55);
                if (zt_step(envs[k], &c, &cases, &fails)) {
                    goto out;
                }
            }
        }
        for (int k = 0; k < 2; k++) {
            fails += zt_check_phase(envs[k], zc);
        }
    }
    /* Ops of both comms queued on the one stream, then one sync; each comm runs
     * one op per arena (zero-copy and plain), so no two ops share buffers. */
    for (int it = 0; fails == 0 && it < 2; it++) {
        zt_pending_t pd[4];
        int started = 0;
        int bad = 0;
        for (int j = 0; j < 4 && !bad; j++) {
            zt_case_t c = {.coll = coll,
                           .dtype = dts[j],
                           .op = HCCL_REDUCE_SUM,
                           .count = zt_counts[3 + (j & 1)],
                           .zero_copy = ((j >> 1) + it) & 1,
                           .misalign = 1,
                           .skip_counters = 1};
            c.seed = zt_next_seed(&seq, 55);
            bad = zt_case_start(envs[j & 1], &c, &pd[j]) != 0;
            started += !bad;
        }
        aclError e = aclrtSynchronizeStream(env->stream);
        for (int j = 0; j < started; j++) {
            fails += zt_case_finish(&pd[j], e) != 0;
        }
        if (bad) {
            fails++;
            break;
        }
    }
out:
    e2.stream = NULL; /* env's */
    if (e2.comm != NULL && zt_env_close(&e2) != 0) {
        fails++;
    }
    return fails;
}

int zt_rank_two_comms(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    zt_two_comms_t *t = arg;
    zt_env_t env;
    HcclRootInfo root2;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = 0;
    if (zt_root_slot_get(t->slot, rank, &root2) != 0) {
        fails++;
    } else {
        fails += zt_two_comms_run(&env, &root2, t->coll);
    }
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}
