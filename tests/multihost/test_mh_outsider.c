/*
 * An outsider across hosts (issue 33): 2 hosts x 2 ranks, and a third host
 * running tests/multihost/mh_outsider, which holds the ranks' UCX worker
 * addresses and nothing of the communicator.
 *  - test_inject_*: before the ranks' first op the outsider sends each rank,
 *    for ops 1..MO_OPS, a message of the right length with the tag its
 *    counterpart's data (step 0) or agreement message would carry under
 *    predictable tags; the ranks then run MO_OPS checked AllReduce ops of
 *    4 KiB or 1 MiB: every op must succeed with 0 wrong elements.
 *  - test_flood: while the ranks run checked ops, the outsider sends rank 1
 *    MO_FLOOD messages of 8 KiB with random tags; rank 1's resident memory
 *    may grow by at most MO_FLOOD_BOUND_MIB (the bound docs/ARCHITECTURE.md
 *    states) and every op must succeed.
 *  - test_ucx_port_conns: 3,000 silent connections to rank 1's UCX port
 *    with every rank at a soft descriptor limit of 1,024 (zccl raises it
 *    to the hard one): every op must succeed (without the raise the first
 *    op failed on every rank; UCX was seen to crash inside).
 *  - test_unreachable_root: a rank whose root info names an address that
 *    its host has a (static) neighbour entry for but nobody answers must
 *    fail with HCCL_E_TCP_CONNECT or HCCL_E_TIMEOUT within
 *    HCCL_CONNECT_TIMEOUT + 1 s (a blocking connect sat in SYN-SENT for
 *    the kernel's SYN retries, over two minutes).
 *
 * Usage: test_mh_outsider TAG NETNS_SH MH_OUTSIDER (run.sh 3: host 3 is
 * the outsider's).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/hccl_test_api.h"
#include "mh_outsider.h"
#include "zt_launch.h"
#include "zt_netns.h"

#define MO_NRANKS 4
#define MO_OPS 6
#define MO_FLOOD 20000
#define MO_FLOOD_LEN 8192
#define MO_FLOOD_BOUND_MIB 8
#if defined(__SANITIZE_ADDRESS__)
#define MO_SANITIZED 1
#else
#define MO_SANITIZED 0
#endif
#define MO_CONNECT_S 3
#define MO_ADDR_MAX 2048
#define MO_LAUNCH_S 100

typedef struct {
    atomic_int naddr;
    atomic_int go;
    atomic_int last; /* flood: the op count every rank stops at (0: not yet known) */
    uint8_t addr[MO_NRANKS][MO_ADDR_MAX];
    size_t alen[MO_NRANKS];
    size_t count;  /* fp32 elements per op */
    int ucx_port;  /* rank 1's UCX listening port (its host's address is 10.231.0.1) */
    int port_mode; /* the outsider takes "IP PORT" of rank 1's UCX listener */
    int flood;
    int ops[MO_NRANKS];    /* ops run */
    int failed[MO_NRANKS]; /* ops that returned an error */
    long wrong[MO_NRANKS]; /* wrong elements over all ops */
    uint64_t dropped[MO_NRANKS];
    long rss_base_kib[MO_NRANKS];
    long rss_max_kib[MO_NRANKS];
} mo_shared_t;

static zt_hosts_t mo_hosts;
static const char *mo_outsider_path;

static long mo_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmRSS: %ld", &kib) == 1) {
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return kib;
}

/* One AllReduce of count fp32 (x[i] = rank + 1 + i % 7), synchronised;
 * adds its wrong elements to *wrong. */
static HcclResult mo_op(zt_env_t *env, float *buf, size_t count, long *wrong)
{
    HcclResult r = zt_ramp_allreduce(env, buf, count);
    if (r != HCCL_SUCCESS) {
        return r;
    }
    for (size_t i = 0; i < count; i++) {
        *wrong += buf[i] != zt_ramp_sum(env->nranks, i);
    }
    return HCCL_SUCCESS;
}

/* The port of this process's listening TCP socket (rank 1 has one: UCX's),
 * matched by inode between /proc/self/fd and /proc/self/net/tcp; 0 if none. */
static int mo_listen_port(void)
{
    FILE *f = fopen("/proc/self/net/tcp", "r");
    char line[512];
    int port = 0;
    while (f != NULL && port == 0 && fgets(line, sizeof(line), f) != NULL) {
        unsigned lport = 0;
        unsigned st = 0;
        unsigned long inode = 0;
        if (sscanf(line, " %*d: %*x:%x %*x:%*x %x %*s %*s %*s %*u %*d %lu", &lport, &st, &inode) !=
                3 ||
            st != 0x0a) {
            continue;
        }
        for (int fd = 0; fd < 1024 && port == 0; fd++) {
            char path[64];
            char link[64] = "";
            snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
            ssize_t n = readlink(path, link, sizeof(link) - 1);
            unsigned long ino = 0;
            if (n > 0 && sscanf(link, "socket:[%lu]", &ino) == 1 && ino == inode) {
                port = (int)lport;
            }
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return port;
}

/* Flood: run until the parent names the last op (ranks stop together). */
static int mo_more(mo_shared_t *sh, int k)
{
    int last = atomic_load_explicit(&sh->last, memory_order_acquire);
    return last == 0 || k < last;
}

static int mo_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    mo_shared_t *sh = arg;
    zt_env_t env;
    float *buf = NULL;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max > 1024) {
        rl.rlim_cur = 1024; /* the usual soft limit; zccl raises it to the hard one */
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0 ||
        aclrtMalloc((void **)&buf, sh->count * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST) !=
            ACL_SUCCESS) {
        return 1;
    }
    sh->alen[rank] = zccl_comm_net_address(env.comm, sh->addr[rank], MO_ADDR_MAX);
    if (rank == 1) {
        sh->ucx_port = mo_listen_port();
    }
    atomic_fetch_add_explicit(&sh->naddr, 1, memory_order_acq_rel);
    if (mo_wait_flag(&sh->go, 60) != 0) {
        fprintf(stderr, "[rank %d] no go\n", rank);
        return 1;
    }
    sh->rss_base_kib[rank] = mo_rss_kib();
    for (int k = 0; sh->flood ? mo_more(sh, k) : k < MO_OPS; k++) {
        HcclResult r = mo_op(&env, buf, sh->count, &sh->wrong[rank]);
        sh->ops[rank]++;
        if (r != HCCL_SUCCESS) {
            fprintf(stderr, "[rank %d] op %d failed: %d\n", rank, k + 1, (int)r);
            sh->failed[rank]++;
            break;
        }
        long rss = mo_rss_kib();
        sh->rss_max_kib[rank] = rss > sh->rss_max_kib[rank] ? rss : sh->rss_max_kib[rank];
    }
    sh->dropped[rank] = zccl_comm_net_dropped(env.comm);
    aclrtFree(buf);
    return zt_env_close(&env) != 0;
}

typedef struct {
    mo_shared_t *sh;
    mo_outsider_t *o;
    int victim; /* -1: every rank */
} mo_feed_t;

/* In a child of zt_fork_call: hand the outsider the victims' addresses (each
 * with its counterpart as the sender tags name), wait until it says it sent
 * everything. 0, or 1 when the ranks or the outsider did not get that far. */
static int mo_feed(void *arg)
{
    mo_feed_t *f = arg;
    mo_shared_t *sh = f->sh;
    double end = mo_now() + MO_LAUNCH_S;
    while (atomic_load_explicit(&sh->naddr, memory_order_acquire) < MO_NRANKS) {
        if (mo_now() > end) {
            return 1;
        }
        usleep(1000);
    }
    if (sh->flood) {
        atomic_store_explicit(&sh->go, 1, memory_order_release); /* the ops run during the flood */
    }
    if (sh->port_mode) {
        fprintf(f->o->in, "10.231.0.1 %d\n", sh->ucx_port);
    }
    for (int v = 0; v < MO_NRANKS && !sh->port_mode; v++) {
        if (f->victim >= 0 && v != f->victim) {
            continue;
        }
        fprintf(f->o->in, "%d ", (v + MO_NRANKS / 2) % MO_NRANKS);
        for (size_t i = 0; i < sh->alen[v]; i++) {
            fprintf(f->o->in, "%02x", sh->addr[v][i]);
        }
        fprintf(f->o->in, "\n");
    }
    fprintf(f->o->in, "\n");
    fflush(f->o->in);
    int rc = mo_outsider_injected(f->o) == 0 ? 0 : 1;
    if (sh->flood) {
        sleep(1); /* more ops after the last message; ranks are within an op of each other */
        atomic_store_explicit(&sh->last, sh->ops[0] + 50, memory_order_release);
    }
    atomic_store_explicit(&sh->go, 1, memory_order_release);
    return rc;
}

static mo_shared_t *mo_run(size_t count, int flood, char *const argv[], int victim)
{
    int port_mode = strcmp(argv[1], "conns") == 0;
    mo_shared_t *sh =
        mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    sh->count = count;
    sh->flood = flood;
    sh->port_mode = port_mode;
    mo_outsider_t o;
    assert_int_equal(mo_outsider_start(&o, mo_hosts.tag, 3, argv), 0);
    mo_feed_t f = {sh, &o, victim};
    int feeder = zt_fork_call(mo_feed, &f);
    assert_true(feeder > 0);
    int failed = zt_launch_procs(MO_NRANKS, mo_rank, sh, MO_LAUNCH_S);
    atomic_store_explicit(&sh->go, 1, memory_order_release);
    atomic_store_explicit(&sh->last, 1, memory_order_release);
    int frc = zt_fork_reap(feeder, 10); /* done once the ranks are, or stuck on the outsider */
    int orc = mo_outsider_stop(&o);
    assert_int_equal(failed, 0);
    assert_int_equal(frc, 0);
    assert_int_equal(orc, 0);
    return sh;
}

static void mo_inject(size_t count, const char *step, size_t len)
{
    char nseq[16];
    char lens[24];
    snprintf(nseq, sizeof(nseq), "%d", MO_OPS);
    snprintf(lens, sizeof(lens), "%zu", len);
    char *argv[] = {(char *)mo_outsider_path, "tags", nseq, lens, (char *)step, NULL};
    mo_shared_t *sh = mo_run(count, 0, argv, -1);
    int bad = 0;
    for (int r = 0; r < MO_NRANKS; r++) {
        int ok = sh->ops[r] == MO_OPS && sh->failed[r] == 0 && sh->wrong[r] == 0;
        printf("# inject %zu B step %s, %zu B ops: rank %d: %d ops, %d failed, %ld wrong "
               "elements, %llu messages dropped%s\n",
               len, step, count * sizeof(float), r, sh->ops[r], sh->failed[r], sh->wrong[r],
               (unsigned long long)sh->dropped[r], ok ? "" : "  <-- FAIL");
        bad += !ok;
    }
    munmap(sh, sizeof(*sh));
    assert_int_equal(bad, 0);
}

/* AllReduce of count fp32 on 2 x 2: each rank's slice (count / 2) crosses
 * in one message (below the 1 MiB chunk); the agreement message is 7 words. */
static void test_inject_data_4k(void **state)
{
    (void)state;
    mo_inject(1024, "0", 512 * sizeof(float));
}

static void test_inject_data_1m(void **state)
{
    (void)state;
    mo_inject(262144, "0", 131072 * sizeof(float));
}

static void test_inject_agree_4k(void **state)
{
    (void)state;
    mo_inject(1024, "0xfffffff", 56);
}

static void test_inject_agree_1m(void **state)
{
    (void)state;
    mo_inject(262144, "0xfffffff", 56);
}

/* The flood's cost is rank 1's growth above the least growth of the ranks
 * no one floods (they run the same ops): that holds under ASan too, whose
 * quarantine grows every rank by tens of MiB alike. Without a sanitizer each
 * rank's own growth must stay within the bound as well. */
static void test_flood(void **state)
{
    (void)state;
    char nmsg[16];
    char lens[16];
    snprintf(nmsg, sizeof(nmsg), "%d", MO_FLOOD);
    snprintf(lens, sizeof(lens), "%d", MO_FLOOD_LEN);
    char *argv[] = {(char *)mo_outsider_path, "flood", nmsg, lens, NULL};
    mo_shared_t *sh = mo_run(1024, 1, argv, 1);
    long least_other = LONG_MAX;
    for (int r = 0; r < MO_NRANKS; r++) {
        long grew = sh->rss_max_kib[r] - sh->rss_base_kib[r];
        if (r != 1 && grew < least_other) {
            least_other = grew;
        }
    }
    int bad = 0;
    for (int r = 0; r < MO_NRANKS; r++) {
        long grew = sh->rss_max_kib[r] - sh->rss_base_kib[r];
        long excess = r == 1 ? grew - least_other : 0;
        int ok = sh->failed[r] == 0 && sh->wrong[r] == 0 && excess <= MO_FLOOD_BOUND_MIB * 1024 &&
                 (MO_SANITIZED || grew <= MO_FLOOD_BOUND_MIB * 1024);
        printf("# flood of %d x %d B at rank 1: rank %d: %d ops, %d failed, %ld wrong, RSS %ld -> "
               "max %ld KiB (+%ld, +%ld above the least unflooded rank), %llu dropped%s\n",
               MO_FLOOD, MO_FLOOD_LEN, r, sh->ops[r], sh->failed[r], sh->wrong[r],
               sh->rss_base_kib[r], sh->rss_max_kib[r], grew, excess,
               (unsigned long long)sh->dropped[r], ok ? "" : "  <-- FAIL");
        bad += !ok;
    }
    munmap(sh, sizeof(*sh));
    assert_int_equal(bad, 0);
}

/* 3,000 silent connections to rank 1's UCX port before the ops, every rank
 * at a soft descriptor limit of 1,024 (the hard one as it is: zccl raises
 * the soft one to it): the ops must all succeed (UCX used to crash inside
 * when the connections took its last descriptors). */
static void test_ucx_port_conns(void **state)
{
    (void)state;
    char *argv[] = {(char *)mo_outsider_path, "conns", "3000", "-", "-", NULL};
    mo_shared_t *sh = mo_run(1024, 0, argv, 1);
    int bad = sh->ucx_port == 0;
    for (int r = 0; r < MO_NRANKS; r++) {
        int ok = sh->ops[r] == MO_OPS && sh->failed[r] == 0 && sh->wrong[r] == 0;
        printf("# 3000 silent connections to rank 1's UCX port %d: rank %d: %d ops, %d failed, "
               "%ld wrong%s\n",
               sh->ucx_port, r, sh->ops[r], sh->failed[r], sh->wrong[r], ok ? "" : "  <-- FAIL");
        bad += !ok;
    }
    munmap(sh, sizeof(*sh));
    assert_int_equal(bad, 0);
}

/* In a child on host 2: a root info naming 10.231.0.200, which host 2 has a
 * permanent neighbour entry for and nobody answers. */
static int mo_unreachable_child(void)
{
    if (zt_hosts_enter(mo_hosts.tag, 2) != 0 ||
        system("ip neigh replace 10.231.0.200 lladdr 02:00:00:00:00:c8 dev zcnet0 nud permanent") !=
            0) {
        return 2;
    }
    char t[16];
    snprintf(t, sizeof(t), "%d", MO_CONNECT_S);
    setenv("HCCL_CONNECT_TIMEOUT", t, 1);
    HcclRootInfo ri;
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS ||
        HcclGetRootInfo(&ri) != HCCL_SUCCESS) {
        return 2;
    }
    snprintf(ri.internal, 16, "10.231.0.200");
    HcclComm comm = NULL;
    double t0 = mo_now();
    HcclResult r = HcclCommInitRootInfo(2, &ri, 1, &comm);
    double dt = mo_now() - t0;
    int ok = (r == HCCL_E_TCP_CONNECT || r == HCCL_E_TIMEOUT) && dt <= MO_CONNECT_S + 1.0;
    printf("# unreachable root (cached neighbour, no answer), HCCL_CONNECT_TIMEOUT=%d: "
           "HcclCommInitRootInfo %d after %.2f s%s\n",
           MO_CONNECT_S, (int)r, dt, ok ? "" : "  <-- FAIL");
    fflush(stdout);
    return ok ? 0 : 1;
}

static void test_unreachable_root(void **state)
{
    (void)state;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        _exit(mo_unreachable_child());
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
    if ((argc != 4 && argc != 5) || zt_hosts_parse(&mo_hosts, argv[1], argv[2], "2,2") != 0) {
        fprintf(stderr, "usage: %s TAG NETNS_SH MH_OUTSIDER [TEST_FILTER]\n", argv[0]);
        return 2;
    }
    if (argc == 5) {
        cmocka_set_test_filter(argv[4]);
    }
    mo_outsider_path = argv[3];
    setenv("HCCL_EXEC_TIMEOUT", "8", 1);
    setenv("HCCL_CONNECT_TIMEOUT", "30", 0);
    signal(SIGPIPE, SIG_IGN);
    zt_hosts_use(&mo_hosts);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unreachable_root), cmocka_unit_test(test_inject_data_4k),
        cmocka_unit_test(test_inject_data_1m),   cmocka_unit_test(test_inject_agree_4k),
        cmocka_unit_test(test_inject_agree_1m),  cmocka_unit_test(test_flood),
        cmocka_unit_test(test_ucx_port_conns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
