/*
 * A rank that is a thread (HCCL's one-thread-per-device model) and stops
 * taking part: 3 thread ranks of this process, exec timeout 2 s through
 * HcclCommConfig.hcclExecTimeOut (HCCL_EXEC_TIMEOUT is 30).
 *
 * A thread rank cannot die alone: a signal that kills a thread (SIGKILL,
 * SIGSEGV, an abort) kills the process and every rank in it, which the
 * peers in other processes see as a dead process (tests in
 * test_fault_kill.c). What a thread can do is stop participating: return
 * from its function (or block forever) without destroying its communicator.
 * Its peers in the same process have no pid to watch, so to them it looks
 * exactly like a stuck peer: their op fails with HCCL_E_TIMEOUT after the
 * exec timeout (the second survivor may see the first one's error flag and
 * fail with HCCL_E_REMOTE a few ms later). The communicator of the thread
 * that left stays allocated until someone calls HcclCommDestroy on it; any
 * thread may do that.
 *
 * Cases:
 *  - the thread of rank 2 returns after one good op, leaving its comm and
 *    stream to the main thread; the survivors time out, see the error in
 *    HcclGetCommAsyncError, fail a later op at once and destroy; the main
 *    thread then destroys the orphan communicator and stream;
 *  - the thread of rank 2 blocks until the survivors have timed out, then
 *    issues its op: that op must fail within 2 s with HCCL_E_REMOTE (its
 *    peers flagged the communicator broken), not hang; it then destroys.
 * Run under TSan by scripts/sanitize.sh (its name says "thread").
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zt_launch.h"

#define FT_NRANKS 3
#define FT_LEAVER 2
#define FT_TIMEOUT_S 2
#define FT_COUNT 2048
#define FT_LATE_MS 2000 /* a few wait slices, with room for TSan's slowdown */

enum { FT_EXITS, FT_BLOCKS };

typedef struct {
    int kind;
    atomic_int survivors_done;
    zt_env_t orphan; /* the leaver's environment (FT_EXITS) */
    int orphan_set;
    int code[FT_NRANKS];
    int64_t took_ms[FT_NRANKS];
} ft_state_t;

static uint64_t ft_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int ft_allreduce(zt_env_t *e)
{
    HcclResult h = HcclAllReduce(e->plain, e->plain + e->half, FT_COUNT, HCCL_DATA_TYPE_FP32,
                                 HCCL_REDUCE_SUM, e->comm, e->stream);
    return h != HCCL_SUCCESS ? (int)h : (int)aclrtSynchronizeStream(e->stream);
}

static int ft_survivor(ft_state_t *st, zt_env_t *e)
{
    int fails = 0;
    uint64_t t0 = ft_now_ns();
    int code = ft_allreduce(e);
    int64_t took = (int64_t)((ft_now_ns() - t0) / 1000000u);
    st->code[e->rank] = code;
    st->took_ms[e->rank] = took;
    int lo = FT_TIMEOUT_S * 1000 - (code == HCCL_E_TIMEOUT ? 50 : 1000);
    if ((code != HCCL_E_TIMEOUT && code != HCCL_E_REMOTE) || took < lo ||
        took > FT_TIMEOUT_S * 1000 + 2000) {
        fprintf(stderr, "[rank %d] op returned %d after %lld ms (want HCCL_E_TIMEOUT after %d s)\n",
                e->rank, code, (long long)took, FT_TIMEOUT_S);
        fails++;
    }
    HcclResult async = HCCL_SUCCESS;
    if (HcclGetCommAsyncError(e->comm, &async) != HCCL_SUCCESS || async != (HcclResult)code) {
        fprintf(stderr, "[rank %d] async error %d, want %d\n", e->rank, (int)async, code);
        fails++;
    }
    t0 = ft_now_ns();
    int later = ft_allreduce(e);
    if (later == 0 || ft_now_ns() - t0 > 500000000ull) {
        fprintf(stderr, "[rank %d] a later op returned %d (want an error at once)\n", e->rank,
                later);
        fails++;
    }
    return fails;
}

static int ft_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    ft_state_t *st = arg;
    HcclCommConfig cfg;
    HcclCommConfigInit(&cfg);
    cfg.hcclExecTimeOut = FT_TIMEOUT_S;
    zt_env_t e;
    if (zt_env_open(&e, rank, nranks, root, &cfg) != 0 || zt_env_arena(&e, 1u << 20) != 0) {
        return 1;
    }
    if (ft_allreduce(&e) != 0) {
        fprintf(stderr, "[rank %d] the first op failed\n", rank);
        return 1;
    }
    int fails = 0;
    if (rank == FT_LEAVER && st->kind == FT_EXITS) {
        st->orphan = e; /* the thread leaves; main destroys this after the join */
        st->orphan_set = 1;
        return 0;
    }
    if (rank == FT_LEAVER) {
        while (atomic_load(&st->survivors_done) < FT_NRANKS - 1) {
            usleep(1000);
        }
        uint64_t t0 = ft_now_ns();
        int code = ft_allreduce(&e);
        st->code[rank] = code;
        st->took_ms[rank] = (int64_t)((ft_now_ns() - t0) / 1000000u);
        if (code != HCCL_E_REMOTE || st->took_ms[rank] > FT_LATE_MS) {
            fprintf(stderr,
                    "[rank %d] late op returned %d after %lld ms (want HCCL_E_REMOTE "
                    "at once)\n",
                    rank, code, (long long)st->took_ms[rank]);
            fails++;
        }
    } else {
        fails += ft_survivor(st, &e);
        atomic_fetch_add(&st->survivors_done, 1);
    }
    if (zt_env_close(&e) != 0) {
        fails++;
    }
    return fails;
}

static void ft_run(int kind)
{
    ft_state_t st;
    memset(&st, 0, sizeof(st));
    st.kind = kind;
    atomic_init(&st.survivors_done, 0);
    int failed = zt_launch_threads(FT_NRANKS, ft_rank, &st);
    int orphan_ok = 1;
    if (st.orphan_set) {
        orphan_ok = zt_env_close(&st.orphan) == 0;
    }
    printf("thread rank %s: rank 0: %d after %lld ms; rank 1: %d after %lld ms; rank 2: %d "
           "after %lld ms\n",
           kind == FT_EXITS ? "exits " : "blocks", st.code[0], (long long)st.took_ms[0], st.code[1],
           (long long)st.took_ms[1], st.code[2], (long long)st.took_ms[2]);
    fflush(stdout);
    assert_int_equal(failed, 0);
    assert_true(orphan_ok);
    assert_true(st.code[0] == HCCL_E_TIMEOUT || st.code[1] == HCCL_E_TIMEOUT);
    assert_int_equal(st.orphan_set, kind == FT_EXITS);
}

static void test_thread_rank_exits(void **state)
{
    (void)state;
    ft_run(FT_EXITS);
}

static void test_thread_rank_blocks(void **state)
{
    (void)state;
    ft_run(FT_BLOCKS);
}

int main(void)
{
    /* Read once per process, before any library call. */
    setenv("HCCL_EXEC_TIMEOUT", "30", 1);
    setenv("HCCL_BUFFSIZE", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_rank_exits),
        cmocka_unit_test(test_thread_rank_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
