/*
 * The communicator API rank bodies of zt_comm.h: written once, launched as
 * forked processes, threads and mpirun ranks.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hccl_test_api.h"
#include "zt_check.h"
#include "zt_comm.h"

/* ---- rank size, id, name, error strings, barrier --------------------------- */

int zt_comm_api(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    zt_comm_shared_t *sh = arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = 0;
    uint32_t v = 12345;
    HcclResult r = HcclGetRankSize(env.comm, &v);
    ZT_EXPECT(&env, r == HCCL_SUCCESS && v == (uint32_t)nranks, "rank size %d %u", (int)r, v);
    r = HcclGetRankId(env.comm, &v);
    ZT_EXPECT(&env, r == HCCL_SUCCESS && v == (uint32_t)rank, "rank id %d %u", (int)r, v);
    ZT_EXPECT_RC(&env, HcclGetRankSize(NULL, &v), HCCL_E_PTR, "NULL comm");
    ZT_EXPECT_RC(&env, HcclGetRankSize(env.comm, NULL), HCCL_E_PTR, "NULL out");
    ZT_EXPECT_RC(&env, HcclGetRankId(env.comm, NULL), HCCL_E_PTR, "NULL out");
    ZT_EXPECT_RC(&env, HcclGetCommName(env.comm, NULL), HCCL_E_PTR, "NULL name");
    char name[COMM_NAME_MAX_LENGTH];
    memset(name, 0x7f, sizeof(name));
    r = HcclGetCommName(env.comm, name);
    ZT_EXPECT(&env, r == HCCL_SUCCESS && memchr(name, 0, sizeof(name)) != NULL && name[0] != 0,
              "comm name %d", (int)r);
    memcpy(sh->names[rank], name, sizeof(name));

    static const struct {
        HcclResult code;
        const char *text;
    } phrases[] = {{HCCL_SUCCESS, "no error"},         {HCCL_E_PARA, "parameter error"},
                   {HCCL_E_PTR, "empty pointer"},      {HCCL_E_TIMEOUT, "timeout"},
                   {(HcclResult)999, "unknown error"}, {(HcclResult)-1, "unknown error"}};
    for (size_t i = 0; i < sizeof(phrases) / sizeof(phrases[0]); i++) {
        const char *s = HcclGetErrorString(phrases[i].code);
        ZT_EXPECT(&env, s != NULL && strcmp(s, phrases[i].text) == 0, "string of %d is '%s'",
                  (int)phrases[i].code, s ? s : "(null)");
    }
    const char *seen[26];
    for (int c = 0; c <= 25; c++) { /* 0..24 and HCCL_E_IN_STATUS: distinct, known */
        HcclResult code = c == 25 ? HCCL_E_IN_STATUS : (HcclResult)c;
        const char *s = HcclGetErrorString(code);
        seen[c] = s;
        ZT_EXPECT(&env, s != NULL && s[0] != 0 && strcmp(s, "unknown error") != 0,
                  "string of %d is '%s'", (int)code, s ? s : "(null)");
        for (int d = 0; s != NULL && d < c; d++) {
            ZT_EXPECT(&env, seen[d] == NULL || strcmp(s, seen[d]) != 0,
                      "codes %d and %d share '%s'", c, d, s);
        }
    }

    /* Barrier: nobody leaves before everybody arrived (ranks arrive staggered). */
    ZT_EXPECT_RC(&env, HcclBarrier(NULL, env.stream), HCCL_E_PTR, "NULL comm");
    for (int k = 0; k < 4; k++) {
        struct timespec ts = {0, 15000000L * ((rank + k) % nranks)};
        nanosleep(&ts, NULL);
        atomic_fetch_add_explicit(&sh->arrived[k], 1, memory_order_release);
        r = HcclBarrier(env.comm, env.stream);
        aclError e = aclrtSynchronizeStream(env.stream);
        int seen_n = atomic_load_explicit(&sh->arrived[k], memory_order_acquire);
        ZT_EXPECT(&env, r == HCCL_SUCCESS && e == ACL_SUCCESS && seen_n == nranks,
                  "barrier %d: %d/%d, %d of %d arrived", k, (int)r, (int)e, seen_n, nranks);
    }
    /* After the barriers every rank has stored its name: all the same. */
    ZT_EXPECT(&env, strcmp(sh->names[0], name) == 0, "name '%s', rank 0 has '%s'", name,
              sh->names[0]);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

/* ---- config ------------------------------------------------------------------ */

int zt_comm_config(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t env;
    int fails = 0;
    memset(&env, 0, sizeof(env));
    env.rank = rank;
    env.nranks = nranks;
    /* Thread ranks share one process: the second aclInit is a repeat. */
    aclError e = aclInit(NULL);
    if ((e != ACL_SUCCESS && e != ACL_ERROR_REPEAT_INITIALIZE) ||
        aclrtSetDevice(0) != ACL_SUCCESS) {
        return 1;
    }
    /* Argument errors fail locally, before any rank is contacted. */
    HcclComm c = NULL;
    HcclCommConfig cfg;
    HcclCommConfigInit(&cfg);
    ZT_EXPECT_RC(&env, HcclCommInitRootInfo(0, root, 0, &c), HCCL_E_PARA, "0 ranks");
    ZT_EXPECT_RC(&env, HcclCommInitRootInfo(nranks, NULL, rank, &c), HCCL_E_PTR, "NULL argument");
    ZT_EXPECT_RC(&env, HcclCommInitRootInfo(nranks, root, rank, NULL), HCCL_E_PTR, "NULL argument");
    ZT_EXPECT_RC(&env, HcclCommInitRootInfoConfig(nranks, root, rank, NULL, &c), HCCL_E_PTR,
                 "NULL argument");
    cfg.magicWord = 0x12345678u;
    HcclResult r = HcclCommInitRootInfoConfig(nranks, root, rank, &cfg, &c);
    ZT_EXPECT(&env, r == HCCL_E_PARA, "bad magic word gave %d", (int)r);
    if (r == HCCL_SUCCESS) {
        return fails; /* the root info is used up */
    }

    HcclCommConfigInit(&cfg);
    cfg.hcclBufferSize = 1; /* MB: every op below is chunked */
    snprintf(cfg.hcclCommName, sizeof(cfg.hcclCommName), "%s", ZT_COMM_NAME);
    if (zt_env_open(&env, rank, nranks, root, &cfg) != 0) {
        return 1;
    }
    char name[COMM_NAME_MAX_LENGTH] = "";
    ZT_EXPECT(&env,
              HcclGetCommName(env.comm, name) == HCCL_SUCCESS && strcmp(name, ZT_COMM_NAME) == 0,
              "name '%s'", name);
    ZT_EXPECT(&env, zccl_comm_ccl_allocated(env.comm) == 0, "CCL buffer before use");
    const size_t big = 1000003;
    if (zt_env_arena(&env, zt_case_bytes(ZT_ALLGATHER, HCCL_DATA_TYPE_FP64, big, nranks)) != 0) {
        zt_env_close(&env);
        return fails + 1;
    }
    zt_case_t zc = {.coll = ZT_ALLREDUCE,
                    .dtype = HCCL_DATA_TYPE_FP32,
                    .op = HCCL_REDUCE_SUM,
                    .count = big,
                    .zero_copy = 1,
                    .misalign = 1,
                    .seed = 11};
    fails += zt_case_run(&env, &zc) != 0;
    ZT_EXPECT(&env, zccl_comm_ccl_allocated(env.comm) == 0, "CCL buffer for zero-copy");
    zt_case_t cases[] = {
        {.coll = ZT_ALLREDUCE,
         .dtype = HCCL_DATA_TYPE_FP32,
         .op = HCCL_REDUCE_SUM,
         .count = big,
         .misalign = 1,
         .seed = 12},
        {.coll = ZT_ALLREDUCE,
         .dtype = HCCL_DATA_TYPE_FP64,
         .op = HCCL_REDUCE_MAX,
         .count = big,
         .in_place = 1,
         .misalign = 1,
         .seed = 13},
        {.coll = ZT_ALLGATHER,
         .dtype = HCCL_DATA_TYPE_FP16,
         .count = big,
         .misalign = 1,
         .seed = 14},
        {.coll = ZT_ALLGATHER,
         .dtype = HCCL_DATA_TYPE_INT8,
         .count = big,
         .in_place = 1,
         .misalign = 1,
         .seed = 15},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t st0 = zccl_comm_staged_bytes(env.comm);
        fails += zt_case_run(&env, &cases[i]) != 0;
        uint64_t st = zccl_comm_staged_bytes(env.comm) - st0;
        /* At least this rank's own input went through its CCL buffer. */
        ZT_EXPECT(&env, nranks == 1 || st >= big * zt_dtype_size(cases[i].dtype),
                  "case %zu staged %llu bytes", i, (unsigned long long)st);
    }
    ZT_EXPECT(&env, nranks == 1 || zccl_comm_ccl_allocated(env.comm) == 1, "no CCL buffer");
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

/* ---- zero-copy rule errors --------------------------------------------------- */

/* AllReduce INT32 SUM of count elements at send/recv (any memory); checks the
 * result and, when expect is 1 / 0, that the op was zero-copy / buffered. */
static int op_check(zt_env_t *env, void *send, void *recv, size_t count, int expect, int line)
{
    return zt_allreduce_path(env, env->comm, send, recv, count, expect, line);
}

/* SetMemoryRange must refuse these arguments with HCCL_E_PARA; a range it set
 * anyway is unset again so the checks after this one still mean something. */
static int set_range_refused(zt_env_t *env, void *base, size_t size, size_t alignment,
                             uint64_t flags, const char *what)
{
    int fails = 0;
    HcclResult r = HcclCommSetMemoryRange(env->comm, base, size, alignment, flags);
    ZT_EXPECT(env, r == HCCL_E_PARA, "SetMemoryRange with %s: got %d (%s), want HCCL_E_PARA", what,
              (int)r, HcclGetErrorString(r));
    if (r == HCCL_SUCCESS) {
        HcclCommUnsetMemoryRange(env->comm, base);
    }
    return fails;
}

int zt_comm_zc_rules(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = 0;
    size_t g = zt_granularity(env.device);
    zt_zc_t z;
    if (zt_zc_open(&z, env.comm, env.device, g, 4, 0) != 0) {
        zt_env_close(&env);
        return 1;
    }
    char *R = z.va;
    HcclComm cm = env.comm;
    ZT_EXPECT_RC(&env, HcclCommSetMemoryRange(cm, R, 4 * g, 0, 0), HCCL_E_PARA, "same range again");
    ZT_EXPECT_RC(&env, HcclCommSetMemoryRange(cm, R + g, g, 0, 0), HCCL_E_PARA, "range in a range");
    ZT_EXPECT_RC(&env, HcclCommSetMemoryRange(cm, R + 3 * g, 2 * g, 0, 0), HCCL_E_PARA,
                 "range overlapping the end of a range");
    void *S = NULL;
    if (aclrtReserveMemAddress(&S, 2 * g, 0, NULL, 0) != ACL_SUCCESS) {
        return fails + 1;
    }
    fails += set_range_refused(&env, S, 0, 0, 0, "size 0");
    fails += set_range_refused(&env, (char *)S + 64, g, 0, 0, "an unaligned base");
    fails += set_range_refused(&env, S, 3 * g, 0, 0, "a size past the reservation");
    fails += set_range_refused(&env, S, SIZE_MAX - 4095, 0, 0, "a size that wraps");
    void *heap = malloc(4 * g);
    fails += set_range_refused(&env, (void *)(((uintptr_t)heap + 4095) & ~(uintptr_t)4095), g, 0, 0,
                               "malloc() memory");
    free(heap);
    ZT_EXPECT_RC(&env, HcclCommSetMemoryRange(cm, NULL, 2 * g, 0, 0), HCCL_E_PTR, "NULL base");
    ZT_EXPECT_RC(&env, HcclCommSetMemoryRange(NULL, S, 2 * g, 0, 0), HCCL_E_PTR, "NULL comm");
    aclrtDrvMemHandle hs = zt_phys_alloc(env.device, g);
    if (hs == NULL || aclrtMapMem(S, g, 0, hs, 0) != ACL_SUCCESS) {
        return fails + 1;
    }
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, S, g, 0, hs, 0), HCCL_E_PARA,
                 "outside range");
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R + 3 * g, 2 * g, 0, z.h[3], 0), HCCL_E_PARA,
                 "block past the range's end");
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R, g, 64, z.h[0], 0), HCCL_E_PARA, "offset");
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R, g, 0, z.h[0], 1), HCCL_E_PARA, "flags");
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R, g, 0, NULL, 0), HCCL_E_PTR, "NULL handle");
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, NULL, g, 0, z.h[0], 0), HCCL_E_PTR,
                 "NULL va");
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R, g, 0, z.h[0], 0), HCCL_SUCCESS,
                 "activate");
    z.active[0] = 1;
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R, g, 0, z.h[0], 0), HCCL_E_PARA, "twice");
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R + g / 2, g, 0, z.h[1], 0), HCCL_E_PARA,
                 "overlapping an active block");
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(cm, R + g), HCCL_E_NOT_FOUND, "never active");
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(cm, R + 4096), HCCL_E_NOT_FOUND,
                 "inside an active block");
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(cm, NULL), HCCL_E_PTR, "NULL va");
    ZT_EXPECT_RC(&env, HcclCommUnsetMemoryRange(cm, R), HCCL_E_PARA, "unset with an active block");
    ZT_EXPECT_RC(&env, HcclCommUnsetMemoryRange(cm, S), HCCL_E_NOT_FOUND,
                 "unset a range never set");
    ZT_EXPECT_RC(&env, HcclCommUnsetMemoryRange(cm, R + g), HCCL_E_NOT_FOUND, "unset inside");

    /* Paths: in one block (zero-copy), across two adjacent active blocks
     * (zero-copy when every block it touches is active), input active but output plain
     * (buffered). */
    fails += op_check(&env, R + 4096 + 4, R + g / 2 + 4, 5000, 1, __LINE__);
    ZT_EXPECT_RC(&env, HcclCommActivateCommMemory(cm, R + g, g, 0, z.h[1], 0), HCCL_SUCCESS, "b1");
    z.active[1] = 1;
    fails += op_check(&env, R + g - 8000, R + 2 * g - 6000, 4000, -1, __LINE__);
    /* A send buffer across the two active blocks, output in the second: zero-copy. */
    fails += op_check(&env, R + g - 8000, R + g + 4096, 4000, 1, __LINE__);
    void *plain = NULL;
    if (aclrtMalloc(&plain, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS) {
        fails += op_check(&env, R + 4096, (char *)plain + 4, 5000, 0, __LINE__);
        fails += op_check(&env, plain, R + 4096, 5000, 0, __LINE__);
        aclrtFree(plain);
    }

    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(cm, R), HCCL_SUCCESS, "deactivate");
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(cm, R), HCCL_E_NOT_FOUND, "deactivate twice");
    ZT_EXPECT_RC(&env, HcclCommDeactivateCommMemory(cm, R + g), HCCL_SUCCESS, "deactivate b1");
    z.active[0] = z.active[1] = 0;
    /* Deactivated memory still works, buffered. */
    fails += op_check(&env, R + 4096, R + 8192, 1000, 0, __LINE__);
    ZT_EXPECT_RC(&env, HcclCommUnsetMemoryRange(cm, R), HCCL_SUCCESS, "unset");
    ZT_EXPECT_RC(&env, HcclCommUnsetMemoryRange(cm, R), HCCL_E_NOT_FOUND, "unset twice");
    ZT_EXPECT_RC(&env, HcclCommSetMemoryRange(cm, R, 4 * g, 0, 0), HCCL_SUCCESS, "set again");
    ZT_EXPECT_RC(&env, HcclCommUnsetMemoryRange(cm, R), HCCL_SUCCESS, "unset again");
    z.range_set = 0;
    if (zt_zc_close(&z, cm) != 0 || aclrtUnmapMem(S) != ACL_SUCCESS ||
        aclrtFreePhysical(hs) != ACL_SUCCESS || aclrtReleaseMemAddress(S) != ACL_SUCCESS) {
        fails++;
    }
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}

/* ---- path choice with mixed memory, stream order, NULL stream -------------- */

int zt_comm_paths(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    const int threads = arg != NULL && *(const int *)arg == ZT_COMM_THREADS;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = 0;
    const size_t count = 1 << 20;
    if (zt_env_arena(&env, zt_case_bytes(ZT_ALLGATHER, HCCL_DATA_TYPE_FP32, count, nranks))) {
        zt_env_close(&env);
        return 1;
    }
    /* One rank's buffers in activated memory, the others' not (then the
     * reverse): every rank takes the buffered path. */
    for (int coll = ZT_ALLREDUCE; coll <= ZT_ALLGATHER; coll++) {
        for (int who = 0; who < 2; who++) {
            int zc = who == 0 ? rank == 0 : rank != nranks - 1;
            zt_case_t c = {.coll = coll,
                           .dtype = HCCL_DATA_TYPE_FP32,
                           .op = HCCL_REDUCE_SUM,
                           .count = 4099,
                           .zero_copy = zc,
                           .expect_buffered = zc,
                           .misalign = 1,
                           .seed = 21 + (uint64_t)who};
            fails += zt_case_run(&env, &c) != 0;
        }
    }
    /* Stream order: the input arrives by an async copy queued before the op. */
    float *host = NULL;
    if (aclrtMallocHost((void **)&host, count * sizeof(float)) != ACL_SUCCESS) {
        zt_env_close(&env);
        return fails + 1;
    }
    zt_pat_t p = {HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, ZT_FILL_EXACT, nranks, 31};
    zt_fill(host, 0, count, &p, rank);
    float *send = (float *)env.plain;
    float *recv = (float *)(env.plain + env.half);
    memset(send, 0xee, count * sizeof(float));
    aclError e = aclrtMemcpyAsync(send, count * sizeof(float), host, count * sizeof(float),
                                  ACL_MEMCPY_HOST_TO_DEVICE, env.stream);
    HcclResult r = HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, env.comm,
                                 env.stream);
    aclError se = aclrtSynchronizeStream(env.stream);
    float *want = malloc(count * sizeof(float));
    zt_ref_allreduce(want, count, &p);
    if (ZT_EXPECT(&env, e == ACL_SUCCESS && r == HCCL_SUCCESS && se == ACL_SUCCESS,
                  "stream order: %d %d %d", (int)e, (int)r, (int)se)) {
        fails += zt_compare("stream order: output", recv, want, count, HCCL_DATA_TYPE_FP32) != 0;
    }
    /* The NULL stream is the current device's default stream, as in ACL. Thread
     * ranks of one process that share a device would share that stream, and
     * one rank's op would queue behind another's forever: not a program HCCL
     * allows, so that step needs a device per thread rank. */
    uint32_t ndev = 0;
    int own_device =
        !threads || (aclrtGetDeviceCount(&ndev) == ACL_SUCCESS && (uint32_t)nranks <= ndev);
    if (own_device) {
        memset(recv, 0, count * sizeof(float));
        r = HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, env.comm, NULL);
        se = r == HCCL_SUCCESS ? aclrtSynchronizeStream(NULL) : ACL_SUCCESS;
        if (ZT_EXPECT(&env, r == HCCL_SUCCESS && se == ACL_SUCCESS, "NULL stream: %d %d", (int)r,
                      (int)se)) {
            fails += zt_compare("NULL stream: output", recv, want, count, HCCL_DATA_TYPE_FP32) != 0;
        }
    }
    free(want);
    aclrtFreeHost(host);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}
