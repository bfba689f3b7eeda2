/*
 * A rank that dies: np = 3 forked ranks; one of them (the victim) kills itself
 * with a signal at a chosen phase, and the two survivors must notice.
 *
 * Every rank runs the same sequence of steps: init, 20 verified AllReduce
 * ops, SetMemoryRange, ActivateCommMemory, a zero-copy and a buffered
 * AllReduce, a Barrier on the default stream, a Send/Recv ring in a group,
 * 40 queued buffered AllReduce ops of 4 MB (one sync) and 40 queued
 * zero-copy AllGather ops of 4 MB per rank (one sync). The victim dies at its phase: for a
 * "before" phase it sleeps FK_VICTIM_SLEEP_MS first, so the survivors are
 * already waiting (asleep on a futex) when it goes; for the "mid" phases it
 * queues the ops, lets them start and dies while they run; for init it dies
 * before joining, or at some point inside HcclCommInitRootInfo (a helper
 * thread runs init while the main thread dies after a delay; in the "late"
 * cases one survivor starts its init only after the death, so the victim,
 * root or not, surely died inside the join).
 *
 * What a survivor checks (the victim records CLOCK_MONOTONIC just before it
 * raises the signal, in memory shared by all ranks):
 *  - every step before the phase succeeds, the first failing step fails with
 *    HCCL_E_REMOTE, within FK_DETECT_MS of the death;
 *  - HcclGetCommAsyncError reports HCCL_E_REMOTE;
 *  - a later AllReduce fails at once (sync returns the error within
 *    FK_LATER_MS);
 *  - HcclCommDestroy returns HCCL_SUCCESS within FK_DETECT_MS, and the
 *    rank's memory and stream are released without error.
 * Init is different: a rank that never joined is indistinguishable from a
 * slow one, so init fails only after HCCL_CONNECT_TIMEOUT (3 s here) with
 * HCCL_E_TIMEOUT; the death of the root or of a rank that joined fails every
 * survivor's init with HCCL_E_REMOTE within FK_INIT_DETECT_MS of the death.
 * A root info used again after its session ended fails init at once:
 * HCCL_E_PARA while the root's process lives, HCCL_E_REMOTE once it exited. HCCL_EXEC_TIMEOUT
 * is 30 s, so every failure seen here comes from death detection, not from
 * the timeout. Signals vary (KILL, TERM, HUP, INT, USR1, ALRM: every one of
 * them ends the process without a core dump).
 *
 * The parent prints one line per case with the survivors' detection times.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "zt_launch.h"

#define FK_NRANKS 3
#define FK_VICTIM_SLEEP_MS 300
#define FK_MID_SLEEP_MS 10
#define FK_DETECT_MS 2000
#define FK_INIT_DETECT_MS 1200 /* about a second, on a loaded box */
#define FK_LATER_MS 500
#define FK_CONNECT_S 3
#define FK_BLOCK (16u << 20) /* zero-copy block: send at 0, recv at 4 MB */
#define FK_RECV_OFF (4u << 20)
#define FK_MID_OPS 40
#define FK_MAX(a, b) ((a) > (b) ? (a) : (b))
#define FK_MID_BUF_COUNT (1u << 20) /* floats per buffered op: 4 MB */
#define FK_MID_ZC_COUNT (1u << 20)  /* floats per zero-copy AllGather send: 4 MB */
#define FK_SMALL 1024
#define FK_LAUNCH_TIMEOUT_S 50

/* Steps in the order every rank runs them; a phase names the step the
 * victim dies at (before it, or during it for the MID ones). */
enum {
    FK_INIT_NOJOIN = 0, /* dies before joining (rank 2) */
    FK_INIT_ROOT,       /* the root info's owner dies before joining (rank 0) */
    FK_INIT_MID,        /* dies while HcclCommInitRootInfo runs */
    FK_STEADY,          /* dies after 10 of 20 AllReduce ops */
    FK_SETRANGE,
    FK_ACTIVATE,
    FK_OP_ZC,
    FK_OP_BUF,
    FK_BARRIER,
    FK_P2P,
    FK_MID_BUF,
    FK_MID_ZC,
    FK_NPHASES
};

static const char *const fk_phase_names[FK_NPHASES] = {
    "init-nojoin",  "init-root",   "init-mid", "steady",    "set-range",    "activate",
    "op-zero-copy", "op-buffered", "barrier",  "send-recv", "mid-buffered", "mid-zero-copy"};

/* What one survivor saw. */
typedef struct {
    int done;          /* 1: the rank reached its checks */
    int failed_step;   /* first step that failed */
    int code;          /* what it failed with */
    int64_t detect_ms; /* failure time - death time */
    int64_t later_ms;  /* a later op's call + sync */
    int later_code;
    int async_code;
    int64_t destroy_ms;
} fk_result_t;

typedef struct {
    int phase;
    int victim;
    int sig;
    int init_delay_ms; /* FK_INIT_MID: delay before the victim dies */
    int late_rank;     /* FK_INIT_MID: this rank starts its init late_ms late (-1: none) */
    int late_ms;
    int too_late; /* a MID victim found its ops complete already */
    atomic_ullong death_ns;
    atomic_ullong start_ns; /* the first rank's start (the root info is older) */
    fk_result_t res[FK_NRANKS];
} fk_shared_t;

/* One rank's resources. */
typedef struct {
    int rank;
    int device;
    aclrtStream stream;
    HcclComm comm;
    void *va; /* zero-copy reservation (one block) */
    aclrtDrvMemHandle h;
    int range_set;
    int active;
    unsigned char *plain; /* 2 * FK_BLOCK of aclrtMalloc memory */
} fk_rank_t;

static uint64_t fk_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void fk_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The victim goes: record the time, restore the default action, raise. */
static void fk_die(fk_shared_t *sh)
{
    signal(sh->sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sh->sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    atomic_store_explicit(&sh->death_ns, fk_now_ns(), memory_order_release);
    raise(sh->sig);
    for (;;) {
        pause(); /* never reached: every signal used terminates the process */
    }
}

static int fk_is_victim(const fk_shared_t *sh, int rank, int phase)
{
    return rank == sh->victim && sh->phase == phase;
}

/* The victim of a "before" phase: let the survivors start waiting, then die. */
static void fk_maybe_die(fk_shared_t *sh, int rank, int phase)
{
    if (fk_is_victim(sh, rank, phase)) {
        fk_sleep_ms(FK_VICTIM_SLEEP_MS);
        fk_die(sh);
    }
}

typedef struct {
    fk_rank_t *r;
    const HcclRootInfo *root;
    HcclResult result;
} fk_init_arg_t;

static void *fk_init_thread(void *p)
{
    fk_init_arg_t *a = p;
    a->result = HcclCommInitRootInfo(FK_NRANKS, a->root, (uint32_t)a->r->rank, &a->r->comm);
    return NULL;
}

static int fk_setup(fk_rank_t *r, int rank)
{
    memset(r, 0, sizeof(*r));
    r->rank = rank;
    uint32_t ndev = 0;
    if (aclInit(NULL) != ACL_SUCCESS || aclrtGetDeviceCount(&ndev) != ACL_SUCCESS || ndev == 0) {
        fprintf(stderr, "[rank %d] aclInit / device count failed\n", rank);
        return -1;
    }
    r->device = rank % (int)ndev;
    if (aclrtSetDevice(r->device) != ACL_SUCCESS || aclrtCreateStream(&r->stream) != ACL_SUCCESS) {
        fprintf(stderr, "[rank %d] set device / create stream failed\n", rank);
        return -1;
    }
    void *p = NULL;
    if (aclrtMalloc(&p, 2 * (size_t)FK_BLOCK, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        fprintf(stderr, "[rank %d] aclrtMalloc failed\n", rank);
        return -1;
    }
    r->plain = p;
    r->h = zt_phys_alloc(r->device, FK_BLOCK);
    if (r->h == NULL || aclrtReserveMemAddress(&r->va, FK_BLOCK, 0, NULL, 0) != ACL_SUCCESS ||
        aclrtMapMem(r->va, FK_BLOCK, 0, r->h, 0) != ACL_SUCCESS) {
        fprintf(stderr, "[rank %d] zero-copy block setup failed\n", rank);
        return -1;
    }
    return 0;
}

/* Release everything local; the communicator is already destroyed. */
static int fk_teardown(fk_rank_t *r)
{
    int bad = 0;
    if (r->va != NULL) {
        bad |= aclrtUnmapMem(r->va) != ACL_SUCCESS;
        bad |= aclrtReleaseMemAddress(r->va) != ACL_SUCCESS;
    }
    if (r->h != NULL) {
        bad |= aclrtFreePhysical(r->h) != ACL_SUCCESS;
    }
    if (r->plain != NULL) {
        bad |= aclrtFree(r->plain) != ACL_SUCCESS;
    }
    if (r->stream != NULL) {
        bad |= aclrtDestroyStream(r->stream) != ACL_SUCCESS;
    }
    if (bad) {
        fprintf(stderr, "[rank %d] teardown after the failure failed\n", r->rank);
    }
    return bad ? -1 : 0;
}

/* Sync and return what the stream reports. */
static int fk_sync(aclrtStream s)
{
    return (int)aclrtSynchronizeStream(s);
}

/* 20 small verified AllReduce ops on the plain arena; the victim of
 * FK_STEADY dies after 10. Returns the first error code (0 = all fine). */
static int fk_steady(fk_shared_t *sh, fk_rank_t *r)
{
    int32_t *in = (int32_t *)(void *)r->plain;
    int32_t *out = (int32_t *)(void *)(r->plain + FK_BLOCK);
    for (int it = 0; it < 20; it++) {
        if (it == 10) {
            fk_maybe_die(sh, r->rank, FK_STEADY);
        }
        for (int i = 0; i < FK_SMALL; i++) {
            in[i] = r->rank * 1000 + i + it;
        }
        HcclResult h = HcclAllReduce(in, out, FK_SMALL, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM,
                                     r->comm, r->stream);
        int e = h != HCCL_SUCCESS ? (int)h : fk_sync(r->stream);
        if (e != 0) {
            return e;
        }
        for (int i = 0; i < FK_SMALL; i++) {
            int32_t want = 3000 + 3 * (i + it); /* ranks 0,1,2 */
            if (out[i] != want) {
                fprintf(stderr, "[rank %d] steady op %d: out[%d] = %d, want %d\n", r->rank, it, i,
                        out[i], want);
                return -1;
            }
        }
    }
    return 0;
}

/* Send to the right, receive from the left, in one group. */
static int fk_ring(fk_rank_t *r)
{
    int n = FK_NRANKS;
    float *s = (float *)(void *)r->plain;
    float *d = (float *)(void *)(r->plain + FK_BLOCK);
    HcclResult h1 = HcclGroupStart();
    HcclResult h2 = HcclSend(s, FK_SMALL, HCCL_DATA_TYPE_FP32, (uint32_t)((r->rank + 1) % n),
                             r->comm, r->stream);
    HcclResult h3 = HcclRecv(d, FK_SMALL, HCCL_DATA_TYPE_FP32, (uint32_t)((r->rank + n - 1) % n),
                             r->comm, r->stream);
    HcclResult h4 = HcclGroupEnd();
    if (h1 != HCCL_SUCCESS || h2 != HCCL_SUCCESS || h3 != HCCL_SUCCESS) {
        return h1 != HCCL_SUCCESS ? (int)h1 : h2 != HCCL_SUCCESS ? (int)h2 : (int)h3;
    }
    return h4 != HCCL_SUCCESS ? (int)h4 : fk_sync(r->stream);
}

/* FK_MID_OPS large ops queued, one sync; the victim dies while they run. */
static int fk_mid(fk_shared_t *sh, fk_rank_t *r, int zero_copy)
{
    int phase = zero_copy ? FK_MID_ZC : FK_MID_BUF;
    int first = 0;
    for (int i = 0; i < FK_MID_OPS && first == 0; i++) {
        HcclResult h;
        if (zero_copy) {
            unsigned char *base = r->va;
            h = HcclAllGather(base, base + FK_RECV_OFF, FK_MID_ZC_COUNT, HCCL_DATA_TYPE_FP32,
                              r->comm, r->stream);
        } else {
            h = HcclAllReduce(r->plain, r->plain + FK_BLOCK, FK_MID_BUF_COUNT, HCCL_DATA_TYPE_FP32,
                              HCCL_REDUCE_SUM, r->comm, r->stream);
        }
        first = (int)h;
    }
    if (fk_is_victim(sh, r->rank, phase)) {
        fk_sleep_ms(FK_MID_SLEEP_MS);
        /* The case is only meaningful if the ops are still running. */
        aclrtStreamStatus st = ACL_STREAM_STATUS_COMPLETE;
        if (aclrtStreamQuery(r->stream, &st) != ACL_SUCCESS || st == ACL_STREAM_STATUS_COMPLETE) {
            fprintf(stderr, "[rank %d] %s: the ops finished before the victim died\n", r->rank,
                    fk_phase_names[phase]);
            sh->too_late = 1;
        }
        fk_die(sh);
    }
    int e = fk_sync(r->stream);
    return first != 0 ? first : e;
}

/* Run step s; 0 on success or the error it returned. */
static int fk_step(fk_shared_t *sh, fk_rank_t *r, int s)
{
    HcclResult h = HCCL_SUCCESS;
    unsigned char *zc = r->va;
    switch (s) {
    case FK_STEADY:
        return fk_steady(sh, r);
    case FK_SETRANGE:
        fk_maybe_die(sh, r->rank, s);
        h = HcclCommSetMemoryRange(r->comm, r->va, FK_BLOCK, 0, 0);
        r->range_set = h == HCCL_SUCCESS;
        return (int)h;
    case FK_ACTIVATE:
        fk_maybe_die(sh, r->rank, s);
        h = HcclCommActivateCommMemory(r->comm, r->va, FK_BLOCK, 0, r->h, 0);
        r->active = h == HCCL_SUCCESS;
        return (int)h;
    case FK_OP_ZC:
        fk_maybe_die(sh, r->rank, s);
        h = HcclAllReduce(zc, zc + FK_RECV_OFF, FK_SMALL, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM,
                          r->comm, r->stream);
        return h != HCCL_SUCCESS ? (int)h : fk_sync(r->stream);
    case FK_OP_BUF:
        fk_maybe_die(sh, r->rank, s);
        h = HcclAllReduce(r->plain, r->plain + FK_BLOCK, FK_SMALL, HCCL_DATA_TYPE_FP32,
                          HCCL_REDUCE_MAX, r->comm, r->stream);
        return h != HCCL_SUCCESS ? (int)h : fk_sync(r->stream);
    case FK_BARRIER:
        fk_maybe_die(sh, r->rank, s);
        h = HcclBarrier(r->comm, NULL);
        return h != HCCL_SUCCESS ? (int)h : fk_sync(NULL);
    case FK_P2P:
        fk_maybe_die(sh, r->rank, s);
        return fk_ring(r);
    case FK_MID_BUF:
        return fk_mid(sh, r, 0);
    case FK_MID_ZC:
        return fk_mid(sh, r, 1);
    default:
        return 0;
    }
}

/* After a failure: async error, a later op, destroy. Returns failures. */
static int fk_after(fk_shared_t *sh, fk_rank_t *r, fk_result_t *res)
{
    int fails = 0;
    HcclResult async = HCCL_SUCCESS;
    if (HcclGetCommAsyncError(r->comm, &async) != HCCL_SUCCESS) {
        fprintf(stderr, "[rank %d] HcclGetCommAsyncError failed\n", r->rank);
        fails++;
    }
    res->async_code = (int)async;
    if (async != HCCL_E_REMOTE) {
        fprintf(stderr, "[rank %d] %s: HcclGetCommAsyncError reports %d, want HCCL_E_REMOTE\n",
                r->rank, fk_phase_names[sh->phase], (int)async);
        fails++;
    }
    uint64_t t0 = fk_now_ns();
    HcclResult h = HcclAllReduce(r->plain, r->plain + FK_BLOCK, FK_SMALL, HCCL_DATA_TYPE_FP32,
                                 HCCL_REDUCE_SUM, r->comm, r->stream);
    int e = h != HCCL_SUCCESS ? (int)h : fk_sync(r->stream);
    res->later_ms = (int64_t)((fk_now_ns() - t0) / 1000000u);
    res->later_code = e;
    if (e == 0 || res->later_ms > FK_LATER_MS) {
        fprintf(stderr,
                "[rank %d] %s: a later op returned %d after %lld ms (want an error "
                "within %d ms)\n",
                r->rank, fk_phase_names[sh->phase], e, (long long)res->later_ms, FK_LATER_MS);
        fails++;
    }
    t0 = fk_now_ns();
    h = HcclCommDestroy(r->comm);
    res->destroy_ms = (int64_t)((fk_now_ns() - t0) / 1000000u);
    r->comm = NULL;
    if (h != HCCL_SUCCESS || res->destroy_ms > FK_DETECT_MS) {
        fprintf(stderr, "[rank %d] %s: HcclCommDestroy returned %d after %lld ms\n", r->rank,
                fk_phase_names[sh->phase], (int)h, (long long)res->destroy_ms);
        fails++;
    }
    return fails;
}

static int64_t fk_since_death_ms(const fk_shared_t *sh, uint64_t t)
{
    uint64_t d = atomic_load_explicit(&sh->death_ns, memory_order_acquire);
    return d == 0 ? -1 : (int64_t)(t - d) / 1000000;
}

/* Init and its failure. Returns 1 when init failed (checked), 0 when it
 * worked, -1 on a broken check. */
static int fk_init(fk_shared_t *sh, fk_rank_t *r, const HcclRootInfo *root, fk_result_t *res)
{
    if (fk_is_victim(sh, r->rank, FK_INIT_NOJOIN) || fk_is_victim(sh, r->rank, FK_INIT_ROOT)) {
        fk_die(sh);
    }
    if (fk_is_victim(sh, r->rank, FK_INIT_MID)) {
        fk_init_arg_t a = {r, root, HCCL_E_INTERNAL};
        pthread_t th;
        if (pthread_create(&th, NULL, fk_init_thread, &a) != 0) {
            return -1;
        }
        fk_sleep_ms(sh->init_delay_ms);
        fk_die(sh);
    }
    if (sh->phase == FK_INIT_MID && r->rank == sh->late_rank) {
        fk_sleep_ms(sh->late_ms); /* so the victim surely joined, and died, first */
    }
    uint64_t t0 = fk_now_ns();
    HcclResult h = HcclCommInitRootInfo(FK_NRANKS, root, (uint32_t)r->rank, &r->comm);
    uint64_t t1 = fk_now_ns();
    if (h == HCCL_SUCCESS) {
        return 0;
    }
    r->comm = NULL;
    res->failed_step = sh->phase <= FK_INIT_MID ? sh->phase : -1;
    res->code = (int)h;
    int64_t took = (int64_t)(t1 - t0) / 1000000;
    /* From the first rank's start: a lower bound of the root's age. */
    int64_t since_start = (int64_t)(t1 - atomic_load(&sh->start_ns)) / 1000000;
    res->detect_ms = fk_since_death_ms(sh, t1);
    int64_t limit = FK_CONNECT_S * 1000 + FK_DETECT_MS;
    int ok = sh->phase <= FK_INIT_MID && took <= limit;
    if (sh->phase == FK_INIT_NOJOIN) {
        /* Nobody can tell a rank that never comes from a slow one: the root
         * gives up at its connect timeout (it started first) and fails every
         * joined rank with HCCL_E_TIMEOUT. */
        ok = ok && h == HCCL_E_TIMEOUT && since_start >= FK_CONNECT_S * 1000 - 100;
    } else if (h == HCCL_E_TIMEOUT) {
        /* A victim that died before it connected never joined: the same. */
        ok = ok && sh->phase == FK_INIT_MID && since_start >= FK_CONNECT_S * 1000 - 100;
    } else {
        /* A dead root or a dead joined rank: one code, about at once. */
        ok = ok && h == HCCL_E_REMOTE && res->detect_ms >= 0 && res->detect_ms <= FK_INIT_DETECT_MS;
    }
    if (!ok) {
        fprintf(stderr,
                "[rank %d] %s: init returned %d after %lld ms, %lld ms after the death (limit "
                "%lld ms; a death must give HCCL_E_REMOTE within %d ms)\n",
                r->rank, fk_phase_names[sh->phase], (int)h, (long long)took,
                (long long)res->detect_ms, (long long)limit, FK_INIT_DETECT_MS);
        return -1;
    }
    if (h == HCCL_E_TIMEOUT) {
        res->detect_ms = took;
    }
    return 1;
}

static int fk_rank_main(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    fk_shared_t *sh = arg;
    fk_result_t *res = &sh->res[rank];
    fk_rank_t r;
    (void)nranks;
    res->failed_step = -1;
    unsigned long long zero = 0;
    atomic_compare_exchange_strong(&sh->start_ns, &zero, fk_now_ns());
    if (fk_setup(&r, rank) != 0) {
        return 1;
    }
    int fails = 0;
    int in = fk_init(sh, &r, root, res);
    if (in != 0) {
        res->done = 1;
        return (in < 0) + (fk_teardown(&r) != 0);
    }
    int failed = 0;
    for (int s = FK_STEADY; s < FK_NPHASES && !failed; s++) {
        int e = fk_step(sh, &r, s);
        if (e == 0) {
            continue;
        }
        uint64_t t = fk_now_ns();
        failed = 1;
        res->failed_step = s;
        res->code = e;
        res->detect_ms = fk_since_death_ms(sh, t);
        /* The first failure must be at the death's step (or the first step
         * that needs the peers after it: Activate is local). */
        int expected = s == sh->phase || (sh->phase == FK_ACTIVATE && s == FK_OP_ZC) ||
                       (sh->phase <= FK_INIT_MID && s == FK_STEADY);
        if (!expected || e != HCCL_E_REMOTE || res->detect_ms < 0 ||
            res->detect_ms > FK_DETECT_MS) {
            fprintf(stderr,
                    "[rank %d] %s: step %s failed with %d, %lld ms after the death "
                    "(want HCCL_E_REMOTE at step %s within %d ms)\n",
                    rank, fk_phase_names[sh->phase], fk_phase_names[s], e,
                    (long long)res->detect_ms, fk_phase_names[sh->phase], FK_DETECT_MS);
            fails++;
        }
        fails += fk_after(sh, &r, res);
    }
    if (!failed) {
        fprintf(stderr, "[rank %d] %s: every step succeeded although rank %d died\n", rank,
                fk_phase_names[sh->phase], sh->victim);
        fails++;
        if (r.active) {
            HcclCommDeactivateCommMemory(r.comm, r.va);
        }
        if (r.range_set) {
            HcclCommUnsetMemoryRange(r.comm, r.va);
        }
        HcclCommDestroy(r.comm);
    }
    fails += fk_teardown(&r) != 0;
    res->done = 1;
    return fails;
}

/* Run one case and print its figures; returns failed survivors. */
static int fk_run_late(int phase, int victim, int sig, int init_delay_ms, int late_rank,
                       int late_ms)
{
    fk_shared_t *sh =
        mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    sh->phase = phase;
    sh->victim = victim;
    sh->sig = sig;
    sh->init_delay_ms = init_delay_ms;
    sh->late_rank = late_rank;
    sh->late_ms = late_ms;
    atomic_init(&sh->death_ns, 0);
    atomic_init(&sh->start_ns, 0);
    int failed = zt_launch_procs(FK_NRANKS, fk_rank_main, sh, FK_LAUNCH_TIMEOUT_S);
    int bad = 0;
    char line[512];
    int off = snprintf(line, sizeof(line), "kill %-13s victim %d sig %-2d:", fk_phase_names[phase],
                       victim, sig);
    for (int r = 0; r < FK_NRANKS; r++) {
        if (r == victim) {
            continue;
        }
        const fk_result_t *x = &sh->res[r];
        bad += !x->done;
        off += snprintf(line + off, sizeof(line) - (size_t)off,
                        " rank %d: %d at %s after %lld ms (later op %lld ms, destroy %lld ms);", r,
                        x->code, x->failed_step >= 0 ? fk_phase_names[x->failed_step] : "-",
                        (long long)x->detect_ms, (long long)x->later_ms, (long long)x->destroy_ms);
        if (off >= (int)sizeof(line)) {
            break;
        }
    }
    printf("%s\n", line);
    fflush(stdout);
    int died = atomic_load(&sh->death_ns) != 0 && !sh->too_late;
    munmap(sh, sizeof(*sh));
    if (!died) {
        fprintf(stderr, "%s: the victim did not reach its phase\n", fk_phase_names[phase]);
        return 1 + bad;
    }
    /* zt_launch_procs counts the victim (killed by its signal) as failed. */
    return failed - 1 + bad;
}

static int fk_run(int phase, int victim, int sig, int init_delay_ms)
{
    return fk_run_late(phase, victim, sig, init_delay_ms, -1, 0);
}

static void test_kill_init_nojoin(void **state)
{
    (void)state;
    assert_int_equal(fk_run(FK_INIT_NOJOIN, 2, SIGKILL, 0), 0);
}

static void test_kill_init_root(void **state)
{
    (void)state;
    assert_int_equal(fk_run(FK_INIT_ROOT, 0, SIGTERM, 0), 0);
}

static void test_kill_init_mid(void **state)
{
    (void)state;
    static const int delays[] = {1, 8, 25};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fk_run(FK_INIT_MID, 1, SIGKILL, delays[i]), 0);
    }
    /* A rank that joined and died while another had not come yet: rank 0
     * waits in the join, rank 2 comes 300 ms after the death. */
    assert_int_equal(fk_run_late(FK_INIT_MID, 1, SIGKILL, 100, 2, 400), 0);
    /* The root's process itself, while its own init runs: at some point,
     * and surely inside the join (rank 2 comes 300 ms after the death). */
    assert_int_equal(fk_run(FK_INIT_MID, 0, SIGKILL, 8), 0);
    assert_int_equal(fk_run_late(FK_INIT_MID, 0, SIGKILL, 100, 2, 400), 0);
}

/* ---- a root info used again --------------------------------------------------------- */

typedef struct {
    HcclRootInfo root; /* written by rank 0 of the first session */
    int code[2];
    int64_t ms[2];
    atomic_int done; /* ranks through their second init */
} fk_reuse_t;

/* Two ranks: init, destroy, then init again with the same root info. */
static int fk_reuse_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    fk_reuse_t *x = arg;
    fk_rank_t r;
    if (fk_setup(&r, rank) != 0) {
        return 1;
    }
    int bad = HcclCommInitRootInfo((uint32_t)nranks, root, (uint32_t)rank, &r.comm) != 0;
    bad += !bad && HcclCommDestroy(r.comm) != HCCL_SUCCESS;
    if (rank == 0) {
        x->root = *root;
    }
    uint64_t t0 = fk_now_ns();
    HcclComm again = NULL;
    x->code[rank] = (int)HcclCommInitRootInfo((uint32_t)nranks, root, (uint32_t)rank, &again);
    x->ms[rank] = (int64_t)(fk_now_ns() - t0) / 1000000;
    /* The root's process (rank 0) stays until both tried: it is alive here. */
    atomic_fetch_add(&x->done, 1);
    while (atomic_load(&x->done) < nranks) {
        fk_sleep_ms(1);
    }
    r.comm = NULL;
    return bad + (fk_teardown(&r) != 0);
}

/* A process that joins with a root info whose root process has exited. */
static int fk_reuse_late(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    fk_reuse_t *x = arg;
    (void)root;
    (void)nranks;
    fk_rank_t r;
    if (fk_setup(&r, rank) != 0) {
        return 1;
    }
    uint64_t t0 = fk_now_ns();
    HcclComm c = NULL;
    x->code[rank] = (int)HcclCommInitRootInfo(2, &x->root, (uint32_t)rank, &c);
    x->ms[rank] = (int64_t)(fk_now_ns() - t0) / 1000000;
    return fk_teardown(&r) != 0;
}

static void test_kill_init_reuse(void **state)
{
    (void)state;
    fk_reuse_t *x =
        mmap(NULL, sizeof(*x), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(x != MAP_FAILED);
    memset(x, 0, sizeof(*x));
    assert_int_equal(zt_launch_procs(2, fk_reuse_rank, x, FK_LAUNCH_TIMEOUT_S), 0);
    printf("root info reused, root alive: codes %d/%d after %lld/%lld ms\n", x->code[0], x->code[1],
           (long long)x->ms[0], (long long)x->ms[1]);
    int alive[2] = {x->code[0], x->code[1]};
    int64_t alive_ms = FK_MAX(x->ms[0], x->ms[1]);
    /* Its root process exited with the first launch: two new processes. */
    assert_int_equal(zt_launch_procs(2, fk_reuse_late, x, FK_LAUNCH_TIMEOUT_S), 0);
    printf("root info reused, root gone: codes %d/%d after %lld/%lld ms\n", x->code[0], x->code[1],
           (long long)x->ms[0], (long long)x->ms[1]);
    fflush(stdout);
    assert_int_equal(alive[0], HCCL_E_PARA);
    assert_int_equal(alive[1], HCCL_E_PARA);
    assert_true(alive_ms < 1000);
    assert_int_equal(x->code[0], HCCL_E_REMOTE);
    assert_int_equal(x->code[1], HCCL_E_REMOTE);
    assert_true(FK_MAX(x->ms[0], x->ms[1]) < 1000);
    munmap(x, sizeof(*x));
}

static void test_kill_steady(void **state)
{
    (void)state;
    assert_int_equal(fk_run(FK_STEADY, 1, SIGKILL, 0), 0);
}

static void test_kill_set_range(void **state)
{
    (void)state;
    assert_int_equal(fk_run(FK_SETRANGE, 1, SIGHUP, 0), 0);
}

static void test_kill_activate(void **state)
{
    (void)state;
    assert_int_equal(fk_run(FK_ACTIVATE, 2, SIGKILL, 0), 0);
}

static void test_kill_op_zero_copy(void **state)
{
    (void)state;
    assert_int_equal(fk_run(FK_OP_ZC, 0, SIGINT, 0), 0);
}

static void test_kill_op_buffered(void **state)
{
    (void)state;
    assert_int_equal(fk_run(FK_OP_BUF, 1, SIGUSR1, 0), 0);
}

static void test_kill_barrier(void **state)
{
    (void)state;
    assert_int_equal(fk_run(FK_BARRIER, 2, SIGALRM, 0), 0);
}

static void test_kill_send_recv(void **state)
{
    (void)state;
    assert_int_equal(fk_run(FK_P2P, 0, SIGKILL, 0), 0);
}

static void test_kill_mid_buffered(void **state)
{
    (void)state;
    assert_int_equal(fk_run(FK_MID_BUF, 2, SIGKILL, 0), 0);
}

static void test_kill_mid_zero_copy(void **state)
{
    (void)state;
    assert_int_equal(fk_run(FK_MID_ZC, 1, SIGKILL, 0), 0);
}

int main(void)
{
    /* Read by every rank at its first library call (rank 0's is in the
     * launcher, before the rank function runs): set them before forking. */
    setenv("HCCL_EXEC_TIMEOUT", "30", 1);
    setenv("HCCL_CONNECT_TIMEOUT", "3", 1);
    setenv("HCCL_BUFFSIZE", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_init_nojoin),   cmocka_unit_test(test_kill_init_root),
        cmocka_unit_test(test_kill_init_mid),      cmocka_unit_test(test_kill_init_reuse),
        cmocka_unit_test(test_kill_steady),        cmocka_unit_test(test_kill_set_range),
        cmocka_unit_test(test_kill_activate),      cmocka_unit_test(test_kill_op_zero_copy),
        cmocka_unit_test(test_kill_op_buffered),   cmocka_unit_test(test_kill_barrier),
        cmocka_unit_test(test_kill_send_recv),     cmocka_unit_test(test_kill_mid_buffered),
        cmocka_unit_test(test_kill_mid_zero_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
