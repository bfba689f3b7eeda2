/*
 * Every collective across namespace "hosts" (scripts/netns.sh), checked
 * against the serial reference: ranks forked from one root info, each rank
 * entering its host's namespaces first (zt_netns.h). Abstract Unix sockets
 * are per network namespace, so peers on another host cannot reach each
 * other's broker: the bytes between hosts take the inter-host path.
 *
 * Usage: test_mh_colls TAG NETNS_SH LAYOUT [CASES], LAYOUT as "2,2" (ranks per
 * host), CASES a cmocka filter pattern (e.g. test_layout: the launcher only),
 * normally through tests/multihost/run.sh, which makes the hosts and always
 * removes them. First the layout itself (each rank in its host's network
 * namespace and hostname, hosts apart). Then the single-host suites' scenarios
 * (tests/common): the communicator API and Barrier; AllReduce and AllGather
 * over every dtype x op x {zero-copy, buffered} x {in place, out of place}
 * x counts; ReduceScatter(V), Reduce, Broadcast, Scatter, AllGatherV and
 * AlltoAll(V, VC) likewise; descriptor mismatches; Send/Recv rings,
 * BatchSendRecv and grouped all-to-all.
 *
 * HCCL_BUFFSIZE=1 makes the buffered path chunk the large cases;
 * HCCL_EXEC_TIMEOUT=60 turns a hang into an error; HCCL_SOCKET_IFNAME=zcnet0
 * (every host's interface) names the address the root info advertises;
 * UCX_TLS=tcp,self keeps UCX off shared memory between hosts (run.sh sets
 * the last two and prints the lanes UCX picks on a host); the first case
 * runs at ZCCL_LOG_LEVEL=info, where the library logs the transport of each
 * UCX endpoint.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "zt_coll_p2p.h"
#include "zt_coll_scen.h"
#include "zt_comm.h"
#include "zt_netns.h"

#define MH_BIG 100003
#define MH_SEED 0x3a1705ull
#define MH_TIMEOUT_S 240

static zt_hosts_t mh_hosts;

static double mh_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Launch fn on the layout's ranks; print how long it took. */
static int mh_launch(const char *what, zt_rank_fn fn, void *arg)
{
    double t0 = mh_now();
    int failed = zt_launch_procs(mh_hosts.nranks, fn, arg, MH_TIMEOUT_S);
    printf("# %s on %d hosts, %d ranks: %d failed ranks, %.1f s\n", what, mh_hosts.nhosts,
           mh_hosts.nranks, failed, mh_now() - t0);
    return failed;
}

static int mh_job(const char *what, zt_cc_body_fn body)
{
    zt_cc_job_t job = {body, NULL};
    return mh_launch(what, zt_cc_rank_job, &job);
}

/* Where each rank runs: its network namespace and hostname, as the rank sees them. */
typedef struct {
    char net[64][64];
    char host[64][64];
} mh_where_t;

static int mh_rank_where(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)nranks;
    (void)root;
    mh_where_t *w = arg;
    ssize_t n = readlink("/proc/self/ns/net", w->net[rank], sizeof(w->net[rank]) - 1);
    return n > 0 && gethostname(w->host[rank], sizeof(w->host[rank]) - 1) == 0 ? 0 : 1;
}

/* The launcher puts ranks where the layout says: one network namespace and hostname per host,
 * shared by the host's ranks and by no other host's, not this process's. */
static void test_layout(void **state)
{
    (void)state;
    mh_where_t *w =
        mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(w != MAP_FAILED);
    memset(w, 0, sizeof(*w));
    assert_int_equal(mh_launch("layout", mh_rank_where, w), 0);
    char mine[64] = {0};
    assert_true(readlink("/proc/self/ns/net", mine, sizeof(mine) - 1) > 0);
    int bad = 0;
    for (int a = 0; a < mh_hosts.nranks; a++) {
        char want[96];
        snprintf(want, sizeof(want), "%sh%d", mh_hosts.tag, mh_hosts.host_of[a]);
        printf("# rank %d: host %s, %s\n", a, w->host[a], w->net[a]);
        bad += strcmp(w->host[a], want) != 0 || strcmp(w->net[a], mine) == 0;
        for (int b = 0; b < a; b++) {
            int same = mh_hosts.host_of[a] == mh_hosts.host_of[b];
            bad += same != (strcmp(w->net[a], w->net[b]) == 0);
        }
    }
    munmap(w, sizeof(*w));
    assert_int_equal(bad, 0);
}

static void test_comm_api(void **state)
{
    (void)state;
    zt_comm_shared_t *sh =
        mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    /* This launch logs at info level: the library names the transport of each endpoint. */
    setenv("ZCCL_LOG_LEVEL", "info", 1);
    setenv("ZCCL_LOG_SUBSYS", "BOOT,COMM", 1);
    int failed = mh_launch("comm api + barrier", zt_comm_api, sh);
    unsetenv("ZCCL_LOG_LEVEL");
    unsetenv("ZCCL_LOG_SUBSYS");
    munmap(sh, sizeof(*sh));
    assert_int_equal(failed, 0);
}

/* Reductions that also run every op at the large count. */
static const int mh_big_ops[] = {HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_BFP16, HCCL_DATA_TYPE_INT64};

static void test_allreduce(void **state)
{
    (void)state;
    zt_matrix_t m = {ZT_ALLREDUCE, MH_BIG, mh_big_ops, 3, MH_SEED + (uint64_t)mh_hosts.nranks};
    assert_int_equal(mh_launch("allreduce matrix", zt_rank_matrix, &m), 0);
}

static void test_allgather(void **state)
{
    (void)state;
    zt_matrix_t m = {ZT_ALLGATHER, MH_BIG, NULL, 0, MH_SEED ^ (uint64_t)mh_hosts.nranks};
    assert_int_equal(mh_launch("allgather matrix", zt_rank_matrix, &m), 0);
}

static int body_colls(zt_env_t *env, const void *arg)
{
    (void)arg;
    zt_ccmatrix_t m = {MH_SEED + 7 * (uint64_t)env->nranks, MH_BIG, 0};
    return zt_cc_matrix_run(env, &m);
}

static void test_colls(void **state)
{
    (void)state;
    assert_int_equal(mh_job("other collectives matrix", body_colls), 0);
}

static int body_mismatch(zt_env_t *env, const void *arg)
{
    (void)arg;
    zt_ccmismatch_t mm = {MH_SEED ^ 0x55ull, -1, ZT_MEM_ZC};
    return zt_cc_mismatch_run(env, &mm);
}

static void test_mismatch(void **state)
{
    (void)state;
    assert_int_equal(mh_job("mismatches", body_mismatch), 0);
}

static int body_p2p(zt_env_t *env, const void *arg)
{
    (void)arg;
    uint64_t seed = MH_SEED + 11 * (uint64_t)env->nranks;
    return zt_p2p_ring_run(env, 0, MH_BIG, seed) + zt_p2p_a2a_run(env, 0, MH_BIG, seed ^ 1);
}

static void test_p2p(void **state)
{
    (void)state;
    assert_int_equal(mh_job("send/recv, batch, grouped all-to-all", body_p2p), 0);
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5 || zt_hosts_parse(&mh_hosts, argv[1], argv[2], argv[3]) != 0) {
        fprintf(stderr, "usage: %s TAG NETNS_SH LAYOUT [CASES] (e.g. 2,2 test_layout)\n", argv[0]);
        return 2;
    }
    if (argc == 5) {
        cmocka_set_test_filter(argv[4]);
    }
    setenv("HCCL_BUFFSIZE", "1", 0);
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    zt_hosts_use(&mh_hosts);
    zt_ref_set_hosts(mh_hosts.nranks, mh_hosts.host_of);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),    cmocka_unit_test(test_comm_api),
        cmocka_unit_test(test_allreduce), cmocka_unit_test(test_allgather),
        cmocka_unit_test(test_colls),     cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_p2p),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
