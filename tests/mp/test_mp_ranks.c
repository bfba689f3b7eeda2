/*
 * Many ranks on one host, forked: every table by rank is sized at init from
 * the rank count (docs/decisions/0032-rank-limit-sized-at-init.md).
 *
 *  - ZT_MANY ranks (more than the 64 the shared structs once held) on 2 cores:
 *    init, a checked fp32 SUM AllReduce of 8 B (inline) and 1 MiB
 *    (zero-copy), a checked AllGather of 4 KiB per rank, Barrier, destroy;
 *  - more ranks than ZCCL_MAX_LOCAL_RANKS: every rank's init fails with
 *    HCCL_E_PARA;
 *  - a peer whose control segment is one page longer than the layout of its
 *    rank count: refused at attach; the ranks that refused it fail init with
 *    HCCL_E_INTERNAL, that peer with HCCL_E_REMOTE (a peer's failure).
 *
 * `test_mp_ranks --bench N...` runs the first case at each N with timed
 * loops instead and prints a table: init time, op times, Pss per rank
 * (scripts/bench_ranks.sh; docs/perf-log.md). `test_mp_ranks --ranks N`
 * runs the checked case alone at N ranks (256: the script, not ctest).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zc/status.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"
#include "zt_launch.h"

/* Ranks of the ctest case: 256 take about 15 s on 2 cores; sanitizer builds
 * (several times slower, tens of MB per process) define 64. */
#ifndef ZT_MANY
#define ZT_MANY 256
#endif
#define ZT_AR_BYTES (1u << 20)
#define ZT_AG_COUNT 1024u /* floats per rank */
#define ZT_TIMEOUT_S 300

/* What each rank reports to the parent (MAP_SHARED, made before the fork). */
typedef struct {
    int bench; /* timed loops instead of one checked round */
    uint64_t init_ns[ZT_MAX_PROCS];
    uint64_t pss_kb[ZT_MAX_PROCS];
    uint64_t ar8_ns, ar1m_ns, ag_ns, bar_ns; /* rank 0: per op */
} zt_ranks_out_t;

/* ---- a peer's control segment of the wrong size ------------------------------------ */

/* Set in one rank before its init: its next offer (the control segment, the
 * first thing init offers) claims, and gets, one page more. */
static int zt_grow_next;

int zccl_broker_offer(int fd, size_t size, int validate_pid, uint64_t *token)
{
    int (*real)(int, size_t, int, uint64_t *) =
        (int (*)(int, size_t, int, uint64_t *))dlsym(RTLD_NEXT, "zccl_broker_offer");
    if (real == NULL) {
        return ZC_ERR_INTERNAL;
    }
    if (zt_grow_next) {
        zt_grow_next = 0;
        size += 4096;
        if (ftruncate(fd, (off_t)size) != 0) {
            return ZC_ERR_SYS;
        }
    }
    return real(fd, size, validate_pid, token);
}

/* ---- helpers ---------------------------------------------------------------------------- */

static uint64_t zt_pss_kb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    uint64_t kb = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "Pss: %lu kB", &kb) == 1) {
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return kb;
}

static HcclResult zt_sync(zt_env_t *env, HcclResult r)
{
    if (r == HCCL_SUCCESS && aclrtSynchronizeStream(env->stream) != ACL_SUCCESS) {
        HcclResult a = HCCL_SUCCESS;
        HcclGetCommAsyncError(env->comm, &a);
        r = a != HCCL_SUCCESS ? a : HCCL_E_INTERNAL;
    }
    return r;
}

/* Rank q's slot holds q * ZT_AG_COUNT + i (exact in fp32 up to 2^24). */
static int zt_check_allgather(zt_env_t *env, float *send, float *recv)
{
    for (uint32_t i = 0; i < ZT_AG_COUNT; i++) {
        send[i] = (float)((uint32_t)env->rank * ZT_AG_COUNT + i);
    }
    HcclResult r = zt_sync(
        env, HcclAllGather(send, recv, ZT_AG_COUNT, HCCL_DATA_TYPE_FP32, env->comm, env->stream));
    if (r != HCCL_SUCCESS) {
        fprintf(stderr, "rank %d: AllGather: %d\n", env->rank, (int)r);
        return 1;
    }
    for (size_t k = 0; k < (size_t)env->nranks * ZT_AG_COUNT; k++) {
        if (recv[k] != (float)k) {
            fprintf(stderr, "rank %d: AllGather [%zu] = %g\n", env->rank, k, (double)recv[k]);
            return 1;
        }
    }
    return 0;
}

/* Mean time of n runs of one op (rank 0's view; every rank loops alike). */
static uint64_t zt_time_ar(zt_env_t *env, float *buf, size_t count, int n)
{
    uint64_t t0 = zc_time_ns();
    for (int i = 0; i < n; i++) {
        if (zt_sync(env, HcclAllReduce(buf, buf, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM,
                                       env->comm, env->stream)) != HCCL_SUCCESS) {
            return 0;
        }
    }
    return (zc_time_ns() - t0) / (uint64_t)n;
}

static uint64_t zt_time_ag(zt_env_t *env, float *send, float *recv, int n)
{
    uint64_t t0 = zc_time_ns();
    for (int i = 0; i < n; i++) {
        if (zt_sync(env, HcclAllGather(send, recv, ZT_AG_COUNT, HCCL_DATA_TYPE_FP32, env->comm,
                                       env->stream)) != HCCL_SUCCESS) {
            return 0;
        }
    }
    return (zc_time_ns() - t0) / (uint64_t)n;
}

static uint64_t zt_time_barrier(zt_env_t *env, int n)
{
    uint64_t t0 = zc_time_ns();
    for (int i = 0; i < n; i++) {
        if (zt_sync(env, HcclBarrier(env->comm, env->stream)) != HCCL_SUCCESS) {
            return 0;
        }
    }
    return (zc_time_ns() - t0) / (uint64_t)n;
}

static int zt_bench_ops(zt_env_t *env, zt_ranks_out_t *out, float *a, float *ag)
{
    /* a warm-up of each, then the timed loops */
    uint64_t ar8 = zt_time_ar(env, a, 2, 5) > 0 ? zt_time_ar(env, a, 2, 50) : 0;
    uint64_t ar1m =
        zt_time_ar(env, a, ZT_AR_BYTES / 4, 2) > 0 ? zt_time_ar(env, a, ZT_AR_BYTES / 4, 10) : 0;
    uint64_t agt = zt_time_ag(env, a, ag, 2) > 0 ? zt_time_ag(env, a, ag, 10) : 0;
    uint64_t bar = zt_time_barrier(env, 50);
    if (env->rank == 0) {
        out->ar8_ns = ar8;
        out->ar1m_ns = ar1m;
        out->ag_ns = agt;
        out->bar_ns = bar;
    }
    return ar8 == 0 || ar1m == 0 || agt == 0 || bar == 0;
}

/* ---- the rank bodies -------------------------------------------------------------------- */

static int zt_rank_many(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    zt_ranks_out_t *out = arg;
    zt_env_t env;
    uint64_t t0 = zc_time_ns();
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    out->init_ns[rank] = zc_time_ns() - t0;
    /* block 0: the AllReduce buffer and AllGather's send; block 1: AllGather's output */
    size_t ag_bytes = (size_t)nranks * ZT_AG_COUNT * sizeof(float);
    size_t block = ag_bytes > ZT_AR_BYTES ? ag_bytes : ZT_AR_BYTES;
    int bad = zt_zc_open(&env.zc, env.comm, env.device, block, 2, 1) != 0;
    float *a = env.zc.va;
    float *ag = (float *)(void *)((char *)env.zc.va + env.zc.block);
    if (!bad && out->bench) {
        bad = zt_bench_ops(&env, out, a, ag);
    } else if (!bad) {
        bad = zt_ramp_checked(&env, a, 2) || zt_ramp_checked(&env, a, ZT_AR_BYTES / 4) ||
              zt_check_allgather(&env, a, ag);
        HcclResult r = zt_sync(&env, HcclBarrier(env.comm, env.stream));
        if (r != HCCL_SUCCESS) {
            fprintf(stderr, "rank %d: Barrier: %d\n", rank, (int)r);
            bad = 1;
        }
    }
    out->pss_kb[rank] = zt_pss_kb();
    if (zt_env_close(&env) != 0) {
        fprintf(stderr, "rank %d: teardown failed\n", rank);
        bad = 1;
    }
    return bad;
}

/* Init must fail with want on this rank (want_grow on rank grow, after
 * zt_grow_next). */
typedef struct {
    HcclResult want;
    HcclResult want_grow;
    int grow;            /* the rank whose control segment is a page too long; -1: none */
    atomic_int returned; /* ranks back from init (MAP_SHARED) */
} zt_refuse_t;

static int zt_rank_refused(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    zt_refuse_t *x = arg;
    HcclResult want = rank == x->grow ? x->want_grow : x->want;
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
        return 1;
    }
    zt_grow_next = rank == x->grow;
    HcclComm comm = NULL;
    HcclResult r = HcclCommInitRootInfo((uint32_t)nranks, root, (uint32_t)rank, &comm);
    /* Stay until every rank is back: a rank that exits while a peer still
     * finishes its init turns that peer's verdict into HCCL_E_REMOTE. */
    atomic_fetch_add(&x->returned, 1);
    uint64_t until = zc_time_ns() + 30000000000ull;
    while (atomic_load(&x->returned) < nranks && zc_time_ns() < until) {
        usleep(1000);
    }
    if (r != want || comm != NULL) {
        fprintf(stderr, "rank %d: init of %d ranks returned %d, want %d\n", rank, nranks, (int)r,
                (int)want);
        if (r == HCCL_SUCCESS) {
            (void)HcclCommDestroy(comm);
        }
        return 1;
    }
    return 0;
}

/* ---- cases --------------------------------------------------------------------------------- */

static zt_ranks_out_t *zt_out_new(int bench)
{
    zt_ranks_out_t *o =
        mmap(NULL, sizeof(*o), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (o == MAP_FAILED) {
        return NULL;
    }
    memset(o, 0, sizeof(*o));
    o->bench = bench;
    return o;
}

static int zt_run_many(int nranks, int bench)
{
    zt_ranks_out_t *o = zt_out_new(bench);
    if (o == NULL) {
        return -1;
    }
    uint64_t t0 = zc_time_ns();
    int failed = zt_launch_procs(nranks, zt_rank_many, o, ZT_TIMEOUT_S);
    double wall = (double)(zc_time_ns() - t0) / 1e9;
    uint64_t init_max = 0, pss = 0;
    for (int r = 0; r < nranks; r++) {
        init_max = o->init_ns[r] > init_max ? o->init_ns[r] : init_max;
        pss += o->pss_kb[r];
    }
    if (bench) {
        printf("| %d | %.0f | %.1f | %.0f | %.0f | %.0f | %.2f |\n", nranks, (double)init_max / 1e6,
               (double)o->ar8_ns / 1e3, (double)o->ar1m_ns / 1e3, (double)o->ag_ns / 1e3,
               (double)o->bar_ns / 1e3, (double)pss / (double)nranks / 1024.0);
    } else {
        printf("%d ranks: %d failed; init %.0f ms (slowest rank), Pss %.2f MiB per rank, %.1f s "
               "in all\n",
               nranks, failed, (double)init_max / 1e6, (double)pss / (double)nranks / 1024.0, wall);
    }
    fflush(stdout);
    munmap(o, sizeof(*o));
    return failed;
}

static void test_many_ranks(void **state)
{
    (void)state;
    assert_int_equal(zt_run_many(ZT_MANY, 0), 0);
}

static int zt_run_refused(int nranks, HcclResult want, int grow, HcclResult want_grow)
{
    zt_refuse_t *x =
        mmap(NULL, sizeof(*x), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(x != MAP_FAILED);
    x->want = want;
    x->grow = grow;
    x->want_grow = want_grow;
    atomic_init(&x->returned, 0);
    int failed = zt_launch_procs(nranks, zt_rank_refused, x, 60);
    munmap(x, sizeof(*x));
    return failed;
}

static void test_over_limit(void **state)
{
    (void)state;
    /* read by every forked rank at its first use of the library */
    setenv("ZCCL_MAX_LOCAL_RANKS", "3", 1);
    int failed = zt_run_refused(4, HCCL_E_PARA, -1, HCCL_E_PARA);
    unsetenv("ZCCL_MAX_LOCAL_RANKS");
    assert_int_equal(failed, 0);
}

static void test_wrong_segment(void **state)
{
    (void)state;
    assert_int_equal(zt_run_refused(3, HCCL_E_INTERNAL, 1, HCCL_E_REMOTE), 0);
}

int main(int argc, char **argv)
{
    setenv("HCCL_EXEC_TIMEOUT", "120", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "120", 0);
    if (argc >= 3 && (strcmp(argv[1], "--bench") == 0 || strcmp(argv[1], "--ranks") == 0)) {
        int bench = strcmp(argv[1], "--bench") == 0;
        int failed = 0;
        if (bench) {
            printf(
                "| ranks | init ms | AllReduce 8 B us | AllReduce 1 MiB us | AllGather 4 KiB "
                "per rank us | Barrier us | Pss MiB per rank |\n|---|---|---|---|---|---|---|\n");
        }
        for (int i = 2; i < argc; i++) {
            int n = atoi(argv[i]);
            failed += n < 1 || n > ZT_MAX_PROCS || zt_run_many(n, bench) != 0;
        }
        return failed != 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_over_limit),
        cmocka_unit_test(test_wrong_segment),
        cmocka_unit_test(test_many_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
