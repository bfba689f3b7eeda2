/*
 * A peer that will never come, and what the survivors say about it.
 *  - destroyed: np 3, exec timeout 60 s; rank 2 destroys its communicator
 *    without issuing the AllReduce the others wait for, and stays alive. Its
 *    control segment says so: the others fail with HCCL_E_REMOTE within 2 s.
 *  - stopped: np 4, exec timeout 2 s; rank 3 stops itself (SIGSTOP) before
 *    the op and never continues on its own: every survivor gets
 *    HCCL_E_TIMEOUT, and logs exactly one "zccl diag:" line, naming rank 3
 *    as not having reached op 1.
 *  - killed: the same with rank 3 killed (SIGKILL): every survivor fails
 *    within 2 s and logs exactly one "zccl diag:" line naming rank 3.
 * Each forked rank logs to its own file (ZCCL_LOG_FILE with %p), which the
 * rank reads back itself.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "zt_launch.h"

#define FG_LOG "/tmp/zt-fault-gone-%p.log"
#define FG_LAUNCH_TIMEOUT_S 60

enum { FG_DESTROYED, FG_STOPPED, FG_KILLED };

typedef struct {
    int kind;
    int late; /* the rank that never comes */
    atomic_int victim_pid;
    atomic_int survivors_done;
    int code[4];
    int64_t took_ms[4];
    int diag_lines[4];
} fg_shared_t;

static fg_shared_t *fg_sh;

static uint64_t fg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void fg_log_path(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/zt-fault-gone-%d.log", (int)getpid());
}

/* Lines of my log holding "zccl diag:"; want names the late rank. */
static int fg_diag_lines(const char *want, int *named)
{
    char path[128];
    fg_log_path(path, sizeof(path));
    FILE *f = fopen(path, "r");
    int n = 0;
    *named = 0;
    if (f == NULL) {
        return 0;
    }
    char line[1024];
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, "zccl diag:") != NULL) {
            n++;
            *named += strstr(line, want) != NULL;
        }
    }
    fclose(f);
    return n;
}

static void fg_wait_survivors(int nranks)
{
    while (atomic_load(&fg_sh->survivors_done) < nranks - 1) {
        usleep(1000);
    }
}

static int fg_late_rank(zt_env_t *e)
{
    if (fg_sh->kind == FG_DESTROYED) {
        int rc = zt_env_close(e);
        fg_wait_survivors(e->nranks);
        return rc != 0;
    }
    atomic_store(&fg_sh->victim_pid, (int)getpid());
    raise(fg_sh->kind == FG_STOPPED ? SIGSTOP : SIGKILL);
    /* Resumed by a survivor once they are done: leave without the comm. */
    return 0;
}

static int fg_survivor(zt_env_t *e)
{
    int rank = e->rank;
    float *in = e->zc.va;
    float *out = (float *)(void *)((char *)e->zc.va + e->half);
    uint64_t t0 = fg_now_ns();
    HcclResult h =
        HcclAllReduce(in, out, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, e->comm, e->stream);
    int code = h != HCCL_SUCCESS ? (int)h : (int)aclrtSynchronizeStream(e->stream);
    int64_t took = (int64_t)((fg_now_ns() - t0) / 1000000u);
    fg_sh->code[rank] = code;
    fg_sh->took_ms[rank] = took;
    int fails = 0;
    int want = fg_sh->kind == FG_STOPPED ? HCCL_E_TIMEOUT : HCCL_E_REMOTE;
    int64_t lo = fg_sh->kind == FG_STOPPED ? 1000 : 0;
    int64_t hi = fg_sh->kind == FG_STOPPED ? 4000 : 2000;
    if (code != want || took < lo || took > hi) {
        fprintf(stderr, "[rank %d] op returned %d after %lld ms (want %d within [%lld, %lld])\n",
                rank, code, (long long)took, want, (long long)lo, (long long)hi);
        fails++;
    }
    if (fg_sh->kind != FG_DESTROYED) {
        char name[64];
        snprintf(name, sizeof(name), "rank %d has not reached op 1", fg_sh->late);
        int named = 0;
        fg_sh->diag_lines[rank] = fg_diag_lines(name, &named);
        if (fg_sh->diag_lines[rank] != 1 || named != 1) {
            fprintf(stderr, "[rank %d] %d diag lines, %d naming the late rank (want 1 and 1)\n",
                    rank, fg_sh->diag_lines[rank], named);
            fails++;
        }
    }
    if (atomic_fetch_add(&fg_sh->survivors_done, 1) + 1 == e->nranks - 1 &&
        fg_sh->kind == FG_STOPPED) {
        kill(atomic_load(&fg_sh->victim_pid), SIGCONT);
    }
    return fails + (zt_env_close(e) != 0);
}

static int fg_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    char path[128];
    fg_log_path(path, sizeof(path)); /* rank 0 may have opened it already (root info) */
    zt_env_t e;
    if (zt_env_open(&e, rank, nranks, root, NULL) != 0 || zt_env_arena(&e, 1u << 20) != 0) {
        return 1;
    }
    int fails = rank == fg_sh->late ? fg_late_rank(&e) : fg_survivor(&e);
    unlink(path);
    return fails;
}

static void fg_run(int kind, int nranks)
{
    memset(fg_sh, 0, sizeof(*fg_sh));
    fg_sh->kind = kind;
    fg_sh->late = nranks - 1;
    int failed = zt_launch_procs(nranks, fg_rank, NULL, FG_LAUNCH_TIMEOUT_S);
    char path[128];
    snprintf(path, sizeof(path), "/tmp/zt-fault-gone-%d.log", zt_child_pids[nranks - 1]);
    unlink(path); /* the killed rank could not remove its own */
    static const char *const names[] = {"destroyed", "stopped", "killed"};
    printf("%s: ", names[kind]);
    for (int r = 0; r < nranks - 1; r++) {
        printf("rank %d: %d after %lld ms, %d diag line(s); ", r, fg_sh->code[r],
               (long long)fg_sh->took_ms[r], fg_sh->diag_lines[r]);
    }
    printf("\n");
    /* The killed rank counts as a failed launch. */
    assert_int_equal(failed, kind == FG_KILLED ? 1 : 0);
}

static void test_destroyed(void **state)
{
    (void)state;
    setenv("HCCL_EXEC_TIMEOUT", "60", 1);
    fg_run(FG_DESTROYED, 3);
}

static void test_stopped(void **state)
{
    (void)state;
    setenv("HCCL_EXEC_TIMEOUT", "2", 1);
    fg_run(FG_STOPPED, 4);
}

static void test_killed(void **state)
{
    (void)state;
    setenv("HCCL_EXEC_TIMEOUT", "60", 1);
    fg_run(FG_KILLED, 4);
}

int main(void)
{
    setenv("HCCL_BUFFSIZE", "1", 1);
    setenv("ZCCL_LOG_FILE", FG_LOG, 1);
    setenv("ZCCL_LOG_LEVEL", "warn", 1);
    fg_sh = mmap(NULL, sizeof(*fg_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (fg_sh == MAP_FAILED) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_destroyed),
        cmocka_unit_test(test_stopped),
        cmocka_unit_test(test_killed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
