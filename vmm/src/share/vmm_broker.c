/*
 * The per-process handle broker, server side (protocol in
 * vmm_ext.h and vmm_share.h; the fetching side is vmm_broker_fetch.c).
 *
 * A process that offers an fd runs one detached thread serving the abstract
 * Unix socket "\0zccl-broker-<pid>-<nonce>" (SOCK_SEQPACKET). The nonce is
 * 20 random bits drawn when the broker starts; a name someone else holds
 * already (squatted) just makes the broker draw another. Every token carries
 * the nonce, so whoever holds a token (from the bootstrap table, an IPC key,
 * a shareable handle) knows the name, and nobody can bind it in advance.
 * Offers are kept in a list: token, a dup of the fd, its size, the offered
 * range, validate flag and allowed pids. A token is (pid << 42) | (nonce <<
 * 22) | 22 random bits, so it names its owner and its broker.
 *
 * Serving (zc/pollsrv.h): the thread polls the listening socket and every
 * pending client at once. A client of another uid (SO_PEERCRED, read at
 * accept) is closed at once without a word; a client of our uid has
 * VMM_BROKER_REQ_MS from accept to send its one request, else it is dropped. A request is checked
 * (malformed: ZC_ERR_INVAL; pid not on the allow list of a validating offer:
 * ZC_ERR_PERM; unknown token: ZC_ERR_NOT_FOUND) and answered, with a dup of
 * the fd (SCM_RIGHTS) when it is granted. So no client, silent or hostile,
 * delays another by more than the poll round it takes to serve one request.
 *
 * fork(): vmm_fork.c takes the registry and then the broker lock around
 * fork(). The child has no broker thread, so its handler here closes the
 * inherited listening socket and the offer fds and empties the offer list;
 * its first offer starts its own broker under its own pid.
 */
#include "share/vmm_share.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
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
#include "zc/pollsrv.h"
#include "zc/status.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"

typedef struct vmm_offer vmm_offer_t;
struct vmm_offer {
    vmm_offer_t *next;
    uint64_t token;
    int fd;
    size_t size;
    int ranged; /* only FETCH_RANGE of exactly [off, off+len) gets it */
    uint64_t off;
    uint64_t len;
    int validate;
    int32_t *pids;
    size_t npids;
    size_t cap;
};

static pthread_mutex_t vmm_broker_mu = PTHREAD_MUTEX_INITIALIZER;
static vmm_offer_t *vmm_offers;
static int vmm_broker_fd = -1;    /* listening socket, -1 when no broker runs */
static pid_t vmm_broker_pid;      /* pid the running broker serves */
static uint32_t vmm_broker_nonce; /* random part of its name */

socklen_t vmm_broker_addr(uint64_t token, struct sockaddr_un *addr)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    unsigned nonce = (unsigned)((token >> VMM_TOKEN_NONCE_SHIFT) & VMM_TOKEN_NONCE_MASK);
    int n = snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1, "zccl-broker-%d-%05x",
                     (int)zccl_broker_token_pid(token), nonce);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int vmm_token_is_mine(uint64_t token)
{
    return token != 0 && zccl_broker_token_pid(token) == (int32_t)getpid();
}

/* ---- fork handling (ordered with the registry's by vmm_fork.c) ------------ */

void vmm_broker_fork_prepare(void)
{
    pthread_mutex_lock(&vmm_broker_mu);
}

void vmm_broker_fork_parent(void)
{
    pthread_mutex_unlock(&vmm_broker_mu);
}

static void vmm_offer_free(vmm_offer_t *o)
{
    close(o->fd);
    free(o->pids);
    free(o);
}

void vmm_broker_fork_child(void)
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

/* Send an answer, with fd attached when fd >= 0. Returns 0 or -1. */
static int vmm_broker_answer(int conn, int32_t status, const vmm_offer_t *o, int fd)
{
    vmm_broker_resp_t resp = {.magic = VMM_BROKER_MAGIC,
                              .version = VMM_BROKER_VERSION,
                              .status = status,
                              .size = o != NULL ? o->size : 0,
                              .offset = o != NULL ? o->off : 0,
                              .length = o != NULL ? o->len : 0};
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
        n = sendmsg(conn, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof(resp) ? 0 : -1;
}

int vmm_offer_check_ask(int ranged, uint64_t off, uint64_t len, uint64_t token,
                        const vmm_ask_t *ask, int32_t pid)
{
    if (!ranged && !ask->ranged) {
        return ZC_OK;
    }
    if (ranged && ask->ranged && ask->off == off && ask->len == len) {
        return ZC_OK;
    }
    if (!ranged) {
        ZC_WARN(ZC_SUB_BROKER,
                "broker: pid %d asked for bytes %llu+%llu of token 0x%016llx, "
                "which offers a whole fd: refused",
                (int)pid, (unsigned long long)ask->off, (unsigned long long)ask->len,
                (unsigned long long)token);
    } else {
        ZC_WARN(ZC_SUB_BROKER,
                "broker: pid %d asked for %s of token 0x%016llx, which offers "
                "bytes %llu+%llu only: refused",
                (int)pid, ask->ranged ? "another range" : "the whole fd", (unsigned long long)token,
                (unsigned long long)off, (unsigned long long)len);
    }
    return ZC_ERR_INVAL;
}

/* Grant or refuse req from pid; answers on conn. */
static void vmm_broker_grant(int conn, pid_t pid, const vmm_broker_req_t *req, const vmm_ask_t *ask)
{
    int32_t status = ZC_OK;
    int fd = -1;
    vmm_offer_t copy;
    memset(&copy, 0, sizeof(copy));
    pthread_mutex_lock(&vmm_broker_mu);
    vmm_offer_t *o = vmm_offer_find(req->token);
    if (o == NULL) {
        status = ZC_ERR_NOT_FOUND;
    } else if (!vmm_offer_allows(o, pid)) {
        status = ZC_ERR_PERM;
    } else if (vmm_offer_check_ask(o->ranged, o->off, o->len, o->token, ask, pid) != ZC_OK) {
        status = ZC_ERR_INVAL; /* logged */
    } else {
        /* Dup under the lock so a concurrent withdraw cannot close it first. */
        fd = fcntl(o->fd, F_DUPFD_CLOEXEC, 0);
        copy = *o;
        if (fd < 0) {
            status = ZC_ERR_SYS;
        }
    }
    pthread_mutex_unlock(&vmm_broker_mu);

    if (status == ZC_ERR_NOT_FOUND) {
        ZC_WARN(ZC_SUB_BROKER, "broker: pid %d asked for unknown token 0x%016llx", (int)pid,
                (unsigned long long)req->token);
    } else if (status == ZC_ERR_PERM) {
        ZC_WARN(ZC_SUB_BROKER, "broker: refused pid %d: not on the allow list of token 0x%016llx",
                (int)pid, (unsigned long long)req->token);
    } else if (status == ZC_ERR_SYS) {
        ZC_WARN(ZC_SUB_BROKER, "broker: dup of token 0x%016llx failed (errno %d)",
                (unsigned long long)req->token, errno);
    }
    if (vmm_broker_answer(conn, status, status == ZC_OK ? &copy : NULL, fd) != 0) {
        ZC_WARN(ZC_SUB_BROKER, "broker: answer to pid %d not sent (errno %d)", (int)pid, errno);
    }
    if (fd >= 0) {
        close(fd);
    }
}

/* Serve one readable client: one request, one answer. */
static void vmm_broker_serve(int conn, pid_t pid)
{
    /* One byte more than the largest request, so an oversized message shows
     * as such; no control buffer, so any fd a client sends us is discarded. */
    char buf[sizeof(vmm_broker_range_req_t) + 1];
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n;
    do {
        n = recvmsg(conn, &msg, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        /* A client that hangs up (e.g. after refusing our credentials) is not garbage. */
        ZC_INFO(ZC_SUB_BROKER, "broker: pid %d hung up without a request", (int)pid);
        return;
    }
    vmm_broker_range_req_t rr;
    memset(&rr, 0, sizeof(rr));
    memcpy(&rr, buf, ZC_MIN((size_t)n, sizeof(rr)));
    const vmm_broker_req_t *req = &rr.head;
    size_t want = req->op == VMM_BROKER_OP_FETCH_RANGE ? sizeof(rr) : sizeof(*req);
    if (n != (ssize_t)want || (msg.msg_flags & MSG_TRUNC) != 0) {
        ZC_WARN(ZC_SUB_BROKER, "broker: refused pid %d: request of %zd bytes (want %zu)", (int)pid,
                n, want);
        (void)vmm_broker_answer(conn, ZC_ERR_INVAL, NULL, -1);
        return;
    }
    if (req->magic != VMM_BROKER_MAGIC || req->version != VMM_BROKER_VERSION ||
        (req->op != VMM_BROKER_OP_FETCH && req->op != VMM_BROKER_OP_FETCH_RANGE)) {
        ZC_WARN(ZC_SUB_BROKER, "broker: refused pid %d: magic 0x%08x version %u op %u", (int)pid,
                req->magic, (unsigned)req->version, (unsigned)req->op);
        (void)vmm_broker_answer(conn, ZC_ERR_INVAL, NULL, -1);
        return;
    }
    vmm_ask_t ask = {req->op == VMM_BROKER_OP_FETCH_RANGE, rr.offset, rr.length};
    vmm_broker_grant(conn, pid, req, &ask);
}

typedef struct {
    zc_pend_t head; /* its request due by head.since + VMM_BROKER_REQ_MS */
    pid_t pid;
} vmm_client_t;

/* A waiting client (zc_pollsrv_accept): other uids are closed at once, ours
 * queued while there is room. */
static void vmm_broker_admit(zc_pollsrv_t *s, int conn)
{
    static unsigned foreign; /* how many other-uid clients were dropped */
    struct ucred cred;
    memset(&cred, 0, sizeof(cred));
    socklen_t clen = sizeof(cred);
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != getuid()) {
        /* Log the first few; a flood must not flood the log too. */
        if (foreign++ < 4) {
            ZC_WARN(ZC_SUB_BROKER, "broker: dropped pid %d of uid %u (not ours, %u)", (int)cred.pid,
                    (unsigned)cred.uid, (unsigned)getuid());
        }
        close(conn);
        return;
    }
    if (s->npend == VMM_BROKER_MAX_CLIENTS) {
        ZC_WARN(ZC_SUB_BROKER, "broker: %d clients pending, dropped pid %d", VMM_BROKER_MAX_CLIENTS,
                (int)cred.pid);
        close(conn);
        return;
    }
    vmm_client_t *c = zc_pollsrv_add(s, conn);
    c->pid = cred.pid;
}

/* A readable client (zc_pollsrv_sweep): one request, one answer, closed. */
static int vmm_broker_readable(zc_pollsrv_t *s, void *rec)
{
    const vmm_client_t *c = rec;
    (void)s;
    vmm_broker_serve(c->head.fd, c->pid);
    return ZC_PEND_CLOSE;
}

static unsigned vmm_broker_silent; /* silent clients dropped, for rate-limited logs */

static void vmm_broker_expired(zc_pollsrv_t *s, const void *rec)
{
    const vmm_client_t *c = rec;
    (void)s;
    /* Log the first few; a flood must not flood the log too. */
    if (vmm_broker_silent++ < 4) {
        ZC_WARN(ZC_SUB_BROKER, "broker: no request from pid %d within %d ms, dropped", (int)c->pid,
                VMM_BROKER_REQ_MS);
    }
}

/* Out of descriptors or memory: zc_pollsrv_accept backs off instead of spinning. */
static void vmm_broker_starved(zc_pollsrv_t *s, int err)
{
    (void)s;
    ZC_WARN(ZC_SUB_BROKER, "broker: accept failed (errno %d), retrying", err);
}

static const zc_pollsrv_ops_t vmm_broker_ops = {
    .evict_ns = UINT64_MAX, /* a full table turns the newcomer away */
    .limit_ns = VMM_BROKER_REQ_MS * 1000000ull,
    .admit = vmm_broker_admit,
    .ready = vmm_broker_readable,
    .expired = vmm_broker_expired,
    .starved = vmm_broker_starved};

static void *vmm_broker_main(void *arg)
{
    vmm_client_t cl[VMM_BROKER_MAX_CLIENTS];
    zc_pollsrv_t s = {(int)(intptr_t)arg, cl, sizeof(cl[0]), &vmm_broker_ops, NULL, 0, 0};
    for (;;) {
        struct pollfd pfd[VMM_BROKER_MAX_CLIENTS + 1];
        int n = zc_pollsrv_fds(&s, pfd);
        int rc = poll(pfd, (nfds_t)n, zc_pollsrv_wait_ms(&s));
        if (rc < 0 && errno != EINTR) {
            ZC_WARN(ZC_SUB_BROKER, "broker: poll failed (errno %d)", errno);
            usleep(10000);
            continue;
        }
        if (pfd[0].revents & POLLNVAL) {
            return NULL; /* the socket is gone: nothing left to serve */
        }
        zc_pollsrv_sweep(&s, pfd);
        /* No cap here: the admission turns a newcomer away, naming its pid. */
        zc_pollsrv_accept(&s, pfd, INT_MAX);
    }
    return NULL;
}

/* Bind a listening socket under a fresh random name; a name held by someone
 * else makes us draw another. Returns the socket or a status < 0. */
static int vmm_broker_listen(pid_t me, uint32_t *nonce)
{
    for (int tries = 0; tries < 32; tries++) {
        uint32_t r = 0;
        if (zc_random_bytes(&r, sizeof(r)) != 0) {
            ZC_WARN(ZC_SUB_BROKER, "broker: getrandom failed (errno %d)", errno);
            return ZC_ERR_SYS;
        }
        r &= VMM_TOKEN_NONCE_MASK;
        int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (lfd < 0) {
            ZC_WARN(ZC_SUB_BROKER, "broker: socket() failed (errno %d)", errno);
            return ZC_ERR_SYS;
        }
        struct sockaddr_un addr;
        uint64_t probe = ((uint64_t)(uint32_t)me << VMM_TOKEN_PID_SHIFT) |
                         ((uint64_t)r << VMM_TOKEN_NONCE_SHIFT);
        socklen_t alen = vmm_broker_addr(probe, &addr);
        if (bind(lfd, (struct sockaddr *)&addr, alen) == 0 &&
            listen(lfd, VMM_BROKER_MAX_CLIENTS) == 0) {
            *nonce = r;
            return lfd;
        }
        int err = errno;
        close(lfd);
        if (err != EADDRINUSE) {
            ZC_WARN(ZC_SUB_BROKER, "broker: bind/listen on @%s failed (errno %d)",
                    addr.sun_path + 1, err);
            return ZC_ERR_SYS;
        }
        ZC_WARN(ZC_SUB_BROKER, "broker: @%s is taken by another process; drawing another name",
                addr.sun_path + 1);
    }
    ZC_WARN(ZC_SUB_BROKER, "broker: 32 random names in a row were taken");
    return ZC_ERR_SYS;
}

/* Start the broker of this pid if it is not running. Broker lock held. */
static int vmm_broker_start(void)
{
    pid_t me = getpid();
    if (vmm_broker_fd >= 0 && vmm_broker_pid == me) {
        return ZC_OK;
    }
    uint32_t nonce = 0;
    int lfd = vmm_broker_listen(me, &nonce);
    if (lfd < 0) {
        return lfd;
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
    vmm_broker_nonce = nonce;
    ZC_INFO(ZC_SUB_BROKER, "broker of pid %d serving @zccl-broker-%d-%05x", (int)me, (int)me,
            (unsigned)nonce);
    return ZC_OK;
}

/* ---- ext interface ------------------------------------------------------------ */

/* A random offer serial no live offer of ours has. Broker lock held. */
static int vmm_offer_serial(uint64_t *serial)
{
    for (;;) {
        uint32_t r = 0;
        if (zc_random_bytes(&r, sizeof(r)) != 0) {
            ZC_WARN(ZC_SUB_BROKER, "zccl_broker_offer: getrandom failed (errno %d)", errno);
            return ZC_ERR_SYS;
        }
        uint64_t s = (uint64_t)r & VMM_TOKEN_OFFER_MASK;
        uint64_t token = ((uint64_t)(uint32_t)getpid() << VMM_TOKEN_PID_SHIFT) |
                         ((uint64_t)vmm_broker_nonce << VMM_TOKEN_NONCE_SHIFT) | s;
        if (s != 0 && vmm_offer_find(token) == NULL) {
            *serial = token;
            return ZC_OK;
        }
    }
}

static int vmm_broker_offer_make(int fd, size_t fsize, int ranged, uint64_t off, uint64_t len,
                                 int validate_pid, uint64_t *token)
{
    if (token == NULL) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_offer: token is NULL");
        return ZC_ERR_PTR;
    }
    if (fd < 0 || fsize == 0 || len == 0 || off > fsize || len > fsize - off) {
        ZC_WARN(ZC_SUB_BROKER, "zccl_broker_offer: bad fd %d, size %zu or range %llu+%llu", fd,
                fsize, (unsigned long long)off, (unsigned long long)len);
        return ZC_ERR_INVAL;
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
    o->size = fsize;
    o->ranged = ranged;
    o->off = off;
    o->len = len;
    o->validate = validate_pid != 0;

    pthread_mutex_lock(&vmm_broker_mu);
    int st = vmm_broker_start();
    if (st == ZC_OK) {
        st = vmm_offer_serial(&o->token);
    }
    if (st == ZC_OK) {
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

int vmm_broker_offer_range(int fd, size_t fsize, uint64_t off, uint64_t len, int validate_pid,
                           uint64_t *token)
{
    return vmm_broker_offer_make(fd, fsize, 1, off, len, validate_pid, token);
}

ZC_EXPORT int zccl_broker_offer(int fd, size_t size, int validate_pid, uint64_t *token)
{
    return vmm_broker_offer_make(fd, size, 0, 0, size, validate_pid, token);
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

int vmm_broker_fetch_local(uint64_t token, const vmm_ask_t *ask, int *fd, size_t *fsize)
{
    int st = ZC_OK;
    int nfd = -1;
    size_t sz = 0;
    pthread_mutex_lock(&vmm_broker_mu);
    vmm_offer_t *o = vmm_offer_find(token);
    if (o == NULL) {
        st = ZC_ERR_NOT_FOUND;
    } else if (vmm_offer_check_ask(o->ranged, o->off, o->len, token, ask, getpid()) != ZC_OK) {
        st = ZC_ERR_INVAL; /* logged */
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
    } else if (st == ZC_OK) {
        *fd = nfd;
        *fsize = sz;
    }
    return st;
}
