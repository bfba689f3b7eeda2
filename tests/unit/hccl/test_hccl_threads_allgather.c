/*
 * HcclAllGather with threads of one process as ranks (one
 * HcclCommInitRootInfo per thread, as CANN's one-thread-per-device samples
 * do), np = 1..4: the full dtype x {zero-copy, buffered} x {in-place,
 * out-of-place} x count matrix against the expected concatenation,
 * re-activation at the same address, descriptor mismatches and two
 * communicators used alternately. Same-process peers use each other's addresses directly, so
 * this exercises the library's other peer-mapping path than the mp tests
 * (the cases are those of tests/common/zt_suite1.h).
 *
 * The CCL buffer keeps its default size here (the mp tests shrink it);
 * HCCL_EXEC_TIMEOUT=60 turns a hang into an error.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "zt_suite1.h"

#include <stdio.h>

#include "zt_launch.h"

/* The form of a large AllGather (push or pull, coll_allgather.c) must be the
 * same on every rank, though each rank's post asks for its own: pulling
 * from 512 KiB of output per rank takes every rank's ask, and a rank asks
 * at its form trial's pull steps (coll_form.c: ops 20 to 23 of a shape, or
 * later as the trial finds) only when its history expects its output
 * cached. With `cycle`, rank 1 cycles through 8 outputs, so its history
 * expects each evicted (streaming) and it never asks, while rank 0 reuses
 * one output and asks: a rank choosing alone would pull beside a pushing
 * peer and leave a slot of the peer's output unwritten. Without, every
 * rank reuses one output and the trial's pull ops pull. 32 ops of 1 MiB of
 * output per rank (in the trial's band with ZCCL_NT_MIN at 8 MiB, set in
 * main) at np 2 and at np 4 (4 threads share the CI machine's 2 cores),
 * each output checked (raw bits, a new pattern per op). */
#define PULL_OUT ((size_t)1 << 20)
#define PULL_OUTS 8
#define PULL_OPS 32

static int pull_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    int cycle = *(const int *)arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    size_t send_bytes = PULL_OUT / (size_t)nranks;
    size_t out_bytes = send_bytes * (size_t)nranks;
    int fails = zt_env_arena(&env, out_bytes * PULL_OUTS) != 0;
    uint32_t *send = env.zc.va;
    char *outs = (char *)env.zc.va + env.half;
    size_t words = send_bytes / sizeof(uint32_t);
    for (int i = 0; i < PULL_OPS && fails == 0; i++) {
        size_t slot = rank == 1 && cycle ? (size_t)(i % PULL_OUTS) : 0;
        uint32_t *out = (uint32_t *)(outs + slot * out_bytes);
        for (size_t k = 0; k < words; k++) {
            send[k] = (uint32_t)(i * 7919 + rank * 104729) ^ (uint32_t)k;
        }
        if (HcclAllGather(send, out, words, HCCL_DATA_TYPE_FP32, env.comm, env.stream) !=
                HCCL_SUCCESS ||
            aclrtSynchronizeStream(env.stream) != ACL_SUCCESS) {
            fprintf(stderr, "rank %d: AllGather %d failed\n", rank, i);
            fails++;
            break;
        }
        for (int q = 0; q < nranks && fails == 0; q++) {
            for (size_t k = 0; k < words; k++) {
                uint32_t want = (uint32_t)(i * 7919 + q * 104729) ^ (uint32_t)k;
                if (out[(size_t)q * words + k] != want) {
                    fprintf(stderr, "rank %d: op %d: slot %d word %zu is 0x%x, not 0x%x\n", rank, i,
                            q, k, out[(size_t)q * words + k], want);
                    fails++;
                    break;
                }
            }
        }
    }
    return fails + (zt_env_close(&env) != 0);
}

static void test_form_agreed(void **state)
{
    (void)state;
    for (int cycle = 0; cycle <= 1; cycle++) {
        assert_int_equal(zt_launch_threads(2, pull_rank, &cycle), 0);
        assert_int_equal(zt_launch_threads(4, pull_rank, &cycle), 0);
    }
}

/* Threads as ranks (procs_s 0). */
static const zt_suite1_t cfg = {ZT_ALLGATHER, NULL, 0, 0x7b7ea9ull, 0};

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    setenv("ZCCL_NT_MIN", "8388608", 1); /* test_form_agreed: its ops in the form trial's band */
    const struct CMUnitTest tests[] = {ZT_SUITE1_TESTS(&cfg), cmocka_unit_test(test_form_agreed)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
