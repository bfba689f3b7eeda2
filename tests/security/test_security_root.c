/*
 * Other local users against the root listener (label security).
 *
 *  - trickle: before the real ranks come, a process of another uid opens
 *    ZS_TRICKLE connections to the root port and sends one byte every
 *    ZS_TRICKLE_MS on each, and a process of our own uid does the same. The
 *    other uid must be refused at accept (a ZC_ERR_PERM refusal within
 *    ZS_REFUSE_MS); ours is held (slowness alone drops nobody while the
 *    pending table has room: still open ZH_PEND_MIN_AGE_MS + 500 ms on) and
 *    closed when the session is complete; four real ranks must init (and
 *    run AllReduce) meanwhile in well under the connect timeout (20 s here).
 *  - eviction: the root's pending table (ZH_MAX_PENDING) is filled with
 *    connections of our uid that never send a byte; once they are
 *    ZH_PEND_MIN_AGE_MS old, a newcomer is challenged and the oldest filler
 *    (only it) is closed; four real ranks then init and run their ops, and
 *    every filler is closed by the end of the session.
 *  - outsiders join first: a process of another uid holding the exact root
 *    info calls HcclCommInitRootInfo as rank 0, a process of our uid holding
 *    a root info with another unique id calls it as rank 1, and a raw client
 *    answers the challenge with a hello whose proof is wrong. All three must
 *    be refused at once (HCCL_E_PARA, and a ZC_ERR_INVAL refusal for the raw
 *    one), none may see a table, no byte run of the unique id may cross the
 *    wire, and the four real ranks must then init and run their ops.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "boot/hccl_boot.h"
#include "zc/export.h"
#include "zc/status.h"
#include "zs_common.h"

#define ZS_NRANKS 4
#define ZS_TRICKLE 4
#define ZS_TRICKLE_MS 900
#define ZS_REFUSE_MS 200

static int zs_root_connect(const HcclRootInfo *ri)
{
    zh_rootrec_t rec;
    memcpy(&rec, ri->internal + ZH_RI_OFFSET, sizeof(rec));
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(rec.port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || inet_pton(AF_INET, ri->internal, &sa.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

/* ---- trickle ------------------------------------------------------------------------- */

typedef struct {
    const zs_user_t *user; /* NULL: stay our own uid */
} zs_trickle_arg_t;

typedef struct {
    int32_t opened;
    int32_t refused;     /* got a ZC_ERR_PERM refusal first */
    int32_t challenged;  /* got a challenge first */
    int32_t dropped;     /* closed by the root afterwards */
    int64_t drop_ms_min; /* from connect to that close */
    int64_t drop_ms_max;
    int32_t bytes_sent;
} zs_trickle_report_t;

/* What the root sent first on fd: 1 challenge, 2 refusal (PERM), 0 other. */
static int zs_first_message(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    zh_chal_t ch;
    if (poll(&p, 1, ms) != 1 ||
        recv(fd, &ch, sizeof(zh_reply_t), MSG_WAITALL) != (ssize_t)sizeof(zh_reply_t)) {
        return 0;
    }
    if (ch.magic == ZH_MSG_CHAL) {
        return recv(fd, (char *)&ch + sizeof(zh_reply_t), sizeof(ch) - sizeof(zh_reply_t),
                    MSG_WAITALL) == (ssize_t)(sizeof(ch) - sizeof(zh_reply_t));
    }
    zh_reply_t rep;
    memcpy(&rep, &ch, sizeof(rep));
    return rep.magic == ZH_MSG_TABLE && rep.status == ZC_ERR_PERM ? 2 : 0;
}

/* A first-generation connection closed by the root, at ms after its connect. */
static void zs_trickle_dropped(zs_trickle_report_t *rep, int64_t ms)
{
    rep->drop_ms_min = rep->dropped == 0 ? ms : ZC_MIN(rep->drop_ms_min, ms);
    rep->drop_ms_max = ZC_MAX(rep->drop_ms_max, ms);
    rep->dropped++;
}

/* Has the root closed fd (EOF within ms)? */
static int zs_closed(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c;
    return poll(&p, 1, ms) == 1 && recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

/* Connect and take the first message; fds[i] stays open only when challenged. */
static void zs_trickle_open(const HcclRootInfo *ri, int *fd, zs_trickle_report_t *rep)
{
    *fd = zs_root_connect(ri);
    rep->opened += *fd >= 0;
    int m = *fd >= 0 ? zs_first_message(*fd, ZS_REFUSE_MS) : 0;
    rep->challenged += m == 1;
    rep->refused += m == 2;
    if (m != 1 && *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

static int zs_trickle_kid(int sock, void *arg)
{
    const zs_trickle_arg_t *a = arg;
    HcclRootInfo ri;
    ZT_KCHECK(zt_msg_get(sock, &ri, sizeof(ri)) == 0);
    if (a->user != NULL) {
        ZT_KCHECK(zs_become(a->user) == 0);
    }
    zs_trickle_report_t rep;
    memset(&rep, 0, sizeof(rep));
    int fds[ZS_TRICKLE];
    uint64_t t0[ZS_TRICKLE];
    int first_gen[ZS_TRICKLE];
    for (int i = 0; i < ZS_TRICKLE; i++) {
        zs_trickle_open(&ri, &fds[i], &rep);
        t0[i] = zs_ms();
        first_gen[i] = 1;
    }
    ZT_KCHECK(zt_msg_put(sock, &rep, sizeof(rep)) == 0);
    /* One byte every ZS_TRICKLE_MS on each connection; a dropped one is
     * reconnected at once (the pressure stays); until told to stop. */
    uint64_t next = zs_ms() + ZS_TRICKLE_MS;
    for (;;) {
        struct pollfd p[1 + ZS_TRICKLE];
        p[0] = (struct pollfd){.fd = sock, .events = POLLIN};
        for (int i = 0; i < ZS_TRICKLE; i++) {
            p[1 + i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        }
        uint64_t now = zs_ms();
        if (poll(p, 1 + ZS_TRICKLE, now < next ? (int)(next - now) : 0) > 0 && p[0].revents) {
            break;
        }
        for (int i = 0; i < ZS_TRICKLE; i++) {
            char c = 'x';
            if (fds[i] >= 0 && p[1 + i].revents != 0 && recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0) {
                if (first_gen[i]) {
                    zs_trickle_dropped(&rep, (int64_t)(zs_ms() - t0[i]));
                    first_gen[i] = 0;
                }
                close(fds[i]);
                zs_trickle_open(&ri, &fds[i], &rep);
                t0[i] = zs_ms();
            }
        }
        if (zs_ms() >= next) {
            for (int i = 0; i < ZS_TRICKLE; i++) {
                rep.bytes_sent += fds[i] >= 0 && send(fds[i], "x", 1, MSG_NOSIGNAL) == 1;
            }
            next += ZS_TRICKLE_MS;
        }
    }
    /* Told to stop: the session is over, so its listener closed them all. */
    for (int i = 0; i < ZS_TRICKLE; i++) {
        if (fds[i] >= 0 && first_gen[i] && zs_closed(fds[i], 2000)) {
            zs_trickle_dropped(&rep, (int64_t)(zs_ms() - t0[i]));
        }
    }
    ZT_KCHECK(zt_msg_put(sock, &rep, sizeof(rep)) == 0);
    return 0;
}

static void test_root_trickle(void **state)
{
    (void)state;
    const zs_user_t *u = zs_user_get();
    zt_kid_t k[ZS_NRANKS];
    zs_rank_t a[ZS_NRANKS];
    zs_ranks_start(k, a, ZS_NRANKS, 0);
    zs_trickle_arg_t other = {u};
    zs_trickle_arg_t ours = {NULL};
    zt_kid_t hostile = {0, -1};
    if (u != NULL) {
        hostile = zt_kid_start(zs_trickle_kid, &other);
    }
    zt_kid_t same = zt_kid_start(zs_trickle_kid, &ours);
    HcclRootInfo ri;
    assert_int_equal(HcclGetRootInfo(&ri), HCCL_SUCCESS);
    zs_trickle_report_t h1 = {0};
    zs_trickle_report_t h2 = {0};
    zs_trickle_report_t s1;
    zs_trickle_report_t s2;
    if (u != NULL) {
        assert_int_equal(zt_msg_put(hostile.sock, &ri, sizeof(ri)), 0);
        assert_int_equal(zt_msg_get(hostile.sock, &h1, sizeof(h1)), 0);
    }
    assert_int_equal(zt_msg_put(same.sock, &ri, sizeof(ri)), 0);
    assert_int_equal(zt_msg_get(same.sock, &s1, sizeof(s1)), 0);
    /* The tricklers' connections outlive the eviction age; they go on. */
    usleep((ZH_PEND_MIN_AGE_MS + 500) * 1000);
    zs_report_t init[ZS_NRANKS];
    zs_report_t ops[ZS_NRANKS];
    int ibad = zs_ranks_init(k, ZS_NRANKS, &ri, init);
    int bad = zs_ranks_run(k, ZS_NRANKS, init, ops);
    if (u != NULL) {
        assert_int_equal(zt_msg_put(hostile.sock, "s", 1), 0);
        assert_int_equal(zt_msg_get(hostile.sock, &h2, sizeof(h2)), 0);
        assert_int_equal(zt_kid_wait(hostile), 0);
    }
    assert_int_equal(zt_msg_put(same.sock, "s", 1), 0);
    assert_int_equal(zt_msg_get(same.sock, &s2, sizeof(s2)), 0);
    assert_int_equal(zt_kid_wait(same), 0);
    int64_t worst = 0;
    for (int r = 0; r < ZS_NRANKS; r++) {
        worst = ZC_MAX(worst, init[r].ms);
    }
    printf("root trickle: other uid: %d connections (%d with reconnects), %d refused at "
           "accept; our uid: %d connections, %d closed by the root (%lld to %lld ms after "
           "connect), %d in all with reconnects, %d bytes trickled; %d real ranks: %d "
           "failed init (slowest %lld ms), %d failed ops\n",
           h1.opened, h2.opened, h2.refused, s1.opened, s2.dropped, (long long)s2.drop_ms_min,
           (long long)s2.drop_ms_max, s2.opened, s2.bytes_sent, ZS_NRANKS, ibad, (long long)worst,
           bad);
    fflush(stdout);
    if (u != NULL) {
        assert_int_equal(h1.opened, ZS_TRICKLE);
        assert_int_equal(h1.refused, ZS_TRICKLE);
        assert_int_equal(h2.refused, h2.opened); /* every one, reconnects too */
    }
    assert_int_equal(s1.challenged, ZS_TRICKLE);
    /* Not dropped for slowness; closed when the session was complete. */
    assert_int_equal(s2.dropped, ZS_TRICKLE);
    assert_int_equal(s2.opened, ZS_TRICKLE);
    assert_true(s2.drop_ms_min >= ZH_PEND_MIN_AGE_MS + 500);
    assert_true(s2.bytes_sent > 0);
    assert_int_equal(ibad, 0);
    assert_int_equal(bad, 0);
    assert_true(worst < 3000); /* the connect timeout is 20 s */
}

/* ---- eviction of the oldest ---------------------------------------------------------- */

static void test_root_evict(void **state)
{
    (void)state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rlim_t want = 2 * ZH_MAX_PENDING + 256; /* our ends and the root's */
    if (rl.rlim_cur < want) {
        rl.rlim_cur = ZC_MIN(want, rl.rlim_max);
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    if (rl.rlim_cur < want) {
        skip(); /* cannot hold a full table here */
    }
    zt_kid_t k[ZS_NRANKS];
    zs_rank_t a[ZS_NRANKS];
    zs_ranks_start(k, a, ZS_NRANKS, 0);
    HcclRootInfo ri;
    assert_int_equal(HcclGetRootInfo(&ri), HCCL_SUCCESS);
    static int fds[ZH_MAX_PENDING];
    zs_trickle_report_t fill = {0};
    for (int i = 0; i < ZH_MAX_PENDING; i++) {
        zs_trickle_open(&ri, &fds[i], &fill);
    }
    usleep((ZH_PEND_MIN_AGE_MS + 300) * 1000);
    zs_trickle_report_t late = {0};
    int nfd = -1;
    zs_trickle_open(&ri, &nfd, &late);
    int first_closed = zs_closed(fds[0], 2000);
    int second_closed = zs_closed(fds[1], 0);
    zs_report_t init[ZS_NRANKS];
    zs_report_t ops[ZS_NRANKS];
    int ibad = zs_ranks_init(k, ZS_NRANKS, &ri, init);
    int bad = zs_ranks_run(k, ZS_NRANKS, init, ops);
    int open_after = 0;
    for (int i = 0; i < ZH_MAX_PENDING; i++) {
        open_after += fds[i] >= 0 && !zs_closed(fds[i], 2000);
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    if (nfd >= 0) {
        close(nfd);
    }
    printf("root evict: %d of %d fillers challenged; after %d ms a newcomer %s, the oldest "
           "filler %s, the second %s; %d real ranks: %d failed init, %d failed ops; %d "
           "fillers open after the session\n",
           fill.challenged, ZH_MAX_PENDING, ZH_PEND_MIN_AGE_MS + 300,
           late.challenged ? "was challenged" : "was not", first_closed ? "closed" : "open",
           second_closed ? "closed" : "open", ZS_NRANKS, ibad, bad, open_after);
    fflush(stdout);
    assert_int_equal(fill.challenged, ZH_MAX_PENDING);
    assert_int_equal(late.challenged, 1);
    assert_true(first_closed);
    assert_false(second_closed);
    assert_int_equal(ibad, 0);
    assert_int_equal(bad, 0);
    assert_int_equal(open_after, 0);
}

/* ---- outsiders joining first --------------------------------------------------------- */

typedef struct {
    const zs_user_t *user; /* NULL: our uid */
    int rank;
    int spoil_id; /* flip a byte of the unique id first */
} zs_outsider_arg_t;

static int zs_outsider_kid(int sock, void *arg)
{
    const zs_outsider_arg_t *a = arg;
    HcclRootInfo ri;
    ZT_KCHECK(zt_msg_get(sock, &ri, sizeof(ri)) == 0);
    if (a->user != NULL) {
        ZT_KCHECK(zs_become(a->user) == 0);
    }
    if (a->spoil_id) {
        ri.internal[ZH_RI_OFFSET + offsetof(zh_rootrec_t, uuid)] ^= 0x5a;
    }
    ZT_KCHECK(aclInit(NULL) == ACL_SUCCESS && aclrtSetDevice(0) == ACL_SUCCESS);
    HcclComm comm = NULL;
    uint64_t t0 = zs_ms();
    zs_report_t rep = {(int32_t)HcclCommInitRootInfo(ZS_NRANKS, &ri, (uint32_t)a->rank, &comm), 0,
                       0};
    rep.ms = (int64_t)(zs_ms() - t0);
    ZT_KCHECK(zt_msg_put(sock, &rep, sizeof(rep)) == 0);
    return 0;
}

/* A raw client with a wrong proof: its answer, and whether the id leaked. */
static void zs_raw_wrong_proof(const HcclRootInfo *ri, int32_t *status, int *leaked)
{
    int fd = zs_root_connect(ri);
    assert_true(fd >= 0);
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    uint8_t got[sizeof(zh_chal_t) + 64];
    assert_int_equal(recv(fd, got, sizeof(zh_chal_t), MSG_WAITALL), (ssize_t)sizeof(zh_chal_t));
    zh_hello_t h;
    memset(&h, 0, sizeof(h));
    h.magic = ZH_MSG_HELLO;
    h.version = ZH_BOOT_VERSION;
    h.nranks = ZS_NRANKS;
    h.rank = 2;
    h.entry.pid = getpid();
    memset(h.mac, 0xab, sizeof(h.mac));
    assert_int_equal(send(fd, &h, sizeof(h), MSG_NOSIGNAL), (ssize_t)sizeof(h));
    ssize_t n = recv(fd, got + sizeof(zh_chal_t), 64, MSG_WAITALL);
    close(fd);
    zh_reply_t rep;
    memset(&rep, 0, sizeof(rep));
    memcpy(&rep, got + sizeof(zh_chal_t), sizeof(rep));
    *status = n == (ssize_t)sizeof(rep) && rep.magic == ZH_MSG_TABLE ? rep.status : 1;
    /* No 4-byte run of the unique id in anything the root sent. */
    const uint8_t *id = (const uint8_t *)ri->internal + ZH_RI_OFFSET + offsetof(zh_rootrec_t, uuid);
    size_t total = sizeof(zh_chal_t) + (n > 0 ? (size_t)n : 0);
    *leaked = 0;
    for (size_t i = 0; i + 4 <= total; i++) {
        for (size_t j = 0; j + 4 <= 16; j++) {
            *leaked |= memcmp(got + i, id + j, 4) == 0;
        }
    }
}

static void test_root_outsiders_first(void **state)
{
    (void)state;
    const zs_user_t *u = zs_user_get();
    zt_kid_t k[ZS_NRANKS];
    zs_rank_t a[ZS_NRANKS];
    zs_ranks_start(k, a, ZS_NRANKS, 0);
    zs_outsider_arg_t other = {u, 0, 0};
    zs_outsider_arg_t spoiled = {NULL, 1, 1};
    zt_kid_t ko = {0, -1};
    if (u != NULL) {
        ko = zt_kid_start(zs_outsider_kid, &other);
    }
    zt_kid_t ks = zt_kid_start(zs_outsider_kid, &spoiled);
    HcclRootInfo ri;
    assert_int_equal(HcclGetRootInfo(&ri), HCCL_SUCCESS);
    zs_report_t ro = {HCCL_E_PARA, 0, 0};
    zs_report_t rs;
    if (u != NULL) {
        assert_int_equal(zt_msg_put(ko.sock, &ri, sizeof(ri)), 0);
        assert_int_equal(zt_msg_get(ko.sock, &ro, sizeof(ro)), 0);
        assert_int_equal(zt_kid_wait(ko), 0);
    }
    assert_int_equal(zt_msg_put(ks.sock, &ri, sizeof(ri)), 0);
    assert_int_equal(zt_msg_get(ks.sock, &rs, sizeof(rs)), 0);
    assert_int_equal(zt_kid_wait(ks), 0);
    int32_t raw = 0;
    int leaked = 1;
    zs_raw_wrong_proof(&ri, &raw, &leaked);
    zs_report_t init[ZS_NRANKS];
    zs_report_t ops[ZS_NRANKS];
    int ibad = zs_ranks_init(k, ZS_NRANKS, &ri, init);
    int bad = zs_ranks_run(k, ZS_NRANKS, init, ops);
    printf("outsiders first: other uid with the root info -> %d in %lld ms%s; our uid with "
           "another id -> %d in %lld ms; raw wrong proof -> status %d, id bytes seen %d; "
           "then %d real ranks: %d failed init, %d failed ops\n",
           ro.code, (long long)ro.ms, u == NULL ? " (skipped: not root)" : "", rs.code,
           (long long)rs.ms, (int)raw, leaked, ZS_NRANKS, ibad, bad);
    fflush(stdout);
    assert_int_equal(ro.code, HCCL_E_PARA);
    assert_true(ro.ms < 1000);
    assert_int_equal(rs.code, HCCL_E_PARA);
    assert_true(rs.ms < 1000);
    assert_int_equal(raw, ZC_ERR_INVAL);
    assert_int_equal(leaked, 0);
    assert_int_equal(ibad, 0);
    assert_int_equal(bad, 0);
}

int main(void)
{
    setenv("HCCL_CONNECT_TIMEOUT", "20", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_root_trickle),
        cmocka_unit_test(test_root_evict),
        cmocka_unit_test(test_root_outsiders_first),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zs_user_remove(&zs_the_user);
    return rc;
}
