/*
 * Misuse that must fail loudly, never give a wrong result with success:
 *  - two threads: on each of 2 forked ranks two threads issue small
 *    AllReduce ops on one communicator at once (each on its own stream,
 *    each followed by a synchronize; thread t reduces t + 2 elements of
 *    value (t + 1) * (rank + 1)). An op of one thread matched with the other
 *    thread's op on a peer disagrees in count, and overlapping issue calls
 *    are refused: every op that reports success must hold the right sum, at
 *    least one op must fail, and every failure must be HCCL_E_PARA. (Two
 *    threads issuing identical ops, paired differently on each rank, look to
 *    any library exactly like one thread's ops: that case cannot be seen.)
 *  - send against collective: np 3, rank 0 issues a Send to rank 1 where
 *    ranks 1 and 2 issue an AllReduce (exec timeout 60 s): HCCL_E_PARA on
 *    every rank within 5 s.
 *  - absurd count: an int8 AllReduce of 2^40 elements on a small buffer
 *    fails at the call with HCCL_E_PARA and the next op works.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "zt_launch.h"

/* Per thread at most; the first refused op ends the run. Ops that finish on the
 * caller's thread in about a microsecond let one thread's whole run fit into the
 * other's wait for a core, so the threads need many ops to overlap at all. */
#define FM_ITERS 200000
#define FM_LAUNCH_TIMEOUT_S 120

typedef struct {
    atomic_int para;    /* ops that failed with HCCL_E_PARA, all ranks */
    atomic_int other;   /* ops that failed otherwise */
    atomic_int wrong;   /* ops that succeeded with a wrong result */
    atomic_int ok;      /* ops that succeeded right */
    int64_t took_ms[4]; /* send-against-collective: time to the error */
    int code[4];
} fm_shared_t;

static fm_shared_t *fm_sh;

static uint64_t fm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct {
    zt_env_t *env;
    int t;
    pthread_barrier_t *go;
} fm_thread_t;

static void *fm_issuer(void *p)
{
    fm_thread_t *a = p;
    zt_env_t *e = a->env;
    aclrtStream s = NULL;
    if (aclrtSetDevice(e->device) != ACL_SUCCESS || aclrtCreateStream(&s) != ACL_SUCCESS) {
        atomic_fetch_add(&fm_sh->other, 1);
        pthread_barrier_wait(a->go);
        return NULL;
    }
    float *send = (float *)(void *)((char *)e->zc.va + (size_t)a->t * 4096);
    float *recv = (float *)(void *)((char *)e->zc.va + e->half + (size_t)a->t * 4096);
    float mine = (float)((a->t + 1) * (e->rank + 1));
    float want = (float)((a->t + 1) * e->nranks * (e->nranks + 1) / 2);
    pthread_barrier_wait(a->go);
    int count = a->t + 2;
    for (int i = 0; i < FM_ITERS; i++) {
        for (int j = 0; j < count; j++) {
            send[j] = mine;
            recv[j] = -1.0f;
        }
        HcclResult h = HcclAllReduce(send, recv, (uint64_t)count, HCCL_DATA_TYPE_FP32,
                                     HCCL_REDUCE_SUM, e->comm, s);
        int code = h != HCCL_SUCCESS ? (int)h : (int)aclrtSynchronizeStream(s);
        if (code == HCCL_E_PARA) {
            atomic_fetch_add(&fm_sh->para, 1);
            break;
        }
        if (code != 0) {
            fprintf(stderr, "[rank %d thread %d] op %d failed with %d\n", e->rank, a->t, i, code);
            atomic_fetch_add(&fm_sh->other, 1);
            break;
        }
        if (recv[0] != want || recv[count - 1] != want) {
            fprintf(stderr, "[rank %d thread %d] op %d succeeded with %g, %g (want %g)\n", e->rank,
                    a->t, i, recv[0], recv[1], want);
            atomic_fetch_add(&fm_sh->wrong, 1);
        } else {
            atomic_fetch_add(&fm_sh->ok, 1);
        }
    }
    (void)aclrtDestroyStream(s);
    return NULL;
}

static int fm_rank_threads(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t e;
    if (zt_env_open(&e, rank, nranks, root, NULL) != 0 || zt_env_arena(&e, 1u << 20) != 0) {
        return 1;
    }
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    pthread_t th[2];
    fm_thread_t a[2];
    for (int t = 0; t < 2; t++) {
        a[t] = (fm_thread_t){&e, t, &go};
        pthread_create(&th[t], NULL, fm_issuer, &a[t]);
    }
    for (int t = 0; t < 2; t++) {
        pthread_join(th[t], NULL);
    }
    pthread_barrier_destroy(&go);
    /* The comm is unusable now; destroy must still work. */
    return zt_env_close(&e) != 0;
}

static void test_two_threads(void **state)
{
    (void)state;
    memset(fm_sh, 0, sizeof(*fm_sh));
    assert_int_equal(zt_launch_procs(2, fm_rank_threads, NULL, FM_LAUNCH_TIMEOUT_S), 0);
    printf("two threads: %d right, %d wrong, %d HCCL_E_PARA, %d other failures\n",
           atomic_load(&fm_sh->ok), atomic_load(&fm_sh->wrong), atomic_load(&fm_sh->para),
           atomic_load(&fm_sh->other));
    assert_int_equal(atomic_load(&fm_sh->wrong), 0);
    assert_int_equal(atomic_load(&fm_sh->other), 0);
    assert_true(atomic_load(&fm_sh->para) >= 1);
}

/* ---- send against a collective ----------------------------------------------------------- */

static int fm_rank_mix(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t e;
    if (zt_env_open(&e, rank, nranks, root, NULL) != 0 || zt_env_arena(&e, 1u << 20) != 0) {
        return 1;
    }
    uint64_t t0 = fm_now_ns();
    HcclResult h;
    if (rank == 0) {
        h = HcclSend(e.plain, 256, HCCL_DATA_TYPE_FP32, 1, e.comm, e.stream);
    } else {
        h = HcclAllReduce(e.plain, e.plain + e.half, 256, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM,
                          e.comm, e.stream);
    }
    int code = h != HCCL_SUCCESS ? (int)h : (int)aclrtSynchronizeStream(e.stream);
    fm_sh->code[rank] = code;
    fm_sh->took_ms[rank] = (int64_t)((fm_now_ns() - t0) / 1000000u);
    int fails = code != HCCL_E_PARA || fm_sh->took_ms[rank] > 5000;
    if (fails) {
        fprintf(stderr, "[rank %d] got %d after %lld ms (want HCCL_E_PARA within 5 s)\n", rank,
                code, (long long)fm_sh->took_ms[rank]);
    }
    return fails + (zt_env_close(&e) != 0);
}

static void test_send_against_allreduce(void **state)
{
    (void)state;
    memset(fm_sh, 0, sizeof(*fm_sh));
    int failed = zt_launch_procs(3, fm_rank_mix, NULL, FM_LAUNCH_TIMEOUT_S);
    printf("send against allreduce: codes %d %d %d after %lld %lld %lld ms\n", fm_sh->code[0],
           fm_sh->code[1], fm_sh->code[2], (long long)fm_sh->took_ms[0],
           (long long)fm_sh->took_ms[1], (long long)fm_sh->took_ms[2]);
    assert_int_equal(failed, 0);
}

/* ---- absurd count ------------------------------------------------------------------------- */

static int fm_rank_absurd(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t e;
    if (zt_env_open(&e, rank, nranks, root, NULL) != 0 || zt_env_arena(&e, 1u << 20) != 0) {
        return 1;
    }
    int fails = 0;
    HcclResult h = HcclAllReduce(e.plain, e.plain + e.half, 1ull << 40, HCCL_DATA_TYPE_INT8,
                                 HCCL_REDUCE_SUM, e.comm, e.stream);
    if (h != HCCL_E_PARA) {
        fprintf(stderr, "[rank %d] AllReduce of 2^40 int8: %d (want HCCL_E_PARA)\n", rank, (int)h);
        fails++;
    }
    int8_t *in = (int8_t *)e.plain;
    int8_t *out = (int8_t *)(e.plain + e.half);
    for (int j = 0; j < 100; j++) {
        in[j] = (int8_t)(rank + j % 7);
    }
    h = HcclAllReduce(in, out, 100, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, e.comm, e.stream);
    aclError s = aclrtSynchronizeStream(e.stream);
    for (int j = 0; j < 100 && h == HCCL_SUCCESS && s == ACL_SUCCESS; j++) {
        int want = nranks * (j % 7) + nranks * (nranks - 1) / 2;
        if (out[j] != (int8_t)want) {
            fprintf(stderr, "[rank %d] element %d: %d want %d\n", rank, j, out[j], want);
            fails++;
            break;
        }
    }
    fails += h != HCCL_SUCCESS || s != ACL_SUCCESS;
    return fails + (zt_env_close(&e) != 0);
}

static void test_absurd_count(void **state)
{
    (void)state;
    assert_int_equal(zt_launch_procs(2, fm_rank_absurd, NULL, FM_LAUNCH_TIMEOUT_S), 0);
}

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "60", 1);
    setenv("HCCL_BUFFSIZE", "1", 1);
    fm_sh = mmap(NULL, sizeof(*fm_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (fm_sh == MAP_FAILED) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_threads),
        cmocka_unit_test(test_send_against_allreduce),
        cmocka_unit_test(test_absurd_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
