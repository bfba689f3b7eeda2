/*
 * Ranks kept a CPU apart on busy cores (ZCCL_SPREAD, hccl_ctrl.c
 * zh_comm_sleep): while yields are off, a rank whose caller's thread sleeps
 * waiting for a peer's post has the CPU that peer last posted from out of
 * its affinity mask, and has its whole mask back when the op is done.
 *
 * Two threads of this process are the ranks. Rank 1 runs alone on one CPU.
 * A busy loop and a thread that keeps yielding beside it keep the process's
 * yields off. Then, op after op, rank 0 starts an AllReduce at once while
 * rank 1 watches rank 0's mask for up to 50 ms before it joins: the mask must
 * lose rank 1's CPU in one of the ops at least (rank 0 sleeps there for up to
 * 1 ms before its worker takes the op over), and each op's result must be
 * right with rank 0's mask whole again after it.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "zc/sync.h"
#include "zt_launch.h"

#define OPS 40
#define COUNT 1024
#define WATCH_NS 50000000ull

static pthread_t rank0_thread;
static atomic_int busy_stop;
static int watched_cpu; /* rank 1's CPU */

static int pin_self(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
}

static void *spin_main(void *arg)
{
    pin_self(*(int *)arg);
    while (!atomic_load_explicit(&busy_stop, memory_order_relaxed)) {
        zc_cpu_relax();
    }
    return NULL;
}

/* Yields beside the busy loop: each one that runs hands it a slice and turns
 * the process's yields off again (zc_sync.c). */
static void *yield_main(void *arg)
{
    pin_self(*(int *)arg);
    struct timespec pause = {0, 100000};
    while (!atomic_load_explicit(&busy_stop, memory_order_relaxed)) {
        (void)zc_yield();
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* 1 once rank 0's mask lacks the watched CPU within WATCH_NS. */
static int watch_rank0(void)
{
    uint64_t until = zc_time_ns() + WATCH_NS;
    while (zc_time_ns() < until) {
        cpu_set_t m;
        if (pthread_getaffinity_np(rank0_thread, sizeof(m), &m) == 0 &&
            !CPU_ISSET(watched_cpu, &m)) {
            return 1;
        }
    }
    return 0;
}

static int fence_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    int *fenced = arg;
    if (rank == 1 && pin_self(watched_cpu) != 0) {
        return 1;
    }
    cpu_set_t whole;
    pthread_getaffinity_np(pthread_self(), sizeof(whole), &whole);
    if (rank == 0) {
        rank0_thread = pthread_self();
    }
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    float buf[COUNT];
    int fails = 0;
    for (int i = 0; i < OPS && fails == 0; i++) {
        if (rank == 1 && i >= 4 && watch_rank0()) {
            (*fenced)++; /* only rank 1 counts; read after the ranks are joined */
        }
        fails += zt_ramp_checked(&env, buf, COUNT);
        cpu_set_t m;
        pthread_getaffinity_np(pthread_self(), sizeof(m), &m);
        if (!CPU_EQUAL(&m, &whole)) {
            fprintf(stderr, "rank %d: op %d: the thread's mask was not given back\n", rank, i);
            fails++;
        }
    }
    return fails + (zt_env_close(&env) != 0);
}

static void test_sleeper_fenced_off_peer_cpu(void **state)
{
    (void)state;
    cpu_set_t all;
    assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
    int cpus[2];
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++) {
        if (CPU_ISSET(c, &all)) {
            cpus[n++] = c;
        }
    }
    if (n < 2) {
        skip(); /* one CPU: no other to keep off */
    }
    int busy_cpu = cpus[0];
    watched_cpu = cpus[1];
    pthread_t spinner, yielder;
    assert_int_equal(pthread_create(&spinner, NULL, spin_main, &busy_cpu), 0);
    assert_int_equal(pthread_create(&yielder, NULL, yield_main, &busy_cpu), 0);
    int fenced = 0;
    int r = zt_launch_threads(2, fence_rank, &fenced);
    atomic_store(&busy_stop, 1);
    pthread_join(spinner, NULL);
    pthread_join(yielder, NULL);
    assert_int_equal(r, 0);
    printf("rank 0 was kept off rank 1's CPU in %d of %d ops\n", fenced, OPS - 4);
    assert_true(fenced > 0);
}

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("ZCCL_LOG_LEVEL", "warn", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sleeper_fenced_off_peer_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
