/*
 * The per-process handle broker (DESIGN §3; protocol in vmm_ext.h and
 * vmm_share.h).
 *
 * A process that offers an fd runs one detached thread serving the abstract
 * Unix socket "\0zccl-broker-<pid>" (SOCK_SEQPACKET). Offers are kept in a
 * list: token, a dup of the fd, size, validate flag and allowed pids. A token
 * is (pid << 42) | 42 random bits, so it names its owner and cannot be
 * guessed.
 *
 * Serving one client: read its credentials (SO_PEERCRED), read one request
 * with a receive timeout, refuse anything malformed with ZC_ERR_INVAL and one
 * log line, refuse another uid or (when the offer validates pids) a pid not
 * on the allow list with ZC_ERR_PERM, else answer ZC_OK with a dup of the fd
 * attached (SCM_RIGHTS). Every socket operation is bounded by a timeout, so a
 * silent or stuck client delays the others by at most a few seconds and the
 * broker never stops serving.
 *
 * Fetching: a token of our own pid is a local dup (no socket). Otherwise the
 * client connects to the owner's socket (a dead owner or one without a
 * broker refuses at once: ZC_ERR_NOT_FOUND), checks that the socket is served
 * by the token's pid under our uid (an abstract name can be squatted), sends
 * the request and waits for the answer, all under VMM_BROKER_CLIENT_TIMEOUT_S.
 *
 * fork(): the handlers below take the registry and broker locks around
 * fork(). The child has no broker thread, so its handler closes the inherited
 * listening socket and the offer fds and empties the offer list; its first
 * offer starts its own broker under its own pid.
 */
#include "vmm_share.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
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

typedef struct vmm_offer vmm_offer_t;
struct vmm_offer {
    vmm_offer_t *next;
    uint64_t token;
    int fd;
    size_t size;
    int validate;
    int32_t *pids;
    size_t npids;
    size_t cap;
};

static pthread_mutex_t vmm_broker_mu = PTHREAD_MUTEX_INITIALIZER;
static vmm_offer_t *vmm_offers;
static int vmm_broker_fd = -1; /* listening socket, -1 when no broker runs */
static pid_t vmm_broker_pid;   /* pid the running broker serves */
static pthread_once_t vmm_fork_once = PTHREAD_ONCE_INIT;

socklen_t vmm_broker_addr(int32_t pid, struct sockaddr_un *addr)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    int n = snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1, "zccl-broker-%d", (int)pid);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int vmm_token_is_mine(uint64_t token)
{
    return token != 0 && zccl_broker_token_pid(token) == (int32_t)getpid();
}

/* ---- fork handling ---------------------------------------------------------- */

static void vmm_fork_prepare(void)
{
    vmm_fork_prepare_registry();
    pthread_mutex_lock(&vmm_broker_mu);
}

static void vmm_fork_parent(void)
{
    pthread_mutex_unlock(&vmm_broker_mu);
    vmm_fork_parent_registry();
}

static void vmm_offer_free(vmm_offer_t *o)
{
    close(o->fd);
    free(o->pids);
    free(o);
}

static void vmm_fork_child(void)
{
    /* The broker thread did not survive the fork; its socket and offers belong
     * to the parent's pid, so none of it is ours. */
    if (vmm_broker_fd >= 0) {
        close(vmm_broker_fd);
        vmm_broker_fd = -1;
    }
    vmm_broker_pid = 0;
    while (vmm_offers != NULL) {
        vmm_offer_t *o = vmm_offers;
        vmm_offers = o->next;
        vmm_offer_free(o);
    }
    pthread_mutex_unlock(&vmm_broker_mu);
    vmm_fork_child_registry();
}

static void vmm_fork_register(void)
{
    pthread_atfork(vmm_fork_prepare, vmm_fork_parent, vmm_fork_child);
}

void vmm_fork_init(void)
{
    pthread_once(&vmm_fork_once, vmm_fork_register);
}

/* Registered at load time, so no fork can slip in before the handlers exist. */
__attribute__((constructor)) static void vmm_broker_ctor(void)
{
    vmm_fork_init();
}

/* ---- offers ----------------------------------------------------------------- */

static vmm_offer_t *vmm_offer_find(uint64_t token)
{
    for (vmm_offer_t *o = vmm_offers; o != NULL; o = o->next) {
        if (o->token == token) {
            return o;
        }
    }
    return NULL;
}

static int vmm_offer_allows(const vmm_offer_t *o, int32_t pid)
{
    if (!o->validate) {
        return 1;
    }
    for (size_t i = 0; i < o->npids; i++) {
        if (o->pids[i] == pid) {
            return 1;
        }
    }
    return 0;
}

/* ---- the broker thread ------------------------------------------------------ */

static void vmm_sock_timeouts(int fd, int seconds)
{
    struct timeval tv = {.tv_sec = seconds, .tv_usec = 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Send an answer, with fd attached when fd >= 0. Returns 0 or -1. */
static int vmm_broker_answer(int conn, int32_t status, uint64_t size, int fd)
{
    vmm_broker_resp_t resp = {
        .magic = VMM_BROKER_MAGIC, .version = VMM_BROKER_VERSION, .status = status, .size = size};
    struct iovec iov = {.iov_base = &resp, .iov_len = sizeof(resp)};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&ctl, 0, sizeof(ctl));
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof(ctl.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    ssize_t n;
    do {
        n = sendmsg(conn, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof(resp) ? 0 : -1;
}

/* Serve one connection: at most one request, one answer. */
static void vmm_broker_serve(int conn)
{
    struct ucred cred;
    memset(&cred, 0, sizeof(cred));
    socklen_t clen = sizeof(cred);
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) {
        ZC_WARN(ZC_SUB_BROKER, "broker: SO_PEERCRED failed (errno %d), client dropped", errno);
        return;
    }
    vmm_sock_timeouts(conn, VMM_BROKER_SERVER_TIMEOUT_S);

    /* One byte more than a request, so an oversized message shows as such;
     * no control buffer, so any fd a client sends us is discarded. */
    char buf[sizeof(vmm_broker_req_t) + 1];
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n;
    do {
        n = recvmsg(conn, &msg, 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        ZC_WARN(ZC_SUB_BROKER, "broker: no request from pid %d within %d s (errno %d), dropped",
                (int)cred.pid, VMM_BROKER_SERVER_TIMEOUT_S, errno);
        return;
    }
    if (n == 0) {
        /* A client that hangs up (e.g. after refusing our credentials) is not garbage. */
        ZC_INFO(ZC_SUB_BROKER, "broker: pid %d hung up without a request", (int)cred.pid);
        return;
    }
    vmm_broker_req_t req;
    memcpy(&req, buf, ZC_MIN((size_t)n, sizeof(req)));
    if (n != (ssize_t)sizeof(req) || (msg.msg_flags & MSG_TRUNC) != 0) {
        ZC_WARN(ZC_SUB_BROKER, "broker: refused pid %d: request of %zd bytes (want %zu)",
                (int)cred.pid, n, sizeof(req));
        (void)vmm_broker_answer(conn, ZC_ERR_INVAL, 0, -1);
        return;
    }
    if (req.magic != VMM_BROKER_MAGIC || req.version != VMM_BROKER_VERSION ||
        req.op != VMM_BROKER_OP_FETCH) {
        ZC_WARN(ZC_SUB_BROKER, "broker: refused pid %d: magic 0x%08x version %u op %u",
                (int)cred.pid, req.magic, (unsigned)req.version, (unsigned)req.op);
        (void)vmm_broker_answer(conn, ZC_ERR_INVAL, 0, -1);
        return;
    }
    /* Checked after the request was read: closing a socket with unread data
     * resets it, and the client would never see why it was refused. */
    if (cred.uid != getuid()) {
        ZC_WARN(ZC_SUB_BROKER, "broker: refused pid %d: uid %u is not ours (%u)", (int)cred.pid,
                (unsigned)cred.uid, (unsigned)getuid());
        (void)vmm_broker_answer(conn, ZC_ERR_PERM, 0, -1);
        return;
    }

    int32_t status = ZC_OK;
    int fd = -1;
    size_t size = 0;
    pthread_mutex_lock(&vmm_broker_mu);
    vmm_offer_t *o = vmm_offer_find(req.token);
    if (o == NULL) {
        status = ZC_ERR_NOT_FOUND;
    } else if (!vmm_offer_allows(o, cred.pid)) {
        status = ZC_ERR_PERM;
    } else {
        /* Dup under the lock so a concurrent withdraw cannot close it first. */
        fd = fcntl(o->fd, F_DUPFD_CLOEXEC, 0);
        size = o->size;
        if (fd < 0) {
            status = ZC_ERR_SYS;
        }
    }
    pthread_mutex_unlock(&vmm_broker_mu);

    if (status == ZC_ERR_NOT_FOUND) {
        ZC_WARN(ZC_SUB_BROKER, "broker: pid %d asked for unknown token 0x%016llx", (int)cred.pid,
                (unsigned long long)req.token);
    } else if (status == ZC_ERR_PERM) {
        ZC_WARN(ZC_SUB_BROKER, "broker: refused pid %d: not on the allow list of token 0x%016llx",
                (int)cred.pid, (unsigned long long)req.token);
    } else if (status == ZC_ERR_SYS) {
        ZC_WARN(ZC_SUB_BROKER, "broker: dup of token 0x%016llx failed (errno %d)",
                (unsigned long long)req.token, errno);
    }
    if (vmm_broker_answer(conn, status, size, fd) != 0) {
        ZC_WARN(ZC_SUB_BROKER, "broker: answer to pid %d not sent (errno %d)", (int)cred.pid,
                errno);
    }
    if (fd >= 0) {
        close(fd);
    }
}

static void *vmm_broker_main(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK) {
                return NULL; /* the socket is gone: nothing left to serve */
            }
            /* Out of fds or memory: back off briefly instead of spinning. */
            ZC_WARN(ZC_SUB_BROKER, "broker: accept failed (errno %d), retrying", errno);
            usleep(10000);
            continue;
        }
        vmm_broker_serve(conn);
        close(conn);
    }
    return NULL;
}

/* Start the broker of this pid if it is not running. Broker lock held. */
static int vmm_broker_start(void)
{
    pid_t me = getpid();
    if (vmm_broker_fd >= 0 && vmm_broker_pid == me) {
        return ZC_OK;
    }
    int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (lfd < 0) {
        ZC_WARN(ZC_SUB_BROKER, "broker: socket() failed (errno %d)", errno);
        return ZC_ERR_SYS;
    }
    struct sockaddr_un addr;
    socklen_t alen = vmm_broker_addr((int32_t)me, &addr);
    if (bind(lfd, (struct sockaddr *)&addr, alen) != 0 || listen(lfd, 128) != 0) {
        ZC_WARN(ZC_SUB_BROKER, "broker: bind/listen on @zccl-broker-%d failed (errno %d)", (int)me,
                errno);
        close(lfd);
        return ZC_ERR_SYS;
    }
    /* The thread blocks every signal: they belong to the application's threads. */
    sigset_t all;
    sigset_t old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t tid;
    int rc = pthread_create(&tid, &attr, vmm_broker_main, (void *)(intptr_t)lfd);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        ZC_WARN(ZC_SUB_BROKER, "broker: pthread_create failed (%d)", rc);
        close(lfd);
        return ZC_ERR_SYS;
    }
    vmm_broker_fd = lfd;
    vmm_broker_pid = me;
    ZC_INFO(ZC_SUB_BROKER, "broker of pid %d serving @zccl-broker-%d", (int)me, (int)me);
    return ZC_OK;
}

/* ---- ext interface ------------------------------------------------------------ */

ZC_EXPORT int zccl_broker_offer(int fd, size_t size, int validate_pid, uint64_t *token)
{
    if (token == NULL) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_offer: token is NULL");
        return ZC_ERR_PTR;
    }
    if (fd < 0 || size == 0) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_offer: bad fd %d or size %zu", fd, size);
        return ZC_ERR_INVAL;
    }
    uint64_t serial = 0;
    while (serial == 0) {
        if (zc_random_bytes(&serial, sizeof(serial)) != 0) {
            ZC_WARN(ZC_SUB_BROKER, "zccl_broker_offer: getrandom failed (errno %d)", errno);
            return ZC_ERR_SYS;
        }
        serial &= VMM_TOKEN_SERIAL_MASK;
    }
    vmm_offer_t *o = calloc(1, sizeof(*o));
    if (o == NULL) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_offer: out of memory");
        return ZC_ERR_NOMEM;
    }
    o->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (o->fd < 0) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_offer: dup of fd %d failed (errno %d)", fd, errno);
        free(o);
        return errno == EBADF ? ZC_ERR_INVAL : ZC_ERR_SYS;
    }
    o->size = size;
    o->validate = validate_pid != 0;

    pthread_mutex_lock(&vmm_broker_mu);
    int st = vmm_broker_start();
    if (st == ZC_OK) {
        o->token = ((uint64_t)(uint32_t)getpid() << VMM_TOKEN_PID_SHIFT) | serial;
        o->next = vmm_offers;
        vmm_offers = o;
        *token = o->token;
    }
    pthread_mutex_unlock(&vmm_broker_mu);
    if (st != ZC_OK) {
        vmm_offer_free(o);
    }
    return st;
}

ZC_EXPORT int zccl_broker_allow(uint64_t token, const int32_t *pids, size_t npids)
{
    if (pids == NULL && npids > 0) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_allow: pids is NULL with npids %zu", npids);
        return ZC_ERR_PTR;
    }
    for (size_t i = 0; i < npids; i++) {
        if (pids[i] <= 0) {
            ZC_WARN(ZC_SUB_BROKER, "zccl_broker_allow: pids[%zu] = %d is not a pid", i,
                    (int)pids[i]);
            return ZC_ERR_INVAL;
        }
    }
    int st = ZC_OK;
    pthread_mutex_lock(&vmm_broker_mu);
    vmm_offer_t *o = vmm_token_is_mine(token) ? vmm_offer_find(token) : NULL;
    if (o == NULL) {
        st = ZC_ERR_NOT_FOUND;
    } else if (o->npids + npids > o->cap) {
        size_t cap = ZC_MAX(o->cap * 2, o->npids + npids);
        int32_t *p = realloc(o->pids, cap * sizeof(*p));
        if (p == NULL) {
            st = ZC_ERR_NOMEM;
        } else {
            o->pids = p;
            o->cap = cap;
        }
    }
    if (st == ZC_OK) {
        for (size_t i = 0; i < npids; i++) {
            o->pids[o->npids++] = pids[i];
        }
    }
    pthread_mutex_unlock(&vmm_broker_mu);
    if (st == ZC_ERR_NOT_FOUND) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_allow: token 0x%016llx is not an offer of pid %d",
                (unsigned long long)token, (int)getpid());
    } else if (st == ZC_ERR_NOMEM) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_allow: out of memory for %zu pids", npids);
    }
    return st;
}

ZC_EXPORT int zccl_broker_withdraw(uint64_t token)
{
    vmm_offer_t *found = NULL;
    pthread_mutex_lock(&vmm_broker_mu);
    if (vmm_token_is_mine(token)) {
        for (vmm_offer_t **pp = &vmm_offers; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->token == token) {
                found = *pp;
                *pp = found->next;
                break;
            }
        }
    }
    pthread_mutex_unlock(&vmm_broker_mu);
    if (found == NULL) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_withdraw: token 0x%016llx is not an offer of pid %d",
                (unsigned long long)token, (int)getpid());
        return ZC_ERR_NOT_FOUND;
    }
    vmm_offer_free(found);
    return ZC_OK;
}

/* A token of this process: dup the offered fd without a socket. */
static int vmm_broker_fetch_local(uint64_t token, int *fd, size_t *size)
{
    int st = ZC_OK;
    int nfd = -1;
    size_t sz = 0;
    pthread_mutex_lock(&vmm_broker_mu);
    vmm_offer_t *o = vmm_offer_find(token);
    if (o == NULL) {
        st = ZC_ERR_NOT_FOUND;
    } else {
        nfd = fcntl(o->fd, F_DUPFD_CLOEXEC, 0);
        sz = o->size;
        if (nfd < 0) {
            st = ZC_ERR_SYS;
        }
    }
    pthread_mutex_unlock(&vmm_broker_mu);
    if (st == ZC_ERR_NOT_FOUND) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: token 0x%016llx is not an offer of pid %d",
                (unsigned long long)token, (int)getpid());
    } else if (st == ZC_ERR_SYS) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: dup failed (errno %d)", errno);
    } else {
        *fd = nfd;
        *size = sz;
    }
    return st;
}

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

/* Connect to pid's broker and check who serves it. Returns a socket or a status < 0. */
static int vmm_broker_connect(int32_t pid)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: socket() failed (errno %d)", errno);
        return ZC_ERR_SYS;
    }
    vmm_sock_timeouts(s, VMM_BROKER_CLIENT_TIMEOUT_S);
    struct sockaddr_un addr;
    socklen_t alen = vmm_broker_addr(pid, &addr);
    int rc;
    do {
        rc = connect(s, (struct sockaddr *)&addr, alen);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        int err = errno;
        close(s);
        if (err == ECONNREFUSED || err == ENOENT) {
            ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: pid %d runs no broker (exited?)", (int)pid);
            return ZC_ERR_NOT_FOUND;
        }
        if (err == EAGAIN || err == ETIMEDOUT) {
            ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: broker of pid %d busy for %d s", (int)pid,
                    VMM_BROKER_CLIENT_TIMEOUT_S);
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
                "zccl_broker_fetch: @zccl-broker-%d is served by pid %d uid %u, expected pid %d "
                "uid %u: refused",
                (int)pid, (int)cred.pid, (unsigned)cred.uid, (int)pid, (unsigned)getuid());
        close(s);
        return ZC_ERR_PERM;
    }
    return s;
}

ZC_EXPORT int zccl_broker_fetch(uint64_t token, int *fd, size_t *size)
{
    if (fd == NULL || size == NULL) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: fd %p or size %p is NULL", (void *)fd,
                (void *)size);
        return ZC_ERR_PTR;
    }
    int32_t pid = zccl_broker_token_pid(token);
    if (pid <= 0 || (token & VMM_TOKEN_SERIAL_MASK) == 0) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: 0x%016llx is not a token",
                (unsigned long long)token);
        return ZC_ERR_INVAL;
    }
    if (pid == (int32_t)getpid()) {
        return vmm_broker_fetch_local(token, fd, size);
    }
    int s = vmm_broker_connect(pid);
    if (s < 0) {
        return s;
    }
    vmm_broker_req_t req = {.magic = VMM_BROKER_MAGIC,
                            .version = VMM_BROKER_VERSION,
                            .op = VMM_BROKER_OP_FETCH,
                            .token = token};
    ssize_t n;
    do {
        n = send(s, &req, sizeof(req), MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(req)) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: request to pid %d not sent (errno %d)", (int)pid,
                errno);
        close(s);
        return errno == EAGAIN ? ZC_ERR_TIMEOUT : ZC_ERR_IO;
    }

    char buf[sizeof(vmm_broker_resp_t) + 1];
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(4 * sizeof(int))];
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b)};
    do {
        n = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    int err = errno;
    close(s);
    if (n < 0) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: no answer from pid %d within %d s (errno %d)",
                (int)pid, VMM_BROKER_CLIENT_TIMEOUT_S, err);
        return err == EAGAIN ? ZC_ERR_TIMEOUT : ZC_ERR_IO;
    }
    vmm_broker_resp_t resp;
    memset(&resp, 0, sizeof(resp));
    memcpy(&resp, buf, ZC_MIN((size_t)n, sizeof(resp)));
    int got = -1;
    int nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            nfds += (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            if (got < 0 && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
                memcpy(&got, CMSG_DATA(c), sizeof(int));
            }
        }
    }
    int ok_shape = n == (ssize_t)sizeof(resp) && (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0 &&
                   resp.magic == VMM_BROKER_MAGIC && resp.version == VMM_BROKER_VERSION;
    if (!ok_shape || (resp.status == ZC_OK && nfds != 1) || (resp.status != ZC_OK && nfds != 0)) {
        ZC_WARN(ZC_SUB_BROKER,
                "zccl_broker_fetch: malformed answer from pid %d (%zd bytes, magic 0x%08x, "
                "%d fds)",
                (int)pid, n, resp.magic, nfds);
        vmm_close_passed_fds(&msg);
        return ZC_ERR_IO;
    }
    if (resp.status != ZC_OK) {
        const char *why = resp.status == ZC_ERR_PERM        ? "this pid is not allowed"
                          : resp.status == ZC_ERR_NOT_FOUND ? "no such offer (withdrawn?)"
                                                            : "request refused";
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: pid %d refused token 0x%016llx: %s (%s)",
                (int)pid, (unsigned long long)token, why, zc_status_str(resp.status));
        return resp.status < 0 && resp.status >= ZC_ERR_OVERLIMIT ? resp.status : ZC_ERR_REMOTE;
    }
    struct stat stbuf;
    if (fstat(got, &stbuf) != 0 || stbuf.st_size < 0 || (uint64_t)stbuf.st_size < resp.size) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_fetch: fd from pid %d smaller than %llu bytes",
                (int)pid, (unsigned long long)resp.size);
        close(got);
        return ZC_ERR_IO;
    }
    *fd = got;
    *size = (size_t)resp.size;
    return ZC_OK;
}
