/*
 * Rank-table rendezvous across servers: a table naming several servers
 * cannot meet on an abstract Unix socket (it is per network namespace), so
 * the table's rank 0 serves its root info over TCP on its server's address
 * (the table's host_ip, else a server_id that is an IPv4 address, else what
 * the server_id resolves to) at port ZCCL_RANKTABLE_PORT, until its init
 * returns (by then every rank has joined). The others connect there
 * (non-blocking, retrying refusals and silence with jittered backoff until
 * HCCL_CONNECT_TIMEOUT: rank 0 may start last) and fetch the root info; all
 * then run the root-info init (hccl_ranktable_init.c), whose listener binds
 * HCCL_IF_IP / HCCL_SOCKET_IFNAME when set, else rank 0's server address.
 *
 * What a fetch exposes, and the guard. The root info's unique id admits a
 * rank to the session (hccl_boot.h), so it must not go to whoever reaches
 * the port. The key is a 128-bit keyed hash (SipHash-2-4 under two fixed
 * keys) of the table file's bytes, which every rank of the job holds and
 * nobody else needs to:
 *   rank -> rank 0  zh_rt_req_t {REQ, version, rank, nonce_c}
 *   rank 0 -> rank  zh_rt_rep_t {REP, status, nonce_s, root info, mac}: the
 *                   unique id XORed with zh_boot_mac(key, 'E', nonce_c,
 *                   nonce_s), the mac = zh_boot_mac(key, 'R', nonce_c, the
 *                   reply up to the mac).
 * A client without the table learns the root's address, port, pid and host
 * id (all in clear, none a secret: the port is open anyway) and nothing of
 * the unique id; a rank checks the mac, so a server that does not hold the
 * table (another job's, a squatter's) cannot hand it a root info, and its
 * fresh nonce makes a recorded reply useless. On this host another uid is
 * refused at accept (/proc/net/tcp, as the root listener does). The residue:
 * the table's bytes are the secret, and a table is often guessable (a
 * generated layout of known addresses); add any field of random text to it
 * (e.g. "zccl_key") to make it a secret, and keep the file readable by the
 * job only. Whoever holds the file can join, as whoever holds a root info can.
 */
#include "boot/hccl_boot.h"
#include "boot/hccl_ranktable.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zc/config.h"
#include "zc/log.h"
#include "zc/pollsrv.h"
#include "zc/sync.h"

#define ZH_RT_MSG_REQ 0x5a435251u /* "ZCRQ" */
#define ZH_RT_MSG_REP 0x5a435250u /* "ZCRP" */
#define ZH_RT_VERSION 1u
/* Clients owing their request: every rank and a margin; when full, the
 * oldest is evicted once ZH_PEND_MIN_AGE_MS old, as the root listener does. */
#define ZH_RT_PENDING ZH_MAX_PENDING
#define ZH_RT_ATTEMPT_MS 5000 /* one connect, or one reply, at most */

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint32_t rank;
    uint32_t pad;
    uint8_t nonce[ZH_NONCE_LEN];
} zh_rt_req_t;

typedef struct {
    uint32_t magic;
    int32_t status;
    uint8_t nonce[ZH_NONCE_LEN];
    HcclRootInfo info;
    uint8_t mac[ZH_MAC_LEN];
} zh_rt_rep_t;
_Static_assert(sizeof(zh_rt_rep_t) == 24 + HCCL_ROOT_INFO_BYTES + ZH_MAC_LEN, "packed reply");

typedef struct {
    zc_pend_t head;
    size_t got;
    int remote;    /* from another host: must come from its rank's server */
    uint32_t addr; /* its IPv4 address (network order) */
    zh_rt_req_t req;
} zh_rt_pend_t;

struct zh_rt_srv {
    zc_pollsrv_t ps; /* the listener and the pending table */
    pthread_t th;
    atomic_int stop;
    uint8_t key[16];
    HcclRootInfo info;
    zh_rt_pend_t pend[ZH_RT_PENDING]; /* in accept order: the oldest first */
    unsigned refused;
    uint32_t nranks;
    uint32_t rank_ip[ZH_MAX_COMM_RANKS]; /* by rank: its server's IPv4 address (network order) */
    struct pollfd pfd[1 + ZH_RT_PENDING];
};

/* The key: 128 bits of keyed hash of the table file's bytes. */
static void zh_rt_key(const char *buf, long len, uint8_t key[16])
{
    uint8_t k[16] = "zccl-rank-table";
    uint64_t h0 = zh_siphash(k, (const uint8_t *)buf, (size_t)len);
    k[15] = 1;
    uint64_t h1 = zh_siphash(k, (const uint8_t *)buf, (size_t)len);
    memcpy(key, &h0, 8);
    memcpy(key + 8, &h1, 8);
    zh_key_with_secret(key, 'J', key); /* ZCCL_JOB_SECRET, when set */
}

/* XOR the unique id in info with the pad of this exchange (both ways). */
static void zh_rt_crypt(const uint8_t key[16], const uint8_t *nonce_c, zh_rt_rep_t *rep)
{
    uint8_t pad[ZH_MAC_LEN];
    zh_boot_mac(key, 'E', nonce_c, ZH_NONCE_LEN, rep->nonce, ZH_NONCE_LEN, NULL, 0, pad);
    uint8_t *id = (uint8_t *)rep->info.internal + ZH_RI_OFFSET + offsetof(zh_rootrec_t, uuid);
    for (int i = 0; i < 16; i++) {
        id[i] ^= pad[i];
    }
}

static void zh_rt_rep_mac(const uint8_t key[16], const uint8_t *nonce_c, const zh_rt_rep_t *rep,
                          uint8_t out[ZH_MAC_LEN])
{
    zh_boot_mac(key, 'R', nonce_c, ZH_NONCE_LEN, rep, offsetof(zh_rt_rep_t, mac), NULL, 0, out);
}

/* ---- rank 0: the server ----------------------------------------------------------- */

/* Answer a complete request (the reply fits a fresh socket's buffer). */
static void zh_rt_srv_answer(zh_rt_srv_t *s, zh_rt_pend_t *p)
{
    if (p->req.magic != ZH_RT_MSG_REQ || p->req.version != ZH_RT_VERSION) {
        ZC_INFO(ZC_SUB_INIT, "rank table server: a request with magic 0x%08x version %u dropped",
                p->req.magic, p->req.version);
        return;
    }
    if (p->remote && (p->req.rank >= s->nranks || p->addr != s->rank_ip[p->req.rank])) {
        if (s->refused++ < 4) {
            char got[INET_ADDRSTRLEN] = "?";
            (void)inet_ntop(AF_INET, &p->addr, got, sizeof(got));
            ZC_WARN(ZC_SUB_INIT,
                    "rank table server: a client from %s asks as rank %u, whose server the "
                    "table names at another address (or no such rank): refused (later ones "
                    "counted)",
                    got, p->req.rank);
        }
        return;
    }
    zh_rt_rep_t rep = {ZH_RT_MSG_REP, ZC_OK, {0}, s->info, {0}};
    if (zc_random_bytes(rep.nonce, ZH_NONCE_LEN) != 0) {
        return;
    }
    zh_rt_crypt(s->key, p->req.nonce, &rep);
    zh_rt_rep_mac(s->key, p->req.nonce, &rep, rep.mac);
    (void)send(p->head.fd, &rep, sizeof(rep), MSG_NOSIGNAL | MSG_DONTWAIT);
    ZC_DEBUG(ZC_SUB_INIT, "rank table server: root info sent to rank %u", p->req.rank);
}

/* A newcomer closed for want of room (zc_pollsrv_accept). */
static void zh_rt_srv_full(zc_pollsrv_t *ps, int cap)
{
    zh_rt_srv_t *s = ps->ctx;
    (void)cap;
    if (s->refused++ < 4) {
        ZC_WARN(ZC_SUB_INIT, "rank table server: too many pending clients, none old enough "
                             "to evict; one dropped (later ones counted)");
    }
}

/* A waiting connection (zc_pollsrv_accept): another uid of this host is
 * refused, and one whose host or uid cannot be told now (out of
 * descriptors) is closed without a verdict (the rank retries). */
static void zh_rt_srv_admit(zc_pollsrv_t *ps, int fd)
{
    zh_rt_srv_t *s = ps->ctx;
    struct sockaddr_in peer;
    socklen_t plen = sizeof(peer);
    uint32_t uid = 0;
    int local = getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 || peer.sin_family != AF_INET
                    ? 1
                    : zh_addr_is_local(&peer);
    int got = local == 1 ? zh_tcp_peer_uid(fd, &uid) : 0;
    if (local < 0 || got == -2 || (local == 1 && (got != 0 || uid != getuid()))) {
        if (local == 1 && got != -2 && s->refused++ < 4) {
            ZC_WARN(ZC_SUB_INIT, "rank table server: refused a client (not of our uid)");
        }
        close(fd); /* another uid, or no verdict now (the rank retries) */
        return;
    }
    zh_rt_pend_t *p = zc_pollsrv_add(ps, fd);
    p->remote = local == 0;
    p->addr = peer.sin_addr.s_addr;
}

/* A pending client sent something (zc_pollsrv_sweep): its request is
 * answered once complete, and then it is closed, as it is when it leaves. */
static int zh_rt_srv_readable(zc_pollsrv_t *ps, void *rec)
{
    zh_rt_pend_t *p = rec;
    ssize_t r = recv(p->head.fd, (char *)&p->req + p->got, sizeof(p->req) - p->got, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
        return ZC_PEND_KEEP;
    }
    if (r <= 0) {
        return ZC_PEND_CLOSE;
    }
    p->got += (size_t)r;
    if (p->got < sizeof(p->req)) {
        return ZC_PEND_KEEP;
    }
    zh_rt_srv_answer(ps->ctx, p);
    return ZC_PEND_CLOSE;
}

/* Evicting as the root listener does (ZH_PEND_MIN_AGE_MS). */
static const zc_pollsrv_ops_t zh_rt_srv_ops = {.evict_ns = ZH_PEND_MIN_AGE_MS * 1000000ull,
                                               .admit = zh_rt_srv_admit,
                                               .ready = zh_rt_srv_readable,
                                               .full = zh_rt_srv_full};

static void zh_rt_srv_round(zh_rt_srv_t *s)
{
    int n = zc_pollsrv_fds(&s->ps, s->pfd);
    if (poll(s->pfd, (nfds_t)n, 50) <= 0) {
        s->pfd[0].revents = 0;
    }
    zc_pollsrv_sweep(&s->ps, s->pfd);
    zc_pollsrv_accept(&s->ps, s->pfd, zh_pend_cap(1)); /* what the descriptor limit leaves */
}

static void *zh_rt_srv_main(void *arg)
{
    zh_rt_srv_t *s = arg;
    while (!atomic_load_explicit(&s->stop, memory_order_acquire)) {
        zh_rt_srv_round(s);
    }
    zc_pollsrv_close(&s->ps);
    return NULL;
}

/* The listening socket on ip:port; HCCL_E_UNAVAIL when the port is taken. */
static HcclResult zh_rt_listen(const zh_rt_t *t, const char *ip, unsigned port, int *out)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    (void)inet_pton(AF_INET, ip, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd >= 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    }
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 1024) != 0) {
        int e = errno;
        ZC_WARN(ZC_SUB_INIT,
                "rank table %s: rank 0 cannot serve the rendezvous on %s:%u "
                "(ZCCL_RANKTABLE_PORT, server \"%s\"): %s%s",
                t->path, ip, port, t->server[t->server_of[0]].id, strerror(e),
                e == EADDRINUSE      ? " (is a job with this port already running?)"
                : e == EADDRNOTAVAIL ? " (not an address of this host)"
                                     : "");
        if (fd >= 0) {
            close(fd);
        }
        return e == EADDRINUSE ? HCCL_E_UNAVAIL : HCCL_E_PARA;
    }
    *out = fd;
    return HCCL_SUCCESS;
}

/* Each rank's server address: where its fetch must come from. */
static void zh_rt_srv_addrs(const zh_rt_t *t, zh_rt_srv_t *s)
{
    uint32_t *ip_of = calloc(t->nservers, sizeof(uint32_t));
    for (uint32_t i = 0; ip_of != NULL && i < t->nservers; i++) {
        char ip[ZH_RT_IP_MAX];
        ip_of[i] = 0;
        if (zh_rt_server_ip(t, i, ip) == ZC_OK) {
            (void)inet_pton(AF_INET, ip, &ip_of[i]);
        }
    }
    s->nranks = t->nranks;
    for (uint32_t r = 0; r < t->nranks; r++) {
        s->rank_ip[r] = ip_of != NULL ? ip_of[t->server_of[r]] : 0; /* 0: nobody's */
    }
    free(ip_of);
}

/* Rank 0: listen on ip:port, make the root info (its listener on ip) and
 * serve it from a thread until zh_rt_net_stop. */
static HcclResult zh_rt_net_serve(const zh_rt_t *t, const uint8_t key[16], const char *ip,
                                  unsigned port, HcclRootInfo *info, zh_rt_srv_t **out)
{
    zh_rt_srv_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return HCCL_E_MEMORY;
    }
    int lfd = -1;
    HcclResult r = zh_rt_listen(t, ip, port, &lfd);
    if (r == HCCL_SUCCESS) {
        r = zh_result(zh_boot_root_create_at(&s->info, ip));
        if (r != HCCL_SUCCESS) {
            close(lfd);
        }
    }
    if (r != HCCL_SUCCESS) {
        free(s);
        return r;
    }
    s->ps = (zc_pollsrv_t){lfd, s->pend, sizeof(s->pend[0]), &zh_rt_srv_ops, s, 0, 0};
    memcpy(s->key, key, sizeof(s->key));
    zh_rt_srv_addrs(t, s);
    if (pthread_create(&s->th, NULL, zh_rt_srv_main, s) != 0) {
        ZC_WARN(ZC_SUB_INIT, "rank table %s: cannot start the rendezvous thread", t->path);
        close(lfd);
        free(s);
        return HCCL_E_INTERNAL;
    }
    ZC_INFO(ZC_SUB_INIT, "rank table %s: rank 0 serves the root info on %s:%u", t->path, ip, port);
    *info = s->info;
    *out = s;
    return HCCL_SUCCESS;
}

void zh_rt_net_stop(zh_rt_srv_t *s)
{
    if (s == NULL) {
        return;
    }
    atomic_store_explicit(&s->stop, 1, memory_order_release);
    pthread_join(s->th, NULL);
    close(s->ps.lfd);
    free(s);
}

/* ---- the other ranks: the fetch --------------------------------------------------- */

/* One connect to sa and the socket waits of its exchange, each bounded by
 * ZH_RT_ATTEMPT_MS and all by the deadline (zc_time_ns); the connected
 * (blocking) fd or -1. */
static int zh_rt_connect(const struct sockaddr_in *sa, uint64_t deadline)
{
    uint64_t now = zc_time_ns();
    uint64_t left = deadline > now ? (deadline - now) / 1000000ull + 1 : 1;
    int fd = zh_sock_connect((const struct sockaddr *)sa, sizeof(*sa),
                             (int)ZC_MIN(left, (uint64_t)ZH_RT_ATTEMPT_MS));
    if (fd >= 0) {
        now = zc_time_ns();
        left = deadline > now ? (deadline - now) / 1000000ull + 1 : 1;
        zh_sock_timeouts(fd, (int)ZC_MIN(left, (uint64_t)ZH_RT_ATTEMPT_MS));
    }
    return fd;
}

/* One exchange on fd: ZC_OK with info, ZC_ERR_PERM for a reply without the
 * table's mac, ZC_ERR_IO otherwise. */
static int zh_rt_exchange(int fd, const uint8_t key[16], uint32_t rank, HcclRootInfo *info)
{
    zh_rt_req_t req = {ZH_RT_MSG_REQ, ZH_RT_VERSION, rank, 0, {0}};
    zh_rt_rep_t rep;
    if (zc_random_bytes(req.nonce, ZH_NONCE_LEN) != 0 ||
        zh_io_full(fd, &req, sizeof(req), 1) != ZC_OK ||
        zh_io_full(fd, &rep, sizeof(rep), 0) != ZC_OK) {
        return ZC_ERR_IO;
    }
    uint8_t mac[ZH_MAC_LEN];
    zh_rt_rep_mac(key, req.nonce, &rep, mac);
    if (rep.magic != ZH_RT_MSG_REP || rep.status != ZC_OK || !zh_mac_equal(mac, rep.mac)) {
        return ZC_ERR_PERM;
    }
    zh_rt_crypt(key, req.nonce, &rep);
    *info = rep.info;
    return ZC_OK;
}

static HcclResult zh_rt_net_fetch(const zh_rt_t *t, const uint8_t key[16], const char *ip,
                                  unsigned port, uint32_t rank, HcclRootInfo *info)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    (void)inet_pton(AF_INET, ip, &sa.sin_addr);
    uint64_t limit = zc_config()->connect_timeout_s * 1000000000ull;
    uint64_t start = zc_time_ns();
    int foreign = 0;
    int last = ECONNREFUSED;
    uint32_t backoff_ms = ZH_BACKOFF_MIN_MS;
    for (;;) {
        int fd = zh_rt_connect(&sa, start + limit);
        last = fd < 0 ? errno : last;
        int st = fd >= 0 ? zh_rt_exchange(fd, key, rank, info) : ZC_ERR_IO;
        if (fd >= 0) {
            close(fd);
        }
        if (st == ZC_OK) {
            return HCCL_SUCCESS;
        }
        if (st == ZC_ERR_PERM && foreign++ == 0) {
            ZC_WARN(ZC_SUB_INIT,
                    "rank %u: rank table %s: whoever answers on %s:%u does not hold this table "
                    "(another job's rank 0?); still trying",
                    rank, t->path, ip, port);
        }
        if (zc_time_ns() - start >= limit) {
            ZC_WARN(ZC_SUB_INIT,
                    "rank %u: rank table %s: no root info from rank 0 at %s:%u (server \"%s\", "
                    "ZCCL_RANKTABLE_PORT) within HCCL_CONNECT_TIMEOUT (%llu s); last: %s",
                    rank, t->path, ip, port, t->server[t->server_of[0]].id,
                    (unsigned long long)(limit / 1000000000ull),
                    foreign ? "an answer without this table's proof" : strerror(last));
            return HCCL_E_TIMEOUT;
        }
        zh_backoff(&backoff_ms, start + limit);
    }
}

HcclResult zh_rt_net_meet(const zh_rt_t *t, const char *buf, long len, uint32_t rank,
                          HcclRootInfo *info, zh_rt_srv_t **srv)
{
    *srv = NULL;
    char ip[ZH_RT_IP_MAX];
    if (zh_rt_server_ip(t, t->server_of[0], ip) != ZC_OK) {
        return HCCL_E_PARA;
    }
    uint8_t key[16];
    zh_rt_key(buf, len, key);
    unsigned port = (unsigned)zc_config()->ranktable_port;
    ZC_INFO(ZC_SUB_INIT, "rank %u: rank table %s names %u servers: rendezvous on %s:%u", rank,
            t->path, t->nservers, ip, port);
    return rank == 0 ? zh_rt_net_serve(t, key, ip, port, info, srv)
                     : zh_rt_net_fetch(t, key, ip, port, rank, info);
}
