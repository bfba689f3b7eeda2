/*
 * The handle broker across processes (forked children, socketpair control):
 *  - robustness: clients sending garbage, truncated or oversized messages,
 *    a wrong magic, version or op, nothing at all, or hanging up, are refused
 *    (an answer with ZC_ERR_INVAL, never an fd) and the broker keeps serving
 *    proper requests, also while a silent client holds a connection open;
 *  - the uid check (when run as root: a child that drops to another uid is
 *    refused by the broker, and refuses a broker of another uid itself);
 *  - fork safety: a forked child has no broker and no offers of its own, can
 *    fetch from its parent, offers under its own pid; a dead owner is
 *    reported as ZC_ERR_NOT_FOUND at once;
 *  - concurrent fetchers are all served.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "share/vmm_share.h"
#include "zc/status.h"
#include "zc/sync.h"
#include "zt_fork.h"
#include "zccl/vmm_ext.h"

#define SEG 8192

/* ---- helpers ---------------------------------------------------------------------------- */

/* A memfd of SEG bytes whose first byte is tag. */
static int seg_new(char tag)
{
    int fd = memfd_create("t", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, SEG) != 0 || pwrite(fd, &tag, 1, 0) != 1) {
        return -1;
    }
    return fd;
}

static char seg_tag(int fd)
{
    char c = 0;
    return pread(fd, &c, 1, 0) == 1 ? c : 0;
}

/* Raw client: connect to pid's broker (no credential check of our own). */
static int raw_connect(uint64_t token)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) {
        return -1;
    }
    struct timeval tv = {.tv_sec = 5, .tv_usec = 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    /* The documented name: "\0zccl-broker-<pid>-<nonce>" in the abstract namespace. */
    struct sockaddr_un a;
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "zccl-broker-%d-%05x",
                     (int)zccl_broker_token_pid(token), (unsigned)zccl_broker_token_nonce(token));
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    if (connect(s, (struct sockaddr *)&a, alen) != 0) {
        close(s);
        return -1;
    }
    return s;
}

/*
 * Send n raw bytes, read the answer. Returns the answer's status, 1 when the
 * broker closed (or reset) without answering, 2 on a malformed answer or one carrying
 * an fd, 3 when the request could not be sent.
 */
static int raw_exchange(uint64_t token, const void *buf, size_t n)
{
    int s = raw_connect(token);
    if (s < 0) {
        return 3;
    }
    if (send(s, buf, n, MSG_NOSIGNAL) != (ssize_t)n) {
        close(s);
        return 3;
    }
    vmm_broker_resp_t resp;
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = &resp, .iov_len = sizeof(resp)};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
    ssize_t r = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
    close(s);
    if (r <= 0) {
        return 1; /* closed (or reset) without an answer */
    }
    if (r != (ssize_t)sizeof(resp) || resp.magic != VMM_BROKER_MAGIC ||
        CMSG_FIRSTHDR(&msg) != NULL) {
        return 2;
    }
    return resp.status;
}

/* ---- robustness ----------------------------------------------------------------------- */

typedef struct {
    uint64_t token;
    char tag;
} offer_msg_t;

static int kid_garbage(int sock, void *arg)
{
    (void)arg;
    offer_msg_t m;
    ZT_KCHECK(zt_msg_get(sock, &m, sizeof(m)) == 0);

    char junk[100];
    memset(junk, 0xab, sizeof(junk));
    ZT_KCHECK(raw_exchange(m.token, junk, sizeof(vmm_broker_req_t)) == ZC_ERR_INVAL); /* magic */
    ZT_KCHECK(raw_exchange(m.token, junk, 3) == ZC_ERR_INVAL);            /* truncated */
    ZT_KCHECK(raw_exchange(m.token, junk, sizeof(junk)) == ZC_ERR_INVAL); /* oversized */
    vmm_broker_req_t req = {.magic = VMM_BROKER_MAGIC,
                            .version = VMM_BROKER_VERSION,
                            .op = VMM_BROKER_OP_FETCH,
                            .token = m.token};
    char big[sizeof(req) + 8];
    memcpy(big, &req, sizeof(req));
    memset(big + sizeof(req), 0, 8);
    ZT_KCHECK(raw_exchange(m.token, big, sizeof(big)) == ZC_ERR_INVAL); /* valid, plus a tail */
    ZT_KCHECK(raw_exchange(m.token, &req, sizeof(req) - 1) == ZC_ERR_INVAL);
    vmm_broker_req_t bad = req;
    bad.magic ^= 1;
    ZT_KCHECK(raw_exchange(m.token, &bad, sizeof(bad)) == ZC_ERR_INVAL);
    bad = req;
    bad.version = 99;
    ZT_KCHECK(raw_exchange(m.token, &bad, sizeof(bad)) == ZC_ERR_INVAL);
    bad = req;
    bad.op = 7;
    ZT_KCHECK(raw_exchange(m.token, &bad, sizeof(bad)) == ZC_ERR_INVAL);
    bad = req;
    bad.token ^= 0x10; /* well formed, unknown offer */
    ZT_KCHECK(raw_exchange(m.token, &bad, sizeof(bad)) == ZC_ERR_NOT_FOUND);
    /* Hang up without a word, a few times. */
    for (int i = 0; i < 3; i++) {
        int s = raw_connect(m.token);
        ZT_KCHECK(s >= 0);
        close(s);
    }
    /* The raw proper request is answered with the fd. */
    int s = raw_connect(m.token);
    ZT_KCHECK(s >= 0);
    ZT_KCHECK(send(s, &req, sizeof(req), MSG_NOSIGNAL) == (ssize_t)sizeof(req));
    vmm_broker_resp_t resp;
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = &resp, .iov_len = sizeof(resp)};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
    ZT_KCHECK(recvmsg(s, &msg, MSG_CMSG_CLOEXEC) == (ssize_t)sizeof(resp));
    ZT_KCHECK(resp.status == ZC_OK && resp.size == SEG);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    ZT_KCHECK(c != NULL && c->cmsg_type == SCM_RIGHTS);
    int rfd;
    memcpy(&rfd, CMSG_DATA(c), sizeof(int));
    ZT_KCHECK(seg_tag(rfd) == m.tag);
    close(rfd);
    close(s);

    /* A silent client holds a connection: a proper fetch still completes at once. */
    int silent = raw_connect(m.token);
    ZT_KCHECK(silent >= 0);
    uint64_t t0 = zc_time_ns();
    int fd = -1;
    size_t size = 0;
    ZT_KCHECK(zccl_broker_fetch(m.token, &fd, &size) == ZC_OK);
    ZT_KCHECK(zc_time_ns() - t0 < 2000000000ull); /* served concurrently, not after it */
    ZT_KCHECK(size == SEG && seg_tag(fd) == m.tag);
    close(fd);
    close(silent);
    /* And a proper fetch after all of it. */
    ZT_KCHECK(zccl_broker_fetch(m.token, &fd, &size) == ZC_OK);
    ZT_KCHECK(seg_tag(fd) == m.tag);
    close(fd);
    return 0;
}

static void test_garbage_refused(void **state)
{
    (void)state;
    int fd = seg_new('G');
    assert_true(fd >= 0);
    offer_msg_t m = {.tag = 'G'};
    assert_int_equal(zccl_broker_offer(fd, SEG, 0, &m.token), ZC_OK);
    zt_kid_t k = zt_kid_start(kid_garbage, NULL);
    assert_int_equal(zt_msg_put(k.sock, &m, sizeof(m)), 0);
    assert_int_equal(zt_kid_wait(k), 0);
    /* The broker still serves a new client afterwards. */
    zt_kid_t k2 = zt_kid_start(kid_garbage, NULL);
    assert_int_equal(zt_msg_put(k2.sock, &m, sizeof(m)), 0);
    assert_int_equal(zt_kid_wait(k2), 0);
    assert_int_equal(zccl_broker_withdraw(m.token), ZC_OK);
    close(fd);
}

/* ---- uid ------------------------------------------------------------------------------- */

static int kid_other_uid(int sock, void *arg)
{
    (void)arg;
    offer_msg_t m;
    ZT_KCHECK(zt_msg_get(sock, &m, sizeof(m)) == 0);
    ZT_KCHECK(setgid(65534) == 0 && setuid(65534) == 0);
    /* The broker drops another uid at accept, unanswered, even though the
     * offer validates no pid... */
    vmm_broker_req_t req = {.magic = VMM_BROKER_MAGIC,
                            .version = VMM_BROKER_VERSION,
                            .op = VMM_BROKER_OP_FETCH,
                            .token = m.token};
    int r = raw_exchange(m.token, &req, sizeof(req));
    ZT_KCHECK(r == 1 || r == 3); /* closed before or after our request, never answered */
    /* ... and a client refuses a broker that runs under another uid. */
    int fd = -1;
    size_t size = 0;
    ZT_KCHECK(zccl_broker_fetch(m.token, &fd, &size) == ZC_ERR_PERM);
    ZT_KCHECK(fd == -1);
    return 0;
}

static void test_other_uid_refused(void **state)
{
    (void)state;
    if (getuid() != 0) {
        skip(); /* needs root to become another uid */
    }
    int fd = seg_new('U');
    offer_msg_t m = {.tag = 'U'};
    assert_int_equal(zccl_broker_offer(fd, SEG, 0, &m.token), ZC_OK);
    zt_kid_t k = zt_kid_start(kid_other_uid, NULL);
    assert_int_equal(zt_msg_put(k.sock, &m, sizeof(m)), 0);
    assert_int_equal(zt_kid_wait(k), 0);
    assert_int_equal(zccl_broker_withdraw(m.token), ZC_OK);
    close(fd);
}

/* ---- fork safety ---------------------------------------------------------------------- */

typedef struct {
    uint64_t parent_token; /* offered before the fork */
    char parent_tag;
} fork_arg_t;

static int kid_forked(int sock, void *arg)
{
    const fork_arg_t *a = arg;
    /* Nothing of the parent's broker state is ours. */
    ZT_KCHECK(zccl_broker_withdraw(a->parent_token) == ZC_ERR_NOT_FOUND);
    int32_t me = (int32_t)getpid();
    ZT_KCHECK(zccl_broker_allow(a->parent_token, &me, 1) == ZC_ERR_NOT_FOUND);
    /* Our own offer runs our own broker under our pid. */
    int sfd = seg_new('C');
    ZT_KCHECK(sfd >= 0);
    uint64_t mine = 0;
    ZT_KCHECK(zccl_broker_offer(sfd, SEG, 1, &mine) == ZC_OK);
    ZT_KCHECK(zccl_broker_token_pid(mine) == me);
    int32_t parent = (int32_t)getppid();
    ZT_KCHECK(zccl_broker_allow(mine, &parent, 1) == ZC_OK);
    ZT_KCHECK(zt_msg_put(sock, &mine, sizeof(mine)) == 0);
    char c;
    ZT_KCHECK(zt_msg_get(sock, &c, 1) == 0); /* parent trusts us now */
    int fd = -1;
    size_t size = 0;
    ZT_KCHECK(zccl_broker_fetch(a->parent_token, &fd, &size) == ZC_OK);
    ZT_KCHECK(size == SEG && seg_tag(fd) == a->parent_tag);
    close(fd);
    ZT_KCHECK(zt_msg_put(sock, &c, 1) == 0);
    ZT_KCHECK(zt_msg_get(sock, &c, 1) == 0); /* parent fetched ours */
    return 0;
}

static void test_fork_safety(void **state)
{
    (void)state;
    int pfd = seg_new('P');
    fork_arg_t a = {.parent_tag = 'P'};
    assert_int_equal(zccl_broker_offer(pfd, SEG, 1, &a.parent_token), ZC_OK);
    zt_kid_t k = zt_kid_start(kid_forked, &a);
    uint64_t kid_token = 0;
    assert_int_equal(zt_msg_get(k.sock, &kid_token, sizeof(kid_token)), 0);
    assert_int_equal(zccl_broker_token_pid(kid_token), k.pid);
    int fd = -1;
    size_t size = 0;
    int32_t kp = (int32_t)k.pid;
    assert_int_equal(zccl_broker_allow(a.parent_token, &kp, 1), ZC_OK);
    char c = 'g';
    assert_int_equal(zt_msg_put(k.sock, &c, 1), 0);
    assert_int_equal(zt_msg_get(k.sock, &c, 1), 0);
    assert_int_equal(zccl_broker_fetch(kid_token, &fd, &size), ZC_OK);
    assert_int_equal(seg_tag(fd), 'C');
    assert_int_equal(zt_msg_put(k.sock, &c, 1), 0);
    assert_int_equal(zt_kid_wait(k), 0);
    /* The child's memory lives on in our fd; its broker is gone. */
    assert_int_equal(seg_tag(fd), 'C');
    close(fd);
    uint64_t t0 = zc_time_ns();
    assert_int_equal(zccl_broker_fetch(kid_token, &fd, &size), ZC_ERR_NOT_FOUND);
    assert_true(zc_time_ns() - t0 < 1000000000ull);
    assert_int_equal(zccl_broker_withdraw(a.parent_token), ZC_OK);
    close(pfd);
}

/* An untrusted child is refused; trusting it later lets it in. */
static int kid_untrusted(int sock, void *arg)
{
    (void)arg;
    offer_msg_t m;
    ZT_KCHECK(zt_msg_get(sock, &m, sizeof(m)) == 0);
    int fd = -1;
    size_t size = 0;
    ZT_KCHECK(zccl_broker_fetch(m.token, &fd, &size) == ZC_ERR_PERM);
    char c = 'r';
    ZT_KCHECK(zt_msg_put(sock, &c, 1) == 0);
    ZT_KCHECK(zt_msg_get(sock, &c, 1) == 0);
    ZT_KCHECK(zccl_broker_fetch(m.token, &fd, &size) == ZC_OK);
    ZT_KCHECK(seg_tag(fd) == m.tag);
    close(fd);
    ZT_KCHECK(zt_msg_put(sock, &c, 1) == 0);
    ZT_KCHECK(zt_msg_get(sock, &c, 1) == 0); /* withdrawn now */
    ZT_KCHECK(zccl_broker_fetch(m.token, &fd, &size) == ZC_ERR_NOT_FOUND);
    return 0;
}

static void test_allow_and_withdraw(void **state)
{
    (void)state;
    int sfd = seg_new('A');
    offer_msg_t m = {.tag = 'A'};
    assert_int_equal(zccl_broker_offer(sfd, SEG, 1, &m.token), ZC_OK);
    zt_kid_t k = zt_kid_start(kid_untrusted, NULL);
    assert_int_equal(zt_msg_put(k.sock, &m, sizeof(m)), 0);
    char c;
    assert_int_equal(zt_msg_get(k.sock, &c, 1), 0);
    int32_t kp = (int32_t)k.pid;
    assert_int_equal(zccl_broker_allow(m.token, &kp, 1), ZC_OK);
    assert_int_equal(zt_msg_put(k.sock, &c, 1), 0);
    assert_int_equal(zt_msg_get(k.sock, &c, 1), 0);
    assert_int_equal(zccl_broker_withdraw(m.token), ZC_OK);
    assert_int_equal(zt_msg_put(k.sock, &c, 1), 0);
    assert_int_equal(zt_kid_wait(k), 0);
    close(sfd);
}

/* ---- concurrency ---------------------------------------------------------------------- */

static int kid_hammer(int sock, void *arg)
{
    (void)arg;
    offer_msg_t m;
    ZT_KCHECK(zt_msg_get(sock, &m, sizeof(m)) == 0);
    for (int i = 0; i < 50; i++) {
        int fd = -1;
        size_t size = 0;
        ZT_KCHECK(zccl_broker_fetch(m.token, &fd, &size) == ZC_OK);
        ZT_KCHECK(size == SEG && seg_tag(fd) == m.tag);
        close(fd);
    }
    return 0;
}

static void test_concurrent_fetchers(void **state)
{
    (void)state;
    int sfd = seg_new('H');
    offer_msg_t m = {.tag = 'H'};
    assert_int_equal(zccl_broker_offer(sfd, SEG, 0, &m.token), ZC_OK);
    zt_kid_t k[4];
    for (int i = 0; i < 4; i++) {
        k[i] = zt_kid_start(kid_hammer, NULL);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(zt_msg_put(k[i].sock, &m, sizeof(m)), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(zt_kid_wait(k[i]), 0);
    }
    assert_int_equal(zccl_broker_withdraw(m.token), ZC_OK);
    close(sfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_garbage_refused),     cmocka_unit_test(test_other_uid_refused),
        cmocka_unit_test(test_fork_safety),         cmocka_unit_test(test_allow_and_withdraw),
        cmocka_unit_test(test_concurrent_fetchers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
