/*
 * Faults across namespace "hosts": 2 hosts x 2 ranks run verified AllReduce
 * ops of 1 MiB back to back; then, from this parent process, either host
 * 2's link goes down (its veth port on the switch set down: carrier lost,
 * nothing reaches or leaves the host) or both ranks of host 2 are killed
 * with SIGKILL. Every surviving rank must get an error from the op:
 *  - link down: nothing tells a peer (no reset, no close), so every rank,
 *    on either host, fails with HCCL_E_TIMEOUT within HCCL_EXEC_TIMEOUT
 *    (8 s here) plus MH_SLACK_S of the fault;
 *  - killed host: the kernel closes the dead ranks' connections, so the
 *    survivors fail with HCCL_E_REMOTE within MH_KILL_S, long before the
 *    timeout;
 * HcclGetCommAsyncError must report the same code, and HcclCommDestroy must
 * return HCCL_SUCCESS within MH_DESTROY_S. The parent prints every rank's
 * detection and destroy times.
 *
 * Usage: test_mh_fault TAG NETNS_SH (through tests/multihost/run.sh 2).
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
#include "zt_netns.h"

#define MH_NRANKS 4
#define MH_EXEC_S 8
#define MH_SLACK_S 4
#define MH_KILL_S 3
#define MH_DESTROY_S 5
#define MH_COUNT (256 * 1024) /* fp32: 1 MiB */
#define MH_WARM 5
#define MH_LAUNCH_S 90

/* What each rank reports to the parent (MAP_SHARED, seen across fork). */
typedef struct {
    atomic_int ready; /* the warm-up ops passed */
    int ok_ops;       /* verified ops before the error */
    int err;          /* HcclResult of the first failing op */
    int async;        /* HcclGetCommAsyncError afterwards */
    int destroy;      /* HcclCommDestroy's result */
    double t_err;     /* CLOCK_MONOTONIC when the error came back */
    double destroy_s; /* how long HcclCommDestroy took */
} mh_rank_t;

typedef struct {
    mh_rank_t r[MH_NRANKS];
    atomic_int stop; /* the parent gave up: ranks return */
} mh_shared_t;

static zt_hosts_t mh_hosts;

static double mh_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One AllReduce of MH_COUNT fp32 (x[i] = rank + 1 + i % 7), synchronised and checked. */
static HcclResult mh_op(zt_env_t *env, float *buf)
{
    HcclResult r = zt_ramp_allreduce(env, buf, MH_COUNT);
    if (r != HCCL_SUCCESS) {
        return r;
    }
    for (int i = 0; i < MH_COUNT; i++) {
        float want = zt_ramp_sum(env->nranks, (size_t)i);
        if (buf[i] != want) {
            fprintf(stderr, "[rank %d] element %d: %g, want %g\n", env->rank, i, buf[i], want);
            return HCCL_E_INTERNAL;
        }
    }
    return HCCL_SUCCESS;
}

static int mh_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    mh_shared_t *sh = arg;
    mh_rank_t *me = &sh->r[rank];
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    float *buf = NULL;
    if (aclrtMalloc((void **)&buf, MH_COUNT * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST) !=
        ACL_SUCCESS) {
        fprintf(stderr, "[rank %d] aclrtMalloc failed\n", rank);
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < MH_WARM && !bad; i++) {
        HcclResult r = mh_op(&env, buf);
        if (r != HCCL_SUCCESS) {
            fprintf(stderr, "[rank %d] warm-up op %d failed: %d\n", rank, i, (int)r);
            bad = 1;
        }
    }
    if (bad) {
        return 1;
    }
    atomic_store_explicit(&me->ready, 1, memory_order_release);
    HcclResult r = HCCL_SUCCESS;
    while (r == HCCL_SUCCESS && !atomic_load_explicit(&sh->stop, memory_order_acquire)) {
        r = mh_op(&env, buf);
        me->ok_ops += r == HCCL_SUCCESS;
    }
    me->t_err = mh_now();
    me->err = (int)r;
    HcclResult a = HCCL_SUCCESS;
    HcclGetCommAsyncError(env.comm, &a);
    me->async = (int)a;
    double t0 = mh_now();
    me->destroy = (int)HcclCommDestroy(env.comm);
    me->destroy_s = mh_now() - t0;
    env.comm = NULL;
    aclrtFree(buf);
    zt_env_close(&env);
    return 0;
}

typedef struct {
    mh_shared_t *sh;
    int kill; /* 1: kill host 2's ranks; 0: take its link down */
    double t_fault;
    int launch_failed;
    atomic_int done; /* the launch returned */
} mh_case_t;

/* Wait until every rank passed its warm-up: 0, or -1 once the launch ended or after MH_LAUNCH_S. */
static int mh_wait_ready(mh_case_t *c)
{
    double end = mh_now() + MH_LAUNCH_S;
    for (int r = 0; r < MH_NRANKS; r++) {
        while (!atomic_load_explicit(&c->sh->r[r].ready, memory_order_acquire)) {
            if (mh_now() > end || atomic_load_explicit(&c->done, memory_order_acquire)) {
                fprintf(stderr, "rank %d never became ready\n", r);
                return -1;
            }
            usleep(10000);
        }
    }
    return 0;
}

/* The launcher runs in a thread of its own so this one can inject the fault. */
static void *mh_launcher(void *p)
{
    mh_case_t *c = p;
    c->launch_failed = zt_launch_procs(MH_NRANKS, mh_rank, c->sh, MH_LAUNCH_S);
    atomic_store_explicit(&c->done, 1, memory_order_release);
    return NULL;
}

static void mh_run(int kill_host)
{
    mh_shared_t *sh =
        mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    mh_case_t c = {sh, kill_host, 0, 0, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, mh_launcher, &c), 0);
    int ready = mh_wait_ready(&c);
    int first = 0; /* survivors: ranks [first, last) */
    int last = MH_NRANKS;
    int link_rc = 0;
    if (ready == 0) {
        usleep(200000);
        c.t_fault = mh_now();
        if (kill_host) {
            kill(zt_child_pids[2], SIGKILL);
            kill(zt_child_pids[3], SIGKILL);
            last = 2;
        } else {
            link_rc = zt_hosts_link(&mh_hosts, 2, 0); /* checked once joined and restored */
        }
    } else {
        atomic_store_explicit(&sh->stop, 1, memory_order_release);
    }
    pthread_join(th, NULL);
    if (!kill_host && ready == 0) {
        zt_hosts_link(&mh_hosts, 2, 1);
    }
    assert_int_equal(ready, 0);
    assert_int_equal(link_rc, 0);
    int fails = 0;
    for (int r = first; r < last; r++) {
        mh_rank_t *m = &sh->r[r];
        double dt = m->t_err - c.t_fault;
        int want = kill_host ? HCCL_E_REMOTE : HCCL_E_TIMEOUT;
        double bound = kill_host ? MH_KILL_S : MH_EXEC_S + MH_SLACK_S;
        int ok = m->err == want && m->async == want && dt <= bound && m->destroy == HCCL_SUCCESS &&
                 m->destroy_s <= MH_DESTROY_S;
        printf("# %s: rank %d (host %d): %d ops after ready, error %d (async %d) %.2f s after "
               "the fault, HcclCommDestroy %d in %.2f s%s\n",
               kill_host ? "kill host 2" : "link down host 2", r, mh_hosts.host_of[r], m->ok_ops,
               m->err, m->async, dt, m->destroy, m->destroy_s, ok ? "" : "  <-- FAIL");
        fails += !ok;
    }
    /* The killed ranks count as failed launches; nothing else may. */
    assert_int_equal(c.launch_failed, kill_host ? 2 : 0);
    munmap(sh, sizeof(*sh));
    assert_int_equal(fails, 0);
}

static void test_link_down(void **state)
{
    (void)state;
    mh_run(0);
}

static void test_kill_host(void **state)
{
    (void)state;
    mh_run(1);
}

int main(int argc, char **argv)
{
    if (argc != 3 || zt_hosts_parse(&mh_hosts, argv[1], argv[2], "2,2") != 0) {
        fprintf(stderr, "usage: %s TAG NETNS_SH\n", argv[0]);
        return 2;
    }
    char exec_s[16];
    snprintf(exec_s, sizeof(exec_s), "%d", MH_EXEC_S);
    setenv("HCCL_EXEC_TIMEOUT", exec_s, 1);
    setenv("HCCL_CONNECT_TIMEOUT", "30", 0);
    zt_hosts_use(&mh_hosts);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_link_down),
        cmocka_unit_test(test_kill_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
