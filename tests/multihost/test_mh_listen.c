/*
 * Listeners across hosts under an outsider (issue 33): 2 hosts x 2 ranks,
 * every rank at `ulimit -n 1024` (soft and hard, so nothing can be raised),
 * and mh_outsider on host 3.
 *  - test_root_flood_*: once rank 0 made the root info, the outsider opens
 *    1,100 or 3,000 TCP connections to the root listener that never send a
 *    byte; then the ranks init and run a checked AllReduce: all must
 *    succeed (the listener used to run out of descriptors and refuse a real
 *    rank of another host as "not of its uid").
 *  - test_table_flood_*: the same against rank 0's rank-table rendezvous
 *    port (known to anyone: ZCCL_RANKTABLE_PORT), the ranks initing from a
 *    rank table.
 *  - test_guessed_table: the members hold ZCCL_JOB_SECRET; an outsider on
 *    host 3 that guessed the table asks rank 0's server for the root info as
 *    rank 1 (the wire request, by hand): it gets no answer (it does not come
 *    from rank 1's server address); an impostor on host 2 (rank 3's server:
 *    the address check passes) runs HcclCommInitClusterInfo as rank 3
 *    without the secret: HCCL_E_TIMEOUT. The members init and run a checked
 *    AllReduce.
 *
 * Usage: test_mh_listen TAG NETNS_SH MH_OUTSIDER [FILTER] (run.sh 3).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boot/hccl_boot.h"
#include "mh_outsider.h"
#include "zt_launch.h"
#include "zt_netns.h"

#define ML_NRANKS 4
#define ML_COUNT 1024
#define ML_PORT "60123"
#define ML_SECRET "c0ffee-issue33-secret"
#define ML_LAUNCH_S 100

typedef struct {
    atomic_int ready; /* rank 0 listens: the root info is made, or its table init began */
    atomic_int go;
    atomic_int done; /* the ranks are done: the driver stops the outsider */
    char ip[64];
    int port;
    int table; /* init from the table at path */
    char path[256];
    int init[ML_NRANKS]; /* HcclResult of the init */
    int op[ML_NRANKS];   /* of the checked AllReduce, HCCL_E_INTERNAL for wrong data */
} ml_shared_t;

static zt_hosts_t ml_hosts;
static const char *ml_outsider;
static char ml_dir[128];

static void ml_ulimit(void)
{
    struct rlimit rl = {1024, 1024};
    (void)setrlimit(RLIMIT_NOFILE, &rl);
}

static int ml_check(int rank, HcclComm comm)
{
    aclrtStream st = NULL;
    float *buf = NULL;
    if (aclrtCreateStream(&st) != ACL_SUCCESS ||
        aclrtMalloc((void **)&buf, ML_COUNT * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST) !=
            ACL_SUCCESS) {
        return HCCL_E_MEMORY;
    }
    for (int i = 0; i < ML_COUNT; i++) {
        buf[i] = (float)(rank + i % 5);
    }
    HcclResult r =
        HcclAllReduce(buf, buf, ML_COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, st);
    if (r == HCCL_SUCCESS && aclrtSynchronizeStream(st) != ACL_SUCCESS) {
        r = HCCL_E_INTERNAL;
    }
    for (int i = 0; r == HCCL_SUCCESS && i < ML_COUNT; i++) {
        r = buf[i] == (float)(6 + 4 * (i % 5)) ? HCCL_SUCCESS : HCCL_E_INTERNAL;
    }
    aclrtFree(buf);
    aclrtDestroyStream(st);
    return r;
}

static int ml_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    ml_shared_t *sh = arg;
    ml_ulimit();
    if (sh->table) {
        setenv("ZCCL_JOB_SECRET", ML_SECRET, 1);
    }
    if (rank == 0 && !sh->table) {
        zh_rootrec_t rec;
        memcpy(&rec, root->internal + ZH_RI_OFFSET, sizeof(rec));
        snprintf(sh->ip, sizeof(sh->ip), "%.63s", root->internal);
        sh->port = rec.port;
        atomic_store_explicit(&sh->ready, 1, memory_order_release);
    }
    if (rank == 0 && sh->table) {
        atomic_store_explicit(&sh->ready, 1, memory_order_release); /* serving in a moment */
    }
    if ((rank != 0 || !sh->table) && mo_wait_flag(&sh->go, 60) != 0) {
        return 1;
    }
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(rank % 2) != ACL_SUCCESS) {
        return 1;
    }
    HcclComm comm = NULL;
    HcclResult r = sh->table ? HcclCommInitClusterInfo(sh->path, (uint32_t)rank, &comm)
                             : HcclCommInitRootInfo((uint32_t)nranks, root, (uint32_t)rank, &comm);
    sh->init[rank] = r;
    sh->op[rank] = r == HCCL_SUCCESS ? ml_check(rank, comm) : -1;
    if (comm != NULL) {
        HcclCommDestroy(comm);
    }
    return r != HCCL_SUCCESS;
}

/* The rank table (1.0 layout) of hosts 1 and 2, two ranks each. */
static void ml_table(ml_shared_t *sh)
{
    snprintf(sh->path, sizeof(sh->path), "%s/table.json", ml_dir);
    FILE *f = fopen(sh->path, "w");
    assert_non_null(f);
    fprintf(f, "{\"status\": \"completed\", \"version\": \"1.0\", \"server_count\": \"2\", "
               "\"server_list\": [\n");
    for (int k = 1; k <= 2; k++) {
        fprintf(f,
                " {\"server_id\": \"host%d\", \"host_ip\": \"10.231.0.%d\", \"device\": ["
                "{\"device_id\": \"0\", \"rank_id\": \"%d\"}, {\"device_id\": \"1\", "
                "\"rank_id\": \"%d\"}]}%s\n",
                k, k, 2 * k - 2, 2 * k - 1, k == 1 ? "," : "");
    }
    fprintf(f, "]}\n");
    fclose(f);
}

/* The driver's part, in the pages shared with it (it runs in a child of zt_fork_call). */
typedef struct {
    ml_shared_t *sh;
    long conns;    /* silent connections of the outsider; 0: the guessed-table attempts */
    int rc;        /* 0: the outsider connected, or the two attempts ran */
    int orc;       /* the outsider's exit status */
    int raw_bytes; /* the outsider's fetch as rank 1: bytes it got back */
    int impostor;  /* the impostor's HcclResult */
} ml_drive_t;

/* In a child on host 3: ask rank 0's server for the root info as rank 1,
 * the way a fetch does (the request is public wire format); exits with the
 * number of bytes that came back (0: none) within 2 s. */
static int ml_raw_fetch(void)
{
    if (zt_hosts_enter(ml_hosts.tag, 3) != 0) {
        return 255;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(ML_PORT))};
    inet_pton(AF_INET, "10.231.0.1", &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        return 254;
    }
    uint32_t req[8] = {0x5a435251u, 1, 1, 0, 0x01020304u, 0x05060708u, 0x090a0b0cu, 0x0d0e0f10u};
    if (send(fd, req, sizeof(req), 0) != (ssize_t)sizeof(req)) {
        return 253;
    }
    char buf[8192];
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_WAITALL);
    return n > 0 ? (int)ZC_MIN(n, 250) : 0;
}

/* In a child on host 2 (rank 3's server) without the job secret: init as rank 3. */
static int ml_impostor(const char *path)
{
    if (zt_hosts_enter(ml_hosts.tag, 2) != 0) {
        return 255;
    }
    unsetenv("ZCCL_JOB_SECRET");
    setenv("HCCL_CONNECT_TIMEOUT", "4", 1);
    HcclComm comm = NULL;
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(1) != ACL_SUCCESS) {
        return 254;
    }
    HcclResult r = HcclCommInitClusterInfo(path, 3, &comm);
    return (int)r;
}

static int ml_child(int (*fn)(const char *), const char *arg)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        _exit(fn(arg));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int ml_raw_fetch_fn(const char *unused)
{
    (void)unused;
    return ml_raw_fetch();
}

/* Once rank 0 listens: the outsider's connections (kept open until the
 * ranks are done) or the guessed-table attempts; then the ranks go. */
static int ml_drive(void *arg)
{
    ml_drive_t *d = arg;
    ml_shared_t *sh = d->sh;
    d->rc = -1;
    if (mo_wait_flag(&sh->ready, ML_LAUNCH_S) != 0) {
        return 1;
    }
    if (sh->table) {
        usleep(500000); /* rank 0's server listens by now */
    }
    if (d->conns == 0) {
        d->raw_bytes = ml_child(ml_raw_fetch_fn, NULL);
        d->impostor = ml_child(ml_impostor, sh->path);
        d->rc = 0;
        atomic_store_explicit(&sh->go, 1, memory_order_release);
        return 0;
    }
    char n[24];
    char port[16];
    snprintf(n, sizeof(n), "%ld", d->conns);
    snprintf(port, sizeof(port), "%d", sh->port);
    char *argv[] = {(char *)ml_outsider,        "conns", n, sh->table ? "10.231.0.1" : sh->ip,
                    sh->table ? ML_PORT : port, NULL};
    mo_outsider_t o;
    if (mo_outsider_start(&o, ml_hosts.tag, 3, argv) != 0) {
        atomic_store_explicit(&sh->go, 1, memory_order_release);
        return 1;
    }
    d->rc = mo_outsider_injected(&o);
    atomic_store_explicit(&sh->go, 1, memory_order_release);
    (void)mo_wait_flag(&sh->done, 2 * ML_LAUNCH_S);
    d->orc = mo_outsider_stop(&o);
    return d->rc != 0 || d->orc != 0;
}

static void ml_run(int table, long conns)
{
    ml_shared_t *sh =
        mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    sh->table = table;
    if (table) {
        ml_table(sh);
        setenv("ZCCL_JOB_SECRET", ML_SECRET, 1); /* the members', inherited at fork */
    }
    ml_drive_t *d =
        mmap(NULL, sizeof(*d), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(d != MAP_FAILED);
    *d = (ml_drive_t){.sh = sh, .conns = conns};
    int driver = zt_fork_call(ml_drive, d);
    assert_true(driver > 0);
    double t0 = mo_now();
    int failed = zt_launch_procs(ML_NRANKS, ml_rank, sh, ML_LAUNCH_S);
    double dt = mo_now() - t0;
    atomic_store_explicit(&sh->ready, 1, memory_order_release);
    atomic_store_explicit(&sh->done, 1, memory_order_release);
    int drc = zt_fork_reap(driver, 30);
    unsetenv("ZCCL_JOB_SECRET");
    int bad = failed != 0 || drc != 0;
    if (drc != 0) {
        printf("# the driver: exit %d, outsider connected %d, outsider exit %d  <-- FAIL\n", drc,
               d->rc, d->orc);
    }
    for (int r = 0; r < ML_NRANKS; r++) {
        int ok = sh->init[r] == HCCL_SUCCESS && sh->op[r] == HCCL_SUCCESS;
        printf("# %s, %s: rank %d: init %d, AllReduce %d%s\n", table ? "rank table" : "root info",
               conns > 0 ? "silent connections" : "guessed table", r, sh->init[r], sh->op[r],
               ok ? "" : "  <-- FAIL");
        bad += !ok;
    }
    if (conns > 0) {
        printf("# %ld silent connections to %s at ulimit -n 1024: members done in %.1f s\n", conns,
               table ? "the rank-table port" : "the root listener", dt);
    } else {
        int ok = d->raw_bytes == 0 && d->impostor == HCCL_E_TIMEOUT;
        printf("# guessed table: the outsider's fetch as rank 1 from host 3 got %d bytes; the "
               "impostor on host 2 without ZCCL_JOB_SECRET got %d (want 0 and %d)%s\n",
               d->raw_bytes, d->impostor, HCCL_E_TIMEOUT, ok ? "" : "  <-- FAIL");
        bad += !ok;
    }
    munmap(d, sizeof(*d));
    munmap(sh, sizeof(*sh));
    assert_int_equal(bad, 0);
}

static void test_root_flood_1100(void **state)
{
    (void)state;
    ml_run(0, 1100);
}

static void test_root_flood_3000(void **state)
{
    (void)state;
    ml_run(0, 3000);
}

static void test_table_flood_1100(void **state)
{
    (void)state;
    ml_run(1, 1100);
}

static void test_table_flood_3000(void **state)
{
    (void)state;
    ml_run(1, 3000);
}

static void test_guessed_table(void **state)
{
    (void)state;
    ml_run(1, 0);
}

int main(int argc, char **argv)
{
    if ((argc != 4 && argc != 5) || zt_hosts_parse(&ml_hosts, argv[1], argv[2], "2,2") != 0) {
        fprintf(stderr, "usage: %s TAG NETNS_SH MH_OUTSIDER [TEST_FILTER]\n", argv[0]);
        return 2;
    }
    if (argc == 5) {
        cmocka_set_test_filter(argv[4]);
    }
    ml_outsider = argv[3];
    snprintf(ml_dir, sizeof(ml_dir), "/tmp/zt-listen-%d", (int)getpid());
    if (mkdir(ml_dir, 0700) != 0) {
        perror(ml_dir);
        return 1;
    }
    setenv("HCCL_CONNECT_TIMEOUT", "30", 1);
    setenv("HCCL_EXEC_TIMEOUT", "20", 1);
    setenv("ZCCL_RANKTABLE_PORT", ML_PORT, 1);
    signal(SIGPIPE, SIG_IGN);
    zt_hosts_use(&ml_hosts);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_root_flood_1100),  cmocka_unit_test(test_root_flood_3000),
        cmocka_unit_test(test_table_flood_1100), cmocka_unit_test(test_table_flood_3000),
        cmocka_unit_test(test_guessed_table),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char path[200];
    snprintf(path, sizeof(path), "%s/table.json", ml_dir);
    unlink(path);
    rmdir(ml_dir);
    return rc;
}
