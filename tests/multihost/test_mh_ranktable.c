/*
 * HcclCommInitClusterInfo across hosts: one rank table names every namespace
 * host as a server (1.0 layout: server_id "hostK", host_ip 10.231.0.K; 2.0
 * layout: server_id "10.231.0.K"), with device ids counted per server. Each
 * rank knows only the path and its rank; rank 0 serves the root info over
 * TCP on host 1's address, the others fetch it, then a checked AllReduce and
 * AllGather run across the hosts.
 * The bad cases: rank 0's server unreachable (its link down) and rank 0
 * never starting: a rank of another host must fail with HCCL_E_TIMEOUT
 * within HCCL_CONNECT_TIMEOUT (+2 s), logging the address it tried.
 *
 * Usage: test_mh_ranktable TAG NETNS_SH LAYOUT (ranks per host, as "2,2"),
 * normally through tests/multihost/run.sh.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zt_check.h"
#include "zt_launch.h"
#include "zt_netns.h"

#define MH_COUNT 4099
#define MH_TIMEOUT_S 120
#define MH_BAD_CONNECT_S 3

static zt_hosts_t mh_hosts;
static zt_hosts_t mh_pair; /* the bad cases: rank 0 on host 1, rank 1 on host 2 */
static char mh_dir[256];

typedef struct {
    const char *path;
    int bad; /* only rank 1 runs, and must time out */
} mh_run_t;

/* The table for h in layout v (1: 1.0, 2: 2.0) into a file; its path. */
static const char *mh_table(const zt_hosts_t *h, int v, const char *name)
{
    static char path[400];
    snprintf(path, sizeof(path), "%s/%s", mh_dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return NULL;
    }
    fprintf(f, "{\"status\": \"completed\", \"version\": \"%s\", \"%s\": \"%d\", \"%s\": [\n",
            v == 1 ? "1.0" : "2.0", v == 1 ? "server_count" : "rank_count",
            v == 1 ? h->nhosts : h->nranks, v == 1 ? "server_list" : "rank_list");
    int rank = 0;
    for (int k = 1; k <= h->nhosts; k++) {
        if (v == 1) {
            fprintf(f, " {\"server_id\": \"host%d\", \"host_ip\": \"10.231.0.%d\", \"device\": [",
                    k, k);
        }
        for (int d = 0; d < h->per_host[k - 1]; d++, rank++) {
            if (v == 1) {
                fprintf(f, "%s{\"device_id\": \"%d\", \"rank_id\": \"%d\"}", d ? ", " : "", d,
                        rank);
            } else {
                fprintf(f,
                        " {\"rank_id\": %d, \"device_id\": %d, \"server_id\": \"10.231.0.%d\"}%s\n",
                        rank, d, k, rank + 1 < h->nranks ? "," : "");
            }
        }
        if (v == 1) {
            fprintf(f, "]}%s\n", k < h->nhosts ? "," : "");
        }
    }
    fprintf(f, "]}\n");
    fclose(f);
    return path;
}

static int mh_colls(zt_env_t *env, HcclComm comm, aclrtStream s)
{
    int fails = 0;
    int n = env->nranks;
    int32_t *send = NULL;
    int32_t *recv = NULL;
    int32_t *want = malloc(MH_COUNT * 4 * (size_t)n);
    aclrtMalloc((void **)&send, MH_COUNT * 4, ACL_MEM_MALLOC_HUGE_FIRST);
    aclrtMalloc((void **)&recv, MH_COUNT * 4 * (size_t)n, ACL_MEM_MALLOC_HUGE_FIRST);
    zt_pat_t p = {HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, ZT_FILL_EXACT, n, 14};
    zt_fill(send, 0, MH_COUNT, &p, env->rank);
    HcclResult r =
        HcclAllReduce(send, recv, MH_COUNT, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, s);
    ZT_EXPECT(env, r == HCCL_SUCCESS && aclrtSynchronizeStream(s) == ACL_SUCCESS, "allreduce");
    zt_ref_allreduce(want, MH_COUNT, &p);
    fails += zt_compare("ranktable allreduce", recv, want, MH_COUNT, HCCL_DATA_TYPE_INT32) != 0;
    r = HcclAllGather(send, recv, MH_COUNT, HCCL_DATA_TYPE_INT32, comm, s);
    ZT_EXPECT(env, r == HCCL_SUCCESS && aclrtSynchronizeStream(s) == ACL_SUCCESS, "allgather");
    zt_ref_allgather(want, MH_COUNT, &p);
    fails += zt_compare("ranktable allgather", recv, want, MH_COUNT * (size_t)n,
                        HCCL_DATA_TYPE_INT32) != 0;
    aclrtFree(send);
    aclrtFree(recv);
    free(want);
    return fails;
}

/* Rank 1 alone: its rank 0 is unreachable or absent. */
static int mh_bad(zt_env_t *env, const char *path)
{
    int fails = 0;
    struct timespec a;
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    HcclComm comm = NULL;
    HcclResult r = HcclCommInitClusterInfo(path, 1, &comm);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double dt = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    printf("# rank 1 without its rank 0: code %d after %.2f s (HCCL_CONNECT_TIMEOUT=%d)\n", (int)r,
           dt, MH_BAD_CONNECT_S);
    ZT_EXPECT(env, r == HCCL_E_TIMEOUT && comm == NULL, "init returned %d, want HCCL_E_TIMEOUT",
              (int)r);
    ZT_EXPECT(env, dt >= MH_BAD_CONNECT_S && dt < MH_BAD_CONNECT_S + 2.0,
              "took %.2f s for a connect timeout of %d s", dt, MH_BAD_CONNECT_S);
    return fails;
}

static int mh_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)root;
    const mh_run_t *run = arg;
    zt_env_t env = {.rank = rank, .nranks = nranks};
    int fails = 0;
    (void)aclInit(NULL);
    if (run->bad) {
        return rank == 1 ? mh_bad(&env, run->path) : 0;
    }
    if (rank == 0) {
        usleep(300000); /* the others come first and must wait for rank 0 */
    }
    HcclComm comm = NULL;
    HcclResult r = HcclCommInitClusterInfo(run->path, (uint32_t)rank, &comm);
    if (!ZT_EXPECT(&env, r == HCCL_SUCCESS, "rank %d: init from %s: %d", rank, run->path, (int)r)) {
        return fails;
    }
    uint32_t size = 0;
    int32_t dev = -1;
    HcclGetRankSize(comm, &size);
    aclrtGetDevice(&dev);
    int local = 0;
    for (int q = 0; q < rank; q++) {
        local += mh_hosts.host_of[q] == mh_hosts.host_of[rank];
    }
    ZT_EXPECT(&env, size == (uint32_t)nranks && dev == local, "size %u device %d (want %d)", size,
              dev, local);
    aclrtStream s = NULL;
    aclrtCreateStream(&s);
    fails += mh_colls(&env, comm, s);
    aclrtDestroyStream(s);
    ZT_EXPECT(&env, HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
    if (rank == 0) {
        printf("# %s: %d ranks on %d hosts, AllReduce and AllGather checked: %d failures\n",
               run->path, nranks, mh_hosts.nhosts, fails);
    }
    return fails;
}

static void test_v1_table(void **state)
{
    (void)state;
    mh_run_t run = {mh_table(&mh_hosts, 1, "table_v1.json"), 0};
    assert_non_null(run.path);
    assert_int_equal(zt_launch_procs(mh_hosts.nranks, mh_rank, &run, MH_TIMEOUT_S), 0);
}

static void test_v2_table(void **state)
{
    (void)state;
    mh_run_t run = {mh_table(&mh_hosts, 2, "table_v2.json"), 0};
    assert_non_null(run.path);
    assert_int_equal(zt_launch_procs(mh_hosts.nranks, mh_rank, &run, MH_TIMEOUT_S), 0);
}

/* Rank 0 never comes: the connections to its server are refused. */
static void test_no_rank0(void **state)
{
    (void)state;
    mh_run_t run = {mh_table(&mh_pair, 1, "table_lonely.json"), 1};
    zt_hosts_use(&mh_pair);
    int failed = zt_launch_procs(2, mh_rank, &run, MH_TIMEOUT_S);
    zt_hosts_use(&mh_hosts);
    assert_int_equal(failed, 0);
}

/* Rank 0's server unreachable: host 1's link is down, connects go unanswered. */
static void test_unreachable(void **state)
{
    (void)state;
    mh_run_t run = {mh_table(&mh_pair, 1, "table_unreachable.json"), 1};
    assert_int_equal(zt_hosts_link(&mh_hosts, 1, 0), 0);
    zt_hosts_use(&mh_pair);
    int failed = zt_launch_procs(2, mh_rank, &run, MH_TIMEOUT_S);
    zt_hosts_use(&mh_hosts);
    assert_int_equal(zt_hosts_link(&mh_hosts, 1, 1), 0);
    assert_int_equal(failed, 0);
}

int main(int argc, char **argv)
{
    if (argc != 4 || zt_hosts_parse(&mh_hosts, argv[1], argv[2], argv[3]) != 0 ||
        mh_hosts.nhosts < 2 || zt_hosts_parse(&mh_pair, argv[1], argv[2], "1,1") != 0) {
        fprintf(stderr, "usage: %s TAG NETNS_SH LAYOUT (2 hosts or more, e.g. 2,2)\n", argv[0]);
        return 2;
    }
    const char *tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    snprintf(mh_dir, sizeof(mh_dir), "%s/zt-mh-ranktable-XXXXXX", tmp);
    if (mkdtemp(mh_dir) == NULL) {
        return 1;
    }
    setenv("HCCL_BUFFSIZE", "1", 0);
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    zt_hosts_use(&mh_hosts);
    /* The good tables first: the bad cases' children get the short timeout
     * (nothing of the library runs in this process, so each child reads it). */
    const struct CMUnitTest good[] = {
        cmocka_unit_test(test_v1_table),
        cmocka_unit_test(test_v2_table),
    };
    const struct CMUnitTest bad[] = {
        cmocka_unit_test(test_no_rank0),
        cmocka_unit_test(test_unreachable),
    };
    setenv("HCCL_CONNECT_TIMEOUT", "60", 1);
    int rc = cmocka_run_group_tests_name("good tables", good, NULL, NULL);
    char v[16];
    snprintf(v, sizeof(v), "%d", MH_BAD_CONNECT_S);
    setenv("HCCL_CONNECT_TIMEOUT", v, 1);
    rc += cmocka_run_group_tests_name("unreachable rank 0", bad, NULL, NULL);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", mh_dir);
    if (system(cmd) != 0) {
        rc = rc != 0 ? rc : 1;
    }
    return rc;
}
