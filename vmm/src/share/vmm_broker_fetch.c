/*
 * The per-process handle broker, fetching side (the server is vmm_broker.c;
 * protocol in vmm_share.h).
 *
 * A token of our own pid is a local dup (no socket). Otherwise the client
 * connects to the owner's socket, whose name the token gives (a dead owner
 * or one without a broker refuses at once: ZC_ERR_NOT_FOUND), checks that the
 * socket is served by the token's pid under our uid (an abstract name can be
 * squatted once its owner is gone: ZC_ERR_PERM), sends the request and waits
 * for the answer. One attempt is bounded by VMM_BROKER_ATTEMPT_MS; an attempt
 * that got no answer (a busy broker, one that dropped us) is retried until
 * VMM_BROKER_CLIENT_TIMEOUT_S, so a slow moment of the owner does not fail
 * the caller. A refusal the broker answered is final.
 */
#include "share/vmm_share.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "zc/export.h"
#include "zc/log.h"
#include "zc/status.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"

/* What one attempt tells the retry loop besides its status. */
#define VMM_FETCH_FINAL 0
#define VMM_FETCH_AGAIN 1

/* Close every fd carried by msg's control data. */
static void vmm_close_passed_fds(struct msghdr *msg)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < n; i++) {
                int f;
                memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                close(f);
            }
        }
    }
}

static void vmm_sock_timeouts_ms(int fd, int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Connect to the broker that made token and check who serves it. Returns a
 * socket or a status < 0; *again says whether a retry may help. */
static int vmm_broker_connect(uint64_t token, int ms, int *again)
{
    int32_t pid = zccl_broker_token_pid(token);
    *again = VMM_FETCH_FINAL;
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: socket() failed (errno %d)", errno);
        return ZC_ERR_SYS;
    }
    vmm_sock_timeouts_ms(s, ms);
    struct sockaddr_un addr;
    socklen_t alen = vmm_broker_addr(token, &addr);
    int rc;
    do {
        rc = connect(s, (struct sockaddr *)&addr, alen);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        int err = errno;
        close(s);
        if (err == ECONNREFUSED || err == ENOENT) {
            ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: pid %d runs no broker @%s (exited?)",
                    (int)pid, addr.sun_path + 1);
            return ZC_ERR_NOT_FOUND;
        }
        if (err == EAGAIN || err == ETIMEDOUT) {
            *again = VMM_FETCH_AGAIN;
            return ZC_ERR_TIMEOUT;
        }
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: connect to broker of pid %d failed (errno %d)",
                (int)pid, err);
        return ZC_ERR_CONNECT;
    }
    struct ucred cred;
    memset(&cred, 0, sizeof(cred));
    socklen_t clen = sizeof(cred);
    if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.pid != pid ||
        cred.uid != getuid()) {
        ZC_WARN(ZC_SUB_BROKER,
                "zccl_broker_fetch: @%s is served by pid %d uid %u, expected pid %d uid %u: "
                "refused",
                addr.sun_path + 1, (int)cred.pid, (unsigned)cred.uid, (int)pid, (unsigned)getuid());
        close(s);
        return ZC_ERR_PERM;
    }
    return s;
}

/* Read and check the broker's answer on s; fills resp and *got (the fd). */
static int vmm_broker_read_answer(int s, int32_t pid, vmm_broker_resp_t *resp, int *got, int *again)
{
    char buf[sizeof(vmm_broker_resp_t) + 1];
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(4 * sizeof(int))];
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b)};
    ssize_t n;
    do {
        n = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        /* No answer in time, or the broker dropped us (it was full or we
         * were late): worth another attempt while the owner lives. */
        *again = VMM_FETCH_AGAIN;
        return n < 0 && errno == EAGAIN ? ZC_ERR_TIMEOUT : ZC_ERR_IO;
    }
    memset(resp, 0, sizeof(*resp));
    memcpy(resp, buf, ZC_MIN((size_t)n, sizeof(*resp)));
    *got = -1;
    int nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            nfds += (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            if (*got < 0 && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
                memcpy(got, CMSG_DATA(c), sizeof(int));
            }
        }
    }
    int ok_shape = n == (ssize_t)sizeof(*resp) && (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0 &&
                   resp->magic == VMM_BROKER_MAGIC && resp->version == VMM_BROKER_VERSION;
    if (!ok_shape || (resp->status == ZC_OK && nfds != 1) || (resp->status != ZC_OK && nfds != 0)) {
        ZC_WARN(ZC_SUB_BROKER,
                "zccl_broker_fetch: malformed answer from pid %d (%zd bytes, magic 0x%08x, "
                "%d fds)",
                (int)pid, n, resp->magic, nfds);
        vmm_close_passed_fds(&msg);
        return ZC_ERR_IO;
    }
    return ZC_OK;
}

/* One attempt: connect, ask, read the answer. */
static int vmm_broker_attempt(uint64_t token, const vmm_ask_t *ask, int ms, int *fd,
                              vmm_broker_resp_t *resp, int *again)
{
    int32_t pid = zccl_broker_token_pid(token);
    int s = vmm_broker_connect(token, ms, again);
    if (s < 0) {
        return s;
    }
    vmm_broker_range_req_t req = {
        {.magic = VMM_BROKER_MAGIC,
         .version = VMM_BROKER_VERSION,
         .op = ask->ranged ? VMM_BROKER_OP_FETCH_RANGE : VMM_BROKER_OP_FETCH,
         .token = token},
        ask->off,
        ask->len};
    size_t len = ask->ranged ? sizeof(req) : sizeof(req.head);
    ssize_t n;
    do {
        n = send(s, &req, len, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    int st = ZC_OK;
    if (n != (ssize_t)len) {
        *again = VMM_FETCH_AGAIN;
        st = errno == EAGAIN ? ZC_ERR_TIMEOUT : ZC_ERR_IO;
    } else {
        st = vmm_broker_read_answer(s, pid, resp, fd, again);
    }
    close(s);
    if (st != ZC_OK || resp->status == ZC_OK) {
        return st;
    }
    const char *why = resp->status == ZC_ERR_PERM        ? "this pid is not allowed"
                      : resp->status == ZC_ERR_NOT_FOUND ? "no such offer (withdrawn?)"
                      : resp->status == ZC_ERR_INVAL && ask->ranged
                          ? "the range asked for is not the one offered"
                          : "request refused";
    ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: pid %d refused token 0x%016llx: %s (%s)", (int)pid,
            (unsigned long long)token, why, zc_status_str(resp->status));
    return resp->status < 0 && resp->status >= ZC_ERR_OVERLIMIT ? resp->status : ZC_ERR_REMOTE;
}

static int vmm_broker_fetch_ask(uint64_t token, const vmm_ask_t *ask, int *fd, size_t *fsize)
{
    if (fd == NULL || fsize == NULL) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: fd %p or size %p is NULL", (void *)fd,
                (void *)fsize);
        return ZC_ERR_PTR;
    }
    int32_t pid = zccl_broker_token_pid(token);
    if (pid <= 0 || (token & VMM_TOKEN_OFFER_MASK) == 0) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: 0x%016llx is not a token",
                (unsigned long long)token);
        return ZC_ERR_INVAL;
    }
    if (pid == (int32_t)getpid()) {
        return vmm_broker_fetch_local(token, ask, fd, fsize);
    }
    uint64_t deadline = zc_time_ns() + VMM_BROKER_CLIENT_TIMEOUT_S * 1000000000ull;
    vmm_broker_resp_t resp;
    int got = -1;
    int st;
    int tries = 0;
    for (;;) {
        int again = VMM_FETCH_FINAL;
        uint64_t now = zc_time_ns();
        int ms = now >= deadline ? 1
                                 : (int)ZC_MIN((deadline - now) / 1000000ull + 1,
                                               (uint64_t)VMM_BROKER_ATTEMPT_MS);
        tries++;
        st = vmm_broker_attempt(token, ask, ms, &got, &resp, &again);
        if (st == ZC_OK || again != VMM_FETCH_AGAIN || zc_time_ns() >= deadline) {
            break;
        }
        ZC_INFO(ZC_SUB_BROKER, "zccl_broker_fetch: no answer from pid %d (%s), retrying", (int)pid,
                zc_status_str(st));
        usleep(1000);
    }
    if (st != ZC_OK) {
        if (st == ZC_ERR_TIMEOUT || st == ZC_ERR_IO) {
            ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: no answer from pid %d in %d s (%d tries)",
                    (int)pid, VMM_BROKER_CLIENT_TIMEOUT_S, tries);
        }
        return st;
    }
    struct stat stbuf;
    if (fstat(got, &stbuf) != 0 || stbuf.st_size < 0 || (uint64_t)stbuf.st_size < resp.size ||
        (ask->ranged && (resp.offset != ask->off || resp.length != ask->len))) {
        ZC_WARN(ZC_SUB_BROKER,
                "zccl_broker_fetch: fd from pid %d does not hold %llu bytes (range %llu+%llu)",
                (int)pid, (unsigned long long)resp.size, (unsigned long long)resp.offset,
                (unsigned long long)resp.length);
        close(got);
        return ZC_ERR_IO;
    }
    *fd = got;
    *fsize = (size_t)resp.size;
    return ZC_OK;
}

int vmm_broker_fetch_range(uint64_t token, uint64_t off, uint64_t len, int *fd, size_t *fsize)
{
    vmm_ask_t ask = {1, off, len};
    return vmm_broker_fetch_ask(token, &ask, fd, fsize);
}

ZC_EXPORT int zccl_broker_fetch(uint64_t token, int *fd, size_t *size)
{
    vmm_ask_t ask = {0, 0, 0};
    return vmm_broker_fetch_ask(token, &ask, fd, size);
}
