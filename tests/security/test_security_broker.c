/*
 * Other local users against the per-process broker (label security).
 *
 *  - flood: two real ranks init; a process of another uid then finds their
 *    brokers' names in /proc/net/unix (abstract names are public once bound),
 *    opens ZS_FLOOD silent connections to each, and keeps reconnecting while
 *    the ranks run buffered and zero-copy AllReduce rounds (each zero-copy
 *    round fetches the peer's memory through its broker). Every hostile
 *    connection must be closed by the broker at once (within ZS_DROP_MS), and
 *    every op must succeed with the right result well under the fetch
 *    timeout.
 *  - silent, same uid: ZS_FLOOD silent connections of our own uid (trusted,
 *    so not dropped at accept) must not delay a fetch: the broker serves
 *    clients concurrently and drops a silent one after VMM_BROKER_REQ_MS.
 *  - squat: another uid binds the names the victims' brokers would take:
 *    the old fixed name "zccl-broker-<pid>" and the exact random name they
 *    draw first (this test replaces getrandom to force that draw). Both
 *    ranks' init must still succeed (the broker draws another name) and
 *    their ops work.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "share/vmm_share.h"
#include "zc/export.h"
#include "zc/status.h"
#include "zccl/vmm_ext.h"
#include "zs_common.h"

#define ZS_FLOOD 32
#define ZS_DROP_MS 200
#define ZS_MAX_CONNS 256

/* ---- getrandom, replaced: the next 4-byte draw (the broker's name) is forced -------- */

static uint32_t zs_forced_nonce;
static int zs_force_armed;
static int zs_force_used;

__attribute__((visibility("default"))) ssize_t getrandom(void *buf, size_t n, unsigned int flags)
{
    if (zs_force_armed && n == sizeof(uint32_t)) {
        zs_force_armed = 0;
        zs_force_used++;
        memcpy(buf, &zs_forced_nonce, sizeof(uint32_t));
        return (ssize_t)n;
    }
    return (ssize_t)syscall(SYS_getrandom, buf, n, flags);
}

/* ---- the hostile side ---------------------------------------------------------------- */

/* The documented broker name of a token (vmm_ext.h), without the leading NUL. */
static void zs_broker_name(uint64_t token, char *buf, size_t len)
{
    snprintf(buf, len, "zccl-broker-%d-%05x", (int)zccl_broker_token_pid(token),
             (unsigned)zccl_broker_token_nonce(token));
}

/* Abstract names in /proc/net/unix of pid's broker(s); returns how many. */
static int zs_find_brokers(int32_t pid, char names[][64], int max)
{
    FILE *f = fopen("/proc/net/unix", "r");
    char line[512];
    char want[40];
    snprintf(want, sizeof(want), "@zccl-broker-%d-", (int)pid);
    int n = 0;
    while (f != NULL && n < max && fgets(line, sizeof(line), f) != NULL) {
        char *at = strstr(line, want);
        if (at != NULL) {
            at[strcspn(at, " \n")] = '\0';
            int dup = 0;
            for (int i = 0; i < n; i++) {
                dup |= strcmp(names[i], at + 1) == 0;
            }
            if (!dup) {
                snprintf(names[n++], 64, "%s", at + 1);
            }
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return n;
}

static int zs_unix_connect(const char *name)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un a;
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    size_t n = strlen(name);
    memcpy(a.sun_path + 1, name, n);
    if (s >= 0 && connect(s, (struct sockaddr *)&a,
                          (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0) {
        close(s);
        s = -1;
    }
    return s;
}

/* How many of fds were closed by their server within ms. */
static int zs_count_dropped(const int *fds, int n, int ms)
{
    uint64_t end = zs_ms() + (uint64_t)ms;
    int dropped = 0;
    int seen[ZS_MAX_CONNS] = {0};
    while (dropped < n && zs_ms() < end) {
        for (int i = 0; i < n; i++) {
            struct pollfd p = {.fd = fds[i], .events = POLLIN};
            char c;
            if (!seen[i] && poll(&p, 1, 0) == 1 && recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0) {
                seen[i] = 1;
                dropped++;
            }
        }
        usleep(1000);
    }
    return dropped;
}

typedef struct {
    int32_t found;
    int32_t opened;
    int32_t dropped;
    int32_t reconnects;
} zs_flood_report_t;

static int zs_flood_kid(int sock, void *arg)
{
    const zs_user_t *u = arg;
    int32_t pids[2];
    ZT_KCHECK(zt_msg_get(sock, pids, sizeof(pids)) == 0);
    ZT_KCHECK(zs_become(u) == 0);
    zs_flood_report_t rep = {0, 0, 0, 0};
    char names[4][64];
    static int fds[ZS_MAX_CONNS];
    int nf = 0;
    for (int r = 0; r < 2; r++) {
        int n = zs_find_brokers(pids[r], names, 4);
        rep.found += n;
        for (int i = 0; i < n; i++) {
            for (int c = 0; c < ZS_FLOOD; c++) {
                int s = zs_unix_connect(names[i]);
                if (s >= 0) {
                    fds[nf++] = s;
                }
            }
        }
    }
    rep.opened = nf;
    rep.dropped = zs_count_dropped(fds, nf, ZS_DROP_MS);
    ZT_KCHECK(zt_msg_put(sock, &rep, sizeof(rep)) == 0);
    /* Keep at it while the ranks run their ops, until told to stop. */
    for (;;) {
        struct pollfd p = {.fd = sock, .events = POLLIN};
        if (poll(&p, 1, 0) == 1) {
            break;
        }
        for (int i = 0; i < nf; i++) {
            close(fds[i]);
            fds[i] = zs_unix_connect(names[0]);
            rep.reconnects += fds[i] >= 0;
        }
        usleep(2000);
    }
    ZT_KCHECK(zt_msg_put(sock, &rep, sizeof(rep)) == 0);
    return 0;
}

/* The hostile user (the test is skipped without one), then two zero-copy rank kids running
 * rank_fn. */
static const zs_user_t *zs_user_and_ranks(zt_kid_t k[2], zs_rank_t a[2], zt_kid_fn rank_fn)
{
    const zs_user_t *u = zs_user_get();
    if (u == NULL) {
        skip();
    }
    zs_ranks_start_fn(k, a, 2, 1, rank_fn);
    return u;
}

static void test_broker_flood(void **state)
{
    (void)state;
    zt_kid_t k[2];
    zs_rank_t a[2];
    const zs_user_t *u = zs_user_and_ranks(k, a, zs_rank_kid);
    zt_kid_t h = zt_kid_start(zs_flood_kid, (void *)u);
    HcclRootInfo ri;
    assert_int_equal(HcclGetRootInfo(&ri), HCCL_SUCCESS);
    zs_report_t init[2];
    zs_report_t ops[2];
    assert_int_equal(zs_ranks_init(k, 2, &ri, init), 0);
    int32_t pids[2] = {k[0].pid, k[1].pid};
    assert_int_equal(zt_msg_put(h.sock, pids, sizeof(pids)), 0);
    zs_flood_report_t f1;
    zs_flood_report_t f2;
    assert_int_equal(zt_msg_get(h.sock, &f1, sizeof(f1)), 0);
    int bad = zs_ranks_run(k, 2, init, ops);
    assert_int_equal(zt_msg_put(h.sock, "s", 1), 0);
    assert_int_equal(zt_msg_get(h.sock, &f2, sizeof(f2)), 0);
    assert_int_equal(zt_kid_wait(h), 0);
    printf("broker flood: uid %u found %d brokers, opened %d silent connections, %d dropped "
           "within %d ms, %d reconnects during the ops; ranks: init %d/%d, ops %d/%d in "
           "%lld/%lld ms\n",
           (unsigned)u->uid, f1.found, f1.opened, f1.dropped, ZS_DROP_MS, f2.reconnects,
           init[0].code, init[1].code, ops[0].code, ops[1].code, (long long)ops[0].ms,
           (long long)ops[1].ms);
    fflush(stdout);
    assert_int_equal(f1.found, 2);
    assert_int_equal(f1.opened, 2 * ZS_FLOOD);
    assert_int_equal(f1.dropped, 2 * ZS_FLOOD);
    assert_true(f2.reconnects > 0);
    assert_int_equal(bad, 0);
    /* The fetch timeout is 5 s; one hostile client used to cost 2 s each. */
    assert_true(ops[0].ms < 3000 && ops[1].ms < 3000);
}

/* ---- silent clients of our own uid --------------------------------------------------- */

static int zs_silent_kid(int sock, void *arg)
{
    (void)arg;
    uint64_t token;
    ZT_KCHECK(zt_msg_get(sock, &token, sizeof(token)) == 0);
    char name[64];
    zs_broker_name(token, name, sizeof(name));
    static int fds[ZS_FLOOD];
    int n = 0;
    for (int i = 0; i < ZS_FLOOD; i++) {
        fds[n] = zs_unix_connect(name);
        n += fds[n] >= 0;
    }
    ZT_KCHECK(zt_msg_put(sock, &n, sizeof(n)) == 0);
    /* Held silent until the broker drops them. */
    int32_t dropped = zs_count_dropped(fds, n, 3000);
    ZT_KCHECK(zt_msg_put(sock, &dropped, sizeof(dropped)) == 0);
    return 0;
}

static int zs_fetch_kid(int sock, void *arg)
{
    (void)arg;
    uint64_t token;
    ZT_KCHECK(zt_msg_get(sock, &token, sizeof(token)) == 0);
    int64_t worst = 0;
    for (int i = 0; i < 10; i++) {
        uint64_t t0 = zs_ms();
        int fd = -1;
        size_t size = 0;
        ZT_KCHECK(zccl_broker_fetch(token, &fd, &size) == ZC_OK && size == 4096);
        worst = ZC_MAX(worst, (int64_t)(zs_ms() - t0));
        close(fd);
    }
    ZT_KCHECK(zt_msg_put(sock, &worst, sizeof(worst)) == 0);
    return 0;
}

static void test_broker_silent_same_uid(void **state)
{
    (void)state;
    zt_kid_t silent = zt_kid_start(zs_silent_kid, NULL);
    zt_kid_t fetch = zt_kid_start(zs_fetch_kid, NULL);
    int fd = memfd_create("zs-seg", MFD_CLOEXEC);
    assert_true(fd >= 0 && ftruncate(fd, 4096) == 0);
    uint64_t token = 0;
    assert_int_equal(zccl_broker_offer(fd, 4096, 0, &token), ZC_OK);
    assert_int_equal(zt_msg_put(silent.sock, &token, sizeof(token)), 0);
    int held = 0;
    assert_int_equal(zt_msg_get(silent.sock, &held, sizeof(held)), 0);
    uint64_t t0 = zs_ms();
    assert_int_equal(zt_msg_put(fetch.sock, &token, sizeof(token)), 0);
    int64_t worst = -1;
    int32_t dropped = -1;
    assert_int_equal(zt_msg_get(fetch.sock, &worst, sizeof(worst)), 0);
    assert_int_equal(zt_msg_get(silent.sock, &dropped, sizeof(dropped)), 0);
    int64_t all = (int64_t)(zs_ms() - t0);
    assert_int_equal(zt_kid_wait(silent), 0);
    assert_int_equal(zt_kid_wait(fetch), 0);
    printf("broker, same uid: %d silent connections held; 10 fetches meanwhile, slowest %lld ms; "
           "%d silent ones dropped after their %d ms (all done in %lld ms)\n",
           held, (long long)worst, dropped, VMM_BROKER_REQ_MS, (long long)all);
    fflush(stdout);
    assert_int_equal(held, ZS_FLOOD);
    assert_int_equal(dropped, ZS_FLOOD);
    assert_true(worst < 1000);
    assert_int_equal(zccl_broker_withdraw(token), ZC_OK);
    close(fd);
}

/* ---- squatted names ------------------------------------------------------------------ */

#define ZS_NONCE 0x5a5a5u

static int zs_squat_rank_kid(int sock, void *arg)
{
    zs_force_armed = 1; /* this process's broker draws ZS_NONCE first */
    zs_forced_nonce = ZS_NONCE;
    int st = zs_rank_kid(sock, arg);
    ZT_KCHECK(zs_force_used == 1);
    return st;
}

static int zs_bind_abstract(const char *name)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un a;
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    size_t n = strlen(name);
    memcpy(a.sun_path + 1, name, n);
    if (s >= 0 && (bind(s, (struct sockaddr *)&a,
                        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0 ||
                   listen(s, 8) != 0)) {
        close(s);
        s = -1;
    }
    return s;
}

static int zs_squat_kid(int sock, void *arg)
{
    const zs_user_t *u = arg;
    int32_t pids[2];
    ZT_KCHECK(zt_msg_get(sock, pids, sizeof(pids)) == 0);
    ZT_KCHECK(zs_become(u) == 0);
    int32_t bound = 0;
    for (int r = 0; r < 2; r++) {
        char name[64];
        snprintf(name, sizeof(name), "zccl-broker-%d", (int)pids[r]);
        bound += zs_bind_abstract(name) >= 0;
        uint64_t t = ((uint64_t)(uint32_t)pids[r] << VMM_TOKEN_PID_SHIFT) |
                     ((uint64_t)ZS_NONCE << VMM_TOKEN_NONCE_SHIFT);
        zs_broker_name(t, name, sizeof(name));
        bound += zs_bind_abstract(name) >= 0;
    }
    ZT_KCHECK(zt_msg_put(sock, &bound, sizeof(bound)) == 0);
    char stop;
    ZT_KCHECK(zt_msg_get(sock, &stop, 1) == 0); /* holds the names until then */
    return 0;
}

static void test_broker_squat(void **state)
{
    (void)state;
    zt_kid_t k[2];
    zs_rank_t a[2];
    const zs_user_t *u = zs_user_and_ranks(k, a, zs_squat_rank_kid);
    zt_kid_t h = zt_kid_start(zs_squat_kid, (void *)u);
    int32_t pids[2] = {k[0].pid, k[1].pid};
    assert_int_equal(zt_msg_put(h.sock, pids, sizeof(pids)), 0);
    int32_t bound = 0;
    assert_int_equal(zt_msg_get(h.sock, &bound, sizeof(bound)), 0);
    HcclRootInfo ri;
    assert_int_equal(HcclGetRootInfo(&ri), HCCL_SUCCESS);
    zs_report_t init[2];
    zs_report_t ops[2];
    int ibad = zs_ranks_init(k, 2, &ri, init);
    int bad = zs_ranks_run(k, 2, init, ops);
    assert_int_equal(zt_msg_put(h.sock, "s", 1), 0);
    assert_int_equal(zt_kid_wait(h), 0);
    printf("broker squat: uid %u bound %d of the victims' names (old fixed + first random); "
           "init %d/%d in %lld/%lld ms, ops %d/%d\n",
           (unsigned)u->uid, bound, init[0].code, init[1].code, (long long)init[0].ms,
           (long long)init[1].ms, ops[0].code, ops[1].code);
    fflush(stdout);
    assert_int_equal(bound, 4);
    assert_int_equal(ibad, 0);
    assert_int_equal(bad, 0);
}

int main(void)
{
    setenv("HCCL_CONNECT_TIMEOUT", "20", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broker_flood),
        cmocka_unit_test(test_broker_silent_same_uid),
        cmocka_unit_test(test_broker_squat),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zs_user_remove(&zs_the_user);
    return rc;
}
