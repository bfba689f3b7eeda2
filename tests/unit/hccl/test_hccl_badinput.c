/*
 * Bad input to every HCCL call: each case states the exact HcclResult it
 * must return, and the process must still be alive (and the communicator
 * usable) afterwards. Conventions (hccl.h, hccl_comm.h): a NULL
 * communicator, output pointer or needed buffer is HCCL_E_PTR; a handle that
 * is not a live communicator, an unknown data type or reduction, a root or
 * peer outside the communicator, counts that overflow and arguments that
 * contradict each other are HCCL_E_PARA; a reduction the type cannot do is
 * HCCL_E_NOT_SUPPORT; what a host cannot do at all (rank tables, symmetric
 * windows, suspend/resume) is HCCL_E_NOT_SUPPORT; "no such range / block"
 * is HCCL_E_NOT_FOUND.
 *
 * The communicator is a one-rank communicator of this process (and a
 * throwaway root info for init cases that poison their rendezvous); every
 * group ends with a real op that must still work. Each group prints how many
 * cases it ran; the ACL runtime's own bad-input cases live in tests/unit/vmm.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hccl/hccl.h"
#include "zt_phys.h"

#define BI_BYTES (1u << 20)

typedef struct {
    HcclRootInfo root;
    HcclComm comm;
    aclrtStream stream;
    unsigned char *send;
    unsigned char *recv;
    int cases;
    int fails;
} bi_ctx_t;

static bi_ctx_t bi;
static int bi_total_cases;
static int bi_total_fails;

static void bi_check(const char *what, int line, int got, int want)
{
    bi.cases++;
    if (got != want) {
        bi.fails++;
        fprintf(stderr, "line %d: %s returned %d, want %d\n", line, what, got, want);
    }
}

#define BI(call, want) bi_check(#call, __LINE__, (int)(call), (int)(want))

/* A string result (HcclGetErrorString) counts as a case too. */
#define BI_STR(call, want) bi_check(#call, __LINE__, strcmp((call), (want)) == 0 ? 0 : 1, 0)

/* The call must be accepted and its op must complete with success. */
static int bi_op_ok(HcclResult r)
{
    if (r != HCCL_SUCCESS) {
        return (int)r;
    }
    return (int)aclrtSynchronizeStream(bi.stream);
}

/* A good op: the communicator still works after the bad calls. */
static void bi_still_works(const char *group)
{
    int32_t *in = (int32_t *)(void *)bi.send;
    int32_t *out = (int32_t *)(void *)bi.recv;
    for (int i = 0; i < 1000; i++) {
        in[i] = i * 3 - 7;
        out[i] = 0;
    }
    BI(bi_op_ok(
           HcclAllReduce(in, out, 1000, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, bi.comm, bi.stream)),
       HCCL_SUCCESS);
    int bad = 0;
    for (int i = 0; i < 1000; i++) {
        bad += out[i] != i * 3 - 7;
    }
    bi_check("one-rank AllReduce result", __LINE__, bad, 0);
    HcclResult async = HCCL_E_INTERNAL;
    BI(HcclGetCommAsyncError(bi.comm, &async), HCCL_SUCCESS);
    bi_check("async error after bad calls", __LINE__, (int)async, HCCL_SUCCESS);
    printf("bad input %-12s: %d cases, %d failed\n", group, bi.cases, bi.fails);
    fflush(stdout);
    bi_total_cases += bi.cases;
    bi_total_fails += bi.fails;
    int fails = bi.fails;
    bi.cases = 0;
    bi.fails = 0;
    assert_int_equal(fails, 0);
}

static int bi_setup(void **state)
{
    (void)state;
    memset(&bi, 0, sizeof(bi));
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS ||
        aclrtCreateStream(&bi.stream) != ACL_SUCCESS) {
        return -1;
    }
    void *p = NULL;
    void *q = NULL;
    if (aclrtMalloc(&p, BI_BYTES, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
        aclrtMalloc(&q, BI_BYTES, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        return -1;
    }
    bi.send = p;
    bi.recv = q;
    if (HcclGetRootInfo(&bi.root) != HCCL_SUCCESS ||
        HcclCommInitRootInfo(1, &bi.root, 0, &bi.comm) != HCCL_SUCCESS) {
        return -1;
    }
    return 0;
}

static int bi_teardown(void **state)
{
    (void)state;
    int bad = HcclCommDestroy(bi.comm) != HCCL_SUCCESS;
    bad |= aclrtFree(bi.send) != ACL_SUCCESS;
    bad |= aclrtFree(bi.recv) != ACL_SUCCESS;
    bad |= aclrtDestroyStream(bi.stream) != ACL_SUCCESS;
    bad |= aclrtResetDevice(0) != ACL_SUCCESS;
    printf("bad input total: %d cases, %d failed\n", bi_total_cases, bi_total_fails);
    return bad ? -1 : 0;
}

/* ---- communicator management ------------------------------------------------ */

static void test_comm_calls(void **state)
{
    (void)state;
    HcclComm c = NULL;
    HcclComm bogus = (HcclComm)(uintptr_t)0x1234560;
    uint32_t u = 0;
    char name[COMM_NAME_MAX_LENGTH];
    HcclResult e;
    BI(HcclGetRootInfo(NULL), HCCL_E_PTR);
    BI(HcclCommInitRootInfo(1, NULL, 0, &c), HCCL_E_PTR);
    BI(HcclCommInitRootInfo(1, &bi.root, 0, NULL), HCCL_E_PTR);
    BI(HcclCommInitRootInfoConfig(1, NULL, 0, NULL, &c), HCCL_E_PTR);
    BI(HcclCommDestroy(NULL), HCCL_E_PTR);
    BI(HcclCommDestroy(bogus), HCCL_E_PARA);
    BI(HcclCommDestroy((HcclComm)bi.send), HCCL_E_PARA);
    BI(HcclGetRankSize(NULL, &u), HCCL_E_PTR);
    BI(HcclGetRankSize(bi.comm, NULL), HCCL_E_PTR);
    BI(HcclGetRankSize(bogus, &u), HCCL_E_PARA);
    BI(HcclGetRankId(NULL, &u), HCCL_E_PTR);
    BI(HcclGetRankId(bi.comm, NULL), HCCL_E_PTR);
    BI(HcclGetRankId(bogus, &u), HCCL_E_PARA);
    BI(HcclGetCommName(NULL, name), HCCL_E_PTR);
    BI(HcclGetCommName(bi.comm, NULL), HCCL_E_PTR);
    BI(HcclGetCommName(bogus, name), HCCL_E_PARA);
    BI(HcclGetCommAsyncError(NULL, &e), HCCL_E_PTR);
    BI(HcclGetCommAsyncError(bi.comm, NULL), HCCL_E_PTR);
    BI(HcclGetCommAsyncError(bogus, &e), HCCL_E_PARA);
    BI(HcclBarrier(NULL, bi.stream), HCCL_E_PTR);
    BI(HcclBarrier(bogus, bi.stream), HCCL_E_PARA);
    BI_STR(HcclGetErrorString((HcclResult)999), "unknown error");
    BI_STR(HcclGetErrorString((HcclResult)-1), "unknown error");
    BI_STR(HcclGetErrorString(HCCL_E_TIMEOUT), "timeout");
    /* Rank tables (the full matrix is test_hccl_ranktable). */
    BI(HcclCommInitClusterInfo("no-such-ranktable.json", 0, &c), HCCL_E_OPEN_FILE_FAILURE);
    BI(HcclCommInitClusterInfo(NULL, 0, &c), HCCL_E_PTR);
    BI(HcclCommInitClusterInfoConfig("no-such-ranktable.json", 0, NULL, &c), HCCL_E_PTR);
    /* What a host cannot do. */
    BI(HcclCommSuspend(bi.comm), HCCL_E_NOT_SUPPORT);
    BI(HcclCommResume(bi.comm), HCCL_E_NOT_SUPPORT);
    /* Symmetric windows (the rules are test_mp_symwin). */
    HcclCommSymWindow w = NULL;
    size_t off = 0;
    BI(HcclCommSymWinRegister(bi.comm, bi.send, 4096, &w, 0), HCCL_E_NOT_SUPPORT);
    BI(HcclCommSymWinRegister(bi.comm, bi.send, 4096, &w, 2), HCCL_E_PARA);
    BI(HcclCommSymWinRegister(bi.comm, bi.send, 4096, &w, 1), HCCL_E_PARA); /* not VMM memory */
    BI(HcclCommSymWinRegister(bi.comm, NULL, 4096, &w, 1), HCCL_E_PTR);
    BI(HcclCommSymWinRegister(bogus, bi.send, 4096, &w, 1), HCCL_E_PARA);
    BI(HcclCommSymWinDeregister(NULL), HCCL_E_PTR);
    BI(HcclCommSymWinDeregister((HcclCommSymWindow)&off), HCCL_E_NOT_FOUND);
    BI(HcclCommSymWinGet(bi.comm, bi.send, 64, &w, &off), HCCL_E_NOT_FOUND);
    BI(HcclCommSymWinGet(bi.comm, bi.send, 0, &w, &off), HCCL_E_PARA);
    BI(HcclCommSymWinGet(bi.comm, bi.send, 64, NULL, &off), HCCL_E_PTR);
    /* HcclCommInitAll. */
    int32_t devs[2] = {0, 0};
    HcclComm comms[2] = {NULL, NULL};
    BI(HcclCommInitAll(0, devs, comms), HCCL_E_PARA);
    BI(HcclCommInitAll(2, NULL, comms), HCCL_E_PTR);
    BI(HcclCommInitAll(2, devs, NULL), HCCL_E_PTR);
    /* One past the 1,024-rank limit; the arrays must really hold ndev entries. */
    static int32_t many_devs[1025];
    static HcclComm many_comms[1025];
    BI(HcclCommInitAll(1025, many_devs, many_comms), HCCL_E_PARA);
    devs[1] = -1;
    BI(HcclCommInitAll(2, devs, comms), HCCL_E_PARA);
    devs[1] = 1 << 30;
    BI(HcclCommInitAll(2, devs, comms), HCCL_E_PARA);
    bi_check("InitAll outputs untouched", __LINE__, comms[0] != NULL || comms[1] != NULL, 0);
    /* HcclCreateSubCommConfig (one-rank parent). */
    uint32_t ids[2] = {0, 0};
    HcclComm sub = NULL;
    HcclComm parent = bi.comm;
    BI(HcclCreateSubCommConfig(NULL, 1, ids, 1, 0, NULL, &sub), HCCL_E_PTR);
    BI(HcclCreateSubCommConfig(&parent, 1, NULL, 1, 0, NULL, &sub), HCCL_E_PTR);
    BI(HcclCreateSubCommConfig(&parent, 1, ids, 1, 0, NULL, NULL), HCCL_E_PTR);
    BI(HcclCreateSubCommConfig(&bogus, 1, ids, 1, 0, NULL, &sub), HCCL_E_PARA);
    BI(HcclCreateSubCommConfig(&parent, 0, ids, 1, 0, NULL, &sub), HCCL_E_PARA);
    BI(HcclCreateSubCommConfig(&parent, 2, ids, 1, 0, NULL, &sub), HCCL_E_PARA);
    BI(HcclCreateSubCommConfig(&parent, 1, ids, 1, 1, NULL, &sub), HCCL_E_PARA);
    ids[0] = 5;
    BI(HcclCreateSubCommConfig(&parent, 1, ids, 1, 0, NULL, &sub), HCCL_E_PARA);
    bi_check("sub comm output untouched", __LINE__, sub != NULL, 0);
    /* A destroyed communicator is no longer a communicator. */
    HcclRootInfo r2;
    BI(HcclGetRootInfo(&r2), HCCL_SUCCESS);
    BI(HcclCommInitRootInfo(1, &r2, 0, &c), HCCL_SUCCESS);
    BI(HcclCommDestroy(c), HCCL_SUCCESS);
    BI(HcclCommDestroy(c), HCCL_E_PARA);
    BI(HcclGetRankSize(c, &u), HCCL_E_PARA);
    BI(HcclAllReduce(bi.send, bi.recv, 1, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, c, bi.stream),
       HCCL_E_PARA);
    bi_still_works("comm");
}

/* Root infos and configs that are wrong. */
/* The fds a failed init must leave alone: those of stdin, stdout and stderr
 * that are open, and BI_OWN of the test's own on /dev/null. (Comparing the
 * whole fd table would also see fds that the library's own threads open and
 * close meanwhile.) -1 marks a slot with nothing to check. */
#define BI_OWN 8
#define BI_FDS (3 + BI_OWN)

static void bi_own_fds(int *fds)
{
    for (int i = 0; i < BI_FDS; i++) {
        fds[i] =
            i < 3 ? (fcntl(i, F_GETFD) != -1 ? i : -1) : open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
}

/* How many of fds[] are no longer open; closes the test's own. */
static int bi_lost_fds(const int *fds)
{
    int lost = 0;
    for (int i = 0; i < BI_FDS; i++) {
        lost += fds[i] >= 0 && fcntl(fds[i], F_GETFD) == -1;
        if (i >= 3 && fds[i] >= 0) {
            close(fds[i]);
        }
    }
    return lost;
}

static void test_init_args(void **state)
{
    (void)state;
    HcclComm c = NULL;
    HcclRootInfo r;
    BI(HcclGetRootInfo(&r), HCCL_SUCCESS);
    /* A failed init must close nothing it did not open (stdin included). */
    int own[BI_FDS];
    bi_own_fds(own);
    HcclRootInfo junk;
    memset(&junk, 0, sizeof(junk));
    BI(HcclCommInitRootInfo(1, &junk, 0, &c), HCCL_E_PARA);
    memset(&junk, 'x', sizeof(junk)); /* no NUL-terminated IP, no magic */
    BI(HcclCommInitRootInfo(1, &junk, 0, &c), HCCL_E_PARA);
    /* A real root info whose IP string was damaged. */
    junk = r;
    memcpy(junk.internal, "999.1.2.3", 10);
    BI(HcclCommInitRootInfo(1, &junk, 0, &c), HCCL_E_PARA);
    junk = r;
    memset(junk.internal, 'y', 64); /* IP string without its NUL */
    BI(HcclCommInitRootInfo(1, &junk, 0, &c), HCCL_E_PARA);

    HcclCommConfig cfg;
    HcclCommConfigInit(&cfg);
    cfg.magicWord = 0x12345678;
    BI(HcclCommInitRootInfoConfig(1, &r, 0, &cfg, &c), HCCL_E_PARA);
    HcclCommConfigInit(&cfg);
    cfg.size = 8;
    BI(HcclCommInitRootInfoConfig(1, &r, 0, &cfg, &c), HCCL_E_PARA);
    HcclCommConfigInit(&cfg);
    cfg.version = 0;
    BI(HcclCommInitRootInfoConfig(1, &r, 0, &cfg, &c), HCCL_E_PARA);
    HcclCommConfigInit(&cfg);
    cfg.hcclBufferSize = 0;
    BI(HcclCommInitRootInfoConfig(1, &r, 0, &cfg, &c), HCCL_E_PARA);
    HcclCommConfigInit(&cfg);
    cfg.hcclDeterministic = 7;
    BI(HcclCommInitRootInfoConfig(1, &r, 0, &cfg, &c), HCCL_E_PARA);
    HcclCommConfigInit(&cfg);
    memset(cfg.hcclCommName, 'n', sizeof(cfg.hcclCommName));
    BI(HcclCommInitRootInfoConfig(1, &r, 0, &cfg, &c), HCCL_E_PARA);
    HcclCommConfigInit(&cfg);
    cfg.hcclExecTimeOut = -5;
    BI(HcclCommInitRootInfoConfig(1, &r, 0, &cfg, &c), HCCL_E_PARA);
    bi_check("init outputs untouched", __LINE__, c != NULL, 0);
    bi_check("failed inits closed none of the test's fds", __LINE__, bi_lost_fds(own), 0);
    /* The config checks came before the rendezvous: r is still good. */
    HcclCommConfigInit(&cfg);
    cfg.hcclExecTimeOut = 7;
    snprintf(cfg.hcclCommName, sizeof(cfg.hcclCommName), "badinput-ok");
    BI(HcclCommInitRootInfoConfig(1, &r, 0, &cfg, &c), HCCL_SUCCESS);
    char name[COMM_NAME_MAX_LENGTH] = "";
    BI(HcclGetCommName(c, name), HCCL_SUCCESS);
    BI_STR(name, "badinput-ok");
    BI(HcclCommDestroy(c), HCCL_SUCCESS);
    /* Rank arguments that are out of range fail the whole rendezvous at once
     * (so this root info is used only for them). */
    HcclRootInfo poisoned;
    BI(HcclGetRootInfo(&poisoned), HCCL_SUCCESS);
    c = NULL;
    BI(HcclCommInitRootInfo(0, &poisoned, 0, &c), HCCL_E_PARA);
    BI(HcclCommInitRootInfo(2, &poisoned, 5, &c), HCCL_E_PARA);
    BI(HcclCommInitRootInfo(2, &poisoned, 2, &c), HCCL_E_PARA);
    BI(HcclCommInitRootInfo(1025, &poisoned, 0, &c), HCCL_E_PARA); /* past 1,024 ranks */
    BI(HcclCommInitRootInfo(UINT32_MAX, &poisoned, 0, &c), HCCL_E_PARA);
    bi_check("init outputs untouched", __LINE__, c != NULL, 0);
    bi_still_works("init");
}

/* ---- zero-copy memory ------------------------------------------------------- */

static void test_memory_range(void **state)
{
    (void)state;
    aclrtPhysicalMemProp prop = zt_phys_prop(0, ACL_HBM_MEM_HUGE);
    size_t g = 0;
    assert_int_equal(
        aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
        ACL_SUCCESS);
    void *va = NULL;
    assert_int_equal(aclrtReserveMemAddress(&va, 4 * g, 0, NULL, 0), ACL_SUCCESS);
    char *b = va;
    aclrtDrvMemHandle h1 = zt_phys_alloc(0, g);
    aclrtDrvMemHandle h2 = zt_phys_alloc(0, 2 * g);
    assert_non_null(h1);
    assert_non_null(h2);
    assert_int_equal(aclrtMapMem(b, g, 0, h1, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(b + g, 2 * g, 0, h2, 0), ACL_SUCCESS);
    HcclComm bogus = (HcclComm)(uintptr_t)0x777000;
    int local = 0;

    BI(HcclCommSetMemoryRange(NULL, b, 3 * g, 0, 0), HCCL_E_PTR);
    BI(HcclCommSetMemoryRange(bi.comm, NULL, 3 * g, 0, 0), HCCL_E_PTR);
    BI(HcclCommSetMemoryRange(bogus, b, 3 * g, 0, 0), HCCL_E_PARA);
    BI(HcclCommSetMemoryRange(bi.comm, b, 0, 0, 0), HCCL_E_PARA);
    BI(HcclCommSetMemoryRange(bi.comm, b + 1, 3 * g, 4096, 0), HCCL_E_PARA);    /* unaligned */
    BI(HcclCommSetMemoryRange(bi.comm, bi.send, 4096, 0, 0), HCCL_E_PARA);      /* not reserved */
    BI(HcclCommSetMemoryRange(bi.comm, b, SIZE_MAX - 4095, 0, 0), HCCL_E_PARA); /* wraps */
    BI(HcclCommSetMemoryRange(bi.comm, b, 5 * g, 0, 0), HCCL_E_PARA); /* past the reservation */
    /* Reserved alignment / flags (a framework passes flags 1): ignored. */
    BI(HcclCommSetMemoryRange(bi.comm, b, 3 * g, 0, 1), HCCL_SUCCESS);
    BI(HcclCommUnsetMemoryRange(bi.comm, b), HCCL_SUCCESS);
    BI(HcclCommSetMemoryRange(bi.comm, b, 3 * g, 3, 0), HCCL_SUCCESS);
    BI(HcclCommUnsetMemoryRange(bi.comm, b), HCCL_SUCCESS);
    BI(HcclCommSetMemoryRange(bi.comm, b, 3 * g, 0, 0), HCCL_SUCCESS);
    BI(HcclCommSetMemoryRange(bi.comm, b, 3 * g, 0, 0), HCCL_E_PARA);         /* same range */
    BI(HcclCommSetMemoryRange(bi.comm, b + g, g, 0, 0), HCCL_E_PARA);         /* inside it */
    BI(HcclCommSetMemoryRange(bi.comm, b + 2 * g, 2 * g, 0, 0), HCCL_E_PARA); /* overlaps */

    BI(HcclCommActivateCommMemory(NULL, b, g, 0, h1, 0), HCCL_E_PTR);
    BI(HcclCommActivateCommMemory(bi.comm, NULL, g, 0, h1, 0), HCCL_E_PTR);
    BI(HcclCommActivateCommMemory(bi.comm, b, g, 0, NULL, 0), HCCL_E_PTR);
    BI(HcclCommActivateCommMemory(bogus, b, g, 0, h1, 0), HCCL_E_PARA);
    BI(HcclCommActivateCommMemory(bi.comm, b, 0, 0, h1, 0), HCCL_E_PARA);
    BI(HcclCommActivateCommMemory(bi.comm, b, g, 64, h1, 0), HCCL_E_PARA);
    BI(HcclCommActivateCommMemory(bi.comm, b, g, 0, h1, 1), HCCL_E_PARA);
    BI(HcclCommActivateCommMemory(bi.comm, b, g, 0, (aclrtDrvMemHandle)&local, 0), HCCL_E_PARA);
    BI(HcclCommActivateCommMemory(bi.comm, b, 2 * g, 0, h1, 0), HCCL_E_PARA);      /* > handle */
    BI(HcclCommActivateCommMemory(bi.comm, bi.send, 4096, 0, h1, 0), HCCL_E_PARA); /* no range */
    BI(HcclCommActivateCommMemory(bi.comm, b + 3 * g, g, 0, h1, 0), HCCL_E_PARA);  /* past it */
    BI(HcclCommActivateCommMemory(bi.comm, b + g, 2 * g, 0, h2, 0), HCCL_SUCCESS);
    BI(HcclCommActivateCommMemory(bi.comm, b + g, 2 * g, 0, h2, 0), HCCL_E_PARA); /* again */
    BI(HcclCommActivateCommMemory(bi.comm, b + 2 * g, g, 0, h1, 0), HCCL_E_PARA); /* overlap */
    BI(HcclCommActivateCommMemory(bi.comm, b, g, 0, h1, 0), HCCL_SUCCESS);

    BI(HcclCommUnsetMemoryRange(NULL, b), HCCL_E_PTR);
    BI(HcclCommUnsetMemoryRange(bi.comm, NULL), HCCL_E_PTR);
    BI(HcclCommUnsetMemoryRange(bogus, b), HCCL_E_PARA);
    BI(HcclCommUnsetMemoryRange(bi.comm, b + g), HCCL_E_NOT_FOUND);
    BI(HcclCommUnsetMemoryRange(bi.comm, b), HCCL_E_PARA); /* blocks still active */

    BI(HcclCommDeactivateCommMemory(NULL, b), HCCL_E_PTR);
    BI(HcclCommDeactivateCommMemory(bi.comm, NULL), HCCL_E_PTR);
    BI(HcclCommDeactivateCommMemory(bogus, b), HCCL_E_PARA);
    BI(HcclCommDeactivateCommMemory(bi.comm, b + 1), HCCL_E_NOT_FOUND);
    BI(HcclCommDeactivateCommMemory(bi.comm, b + 2 * g), HCCL_E_NOT_FOUND); /* mid-block */
    BI(HcclCommDeactivateCommMemory(bi.comm, bi.send), HCCL_E_NOT_FOUND);

    /* Zero-copy ops still work on what was activated. */
    int32_t *zs = (int32_t *)(void *)(b + g);
    int32_t *zr = (int32_t *)(void *)(b + 2 * g);
    for (int i = 0; i < 512; i++) {
        zs[i] = i;
    }
    BI(bi_op_ok(
           HcclAllReduce(zs, zr, 512, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, bi.comm, bi.stream)),
       HCCL_SUCCESS);
    bi_check("zero-copy result", __LINE__, zr[511] != 511, 0);

    BI(HcclCommDeactivateCommMemory(bi.comm, b + g), HCCL_SUCCESS);
    BI(HcclCommDeactivateCommMemory(bi.comm, b + g), HCCL_E_NOT_FOUND); /* twice */
    BI(HcclCommDeactivateCommMemory(bi.comm, b), HCCL_SUCCESS);
    BI(HcclCommUnsetMemoryRange(bi.comm, b), HCCL_SUCCESS);
    BI(HcclCommUnsetMemoryRange(bi.comm, b), HCCL_E_NOT_FOUND);           /* twice */
    BI(HcclCommActivateCommMemory(bi.comm, b, g, 0, h1, 0), HCCL_E_PARA); /* range gone */

    assert_int_equal(aclrtUnmapMem(b), ACL_SUCCESS);
    assert_int_equal(aclrtUnmapMem(b + g), ACL_SUCCESS);
    assert_int_equal(aclrtFreePhysical(h1), ACL_SUCCESS);
    assert_int_equal(aclrtFreePhysical(h2), ACL_SUCCESS);
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_SUCCESS);
    bi_still_works("memory");
}

/* ---- collectives ------------------------------------------------------------- */

static void test_collectives(void **state)
{
    (void)state;
    void *s = bi.send;
    void *r = bi.recv;
    HcclComm c = bi.comm;
    aclrtStream st = bi.stream;
    HcclComm bogus = (HcclComm)(uintptr_t)0x999000;
    const HcclDataType bad_t = (HcclDataType)99;
    const HcclReduceOp bad_op = (HcclReduceOp)4;
    const uint64_t huge = UINT64_MAX / 2;
    uint64_t cnt[1] = {16};
    uint64_t dsp[1] = {0};
    uint64_t absurd[1] = {huge};

    /* AllReduce */
    BI(HcclAllReduce(s, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, NULL, st), HCCL_E_PTR);
    BI(HcclAllReduce(s, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, bogus, st), HCCL_E_PARA);
    BI(HcclAllReduce(s, r, 16, bad_t, HCCL_REDUCE_SUM, c, st), HCCL_E_PARA);
    BI(HcclAllReduce(s, r, 16, HCCL_DATA_TYPE_RESERVED, HCCL_REDUCE_SUM, c, st), HCCL_E_PARA);
    BI(HcclAllReduce(s, r, 16, (HcclDataType)13, HCCL_REDUCE_SUM, c, st), HCCL_E_PARA);
    BI(HcclAllReduce(s, r, 16, (HcclDataType)-1, HCCL_REDUCE_SUM, c, st), HCCL_E_PARA);
    BI(HcclAllReduce(s, r, 16, HCCL_DATA_TYPE_FP32, bad_op, c, st), HCCL_E_PARA);
    BI(HcclAllReduce(s, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_RESERVED, c, st), HCCL_E_PARA);
    BI(HcclAllReduce(s, r, 16, HCCL_DATA_TYPE_FP32, (HcclReduceOp)-1, c, st), HCCL_E_PARA);
    BI(HcclAllReduce(NULL, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c, st), HCCL_E_PTR);
    BI(HcclAllReduce(s, NULL, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c, st), HCCL_E_PTR);
    BI(HcclAllReduce(s, r, huge, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c, st), HCCL_E_PARA);
    BI(HcclAllReduce(s, r, UINT64_MAX, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, c, st), HCCL_E_PARA);
    BI(HcclAllReduce(s, r, 16, HCCL_DATA_TYPE_FP8E4M3, HCCL_REDUCE_SUM, c, st), HCCL_E_NOT_SUPPORT);
    BI(HcclAllReduce(s, r, 16, HCCL_DATA_TYPE_HIF8, HCCL_REDUCE_PROD, c, st), HCCL_E_NOT_SUPPORT);
    BI(bi_op_ok(HcclAllReduce(NULL, NULL, 0, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c, st)),
       HCCL_SUCCESS); /* nothing to move: NULL is fine */

    /* AllGather */
    BI(HcclAllGather(s, r, 16, HCCL_DATA_TYPE_INT8, NULL, st), HCCL_E_PTR);
    BI(HcclAllGather(s, r, 16, HCCL_DATA_TYPE_INT8, bogus, st), HCCL_E_PARA);
    BI(HcclAllGather(s, r, 16, bad_t, c, st), HCCL_E_PARA);
    BI(HcclAllGather(NULL, r, 16, HCCL_DATA_TYPE_INT8, c, st), HCCL_E_PTR);
    BI(HcclAllGather(s, NULL, 16, HCCL_DATA_TYPE_INT8, c, st), HCCL_E_PTR);
    BI(HcclAllGather(s, r, huge, HCCL_DATA_TYPE_INT64, c, st), HCCL_E_PARA);

    /* AllGatherV */
    BI(HcclAllGatherV(s, 16, r, cnt, dsp, HCCL_DATA_TYPE_INT8, NULL, st), HCCL_E_PTR);
    BI(HcclAllGatherV(s, 16, r, cnt, dsp, HCCL_DATA_TYPE_INT8, bogus, st), HCCL_E_PARA);
    BI(HcclAllGatherV(s, 16, r, NULL, dsp, HCCL_DATA_TYPE_INT8, c, st), HCCL_E_PTR);
    BI(HcclAllGatherV(s, 16, r, cnt, NULL, HCCL_DATA_TYPE_INT8, c, st), HCCL_E_PTR);
    BI(HcclAllGatherV(s, 15, r, cnt, dsp, HCCL_DATA_TYPE_INT8, c, st), HCCL_E_PARA);
    BI(HcclAllGatherV(s, 16, r, cnt, dsp, bad_t, c, st), HCCL_E_PARA);
    BI(HcclAllGatherV(s, huge, r, absurd, dsp, HCCL_DATA_TYPE_INT32, c, st), HCCL_E_PARA);
    BI(HcclAllGatherV(NULL, 16, r, cnt, dsp, HCCL_DATA_TYPE_INT8, c, st), HCCL_E_PTR);
    BI(HcclAllGatherV(s, 16, NULL, cnt, dsp, HCCL_DATA_TYPE_INT8, c, st), HCCL_E_PTR);

    /* ReduceScatter */
    BI(HcclReduceScatter(s, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, NULL, st), HCCL_E_PTR);
    BI(HcclReduceScatter(s, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, bogus, st), HCCL_E_PARA);
    BI(HcclReduceScatter(s, r, 16, bad_t, HCCL_REDUCE_SUM, c, st), HCCL_E_PARA);
    BI(HcclReduceScatter(s, r, 16, HCCL_DATA_TYPE_FP32, bad_op, c, st), HCCL_E_PARA);
    BI(HcclReduceScatter(NULL, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c, st), HCCL_E_PTR);
    BI(HcclReduceScatter(s, NULL, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c, st), HCCL_E_PTR);
    BI(HcclReduceScatter(s, r, huge, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c, st), HCCL_E_PARA);
    BI(HcclReduceScatter(s, r, 16, HCCL_DATA_TYPE_FP8E5M2, HCCL_REDUCE_MAX, c, st),
       HCCL_E_NOT_SUPPORT);

    /* ReduceScatterV */
    BI(HcclReduceScatterV(s, cnt, dsp, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, NULL, st),
       HCCL_E_PTR);
    BI(HcclReduceScatterV(s, NULL, dsp, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c, st),
       HCCL_E_PTR);
    BI(HcclReduceScatterV(s, cnt, NULL, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c, st),
       HCCL_E_PTR);
    BI(HcclReduceScatterV(s, cnt, dsp, r, 17, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c, st),
       HCCL_E_PARA);
    BI(HcclReduceScatterV(s, cnt, dsp, r, 16, HCCL_DATA_TYPE_FP32, bad_op, c, st), HCCL_E_PARA);
    BI(HcclReduceScatterV(s, cnt, dsp, r, 16, bad_t, HCCL_REDUCE_SUM, c, st), HCCL_E_PARA);
    BI(HcclReduceScatterV(s, absurd, dsp, r, huge, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c, st),
       HCCL_E_PARA);
    BI(HcclReduceScatterV(NULL, cnt, dsp, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c, st),
       HCCL_E_PTR);

    /* Broadcast */
    BI(HcclBroadcast(s, 16, HCCL_DATA_TYPE_INT16, 0, NULL, st), HCCL_E_PTR);
    BI(HcclBroadcast(s, 16, HCCL_DATA_TYPE_INT16, 0, bogus, st), HCCL_E_PARA);
    BI(HcclBroadcast(s, 16, HCCL_DATA_TYPE_INT16, 1, c, st), HCCL_E_PARA);
    BI(HcclBroadcast(s, 16, HCCL_DATA_TYPE_INT16, UINT32_MAX, c, st), HCCL_E_PARA);
    BI(HcclBroadcast(NULL, 16, HCCL_DATA_TYPE_INT16, 0, c, st), HCCL_E_PTR);
    BI(HcclBroadcast(s, 16, bad_t, 0, c, st), HCCL_E_PARA);
    BI(HcclBroadcast(s, huge, HCCL_DATA_TYPE_INT16, 0, c, st), HCCL_E_PARA);

    /* Reduce */
    BI(HcclReduce(s, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0, NULL, st), HCCL_E_PTR);
    BI(HcclReduce(s, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0, bogus, st), HCCL_E_PARA);
    BI(HcclReduce(s, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 3, c, st), HCCL_E_PARA);
    BI(HcclReduce(s, r, 16, HCCL_DATA_TYPE_FP32, bad_op, 0, c, st), HCCL_E_PARA);
    BI(HcclReduce(s, r, 16, bad_t, HCCL_REDUCE_SUM, 0, c, st), HCCL_E_PARA);
    BI(HcclReduce(NULL, r, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0, c, st), HCCL_E_PTR);
    BI(HcclReduce(s, NULL, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0, c, st), HCCL_E_PTR);
    BI(HcclReduce(s, r, 16, HCCL_DATA_TYPE_INT128, HCCL_REDUCE_PROD, 0, c, st), HCCL_E_NOT_SUPPORT);

    /* Scatter */
    BI(HcclScatter(s, r, 16, HCCL_DATA_TYPE_INT32, 0, NULL, st), HCCL_E_PTR);
    BI(HcclScatter(s, r, 16, HCCL_DATA_TYPE_INT32, 0, bogus, st), HCCL_E_PARA);
    BI(HcclScatter(s, r, 16, HCCL_DATA_TYPE_INT32, 2, c, st), HCCL_E_PARA);
    BI(HcclScatter(s, r, 16, bad_t, 0, c, st), HCCL_E_PARA);
    BI(HcclScatter(NULL, r, 16, HCCL_DATA_TYPE_INT32, 0, c, st), HCCL_E_PTR); /* root's send */
    BI(HcclScatter(s, NULL, 16, HCCL_DATA_TYPE_INT32, 0, c, st), HCCL_E_PTR);
    BI(HcclScatter(s, r, huge, HCCL_DATA_TYPE_INT32, 0, c, st), HCCL_E_PARA);

    /* AlltoAll */
    BI(HcclAlltoAll(s, 16, HCCL_DATA_TYPE_INT8, r, 16, HCCL_DATA_TYPE_INT8, NULL, st), HCCL_E_PTR);
    BI(HcclAlltoAll(s, 16, HCCL_DATA_TYPE_INT8, r, 16, HCCL_DATA_TYPE_INT8, bogus, st),
       HCCL_E_PARA);
    BI(HcclAlltoAll(s, 16, HCCL_DATA_TYPE_INT8, r, 16, HCCL_DATA_TYPE_INT16, c, st), HCCL_E_PARA);
    BI(HcclAlltoAll(s, 16, HCCL_DATA_TYPE_INT8, r, 8, HCCL_DATA_TYPE_INT8, c, st), HCCL_E_PARA);
    BI(HcclAlltoAll(s, 16, bad_t, r, 16, bad_t, c, st), HCCL_E_PARA);
    BI(HcclAlltoAll(NULL, 16, HCCL_DATA_TYPE_INT8, r, 16, HCCL_DATA_TYPE_INT8, c, st), HCCL_E_PTR);
    BI(HcclAlltoAll(s, 16, HCCL_DATA_TYPE_INT8, NULL, 16, HCCL_DATA_TYPE_INT8, c, st), HCCL_E_PTR);
    BI(HcclAlltoAll(s, huge, HCCL_DATA_TYPE_INT64, r, huge, HCCL_DATA_TYPE_INT64, c, st),
       HCCL_E_PARA);

    /* AlltoAllV and AlltoAllVC */
    BI(HcclAlltoAllV(s, cnt, dsp, HCCL_DATA_TYPE_INT8, r, cnt, dsp, HCCL_DATA_TYPE_INT8, NULL, st),
       HCCL_E_PTR);
    BI(HcclAlltoAllV(s, cnt, dsp, HCCL_DATA_TYPE_INT8, r, cnt, dsp, HCCL_DATA_TYPE_INT8, bogus, st),
       HCCL_E_PARA);
    BI(HcclAlltoAllV(s, NULL, dsp, HCCL_DATA_TYPE_INT8, r, cnt, dsp, HCCL_DATA_TYPE_INT8, c, st),
       HCCL_E_PTR);
    BI(HcclAlltoAllV(s, cnt, dsp, HCCL_DATA_TYPE_INT8, r, cnt, NULL, HCCL_DATA_TYPE_INT8, c, st),
       HCCL_E_PTR);
    BI(HcclAlltoAllV(s, cnt, dsp, HCCL_DATA_TYPE_INT8, r, cnt, dsp, HCCL_DATA_TYPE_FP16, c, st),
       HCCL_E_PARA);
    BI(HcclAlltoAllV(s, cnt, dsp, bad_t, r, cnt, dsp, bad_t, c, st), HCCL_E_PARA);
    BI(HcclAlltoAllV(s, absurd, dsp, HCCL_DATA_TYPE_INT8, r, cnt, dsp, HCCL_DATA_TYPE_INT8, c, st),
       HCCL_E_PARA);
    BI(HcclAlltoAllV(NULL, cnt, dsp, HCCL_DATA_TYPE_INT8, r, cnt, dsp, HCCL_DATA_TYPE_INT8, c, st),
       HCCL_E_PTR);
    BI(HcclAlltoAllVC(s, NULL, HCCL_DATA_TYPE_INT8, r, HCCL_DATA_TYPE_INT8, c, st), HCCL_E_PTR);
    BI(HcclAlltoAllVC(s, cnt, HCCL_DATA_TYPE_INT8, r, HCCL_DATA_TYPE_INT8, NULL, st), HCCL_E_PTR);
    BI(HcclAlltoAllVC(s, cnt, HCCL_DATA_TYPE_INT8, r, HCCL_DATA_TYPE_INT32, c, st), HCCL_E_PARA);
    BI(HcclAlltoAllVC(s, absurd, HCCL_DATA_TYPE_INT8, r, HCCL_DATA_TYPE_INT8, c, st), HCCL_E_PARA);
    BI(HcclAlltoAllVC(NULL, cnt, HCCL_DATA_TYPE_INT8, r, HCCL_DATA_TYPE_INT8, c, st), HCCL_E_PTR);
    bi_still_works("collectives");
}

/* ---- point-to-point, groups, streams ---------------------------------------- */

static void test_p2p_group_stream(void **state)
{
    (void)state;
    void *s = bi.send;
    HcclComm c = bi.comm;
    aclrtStream st = bi.stream;
    HcclComm bogus = (HcclComm)(uintptr_t)0xabc000;
    BI(HcclSend(s, 16, HCCL_DATA_TYPE_INT8, 0, NULL, st), HCCL_E_PTR);
    BI(HcclSend(s, 16, HCCL_DATA_TYPE_INT8, 0, bogus, st), HCCL_E_PARA);
    BI(HcclSend(s, 16, HCCL_DATA_TYPE_INT8, 0, c, st), HCCL_E_PARA); /* to myself */
    BI(HcclSend(s, 16, HCCL_DATA_TYPE_INT8, 1, c, st), HCCL_E_PARA);
    BI(HcclSend(s, 16, (HcclDataType)99, 0, c, st), HCCL_E_PARA);
    BI(HcclRecv(s, 16, HCCL_DATA_TYPE_INT8, 0, NULL, st), HCCL_E_PTR);
    BI(HcclRecv(s, 16, HCCL_DATA_TYPE_INT8, 0, bogus, st), HCCL_E_PARA);
    BI(HcclRecv(s, 16, HCCL_DATA_TYPE_INT8, 0, c, st), HCCL_E_PARA);
    BI(HcclRecv(s, 16, HCCL_DATA_TYPE_INT8, UINT32_MAX, c, st), HCCL_E_PARA);

    HcclSendRecvItem it = {HCCL_SEND, s, 16, HCCL_DATA_TYPE_INT8, 0};
    BI(HcclBatchSendRecv(&it, 1, NULL, st), HCCL_E_PTR);
    BI(HcclBatchSendRecv(&it, 1, bogus, st), HCCL_E_PARA);
    BI(HcclBatchSendRecv(NULL, 2, c, st), HCCL_E_PTR);
    BI(HcclBatchSendRecv(&it, 1, c, st), HCCL_E_PARA); /* peer is myself */
    it.remoteRank = 9;
    BI(HcclBatchSendRecv(&it, 1, c, st), HCCL_E_PARA);
    it.remoteRank = 0;
    it.sendRecvType = (HcclSendRecvType)7;
    BI(HcclBatchSendRecv(&it, 1, c, st), HCCL_E_PARA);
    it.sendRecvType = HCCL_RECV;
    it.dataType = (HcclDataType)77;
    BI(HcclBatchSendRecv(&it, 1, c, st), HCCL_E_PARA);
    BI(bi_op_ok(HcclBatchSendRecv(NULL, 0, c, st)), HCCL_SUCCESS); /* nothing to do */

    /* Groups: a bad item fails at its call; an unmatched end fails. */
    BI(HcclGroupEnd(), HCCL_E_PARA);
    BI(HcclGroupStart(), HCCL_SUCCESS);
    BI(HcclSend(s, 16, HCCL_DATA_TYPE_INT8, 0, c, st), HCCL_E_PARA);
    BI(HcclRecv(NULL, 16, HCCL_DATA_TYPE_INT8, 3, c, st), HCCL_E_PTR);
    BI(HcclRecv(s, 16, (HcclDataType)50, 3, c, st), HCCL_E_PARA);
    BI(HcclGroupEnd(), HCCL_SUCCESS); /* nothing was queued */
    BI(HcclGroupEnd(), HCCL_E_PARA);

    /* Streams that are not streams (or no longer are). */
    int fake = 0;
    aclrtStream dead = NULL;
    assert_int_equal(aclrtCreateStream(&dead), ACL_SUCCESS);
    assert_int_equal(aclrtDestroyStream(dead), ACL_SUCCESS);
    BI(HcclAllReduce(s, bi.recv, 16, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, c, &fake), HCCL_E_PARA);
    BI(HcclAllReduce(s, bi.recv, 16, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, c, dead), HCCL_E_PARA);
    BI(HcclBarrier(c, &fake), HCCL_E_PARA);
    BI(HcclBroadcast(s, 16, HCCL_DATA_TYPE_INT8, 0, c, dead), HCCL_E_PARA);
    /* The default stream (NULL) is a stream. */
    BI(bi_op_ok(HcclBarrier(c, NULL)), HCCL_SUCCESS);
    BI(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
    bi_still_works("p2p/stream");
}

int main(void)
{
    /* Throwaway root infos stop listening after this long. */
    setenv("HCCL_CONNECT_TIMEOUT", "5", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_comm_calls),       cmocka_unit_test(test_init_args),
        cmocka_unit_test(test_memory_range),     cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_p2p_group_stream),
    };
    return cmocka_run_group_tests(tests, bi_setup, bi_teardown);
}
