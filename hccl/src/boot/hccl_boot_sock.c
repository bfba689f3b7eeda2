/*
 * The socket helpers of bootstrap and rendezvous (declared in hccl_boot.h):
 * exact reads and writes, bounded non-blocking connects, who is at the
 * other end of a TCP connection (this host? which uid?), a listener's
 * descriptor budget (its pending table and accept are zc/pollsrv.h) and
 * every client's retry backoff.
 *
 * Descriptors. A flood of silent connections must run the attacker out of
 * descriptors, not us: the first use raises the soft RLIMIT_NOFILE to the
 * hard limit, and a listener holds at most what the limit leaves after
 * what was open then, ZH_FD_HEADROOM and its joined ranks, evicting its
 * oldest silent client first. A failure to judge a client for want of a
 * descriptor (getifaddrs, sock_diag, /proc/net/tcp) is reported as "no
 * verdict" (-1 / -2), never as a refusal.
 */
#include "boot/hccl_boot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zc/log.h"
#include "zc/sync.h"

int zh_io_full(int fd, void *buf, size_t n, int writing)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return ZC_ERR_IO;
        }
        p += r;
        n -= (size_t)r;
    }
    return ZC_OK;
}

void zh_sock_timeouts(int fd, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int zh_sock_connect(const struct sockaddr *sa, socklen_t len, int ms)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return -1;
    }
    int err = connect(fd, sa, len) == 0 ? 0 : errno;
    if (err == EINPROGRESS || err == EAGAIN) {
        /* poll's own clock: a signal restarts the wait with what is left */
        uint64_t end = zc_time_ns() + (uint64_t)ms * 1000000ull;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int n;
        do {
            uint64_t now = zc_time_ns();
            n = now >= end ? 0 : poll(&p, 1, (int)((end - now) / 1000000ull + 1));
        } while (n < 0 && errno == EINTR);
        socklen_t l = sizeof(err);
        err = n == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 ? err : ETIMEDOUT;
    }
    if (err != 0) {
        close(fd);
        errno = err;
        return -1;
    }
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

void zh_send_status(int fd, uint32_t magic, int status)
{
    zh_reply_t rep = {magic, status, 0, 0};
    (void)zh_io_full(fd, &rep, sizeof(rep), 1);
}

/* The uid of the socket whose local end is peer and remote end me, asked of
 * the kernel by its exact address (sock_diag: one lookup, where a scan of
 * /proc/net/tcp costs O(sockets) per accept, seconds for a thousand ranks);
 * 0, or -1 when there is no answer. */
static int zh_diag_uid(const struct sockaddr_in *me, const struct sockaddr_in *peer, uint32_t *uid)
{
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0) {
        return -1;
    }
    struct {
        struct nlmsghdr nh;
        struct inet_diag_req_v2 r;
    } req;
    memset(&req, 0, sizeof(req));
    req.nh.nlmsg_len = sizeof(req);
    req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nh.nlmsg_flags = NLM_F_REQUEST;
    req.r.sdiag_family = AF_INET;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = ~0u;
    req.r.id.idiag_sport = peer->sin_port;
    req.r.id.idiag_dport = me->sin_port;
    req.r.id.idiag_src[0] = peer->sin_addr.s_addr;
    req.r.id.idiag_dst[0] = me->sin_addr.s_addr;
    req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    struct timeval tv = {1, 0};
    (void)setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    union {
        struct nlmsghdr nh;
        char buf[1024];
    } rep;
    int found = -1;
    if (send(nl, &req, sizeof(req), 0) == (ssize_t)sizeof(req)) {
        ssize_t n = recv(nl, &rep, sizeof(rep), 0);
        if (n >= (ssize_t)NLMSG_LENGTH(sizeof(struct inet_diag_msg)) &&
            rep.nh.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
            const struct inet_diag_msg *m = NLMSG_DATA(&rep.nh);
            *uid = m->idiag_uid;
            found = 0;
        }
    }
    close(nl);
    return found;
}

int zh_tcp_peer_uid(int fd, uint32_t *uid)
{
    struct sockaddr_in me;
    struct sockaddr_in peer;
    socklen_t l1 = sizeof(me);
    socklen_t l2 = sizeof(peer);
    if (getsockname(fd, (struct sockaddr *)&me, &l1) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &l2) != 0 || me.sin_family != AF_INET) {
        return -1;
    }
    if (zh_diag_uid(&me, &peer, uid) == 0) {
        return 0;
    }
    /* The peer's own socket is the row whose local end is its address and
     * whose remote end is ours; the kernel prints addresses as the raw
     * 32-bit word and ports in host order. */
    char want_local[32];
    char want_rem[32];
    snprintf(want_local, sizeof(want_local), "%08X:%04X", (unsigned)peer.sin_addr.s_addr,
             (unsigned)ntohs(peer.sin_port));
    snprintf(want_rem, sizeof(want_rem), "%08X:%04X", (unsigned)me.sin_addr.s_addr,
             (unsigned)ntohs(me.sin_port));
    FILE *f = fopen("/proc/net/tcp", "re");
    if (f == NULL) {
        return -2; /* transient (out of descriptors?): no verdict */
    }
    char line[512];
    int found = -1;
    while (found != 0 && fgets(line, sizeof(line), f) != NULL) {
        char local[64];
        char rem[64];
        unsigned u = 0;
        if (sscanf(line, " %*d: %63s %63s %*x %*s %*s %*s %u", local, rem, &u) == 3 &&
            strcmp(local, want_local) == 0 && strcmp(rem, want_rem) == 0) {
            *uid = u;
            found = 0;
        }
    }
    fclose(f);
    return found;
}

int zh_addr_is_local(const struct sockaddr_in *sa)
{
    if ((ntohl(sa->sin_addr.s_addr) >> 24) == 127) {
        return 1;
    }
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) {
        return -1; /* unknown (out of descriptors?): the caller drops it, without a verdict */
    }
    int local = 0;
    for (struct ifaddrs *i = ifs; i != NULL && !local; i = i->ifa_next) {
        local = i->ifa_addr != NULL && i->ifa_addr->sa_family == AF_INET &&
                ((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr == sa->sin_addr.s_addr;
    }
    freeifaddrs(ifs);
    return local;
}

static pthread_once_t zh_fd_once = PTHREAD_ONCE_INIT;
static long zh_fd_soft = 1024;
static long zh_fd_base = 0;

/* Raise the soft descriptor limit to the hard one (a flood of connections
 * should run the attacker out, not us), and count what is open already. */
static void zh_fd_raise(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY ? (rlim_t)1 << 20 : rl.rlim_max;
        if (rl.rlim_cur < want) {
            rlim_t was = rl.rlim_cur;
            rl.rlim_cur = want;
            if (setrlimit(RLIMIT_NOFILE, &rl) == 0) {
                ZC_INFO(ZC_SUB_BOOT, "descriptor limit raised from %llu to %llu",
                        (unsigned long long)was, (unsigned long long)want);
            } else {
                rl.rlim_cur = was;
            }
        }
        zh_fd_soft = rl.rlim_cur == RLIM_INFINITY ? 1L << 20 : (long)rl.rlim_cur;
    }
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        zh_fd_base += e->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
    }
}

void zh_fd_raise_once(void)
{
    pthread_once(&zh_fd_once, zh_fd_raise);
}

int zh_pend_cap(int held)
{
    zh_fd_raise_once();
    long cap = zh_fd_soft - zh_fd_base - ZH_FD_HEADROOM - held;
    return (int)ZC_MAX(ZC_MIN(cap, (long)ZH_MAX_PENDING), (long)ZH_PEND_MIN);
}

void zh_backoff(uint32_t *ms, uint64_t deadline)
{
    uint32_t r = 0;
    (void)zc_random_bytes(&r, sizeof(r));
    uint64_t us = (uint64_t)*ms * 500u + r % ((uint64_t)*ms * 500u + 1u);
    uint64_t now = zc_time_ns();
    us = ZC_MIN(us, deadline > now ? (deadline - now) / 1000u : 0);
    if (us > 0) {
        usleep((useconds_t)us);
    }
    *ms = ZC_MIN(*ms * 2u, (uint32_t)ZH_BACKOFF_MAX_MS);
}
