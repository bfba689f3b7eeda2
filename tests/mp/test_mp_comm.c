/*
 * Communicator API with forked ranks: the bodies of tests/common/zt_comm.h
 * (rank size / id / name, error strings, barrier, config, argument errors,
 * the zero-copy rule errors, path choice, stream order, the NULL stream),
 * and the init faults only processes can show (wrong nranks, duplicate or
 * out-of-range rank, garbage root info) that must fail on every rank within
 * HCCL_CONNECT_TIMEOUT. The same bodies run as threads in
 * tests/unit/hccl/test_hccl_threads_comm.c and under mpirun in
 * tests/mpi/test_mpi_comm.c.
 *
 * HCCL_CONNECT_TIMEOUT is set to ZT_CONNECT_S here, before any rank is
 * forked; the library reads it once per process, at first use, in the child.
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

#include "zt_check.h"
#include "zt_comm.h"

#define ZT_CONNECT_S 4

/* Memory the forked ranks of one launch share (MAP_SHARED, before fork). */
static void *shared_new(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    memset(p, 0, size);
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_api(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 1; n <= 4; n++) {
        zt_comm_shared_t *sh = shared_new(sizeof(*sh));
        failed += zt_launch_procs(n, zt_comm_api, sh, 60);
        munmap(sh, sizeof(*sh));
    }
    assert_int_equal(failed, 0);
}

static void test_config(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 1; n <= 3; n++) {
        failed += zt_launch_procs(n, zt_comm_config, NULL, 120);
    }
    assert_int_equal(failed, 0);
}

/* ---- init faults ------------------------------------------------------------- */

enum {
    FAULT_NRANKS_LAST, /* the last rank says nranks + 1 */
    FAULT_NRANKS_ROOT, /* rank 0 says nranks - 1 */
    FAULT_DUP_RANK,    /* the last rank claims rank 1 */
    FAULT_RANK_RANGE,  /* the last rank claims rank nranks */
    FAULT_GARBAGE_ONE, /* the last rank passes 0xff bytes as root info */
    FAULT_GARBAGE_ALL, /* every rank passes a root info with only an IP string */
    FAULT_COUNT
};

static int rank_init_fault(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    const int *fault = arg;
    zt_env_t env = {.rank = rank, .nranks = nranks};
    if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
        return 1;
    }
    HcclRootInfo ri = *root;
    uint32_t nr = (uint32_t)nranks;
    uint32_t rk = (uint32_t)rank;
    int last = rank == nranks - 1;
    switch (*fault) {
    case FAULT_NRANKS_LAST:
        nr += last ? 1 : 0;
        break;
    case FAULT_NRANKS_ROOT:
        nr -= rank == 0 ? 1 : 0;
        break;
    case FAULT_DUP_RANK:
        rk = last ? 1 : rk;
        break;
    case FAULT_RANK_RANGE:
        rk = last ? (uint32_t)nranks : rk;
        break;
    case FAULT_GARBAGE_ONE:
        if (last) {
            memset(&ri, 0xff, sizeof(ri));
        }
        break;
    default:
        memset(&ri, 0, sizeof(ri));
        snprintf(ri.internal, sizeof(ri.internal), "127.0.0.1");
        break;
    }
    HcclComm comm = NULL;
    double t0 = now_s();
    HcclResult r = HcclCommInitRootInfo(nr, &ri, rk, &comm);
    double dt = now_s() - t0;
    printf("fault %d rank %d/%d: %s after %.2f s\n", *fault, rank, nranks, HcclGetErrorString(r),
           dt);
    int fails = 0;
    if (r == HCCL_SUCCESS) {
        zt_report(&env, "fault %d: init succeeded", *fault);
        HcclCommDestroy(comm);
        fails++;
    }
    ZT_EXPECT(&env, dt < ZT_CONNECT_S + 7.0, "fault %d: init took %.1f s", *fault, dt);
    return fails;
}

static void test_init_faults(void **state)
{
    (void)state;
    int failed = 0;
    for (int f = 0; f < FAULT_COUNT; f++) {
        int *fault = shared_new(sizeof(*fault));
        *fault = f;
        failed += zt_launch_procs(3, rank_init_fault, fault, 60);
        munmap(fault, sizeof(*fault));
    }
    assert_int_equal(failed, 0);
}

static void test_zc_rules(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 1; n <= 3; n++) {
        failed += zt_launch_procs(n, zt_comm_zc_rules, NULL, 60);
    }
    assert_int_equal(failed, 0);
}

static void test_paths_and_streams(void **state)
{
    (void)state;
    int failed = 0;
    for (int n = 1; n <= 3; n++) {
        failed += zt_launch_procs(n, zt_comm_paths, NULL, 60);
    }
    assert_int_equal(failed, 0);
}

int main(void)
{
    char s[16];
    snprintf(s, sizeof(s), "%d", ZT_CONNECT_S);
    setenv("HCCL_CONNECT_TIMEOUT", s, 1);
    setenv("HCCL_EXEC_TIMEOUT", "30", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_init_faults),
        cmocka_unit_test(test_zc_rules),
        cmocka_unit_test(test_paths_and_streams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
