/*
 * A sleeper is woken by every barrier post (decision 0037).
 *
 * With no more ranks than cores, ranks post their barriers without a full
 * fence (zh_bar_post), and a rank that goes to sleep on a peer's barrier
 * flag makes every rank's threads pass a barrier first (zc_fence_peers).
 * Should either half be missing, a post can land between a sleeper's count
 * and its read of the flag unseen by both, and the sleeper waits out its
 * 100 ms slice instead of waking.
 *
 * Two forked ranks run OPS AllReduce ops; before each one rank 1 sleeps a
 * while (0.5 to 1.5 ms, varied), long enough that rank 0 spins, yields, and
 * goes to sleep on rank 1's flags (its op post, then the barriers of the
 * buffered path), where rank 1's posts must wake it. Every result is checked,
 * and rank 0's longest op must stay well below a slice. A barrier post that
 * skips the wake failed it in three runs of three (ops of 101-202 ms); the
 * window the sleeper's fence closes is nanoseconds wide, and runs without
 * the fence passed, so this guards the wake, not that window.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "zc/sync.h"
#include "zt_launch.h"

#define OPS 1000
#define COUNT 2048              /* 8 KiB of fp32: past the inline limit, with barriers */
#define LATE_MAX_NS 60000000ull /* a lost wake costs a 100 ms slice */
#define LAUNCH_TIMEOUT_S 120

static void sw_nap_us(unsigned us)
{
    struct timespec ts = {0, (long)us * 1000};
    nanosleep(&ts, NULL);
}

static int sw_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    float *buf = malloc(COUNT * sizeof(float));
    int fails = buf == NULL;
    uint64_t worst = 0;
    for (int i = 0; i < OPS && fails == 0; i++) {
        if (rank == 1) {
            sw_nap_us(500 + (unsigned)(i * 37 % 1000));
        }
        uint64_t t0 = zc_time_ns();
        fails += zt_ramp_checked(&env, buf, COUNT);
        uint64_t t = zc_time_ns() - t0;
        worst = t > worst ? t : worst;
    }
    if (rank == 0) {
        printf("rank 0: longest op %.2f ms over %d ops (rank 1 late by 0.5-1.5 ms each); "
               "posts without a fence: %s\n",
               (double)worst / 1e6, OPS, zc_fence_peers_ready() ? "yes" : "no (kernel)");
        if (worst > LATE_MAX_NS + 1500000ull) {
            fprintf(stderr, "rank 0: an op took %.2f ms: a post did not wake its sleeper\n",
                    (double)worst / 1e6);
            fails++;
        }
    }
    free(buf);
    return fails + (zt_env_close(&env) != 0);
}

static void test_sleepers_wake(void **state)
{
    (void)state;
    assert_int_equal(zt_launch_procs(2, sw_rank, NULL, LAUNCH_TIMEOUT_S), 0);
}

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("ZCCL_LOG_LEVEL", "warn", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sleepers_wake),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
