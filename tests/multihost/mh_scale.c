/*
 * One large communicator across namespace hosts, for the scale figures
 * (ctest runs it at 3 x 33 ranks; 1,024 ranks take minutes on a small
 * machine).
 *
 * Writes a rank table (1.0 layout: server "hostK", host_ip 10.231.0.K,
 * device ids counted per host) for LAYOUT, forks every rank (each enters
 * its host, then knows only the path and its rank), and each runs
 * HcclCommInitClusterInfo, an untimed Barrier (everyone is in), then ITERS x
 * Barrier, AllReduce (int32 SUM) and AllGather (int32), every result
 * checked. Each rank reports its init time, mean op times, VmRSS, VmHWM and
 * Pss after the ops, the machine's MemAvailable then and its
 * HcclCommDestroy time; the parent prints min / median / max over ranks.
 *
 * Usage: mh_scale TAG NETNS_SH LAYOUT [ITERS [AR_COUNT [AG_COUNT]]]
 * (LAYOUT: ranks per host, e.g. 64,64), through tests/multihost/run.sh:
 *   tests/multihost/run.sh 2 900 build/tests/mh_scale @TAG@ @NETNS@ 64,64
 * Defaults: ZCCL_DEVICES=64, HCCL_BUFFSIZE=1, connect and exec timeouts
 * 900 s, ZCCL_RANKTABLE_PORT as set (each set-up has its own addresses).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"
#include "hccl/hccl.h"
#include "zt_netns.h"

#define MH_MAX_RANKS 1024
#define MH_MAX_HOSTS 200

typedef struct {
    double init_s;
    double destroy_s;
    double op_us[3]; /* Barrier, AllReduce, AllGather: mean per op */
    long rss_kb;
    long hwm_kb;
    long pss_kb;
    long avail_kb;
    int fails;
    int done;
} mh_res_t;

static const char *const mh_ops[3] = {"Barrier", "AllReduce", "AllGather"};

typedef struct {
    const char *tag;
    const char *path;
    int nranks;
    int iters;
    size_t ar_count;
    size_t ag_count;
    int host_of[MH_MAX_RANKS];
    int dev_of[MH_MAX_RANKS];
    double t0; /* the launch */
    mh_res_t *res;
} mh_job_t;

static double mh_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The value of "key:" (kB) in a /proc file, or -1. */
static long mh_proc_kb(const char *file, const char *key)
{
    FILE *f = fopen(file, "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return v;
}

static int mh_layout(mh_job_t *j, const char *layout)
{
    int host = 0;
    j->nranks = 0;
    for (const char *p = layout; *p != '\0'; host++) {
        char *end = NULL;
        long n = strtol(p, &end, 10);
        if (end == p || n < 1 || n > 64 || host >= MH_MAX_HOSTS || j->nranks + n > MH_MAX_RANKS) {
            fprintf(stderr, "mh_scale: bad layout '%s' (1..64 ranks per host, %d ranks)\n", layout,
                    MH_MAX_RANKS);
            return -1;
        }
        for (long d = 0; d < n; d++) {
            j->host_of[j->nranks] = host + 1;
            j->dev_of[j->nranks++] = (int)d;
        }
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static int mh_table(const mh_job_t *j, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return -1;
    }
    int nhosts = j->host_of[j->nranks - 1];
    fprintf(f,
            "{\"status\": \"completed\", \"version\": \"1.0\", \"server_count\": \"%d\",\n"
            " \"server_list\": [\n",
            nhosts);
    for (int k = 1, r = 0; k <= nhosts; k++) {
        fprintf(f, "  {\"server_id\": \"host%d\", \"host_ip\": \"10.231.0.%d\", \"device\": [", k,
                k);
        for (int first = 1; r < j->nranks && j->host_of[r] == k; r++, first = 0) {
            fprintf(f, "%s{\"device_id\": \"%d\", \"rank_id\": \"%d\"}", first ? "" : ", ",
                    j->dev_of[r], r);
        }
        fprintf(f, "]}%s\n", k < nhosts ? "," : "");
    }
    fprintf(f, " ]\n}\n");
    return fclose(f);
}

/* ITERS of one op, results checked after each; the mean time per op. */
static double mh_op(const mh_job_t *j, int op, HcclComm comm, aclrtStream s, int32_t *send,
                    int32_t *recv, int rank, int *fails)
{
    int n = j->nranks;
    double t0 = mh_now();
    for (int it = 0; it < j->iters; it++) {
        HcclResult r = op == 0 ? HcclBarrier(comm, s)
                       : op == 1
                           ? HcclAllReduce(send, recv, j->ar_count, HCCL_DATA_TYPE_INT32,
                                           HCCL_REDUCE_SUM, comm, s)
                           : HcclAllGather(send, recv, j->ag_count, HCCL_DATA_TYPE_INT32, comm, s);
        if (r != HCCL_SUCCESS || aclrtSynchronizeStream(s) != ACL_SUCCESS) {
            fprintf(stderr, "rank %d: %s #%d failed (%d)\n", rank, mh_ops[op], it, (int)r);
            (*fails)++;
            return 0;
        }
        size_t bad = 0;
        for (size_t i = 0; op == 1 && i < j->ar_count; i++) {
            /* sum over ranks q of (q + 1 + i) */
            bad += recv[i] != (int32_t)((int64_t)n * (n + 1) / 2 + (int64_t)n * (int64_t)i);
        }
        for (size_t q = 0; op == 2 && q < (size_t)n; q++) {
            for (size_t i = 0; i < j->ag_count; i++) {
                bad += recv[q * j->ag_count + i] != (int32_t)(q + 1 + i);
            }
        }
        if (bad > 0) {
            fprintf(stderr, "rank %d: %s #%d: %zu wrong elements\n", rank, mh_ops[op], it, bad);
            (*fails)++;
        }
    }
    return (mh_now() - t0) / j->iters * 1e6;
}

static int mh_rank(const mh_job_t *j, int rank)
{
    mh_res_t *res = &j->res[rank];
    if (zt_hosts_enter(j->tag, j->host_of[rank]) != 0 || aclInit(NULL) != ACL_SUCCESS) {
        return 1;
    }
    double t0 = mh_now();
    HcclComm comm = NULL;
    HcclResult r = HcclCommInitClusterInfo(j->path, (uint32_t)rank, &comm);
    res->init_s = mh_now() - t0;
    if (r != HCCL_SUCCESS) {
        fprintf(stderr, "rank %d: init failed (%d) after %.1f s\n", rank, (int)r, res->init_s);
        return 1;
    }
    aclrtStream s = NULL;
    int32_t *send = NULL;
    int32_t *recv = NULL;
    size_t big = j->ar_count > j->ag_count ? j->ar_count : j->ag_count;
    if (aclrtCreateStream(&s) != ACL_SUCCESS ||
        aclrtMalloc((void **)&send, big * 4, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS ||
        aclrtMalloc((void **)&recv, (j->ag_count * (size_t)j->nranks + j->ar_count) * 4,
                    ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        fprintf(stderr, "rank %d: stream or buffers failed\n", rank);
        return 1;
    }
    for (size_t i = 0; i < big; i++) {
        send[i] = (int32_t)(rank + 1 + i);
    }
    /* One untimed Barrier first: the timed ops then measure the ops, not the
     * wait for the slowest rank's init (tens of seconds at 1,024 ranks). */
    if (HcclBarrier(comm, s) != HCCL_SUCCESS || aclrtSynchronizeStream(s) != ACL_SUCCESS) {
        fprintf(stderr, "rank %d: the first Barrier failed\n", rank);
        res->fails++;
    }
    for (int op = 0; op < 3; op++) {
        if (rank == 0 || rank == j->nranks - 1) {
            fprintf(stderr, "# rank %d: %s at %.1f s\n", rank,
                    op == 0 ? "init done" : mh_ops[op - 1], mh_now() - j->t0);
        }
        res->op_us[op] = mh_op(j, op, comm, s, send, recv, rank, &res->fails);
    }
    res->rss_kb = mh_proc_kb("/proc/self/status", "VmRSS");
    res->hwm_kb = mh_proc_kb("/proc/self/status", "VmHWM");
    res->pss_kb = mh_proc_kb("/proc/self/smaps_rollup", "Pss");
    res->avail_kb = mh_proc_kb("/proc/meminfo", "MemAvailable");
    aclrtFree(send);
    aclrtFree(recv);
    aclrtDestroyStream(s);
    t0 = mh_now();
    if (HcclCommDestroy(comm) != HCCL_SUCCESS) {
        res->fails++;
    }
    res->destroy_s = mh_now() - t0;
    res->done = 1;
    return res->fails != 0;
}

static int mh_cmp(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

/* min / median / max of one field over the ranks that finished. */
static void mh_stat(const mh_job_t *j, const char *what, double (*get)(const mh_res_t *))
{
    double v[MH_MAX_RANKS];
    int n = 0;
    for (int r = 0; r < j->nranks; r++) {
        if (j->res[r].done) {
            v[n++] = get(&j->res[r]);
        }
    }
    if (n == 0) {
        return;
    }
    qsort(v, (size_t)n, sizeof(v[0]), mh_cmp);
    printf("| %s | %.2f | %.2f | %.2f |\n", what, v[0], v[n / 2], v[n - 1]);
}

static double mh_get_init(const mh_res_t *r)
{
    return r->init_s;
}
static double mh_get_destroy(const mh_res_t *r)
{
    return r->destroy_s;
}
static double mh_get_bar(const mh_res_t *r)
{
    return r->op_us[0];
}
static double mh_get_ar(const mh_res_t *r)
{
    return r->op_us[1];
}
static double mh_get_ag(const mh_res_t *r)
{
    return r->op_us[2];
}
static double mh_get_rss(const mh_res_t *r)
{
    return (double)r->rss_kb / 1024.0;
}
static double mh_get_hwm(const mh_res_t *r)
{
    return (double)r->hwm_kb / 1024.0;
}
static double mh_get_pss(const mh_res_t *r)
{
    return (double)r->pss_kb / 1024.0;
}
static double mh_get_avail(const mh_res_t *r)
{
    return (double)r->avail_kb / 1048576.0;
}

static int mh_report(const mh_job_t *j, const char *layout, double wall)
{
    int done = 0;
    int fails = 0;
    for (int r = 0; r < j->nranks; r++) {
        done += j->res[r].done;
        fails += j->res[r].fails;
    }
    printf("# %d ranks (layout %s), %d iterations, AllReduce %zu x int32, AllGather %zu x int32 "
           "per rank: %d ranks finished, %d failures, %.1f s wall\n",
           j->nranks, layout, j->iters, j->ar_count, j->ag_count, done, fails, wall);
    printf("| per rank | min | median | max |\n|---|---:|---:|---:|\n");
    mh_stat(j, "init (s)", mh_get_init);
    mh_stat(j, "Barrier (us/op)", mh_get_bar);
    mh_stat(j, "AllReduce (us/op)", mh_get_ar);
    mh_stat(j, "AllGather (us/op)", mh_get_ag);
    mh_stat(j, "VmRSS after ops (MiB)", mh_get_rss);
    mh_stat(j, "VmHWM (MiB)", mh_get_hwm);
    mh_stat(j, "Pss after ops (MiB)", mh_get_pss);
    mh_stat(j, "machine MemAvailable (GiB)", mh_get_avail);
    mh_stat(j, "HcclCommDestroy (s)", mh_get_destroy);
    return done == j->nranks && fails == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    static mh_job_t j;
    if (argc < 4 || mh_layout(&j, argv[3]) != 0) {
        fprintf(stderr, "usage: %s TAG NETNS_SH LAYOUT [ITERS [AR_COUNT [AG_COUNT]]]\n", argv[0]);
        return 2;
    }
    j.tag = argv[1];
    j.iters = argc > 4 ? atoi(argv[4]) : 20;
    j.ar_count = argc > 5 ? (size_t)atol(argv[5]) : 4096;
    j.ag_count = argc > 6 ? (size_t)atol(argv[6]) : 256;
    if (j.iters < 1 || j.ar_count < 1 || j.ag_count < 1) {
        fprintf(stderr, "mh_scale: ITERS, AR_COUNT and AG_COUNT must be positive\n");
        return 2;
    }
    setenv("ZCCL_DEVICES", "64", 0);
    setenv("HCCL_BUFFSIZE", "1", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "900", 0);
    setenv("HCCL_EXEC_TIMEOUT", "900", 0);
    static char path[300];
    snprintf(path, sizeof(path), "%s/zccl-mh-scale-%d.json",
             getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp", (int)getpid());
    j.path = path;
    j.res = mmap(NULL, sizeof(mh_res_t) * MH_MAX_RANKS, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (j.res == MAP_FAILED || mh_table(&j, path) != 0) {
        fprintf(stderr, "mh_scale: cannot write %s or map results: %s\n", path, strerror(errno));
        return 1;
    }
    fflush(stdout);
    double t0 = mh_now();
    j.t0 = t0;
    static pid_t pid[MH_MAX_RANKS];
    for (int r = 0; r < j.nranks; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            _exit(mh_rank(&j, r));
        }
        if (pid[r] < 0) {
            fprintf(stderr, "mh_scale: fork of rank %d: %s\n", r, strerror(errno));
            break;
        }
    }
    for (int r = 0; r < j.nranks && pid[r] > 0; r++) {
        int st = 0;
        if (waitpid(pid[r], &st, 0) == pid[r] && WIFSIGNALED(st)) {
            fprintf(stderr, "mh_scale: rank %d killed by signal %d\n", r, WTERMSIG(st));
        }
    }
    int rc = mh_report(&j, argv[3], mh_now() - t0);
    unlink(path);
    return rc;
}
