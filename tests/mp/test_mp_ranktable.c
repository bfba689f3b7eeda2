/*
 * Rank-table init (HcclCommInitClusterInfo[Config]):
 *  - good tables of both CANN layouts (server_list / device, version 1.0;
 *    rank_list, version 2.0) start forked ranks that know only the path and
 *    their rank, rank 0 last, and run a checked AllReduce; a table of two
 *    servers (both this host, by host_ip) meets over TCP;
 *  - a matrix of malformed tables: each returns its exact code and logs one
 *    line naming the file, the field and the value;
 *  - a rank whose rank 0 never comes fails with HCCL_E_TIMEOUT within
 *    HCCL_CONNECT_TIMEOUT.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/hccl_test_api.h"
#include "zt_check.h"

static char rt_dir[256];
static char rt_log[300];

static const char *rt_write(const char *name, const char *text)
{
    static char path[8][400];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, 400, "%s/%s", rt_dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

static long rt_mark(void)
{
    struct stat st;
    return stat(rt_log, &st) == 0 ? (long)st.st_size : 0;
}

/* The log text written since mark (caller frees). */
static char *rt_since(long mark)
{
    FILE *f = fopen(rt_log, "r");
    char *buf = calloc(1, 65536);
    if (f != NULL) {
        fseek(f, mark, SEEK_SET);
        size_t n = fread(buf, 1, 65535, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

/* ---- good tables --------------------------------------------------------------- */

static const char *rt_good_v1(int n)
{
    static char text[4096];
    int o = snprintf(text, sizeof(text),
                     "{\n  \"status\": \"completed\",\n  \"version\": \"1.0\",\n"
                     "  \"server_count\": \"1\",\n  \"server_list\": [{\n"
                     "    \"server_id\": \"127.0.0.1\",\n    \"device\": [\n");
    for (int r = 0; r < n; r++) {
        o += snprintf(text + o, sizeof(text) - (size_t)o,
                      "      {\"device_id\": \"%d\", \"device_ip\": \"192.168.1.%d\", "
                      "\"device_port\": \"16667\", \"rank_id\": \"%d\"}%s\n",
                      n - 1 - r, r + 8, r, r + 1 < n ? "," : "");
    }
    snprintf(text + o, sizeof(text) - (size_t)o, "    ]\n  }]\n}\n");
    return text;
}

/* Two servers (both named by host_ip 127.0.0.1: two "servers" on this host),
 * ranks 0..n/2-1 on the first: the rendezvous over TCP (ZCCL_RANKTABLE_PORT). */
static const char *rt_two_servers_v1(int n)
{
    static char text[4096];
    int o = snprintf(text, sizeof(text),
                     "{\"status\": \"completed\", \"version\": \"1.0\", \"server_count\": \"2\",\n"
                     " \"server_list\": [\n");
    for (int s = 0; s < 2; s++) {
        o += snprintf(text + o, sizeof(text) - (size_t)o,
                      "  {\"server_id\": \"srv_%c\", \"host_ip\": \"127.0.0.1\", \"device\": [",
                      'a' + s);
        for (int r = s * (n / 2); r < (s == 0 ? n / 2 : n); r++) {
            o += snprintf(text + o, sizeof(text) - (size_t)o,
                          "{\"device_id\": \"%d\", \"rank_id\": \"%d\"}%s", n - 1 - r, r,
                          r + 1 < (s == 0 ? n / 2 : n) ? ", " : "");
        }
        o += snprintf(text + o, sizeof(text) - (size_t)o, "]}%s\n", s == 0 ? "," : "");
    }
    snprintf(text + o, sizeof(text) - (size_t)o, " ]\n}\n");
    return text;
}

static const char *rt_good_v2(int n)
{
    static char text[8192];
    int o = snprintf(text, sizeof(text),
                     "{\"status\": \"completed\", \"version\": \"2.0\", \"rank_count\": %d,\n"
                     " \"rank_list\": [\n",
                     n);
    for (int r = 0; r < n; r++) {
        o += snprintf(text + o, sizeof(text) - (size_t)o,
                      "  {\"rank_id\": %d, \"local_id\": %d, \"device_id\": %d, "
                      "\"server_id\": \"node_0\", \"device_port\": %d, \"level_list\": [{"
                      "\"net_layer\": 0, \"net_instance_id\": \"az0-rack0\", \"net_type\": "
                      "\"TOPO_FILE_DESC\", \"net_attr\": \"\", \"rank_addr_list\": [{"
                      "\"addr_type\": \"IPV4\", \"addr\": \"172.16.0.%d\", \"ports\": "
                      "[\"1/0\"]}]}]}%s\n",
                      r, r, r, 16666 + r, 10 + r, r + 1 < n ? "," : "");
    }
    snprintf(text + o, sizeof(text) - (size_t)o, " ]\n}\n");
    return text;
}

typedef struct {
    const char *path;
    int config; /* use HcclCommInitClusterInfoConfig */
} rt_run_t;

static int rank_good(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)root;
    const rt_run_t *run = arg;
    int fails = 0;
    zt_env_t env = {.rank = rank, .nranks = nranks};
    (void)aclInit(NULL); /* a repeated init is fine */
    if (rank == 0) {
        usleep(300000); /* the others start first and must wait for rank 0 */
    }
    HcclComm comm = NULL;
    HcclResult r;
    if (run->config) {
        HcclCommConfig cfg;
        HcclCommConfigInit(&cfg);
        cfg.hcclBufferSize = 16;
        snprintf(cfg.hcclCommName, sizeof(cfg.hcclCommName), "ranktable_cfg");
        r = HcclCommInitClusterInfoConfig(run->path, (uint32_t)rank, &cfg, &comm);
    } else {
        r = HcclCommInitClusterInfo(run->path, (uint32_t)rank, &comm);
    }
    if (!ZT_EXPECT(&env, r == HCCL_SUCCESS, "rank %d: init from %s: %d", rank, run->path, (int)r)) {
        return fails;
    }
    uint32_t size = 0;
    uint32_t id = 99;
    int32_t dev = -1;
    HcclGetRankSize(comm, &size);
    HcclGetRankId(comm, &id);
    aclrtGetDevice(&dev);
    ZT_EXPECT(&env, size == (uint32_t)nranks && id == (uint32_t)rank, "size %u id %u", size, id);
    /* The v1 table gives rank r device n-1-r, the v2 table device r. */
    int want_dev = strstr(run->path, "v1") != NULL ? nranks - 1 - rank : rank;
    ZT_EXPECT(&env, dev == want_dev, "device %d, want %d", dev, want_dev);
    aclrtStream s = NULL;
    aclrtCreateStream(&s);
    const size_t count = 1001;
    int32_t *send = NULL;
    int32_t *recv = NULL;
    aclrtMalloc((void **)&send, count * 4, ACL_MEM_MALLOC_HUGE_FIRST);
    aclrtMalloc((void **)&recv, count * 4, ACL_MEM_MALLOC_HUGE_FIRST);
    zt_pat_t p = {HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, ZT_FILL_EXACT, nranks, 5};
    zt_fill(send, 0, count, &p, rank);
    r = HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, s);
    ZT_EXPECT(&env, r == HCCL_SUCCESS && aclrtSynchronizeStream(s) == ACL_SUCCESS, "allreduce");
    int32_t want[1001];
    zt_ref_allreduce(want, count, &p);
    fails += zt_compare("ranktable allreduce", recv, want, count, HCCL_DATA_TYPE_INT32) != 0;
    aclrtFree(send);
    aclrtFree(recv);
    aclrtDestroyStream(s);
    ZT_EXPECT(&env, HcclCommDestroy(comm) == HCCL_SUCCESS, "destroy");
    return fails;
}

static void test_good_tables(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 1; n <= 4; n += 3) {
        char name[32];
        snprintf(name, sizeof(name), "good_v1_%d.json", n);
        rt_run_t v1 = {rt_write(name, rt_good_v1(n)), 0};
        failed += zt_launch_procs(n, rank_good, &v1, 120);
        snprintf(name, sizeof(name), "good_v2_%d.json", n);
        rt_run_t v2 = {rt_write(name, rt_good_v2(n)), 1};
        failed += zt_launch_procs(n, rank_good, &v2, 120);
    }
    /* Two servers: rank 0 serves the root info over TCP. */
    rt_run_t two = {rt_write("two_servers_v1_4.json", rt_two_servers_v1(4)), 0};
    failed += zt_launch_procs(4, rank_good, &two, 120);
    /* Ranks as threads of one process, each with the path and its rank. */
    rt_run_t th = {rt_write("good_v2_threads.json", rt_good_v2(3)), 0};
    failed += zt_launch_threads(3, rank_good, &th);
    assert_int_equal(failed, 0);
}

/* ---- the malformed matrix -------------------------------------------------------- */

typedef struct {
    const char *what;
    const char *text; /* NULL: the file does not exist */
    uint32_t rank;
    HcclResult code;
    const char *line; /* what the one log line must contain */
} rt_bad_t;

#define V1_HEAD "{\"status\": \"completed\", \"version\": \"1.0\", "
#define V1_DEV(d, r) "{\"device_id\": \"" #d "\", \"rank_id\": \"" #r "\"}"
#define V1_ONE(devs)                                                                               \
    V1_HEAD "\"server_list\": [{\"server_id\": \"node_0\", \"device\": [" devs "]}]}"
#define V2_HEAD "{\"version\": \"2.0\", "

static const rt_bad_t rt_bad[] = {
    {"unreadable", NULL, 0, HCCL_E_OPEN_FILE_FAILURE, "cannot open"},
    {"not_json", "{\"version\": \"1.0\",", 0, HCCL_E_PARA, "not valid JSON at byte"},
    {"trailing", V1_ONE(V1_DEV(0, 0)) " x", 0, HCCL_E_PARA, "not valid JSON at byte"},
    {"array", "[1, 2]", 0, HCCL_E_PARA, "the top level is not a JSON object"},
    {"no_version", "{\"server_list\": []}", 0, HCCL_E_PARA, "field version is missing"},
    {"version_3", "{\"version\": \"3.0\"}", 0, HCCL_E_PARA,
     "field version: value \"3.0\" is not a known layout"},
    {"version_num", "{\"version\": 1.0}", 0, HCCL_E_PARA,
     "field version: value 1.0 is not a string"},
    {"initializing", "{\"status\": \"initializing\", \"version\": \"1.0\"}", 0, HCCL_E_PARA,
     "field status: value \"initializing\""},
    {"no_server_list", V1_HEAD "\"server_count\": \"1\"}", 0, HCCL_E_PARA,
     "field server_list is missing"},
    {"empty_server_list", V1_HEAD "\"server_list\": []}", 0, HCCL_E_PARA,
     "field server_list: value [] is not a non-empty array"},
    {"server_count",
     V1_HEAD "\"server_count\": \"2\", \"server_list\": [{\"server_id\": \"a\", "
             "\"device\": [" V1_DEV(0, 0) "]}]}",
     0, HCCL_E_PARA, "field server_count: value 2 but the list has 1 entries"},
    {"no_device", V1_HEAD "\"server_list\": [{\"server_id\": \"a\"}]}", 0, HCCL_E_PARA,
     "field server_list[0].device is missing"},
    {"no_server_id", V1_HEAD "\"server_list\": [{\"device\": [" V1_DEV(0, 0) "]}]}", 0, HCCL_E_PARA,
     "field server_list[0].server_id is missing"},
    {"server_id_num",
     V1_HEAD "\"server_list\": [{\"server_id\": 5, \"device\": [" V1_DEV(0, 0) "]}]}", 0,
     HCCL_E_PARA, "field server_list[0].server_id: value 5 is not a string"},
    {"no_rank_id", V1_ONE(V1_DEV(0, 0) ", {\"device_id\": \"1\"}"), 0, HCCL_E_PARA,
     "field server_list[0].device[1].rank_id is missing"},
    {"rank_id_abc", V1_ONE("{\"device_id\": \"0\", \"rank_id\": \"abc\"}"), 0, HCCL_E_PARA,
     "field server_list[0].device[0].rank_id: value \"abc\" is not a non-negative integer"},
    {"rank_id_negative", V1_ONE("{\"device_id\": \"0\", \"rank_id\": -1}"), 0, HCCL_E_PARA,
     "field server_list[0].device[0].rank_id: value -1 is not a non-negative integer"},
    {"rank_id_huge", V1_ONE("{\"device_id\": \"0\", \"rank_id\": 99999999999}"), 0, HCCL_E_PARA,
     "field server_list[0].device[0].rank_id: value 99999999999 is not a non-negative integer"},
    {"device_id_float", V1_ONE("{\"device_id\": 0.5, \"rank_id\": \"0\"}"), 0, HCCL_E_PARA,
     "field server_list[0].device[0].device_id: value 0.5 is not a non-negative integer"},
    {"duplicate_rank", V1_ONE(V1_DEV(0, 0) ", " V1_DEV(1, 0)), 0, HCCL_E_PARA,
     "field server_list[0].device[1].rank_id: value 0 appears twice"},
    {"rank_gap", V1_ONE(V1_DEV(0, 0) ", " V1_DEV(1, 2)), 0, HCCL_E_PARA,
     "field server_list[0].device[1].rank_id: value 2 is not below the rank count 2"},
    {"duplicate_device", V1_ONE(V1_DEV(1, 0) ", " V1_DEV(1, 1)), 0, HCCL_E_PARA,
     "field server_list[0].device[1].device_id: value 1 is also rank 0's device"},
    {"device_count", V1_ONE(V1_DEV(999, 0)), 0, HCCL_E_PARA,
     "field server_list[0].device[0].device_id: value 999: this host has 8 devices"},
    {"rank_not_in_table", V1_ONE(V1_DEV(0, 0) ", " V1_DEV(1, 1)), 5, HCCL_E_PARA,
     "rank 5 is not in the table (2 ranks)"},
    {"two_servers_no_address",
     V1_HEAD "\"server_list\": [{\"server_id\": \"node_0.invalid\", \"device\": [" V1_DEV(
         0, 0) "]}, {\"server_id\": \"node_1\", \"device\": [" V1_DEV(0, 1) "]}]}",
     1, HCCL_E_PARA,
     "field server_list[0].server_id: value \"node_0.invalid\": no IPv4 address for this "
     "server"},
    {"server_twice",
     V1_HEAD "\"server_list\": [{\"server_id\": \"node_0\", \"device\": [" V1_DEV(
         0, 0) "]}, {\"server_id\": \"node_0\", \"device\": [" V1_DEV(1, 1) "]}]}",
     0, HCCL_E_PARA,
     "field server_list[1].server_id: value \"node_0\" is also server_list[0].server_id"},
    {"device_twice_on_a_server",
     V1_HEAD "\"server_list\": [{\"server_id\": \"n0\", \"device\": [" V1_DEV(
         0, 0) "]}, "
               "{\"server_id\": \"n1\", \"device\": [" V1_DEV(0, 1) ", " V1_DEV(0, 2) "]}]}",
     0, HCCL_E_PARA, "field server_list[1].device[1].device_id: value 0 is also rank 1's device"},
    {"my_server_elsewhere",
     V1_HEAD "\"server_list\": [{\"server_id\": \"127.0.0.1\", \"device\": [" V1_DEV(
         0, 0) "]}, {\"server_id\": \"192.0.2.78\", \"device\": [" V1_DEV(0, 1) "]}]}",
     1, HCCL_E_PARA,
     "field server_list[1].server_id: value \"192.0.2.78\" is not an address of this host"},
    {"other_host",
     V1_HEAD "\"server_list\": [{\"server_id\": \"192.0.2.77\", \"device\": [" V1_DEV(0, 0) "]}]}",
     0, HCCL_E_PARA,
     "field server_list[0].server_id: value \"192.0.2.77\" is not an address of this host"},
    {"other_host_ip",
     V1_HEAD "\"server_list\": [{\"server_id\": \"n\", \"host_ip\": "
             "\"198.51.100.3\", \"device\": [" V1_DEV(0, 0) "]}]}",
     0, HCCL_E_PARA,
     "field server_list[0].host_ip: value \"198.51.100.3\" is not an address of this host"},
    {"v2_no_rank_list", V2_HEAD "\"rank_count\": 2}", 0, HCCL_E_PARA, "field rank_list is missing"},
    {"v2_rank_count",
     V2_HEAD "\"rank_count\": 3, \"rank_list\": [{\"rank_id\": 0, "
             "\"device_id\": 0}]}",
     0, HCCL_E_PARA, "field rank_count: value 3 but the list has 1 entries"},
    {"v2_no_device_id", V2_HEAD "\"rank_count\": 1, \"rank_list\": [{\"rank_id\": 0}]}", 0,
     HCCL_E_PARA, "field rank_list[0].device_id is missing"},
    {"v2_two_servers_no_address",
     V2_HEAD "\"rank_count\": 2, \"rank_list\": [{\"rank_id\": 0, "
             "\"device_id\": 0, \"server_id\": \"a.invalid\"}, {\"rank_id\": 1, \"device_id\": 0, "
             "\"server_id\": \"b\"}]}",
     0, HCCL_E_PARA, "field rank_list[0].server_id: value \"a.invalid\": no IPv4 address"},
    {"v2_server_missing",
     V2_HEAD "\"rank_count\": 2, \"rank_list\": [{\"rank_id\": 0, "
             "\"device_id\": 0, \"server_id\": \"a\"}, {\"rank_id\": 1, \"device_id\": 1}]}",
     0, HCCL_E_PARA, "field rank_list[1].server_id is missing (other ranks name their servers)"},
    {"v2_local_id",
     V2_HEAD "\"rank_count\": 1, \"rank_list\": [{\"rank_id\": 0, \"device_id\": 0, "
             "\"local_id\": \"x\"}]}",
     0, HCCL_E_PARA, "field rank_list[0].local_id: value \"x\" is not a non-negative integer"},
};

static void test_malformed(void **state)
{
    (void)state;
    assert_int_equal(aclInit(NULL), ACL_SUCCESS);
    int failed = 0;
    size_t n = sizeof(rt_bad) / sizeof(rt_bad[0]);
    for (size_t i = 0; i < n; i++) {
        const rt_bad_t *b = &rt_bad[i];
        char name[64];
        snprintf(name, sizeof(name), "bad_%s.json", b->what);
        const char *path = b->text != NULL ? rt_write(name, b->text) : rt_write(name, "");
        if (b->text == NULL) {
            unlink(path);
        }
        long mark = rt_mark();
        HcclComm comm = NULL;
        HcclResult r = HcclCommInitClusterInfo(path, b->rank, &comm);
        char *log = rt_since(mark);
        int lines = 0;
        for (const char *p = log; *p != '\0'; p++) {
            lines += *p == '\n';
        }
        int ok = r == b->code && comm == NULL && lines == 1 && strstr(log, b->line) != NULL &&
                 strstr(log, path) != NULL;
        if (!ok) {
            fprintf(stderr, "case %s: got %d (want %d), %d log lines, log: %s", b->what, (int)r,
                    (int)b->code, lines, log);
            failed++;
        }
        free(log);
    }
    printf("rank-table matrix: %zu malformed tables, %d failed\n", n, failed);
    assert_true(n >= 15);
    assert_int_equal(failed, 0);
}

/* ---- rank 0 never comes ---------------------------------------------------------- */

static void test_timeout(void **state)
{
    (void)state;
    const char *path = rt_write("lonely.json", rt_good_v2(2));
    pid_t pid = fork();
    if (pid == 0) {
        /* Before the library reads its configuration (nothing ran here yet). */
        setenv("HCCL_CONNECT_TIMEOUT", "1", 1);
        long mark = rt_mark();
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        HcclComm comm = NULL;
        HcclResult r = HcclCommInitClusterInfo(path, 1, &comm);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        char *log = rt_since(mark);
        int ok = r == HCCL_E_TIMEOUT && dt >= 1.0 && dt < 4.0 &&
                 strstr(log, "rank 0 did not publish its root info") != NULL;
        printf("rank without its rank 0: code %d after %.2f s\n", (int)r, dt);
        fflush(stdout);
        if (!ok) {
            fprintf(stderr, "timeout case: got %d after %.2f s, log: %s", (int)r, dt, log);
        }
        free(log);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Two rank 0s of one table at once (the same job started twice): the second
 * cannot serve the rendezvous and says so at once; the first times out. */
static void test_busy(void **state)
{
    (void)state;
    const char *path = rt_write("busy.json", rt_good_v1(2));
    pid_t pid[2];
    for (int i = 0; i < 2; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            setenv("HCCL_CONNECT_TIMEOUT", "2", 1);
            if (i == 1) {
                usleep(500000); /* let the first one bind */
            }
            long mark = rt_mark();
            HcclComm comm = NULL;
            struct timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            HcclResult r = HcclCommInitClusterInfo(path, 0, &comm);
            clock_gettime(CLOCK_MONOTONIC, &b);
            double dt = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
            char *log = rt_since(mark);
            int ok = i == 0 ? r == HCCL_E_TIMEOUT
                            : r == HCCL_E_UNAVAIL && dt < 1.0 &&
                                  strstr(log, "cannot serve the rendezvous socket") != NULL;
            printf("rank 0 #%d of one table: code %d after %.2f s\n", i + 1, (int)r, dt);
            fflush(stdout);
            if (!ok) {
                fprintf(stderr, "busy case %d: got %d after %.2f s, log: %s", i, (int)r, dt, log);
            }
            free(log);
            _exit(ok ? 0 : 1);
        }
    }
    for (int i = 0; i < 2; i++) {
        int status = 0;
        assert_int_equal(waitpid(pid[i], &status, 0), pid[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

int main(void)
{
    const char *tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    snprintf(rt_dir, sizeof(rt_dir), "%s/zt-ranktable-XXXXXX", tmp);
    if (mkdtemp(rt_dir) == NULL) {
        return 1;
    }
    snprintf(rt_log, sizeof(rt_log), "%s/log.txt", rt_dir);
    setenv("ZCCL_LOG_FILE", rt_log, 1);
    setenv("ZCCL_LOG_LEVEL", "warn", 1);
    setenv("ZCCL_DEVICES", "8", 1);
    /* Ours alone: parallel runs of this test do not share the two-server port. */
    char port[16];
    snprintf(port, sizeof(port), "%d", 40000 + (int)(getpid() % 20000));
    setenv("ZCCL_RANKTABLE_PORT", port, 1);
    const struct CMUnitTest tests[] = {
        /* first: their children set the timeout before the library reads it */
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_busy),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_good_tables),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", rt_dir);
    if (system(cmd) != 0) {
        rc = rc != 0 ? rc : 1;
    }
    return rc;
}
