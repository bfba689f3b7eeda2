/*
 * A rank that is alive but stuck: np = 3 forked ranks; the victim stops
 * itself with SIGSTOP (the whole process, stream workers included) at a
 * chosen point, and the two survivors must give up with HCCL_E_TIMEOUT after
 * the exec timeout instead of waiting forever:
 *  - before an AllReduce, HCCL_EXEC_TIMEOUT=3;
 *  - before an AllGather with HCCL_EXEC_TIMEOUT=30 but
 *    HcclCommConfig.hcclExecTimeOut = 2 (the config wins);
 *  - in the middle of 40 queued 4 MB AllReduce ops;
 *  - before a Send/Recv ring;
 *  - before HcclCommInitRootInfo, HCCL_CONNECT_TIMEOUT=3: init gives up.
 * The first survivor to time out raises its error flag; the other may see
 * that flag before its own clock runs out, and as the rank it waits for is
 * the same stuck one, it fails with HCCL_E_TIMEOUT too: every case wants
 * HCCL_E_TIMEOUT from both survivors within [timeout - 1 s, timeout + 2 s]
 * of the call (the other survivor's op may have started earlier). Then, as for a dead peer:
 * HcclGetCommAsyncError reports the failure, a later op fails at once, HcclCommDestroy returns.
 *
 * When both survivors are done, one of them sends SIGCONT: the stuck rank
 * resumes where it stopped and its own op (or init) must fail within 2 s
 * (its peers flagged the communicator broken or are gone) rather than hang;
 * it then destroys its communicator and exits normally.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "zt_launch.h"

#define FS_NRANKS 3
#define FS_VICTIM 1
#define FS_SMALL 4096
#define FS_BIG (1u << 20) /* floats: 4 MB */
#define FS_MID_OPS 40
#define FS_SLACK_MS 2000
#define FS_LAUNCH_TIMEOUT_S 50

enum { FS_OP, FS_CONFIG, FS_MID, FS_P2P, FS_INIT };

static const char *const fs_case_names[] = {"op", "config", "mid-op", "send-recv", "init"};

typedef struct {
    int kind;
    int timeout_ms; /* the timeout in force for the case */
    atomic_int victim_pid;
    atomic_int survivors_done;
    int code[FS_NRANKS]; /* first failure of each rank */
    int64_t took_ms[FS_NRANKS];
    int ok[FS_NRANKS]; /* 1: the rank's own checks passed */
} fs_shared_t;

static uint64_t fs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int64_t fs_ms_since(uint64_t t0)
{
    return (int64_t)((fs_now_ns() - t0) / 1000000u);
}

static void fs_stop_self(fs_shared_t *sh)
{
    atomic_store(&sh->victim_pid, (int)getpid());
    raise(SIGSTOP);
}

/* Send to the right, receive from the left, in one group; then sync. */
static int fs_ring(zt_env_t *e)
{
    int n = e->nranks;
    unsigned char *s = e->plain;
    unsigned char *d = e->plain + e->half;
    HcclResult h[4];
    h[0] = HcclGroupStart();
    h[1] = HcclSend(s, FS_SMALL, HCCL_DATA_TYPE_FP32, (uint32_t)((e->rank + 1) % n), e->comm,
                    e->stream);
    h[2] = HcclRecv(d, FS_SMALL, HCCL_DATA_TYPE_FP32, (uint32_t)((e->rank + n - 1) % n), e->comm,
                    e->stream);
    h[3] = HcclGroupEnd();
    for (int i = 0; i < 4; i++) {
        if (h[i] != HCCL_SUCCESS) {
            return (int)h[i];
        }
    }
    return (int)aclrtSynchronizeStream(e->stream);
}

/* The op of the case (the victim stops first, or in the middle). */
static int fs_op(fs_shared_t *sh, zt_env_t *e, int victim)
{
    unsigned char *in = e->plain;
    unsigned char *out = e->plain + e->half;
    HcclResult h = HCCL_SUCCESS;
    switch (sh->kind) {
    case FS_OP:
        h = HcclAllReduce(in, out, FS_SMALL, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, e->comm,
                          e->stream);
        break;
    case FS_CONFIG:
        h = HcclAllGather(in, out, FS_SMALL, HCCL_DATA_TYPE_INT8, e->comm, e->stream);
        break;
    case FS_MID:
        for (int i = 0; i < FS_MID_OPS && h == HCCL_SUCCESS; i++) {
            h = HcclAllReduce(in, out, FS_BIG, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, e->comm,
                              e->stream);
        }
        if (victim) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
            fs_stop_self(sh);
        }
        break;
    case FS_P2P:
        return fs_ring(e);
    default:
        break;
    }
    if (h != HCCL_SUCCESS) {
        return (int)h;
    }
    return (int)aclrtSynchronizeStream(e->stream);
}

/* After the failure: async error, a later op, then teardown. */
static int fs_after(zt_env_t *e, int code)
{
    int fails = 0;
    HcclResult async = HCCL_SUCCESS;
    if (HcclGetCommAsyncError(e->comm, &async) != HCCL_SUCCESS || async != (HcclResult)code) {
        fprintf(stderr, "[rank %d] HcclGetCommAsyncError reports %d, want %d\n", e->rank,
                (int)async, code);
        fails++;
    }
    uint64_t t0 = fs_now_ns();
    HcclResult h = HcclAllReduce(e->plain, e->plain + e->half, 16, HCCL_DATA_TYPE_INT32,
                                 HCCL_REDUCE_SUM, e->comm, e->stream);
    int later = h != HCCL_SUCCESS ? (int)h : (int)aclrtSynchronizeStream(e->stream);
    int64_t ms = fs_ms_since(t0);
    if (later == 0 || ms > 500) {
        fprintf(stderr, "[rank %d] a later op returned %d after %lld ms (want an error at once)\n",
                e->rank, later, (long long)ms);
        fails++;
    }
    t0 = fs_now_ns();
    if (zt_env_close(e) != 0 || fs_ms_since(t0) > FS_SLACK_MS) {
        fprintf(stderr, "[rank %d] teardown failed or took %lld ms\n", e->rank,
                (long long)fs_ms_since(t0));
        fails++;
    }
    return fails;
}

/* Survivor: the op must time out (or see the other survivor's timeout). */
static int fs_survivor_check(fs_shared_t *sh, int rank, int code, int64_t took)
{
    sh->code[rank] = code;
    sh->took_ms[rank] = took;
    /* Its own clock ran out, or it saw the other survivor's timeout (that
     * one may have started its op a little earlier): HCCL_E_TIMEOUT either
     * way, since both wait for the same stuck rank. */
    int lo = sh->timeout_ms - 1000;
    int hi = sh->timeout_ms + FS_SLACK_MS;
    if (code != HCCL_E_TIMEOUT || took < lo || took > hi) {
        fprintf(stderr,
                "[rank %d] %s: returned %d after %lld ms (want HCCL_E_TIMEOUT within "
                "[%d, %d] ms)\n",
                rank, fs_case_names[sh->kind], code, (long long)took, lo, hi);
        return 1;
    }
    return 0;
}

/* Wake the stuck rank once both survivors are through their checks. */
static void fs_survivor_done(fs_shared_t *sh, int rank)
{
    if (atomic_fetch_add(&sh->survivors_done, 1) + 1 == FS_NRANKS - 1) {
        while (atomic_load(&sh->victim_pid) == 0) {
            usleep(1000);
        }
        kill(atomic_load(&sh->victim_pid), SIGCONT);
    }
    (void)rank;
}

static int fs_init_case(fs_shared_t *sh, int rank, int nranks, const HcclRootInfo *root)
{
    int victim = rank == FS_VICTIM;
    if (victim) {
        fs_stop_self(sh);
    }
    HcclComm comm = NULL;
    int fails = 0;
    if (aclInit(NULL) == ACL_ERROR_INVALID_PARAM || aclrtSetDevice(0) != ACL_SUCCESS) {
        return 1;
    }
    uint64_t t0 = fs_now_ns();
    HcclResult h = HcclCommInitRootInfo((uint32_t)nranks, root, (uint32_t)rank, &comm);
    int64_t took = fs_ms_since(t0);
    sh->code[rank] = (int)h;
    sh->took_ms[rank] = took;
    if (h == HCCL_SUCCESS) {
        fprintf(stderr, "[rank %d] init: succeeded although rank %d is stopped\n", rank, FS_VICTIM);
        HcclCommDestroy(comm);
        fails++;
    } else if (victim) {
        /* Resumed after the others gave up: its own init must fail too. */
        if (took > sh->timeout_ms + FS_SLACK_MS) {
            fprintf(stderr, "[rank %d] init: the resumed rank failed only after %lld ms\n", rank,
                    (long long)took);
            fails++;
        }
    } else {
        /* HCCL_E_TIMEOUT, or HCCL_E_REMOTE when the other survivor gave up
         * first and left the rendezvous. */
        int lo = sh->timeout_ms - 500;
        int hi = sh->timeout_ms + FS_SLACK_MS;
        if ((h != HCCL_E_TIMEOUT && h != HCCL_E_REMOTE) || took < lo || took > hi) {
            fprintf(stderr,
                    "[rank %d] init: returned %d after %lld ms (want HCCL_E_TIMEOUT in "
                    "[%d, %d] ms)\n",
                    rank, (int)h, (long long)took, lo, hi);
            fails++;
        }
        fs_survivor_done(sh, rank);
        /* Rank 0 hosts the root listener: it stays until the other survivor
         * is through, so nobody sees the listener vanish with its process. */
        for (int i = 0; i < 10000 && atomic_load(&sh->survivors_done) < FS_NRANKS - 1; i++) {
            usleep(1000);
        }
    }
    sh->ok[rank] = fails == 0;
    return fails;
}

static int fs_rank_main(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    fs_shared_t *sh = arg;
    if (sh->kind == FS_INIT) {
        return fs_init_case(sh, rank, nranks, root);
    }
    int victim = rank == FS_VICTIM;
    HcclCommConfig cfg;
    HcclCommConfigInit(&cfg);
    cfg.hcclExecTimeOut = 2;
    zt_env_t e;
    if (zt_env_open(&e, rank, nranks, root, sh->kind == FS_CONFIG ? &cfg : NULL) != 0 ||
        zt_env_arena(&e, (size_t)FS_BIG * 4) != 0) {
        return 1;
    }
    /* One good op first: the communicator works. */
    if (HcclAllReduce(e.plain, e.plain + e.half, 64, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, e.comm,
                      e.stream) != HCCL_SUCCESS ||
        aclrtSynchronizeStream(e.stream) != ACL_SUCCESS) {
        fprintf(stderr, "[rank %d] the first op failed\n", rank);
        return 1;
    }
    if (victim && sh->kind != FS_MID) {
        fs_stop_self(sh);
    }
    uint64_t t0 = fs_now_ns();
    int code = fs_op(sh, &e, victim);
    int64_t took = fs_ms_since(t0);
    int fails = 0;
    if (victim) {
        /* Resumed: the peers gave up on this communicator. */
        sh->code[rank] = code;
        sh->took_ms[rank] = took;
        if (code == 0) {
            fprintf(stderr, "[rank %d] %s: the resumed rank's op succeeded\n", rank,
                    fs_case_names[sh->kind]);
            fails++;
        }
        HcclResult d = HcclCommDestroy(e.comm);
        e.comm = NULL;
        fails += d != HCCL_SUCCESS;
        fails += zt_env_close(&e) != 0;
    } else {
        fails += fs_survivor_check(sh, rank, code, took);
        fails += fs_after(&e, code);
        fs_survivor_done(sh, rank);
    }
    sh->ok[rank] = fails == 0;
    return fails;
}

static void fs_run(int kind, const char *exec_timeout, int timeout_ms)
{
    setenv("HCCL_EXEC_TIMEOUT", exec_timeout, 1);
    fs_shared_t *sh =
        mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    sh->kind = kind;
    sh->timeout_ms = timeout_ms;
    int failed = zt_launch_procs(FS_NRANKS, fs_rank_main, sh, FS_LAUNCH_TIMEOUT_S);
    int timeouts = 0;
    for (int r = 0; r < FS_NRANKS; r++) {
        timeouts += r != FS_VICTIM && sh->code[r] == HCCL_E_TIMEOUT;
    }
    printf("stop %-9s (timeout %d ms): rank 0: %d after %lld ms; rank 2: %d after %lld ms; "
           "resumed rank 1: %d after %lld ms\n",
           fs_case_names[kind], timeout_ms, sh->code[0], (long long)sh->took_ms[0], sh->code[2],
           (long long)sh->took_ms[2], sh->code[1], (long long)sh->took_ms[1]);
    fflush(stdout);
    int all_ok = sh->ok[0] && sh->ok[1] && sh->ok[2];
    munmap(sh, sizeof(*sh));
    assert_int_equal(failed, 0);
    assert_true(all_ok);
    assert_true(timeouts >= 1);
}

static void test_stop_before_op(void **state)
{
    (void)state;
    fs_run(FS_OP, "3", 3000);
}

static void test_stop_config_timeout(void **state)
{
    (void)state;
    fs_run(FS_CONFIG, "30", 2000);
}

static void test_stop_mid_op(void **state)
{
    (void)state;
    fs_run(FS_MID, "3", 3000);
}

static void test_stop_send_recv(void **state)
{
    (void)state;
    fs_run(FS_P2P, "3", 3000);
}

static void test_stop_before_init(void **state)
{
    (void)state;
    fs_run(FS_INIT, "3", 3000);
}

int main(void)
{
    /* Read once per process at the first library call; every rank is a fresh
     * fork, and rank 0's first call is in the launcher, so set them here. */
    setenv("HCCL_CONNECT_TIMEOUT", "3", 1);
    setenv("HCCL_BUFFSIZE", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_before_op),   cmocka_unit_test(test_stop_config_timeout),
        cmocka_unit_test(test_stop_mid_op),      cmocka_unit_test(test_stop_send_recv),
        cmocka_unit_test(test_stop_before_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
