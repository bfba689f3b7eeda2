/*
 * HcclGetRootInfo and the root listener: one thread per HcclGetRootInfo,
 * serving one session (wire protocol in hccl_boot.h).
 *
 * HcclGetRootInfo opens a TCP listener (on HCCL_IF_IP, else the address of
 * HCCL_SOCKET_IFNAME, else of the first non-loopback interface that is up,
 * else loopback), starts its thread and writes the root info.
 *
 * The thread polls the listening socket, every connection whose hello is not
 * in yet and every joined rank, all at once, so no client can hold up
 * another. At accept the peer's uid is looked up (zh_tcp_peer_uid): another
 * uid gets a refusal and is closed at once; ours gets a challenge and a slot
 * in the pending table (ZH_MAX_PENDING: a whole communicator and a margin)
 * until its hello is complete. Slowness alone never drops a connection
 * while there is room: 1,024 ranks on 2 cores may take seconds per hello.
 * When the table is full, the oldest pending connection is evicted if it is
 * ZH_PEND_MIN_AGE_MS old or more, else the newcomer is closed (a real rank
 * retries with backoff). A hostile process of our uid can therefore occupy
 * slots, but not keep a real rank out: its connections are the oldest and go
 * first. A hello whose mac does not verify is refused at once (logged once
 * per session, then counted) and changes nothing; a verified hello that
 * conflicts with the session (other nranks, duplicate or out-of-range
 * rank, another host) fails the session for
 * every joined rank at once, and later verified hellos get the same error
 * until the connect timeout, so no rank waits for peers that will never
 * come. A joined rank whose connection closes (it died) before everyone
 * joined fails the session with ZC_ERR_REMOTE.
 *
 * When all nranks joined, the listener is closed (a late connection with
 * this root info is refused by the kernel: the session is over), the table
 * goes to every rank with its mac, each rank reports its attach status and
 * gets the worst of them ("go").
 */
#include "boot/hccl_boot.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
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

typedef struct {
    zc_pend_t head;
    uint8_t nonce[ZH_NONCE_LEN];
    size_t got;
    zh_hello_t h;
} zh_pending_t;

typedef struct {
    zc_pollsrv_t ps; /* the listener and the pending table */
    uint8_t uuid[16];
    uint64_t deadline;
    int conn[ZH_MAX_COMM_RANKS];
    zh_hello_t hello[ZH_MAX_COMM_RANKS];
    uint8_t nonce[ZH_MAX_COMM_RANKS][ZH_NONCE_LEN]; /* the challenge each rank answered */
    zh_hello_t first;
    int have_first;
    int joined;
    int failed;
    uint8_t *addr[ZH_MAX_COMM_RANKS]; /* transport addresses from the ready reports */
    uint32_t addr_len[ZH_MAX_COMM_RANKS];
    zh_pending_t pend[ZH_MAX_PENDING]; /* in accept order: the oldest first */
    unsigned dropped;                  /* clients refused at accept, for rate-limited logs */
    unsigned bad;                      /* hellos that failed the proof */
    /* One poll round's set: listener, pending clients, joined ranks. */
    struct pollfd pfd[1 + ZH_MAX_PENDING + ZH_MAX_COMM_RANKS];
    int rank_of[1 + ZH_MAX_PENDING + ZH_MAX_COMM_RANKS];
} zh_server_t;

/* Fail the session: every joined rank gets st and is let go. Ranks of other
 * processes hear it first: a rank of this process may return from its init
 * at once and exit, and the others must get the verdict, not see the root
 * die (which they would report as HCCL_E_REMOTE instead). */
static void zh_srv_fail(zh_server_t *s, int st)
{
    s->failed = st;
    pid_t self = getpid();
    for (int own = 0; own < 2; own++) {
        for (int r = 0; r < ZH_MAX_COMM_RANKS; r++) {
            if (s->conn[r] >= 0 && (s->hello[r].entry.pid == self) == own) {
                zh_send_status(s->conn[r], ZH_MSG_TABLE, st);
                close(s->conn[r]);
                s->conn[r] = -1;
            }
        }
    }
}

/* Validate a verified hello against the session so far; returns ZC_OK or the
 * error the whole session fails with (and logs why). */
static int zh_srv_check(const zh_server_t *s, const zh_hello_t *h)
{
    const zh_hello_t *first = s->have_first ? &s->first : NULL;
    if (h->nranks == 0 || h->nranks > ZH_MAX_COMM_RANKS) {
        ZC_WARN(ZC_SUB_BOOT, "root: rank %u asks for nranks %u (must be 1..%d)", h->rank, h->nranks,
                ZH_MAX_COMM_RANKS);
        return ZC_ERR_INVAL;
    }
    if (first != NULL && h->nranks != first->nranks) {
        ZC_WARN(ZC_SUB_BOOT, "root: rank %u says nranks %u but rank %u said %u", h->rank, h->nranks,
                first->rank, first->nranks);
        return ZC_ERR_INVAL;
    }
    if (h->rank >= h->nranks) {
        ZC_WARN(ZC_SUB_BOOT, "root: rank %u out of range (nranks %u)", h->rank, h->nranks);
        return ZC_ERR_INVAL;
    }
    if (s->conn[h->rank] >= 0) {
        ZC_WARN(ZC_SUB_BOOT, "root: rank %u joined twice (pids %d and %d)", h->rank,
                (int)s->hello[h->rank].entry.pid, (int)h->entry.pid);
        return ZC_ERR_INVAL;
    }
    return ZC_OK;
}

/* A complete hello from pending p: verify, then join, refuse or fail. */
static void zh_srv_hello(zh_server_t *s, zh_pending_t *p)
{
    const zh_hello_t *h = &p->h;
    uint8_t mac[ZH_MAC_LEN];
    zh_hello_mac(s->uuid, p->nonce, h, mac);
    if (h->magic != ZH_MSG_HELLO || h->version != ZH_BOOT_VERSION || !zh_mac_equal(mac, h->mac)) {
        if (s->bad++ == 0) {
            ZC_WARN(ZC_SUB_BOOT,
                    "root: a client (pid %d) failed the session proof (magic 0x%08x "
                    "version %u): refused, not of this session (later ones counted)",
                    (int)h->entry.pid, h->magic, h->version);
        }
        zh_send_status(p->head.fd, ZH_MSG_TABLE, ZC_ERR_INVAL);
        close(p->head.fd);
        return;
    }
    int fl = fcntl(p->head.fd, F_GETFL);
    (void)fcntl(p->head.fd, F_SETFL, fl & ~O_NONBLOCK);
    zh_sock_timeouts(p->head.fd, ZH_IO_TIMEOUT_MS);
    if (s->failed != ZC_OK) {
        zh_send_status(p->head.fd, ZH_MSG_TABLE, s->failed);
        close(p->head.fd);
        return;
    }
    int st = zh_srv_check(s, h);
    if (st != ZC_OK) {
        zh_send_status(p->head.fd, ZH_MSG_TABLE, st);
        close(p->head.fd);
        zh_srv_fail(s, st);
        return;
    }
    if (!s->have_first) {
        s->first = *h;
        s->have_first = 1;
    }
    s->conn[h->rank] = p->head.fd;
    s->hello[h->rank] = *h;
    memcpy(s->nonce[h->rank], p->nonce, ZH_NONCE_LEN);
    s->joined++;
}

/* A newcomer closed for want of room (zc_pollsrv_accept). */
static void zh_srv_full(zc_pollsrv_t *ps, int cap)
{
    zh_server_t *s = ps->ctx;
    if (s->dropped++ < 4) {
        ZC_WARN(ZC_SUB_BOOT,
                "root: %d connections owe a hello (the most the descriptor limit "
                "leaves), none %d ms old; one more dropped (later ones counted)",
                cap, ZH_PEND_MIN_AGE_MS);
    }
}

/* Refuse a client of another uid (with a word) or one whose host or uid
 * cannot be told now (out of descriptors: closed without a verdict, so a
 * real rank retries instead of taking a refusal); returns 1 when fd is closed. */
static int zh_srv_refuse(zh_server_t *s, int fd)
{
    uint32_t uid = 0;
    const char *why = NULL;
    struct sockaddr_in peer;
    socklen_t plen = sizeof(peer);
    int local = getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 || peer.sin_family != AF_INET
                    ? 1
                    : zh_addr_is_local(&peer);
    int got = local == 1 ? zh_tcp_peer_uid(fd, &uid) : 0;
    if (local < 0 || got == -2) {
        close(fd); /* no verdict now: a real rank retries */
        return 1;
    }
    if (local == 0) {
        /* Another host: no uid can be proven; the hello's mac (holding
         * the unique id) is the only admission. */
        return 0;
    }
    if (got != 0) {
        why = "whose uid is unknown (not a local socket)";
    } else if (uid != (uint32_t)getuid()) {
        why = "of another uid";
    }
    if (why == NULL) {
        return 0;
    }
    if (s->dropped++ < 4) {
        ZC_WARN(ZC_SUB_BOOT, "root: refused a client %s (uid %u, ours %u)", why, (unsigned)uid,
                (unsigned)getuid());
    }
    zh_reply_t rep = {ZH_MSG_TABLE, ZC_ERR_PERM, 0, 0};
    (void)send(fd, &rep, sizeof(rep), MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
    return 1;
}

/* A waiting connection (zc_pollsrv_accept): refuse other uids, challenge
 * ours and hold it pending until its hello is in. */
static void zh_srv_admit(zc_pollsrv_t *ps, int fd)
{
    if (zh_srv_refuse(ps->ctx, fd)) {
        return;
    }
    zh_chal_t ch = {ZH_MSG_CHAL, ZH_BOOT_VERSION, {0}};
    if (zc_random_bytes(ch.nonce, ZH_NONCE_LEN) != 0) {
        ZC_WARN(ZC_SUB_BOOT, "root: getrandom failed (errno %d)", errno);
        close(fd);
        return;
    }
    if (send(fd, &ch, sizeof(ch), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(ch)) {
        close(fd);
        return;
    }
    zh_pending_t *p = zc_pollsrv_add(ps, fd);
    memcpy(p->nonce, ch.nonce, ZH_NONCE_LEN);
}

/* Read what pending p has sent; returns 1 when its hello is complete, -1 when
 * it is gone, 0 otherwise. */
static int zh_srv_read(zh_pending_t *p)
{
    ssize_t r = recv(p->head.fd, (char *)&p->h + p->got, sizeof(p->h) - p->got, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
        return 0;
    }
    if (r <= 0) {
        return -1;
    }
    p->got += (size_t)r;
    return p->got == sizeof(p->h) ? 1 : 0;
}

/* A pending client sent something (zc_pollsrv_sweep). */
static int zh_srv_readable(zc_pollsrv_t *ps, void *rec)
{
    zh_pending_t *p = rec;
    int got = zh_srv_read(p);
    if (got == 1) {
        zh_srv_hello(ps->ctx, p); /* its socket: closed, or a joined rank's */
        return ZC_PEND_TAKEN;
    }
    return got < 0 ? ZC_PEND_CLOSE : ZC_PEND_KEEP;
}

static const zc_pollsrv_ops_t zh_srv_ops = {.evict_ns = ZH_PEND_MIN_AGE_MS * 1000000ull,
                                            .admit = zh_srv_admit,
                                            .ready = zh_srv_readable,
                                            .full = zh_srv_full};

/* One poll round over the listener, pending clients and joined ranks. */
static void zh_srv_round(zh_server_t *s)
{
    struct pollfd *pfd = s->pfd;
    int *rank_of = s->rank_of;
    uint64_t now = zc_time_ns();
    uint64_t wake = ZC_MIN(s->deadline, now + 200000000ull);
    int n = zc_pollsrv_fds(&s->ps, pfd);
    int first_rank = n;
    for (int r = 0; r < ZH_MAX_COMM_RANKS; r++) {
        if (s->conn[r] >= 0) {
            rank_of[n] = r;
            pfd[n++] = (struct pollfd){.fd = s->conn[r], .events = POLLIN};
        }
    }
    int ms = wake > now ? (int)((wake - now) / 1000000ull) + 1 : 0;
    if (poll(pfd, (nfds_t)n, ms) < 0 || zc_time_ns() >= s->deadline) {
        return; /* past the deadline the verdict is a timeout, whoever left */
    }
    for (int i = first_rank; i < n; i++) {
        if (pfd[i].revents != 0 && s->failed == ZC_OK) {
            /* A joined rank must not talk before the table: it left (died). */
            int r = rank_of[i];
            ZC_WARN(ZC_SUB_BOOT, "root: rank %d (pid %d) left before all ranks joined", r,
                    (int)s->hello[r].entry.pid);
            zh_srv_fail(s, ZC_ERR_REMOTE);
        }
    }
    zc_pollsrv_sweep(&s->ps, pfd);
    /* The pending table holds what the descriptor limit leaves. */
    zc_pollsrv_accept(&s->ps, pfd, zh_pend_cap(1 + s->joined));
}

/* Send rank r the table with its mac. */
static int zh_srv_send_table(zh_server_t *s, int r, const zh_boot_entry_t *table, int nr)
{
    uint8_t msg[sizeof(zh_reply_t) + ZH_MAX_COMM_RANKS * sizeof(zh_boot_entry_t)];
    zh_reply_t rep = {ZH_MSG_TABLE, ZC_OK, (uint32_t)nr, 0};
    size_t len = sizeof(rep) + sizeof(table[0]) * (size_t)nr;
    memcpy(msg, &rep, sizeof(rep));
    memcpy(msg + sizeof(rep), table, sizeof(table[0]) * (size_t)nr);
    uint8_t mac[ZH_MAC_LEN];
    zh_boot_mac(s->uuid, 'T', s->nonce[r], ZH_NONCE_LEN, s->hello[r].nonce, ZH_NONCE_LEN, msg, len,
                mac);
    if (zh_io_full(s->conn[r], msg, len, 1) != ZC_OK ||
        zh_io_full(s->conn[r], mac, sizeof(mac), 1) != ZC_OK) {
        ZC_WARN(ZC_SUB_BOOT, "root: sending the table to rank %d failed", r);
        return ZC_ERR_REMOTE;
    }
    return ZC_OK;
}

/* Rank r's ready report: its status, then its address blob (kept in s). */
static int zh_srv_read_ready(zh_server_t *s, int r)
{
    zh_reply_t rep;
    if (zh_io_full(s->conn[r], &rep, sizeof(rep), 0) != ZC_OK || rep.magic != ZH_MSG_READY ||
        rep.pad > ZH_ADDR_MAX) {
        ZC_WARN(ZC_SUB_BOOT, "root: rank %d left before reporting ready", r);
        return ZC_ERR_REMOTE;
    }
    if (rep.pad > 0) {
        s->addr[r] = malloc(rep.pad);
        if (s->addr[r] == NULL || zh_io_full(s->conn[r], s->addr[r], rep.pad, 0) != ZC_OK) {
            ZC_WARN(ZC_SUB_BOOT, "root: rank %d sent %u address bytes short", r, rep.pad);
            return ZC_ERR_REMOTE;
        }
        s->addr_len[r] = rep.pad;
    }
    if (rep.status != ZC_OK) {
        ZC_WARN(ZC_SUB_BOOT, "root: rank %d reported init failure %d", r, rep.status);
    }
    return rep.status;
}

/* The go for rank r, with every rank's address when some rank sent one. */
static void zh_srv_send_go(zh_server_t *s, int r, int nr, int worst, const uint8_t *blob, size_t n)
{
    zh_reply_t rep = {ZH_MSG_GO, worst, (uint32_t)nr, worst == ZC_OK ? (uint32_t)n : 0};
    if (rep.pad == 0) {
        zh_send_status(s->conn[r], ZH_MSG_GO, worst);
        return;
    }
    uint8_t mac[ZH_MAC_LEN];
    zh_go_mac(s->uuid, s->nonce[r], s->hello[r].nonce, &rep, blob, n, mac);
    if (zh_io_full(s->conn[r], &rep, sizeof(rep), 1) != ZC_OK ||
        zh_io_full(s->conn[r], (void *)(uintptr_t)blob, n, 1) != ZC_OK ||
        zh_io_full(s->conn[r], mac, sizeof(mac), 1) != ZC_OK) {
        ZC_WARN(ZC_SUB_BOOT, "root: sending the go to rank %d failed", r);
    }
}

/* Lengths then addresses, in rank order; NULL (n = 0) when nobody sent one. */
static uint8_t *zh_srv_addr_blob(zh_server_t *s, int nr, size_t *n)
{
    size_t total = 0;
    for (int r = 0; r < nr; r++) {
        total += s->addr_len[r];
    }
    *n = 0;
    if (total == 0) {
        return NULL;
    }
    uint8_t *b = malloc(4u * (size_t)nr + total);
    if (b == NULL) {
        return NULL;
    }
    size_t off = 4u * (size_t)nr;
    for (int r = 0; r < nr; r++) {
        memcpy(b + 4u * (size_t)r, &s->addr_len[r], 4);
        if (s->addr_len[r] > 0) {
            memcpy(b + off, s->addr[r], s->addr_len[r]);
        }
        off += s->addr_len[r];
    }
    *n = off;
    return b;
}

/* After the table: one ready status from every rank, the worst goes back. */
static void zh_srv_ready(zh_server_t *s, int nr, int worst)
{
    int got[ZH_MAX_COMM_RANKS] = {0};
    int nready = 0;
    while (nready < nr && zc_time_ns() < s->deadline) {
        struct pollfd pfd[ZH_MAX_COMM_RANKS];
        int rank_of[ZH_MAX_COMM_RANKS];
        int n = 0;
        for (int r = 0; r < nr; r++) {
            if (!got[r]) {
                rank_of[n] = r;
                pfd[n++] = (struct pollfd){.fd = s->conn[r], .events = POLLIN};
            }
        }
        if (poll(pfd, (nfds_t)n, 200) <= 0) {
            continue;
        }
        for (int i = 0; i < n; i++) {
            if (pfd[i].revents == 0) {
                continue;
            }
            int r = rank_of[i];
            if (zh_srv_read_ready(s, r) != ZC_OK && worst == ZC_OK) {
                worst = ZC_ERR_REMOTE; /* a peer's failure, seen from the others */
            }
            got[r] = 1;
            nready++;
        }
    }
    if (nready < nr && worst == ZC_OK) {
        ZC_WARN(ZC_SUB_BOOT, "root: only %d of %d ranks reported ready in time", nready, nr);
        worst = ZC_ERR_TIMEOUT;
    }
    size_t blen = 0;
    uint8_t *blob = worst == ZC_OK ? zh_srv_addr_blob(s, nr, &blen) : NULL;
    if (worst == ZC_OK && blob == NULL && blen == 0) {
        for (int r = 0; r < nr && worst == ZC_OK; r++) {
            worst = s->addr_len[r] > 0 ? ZC_ERR_NOMEM : ZC_OK;
        }
    }
    for (int r = 0; r < nr; r++) {
        zh_srv_send_go(s, r, nr, worst, blob, blen);
        close(s->conn[r]);
    }
    free(blob);
    for (int r = 0; r < nr; r++) {
        free(s->addr[r]);
    }
}

static void *zh_srv_main(void *arg)
{
    zh_server_t *s = arg;
    while (zc_time_ns() < s->deadline &&
           !(s->have_first && s->failed == ZC_OK && s->joined == (int)s->first.nranks)) {
        zh_srv_round(s);
    }
    /* Whatever happens next, this root info admits nobody else. */
    close(s->ps.lfd);
    zc_pollsrv_close(&s->ps);
    if (s->bad > 1 || s->ps.evicted > 0 || s->dropped > 0) {
        ZC_WARN(ZC_SUB_BOOT,
                "root: this session refused %u hellos without the proof, evicted %u clients "
                "owing a hello, refused or dropped %u at accept, closed %d still owing one",
                s->bad, s->ps.evicted, s->dropped, s->ps.npend);
    }
    if (!s->have_first || s->failed != ZC_OK || s->joined != (int)s->first.nranks) {
        if (s->failed == ZC_OK && s->have_first) {
            ZC_WARN(ZC_SUB_BOOT, "root: only %d of %u ranks joined before the connect timeout",
                    s->joined, s->first.nranks);
        }
        zh_srv_fail(s, s->failed != ZC_OK ? s->failed : ZC_ERR_TIMEOUT);
        free(s);
        return NULL;
    }
    int nr = (int)s->first.nranks;
    zh_boot_entry_t table[ZH_MAX_COMM_RANKS];
    for (int r = 0; r < nr; r++) {
        table[r] = s->hello[r].entry;
    }
    int worst = ZC_OK;
    for (int r = 0; r < nr; r++) {
        if (zh_srv_send_table(s, r, table, nr) != ZC_OK) {
            worst = ZC_ERR_REMOTE;
        }
    }
    zh_srv_ready(s, nr, worst);
    free(s);
    return NULL;
}

static int zh_boot_root_serve(int lfd, const uint8_t uuid[16], uint64_t deadline_ns)
{
    zh_server_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        close(lfd);
        return ZC_ERR_NOMEM;
    }
    s->ps = (zc_pollsrv_t){lfd, s->pend, sizeof(s->pend[0]), &zh_srv_ops, s, 0, 0};
    zh_key_with_secret(uuid, 'S', s->uuid); /* ZCCL_JOB_SECRET, when set */
    s->deadline = deadline_ns;
    for (int r = 0; r < ZH_MAX_COMM_RANKS; r++) {
        s->conn[r] = -1;
    }
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &attr, zh_srv_main, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        ZC_WARN(ZC_SUB_BOOT, "root: cannot start the listener thread: %s", strerror(rc));
        close(lfd);
        free(s);
        return ZC_ERR_SYS;
    }
    return ZC_OK;
}

/* ---- HcclGetRootInfo ---------------------------------------------------------------- */

/* The address the root binds and advertises: HCCL_IF_IP, else the IPv4
 * address of HCCL_SOCKET_IFNAME, else the caller's (fallback, when not
 * NULL), else of the first non-loopback interface that is up (so ranks on
 * other hosts can reach it), else loopback. */
static int zh_boot_pick_ip(const zc_config_t *cfg, const char *fallback, char *ip, size_t n)
{
    if (cfg->if_ip[0] == '\0' && cfg->socket_ifname[0] == '\0' && fallback != NULL) {
        snprintf(ip, n, "%s", fallback);
        return ZC_OK;
    }
    if (cfg->if_ip[0] != '\0') {
        if (strlen(cfg->if_ip) >= n) {
            ZC_WARN(ZC_SUB_BOOT, "HCCL_IF_IP=\"%s\" is too long", cfg->if_ip);
            return ZC_ERR_INVAL;
        }
        memcpy(ip, cfg->if_ip, strlen(cfg->if_ip) + 1);
        return ZC_OK;
    }
    snprintf(ip, n, "127.0.0.1");
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) {
        return ZC_OK;
    }
    const char *want = cfg->socket_ifname[0] != '\0' ? cfg->socket_ifname : NULL;
    int found = 0;
    for (struct ifaddrs *i = ifs; i != NULL && !found; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
            (i->ifa_flags & IFF_UP) == 0 ||
            (want != NULL ? strcmp(i->ifa_name, want) != 0 : (i->ifa_flags & IFF_LOOPBACK) != 0)) {
            continue;
        }
        inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, ip,
                  (socklen_t)n);
        found = 1;
    }
    freeifaddrs(ifs);
    if (want != NULL && !found) {
        ZC_WARN(ZC_SUB_BOOT, "HCCL_SOCKET_IFNAME=\"%s\": no such interface with an IPv4 address up",
                want);
        return ZC_ERR_INVAL;
    }
    return ZC_OK;
}

int zh_boot_root_create(HcclRootInfo *info)
{
    return zh_boot_root_create_at(info, NULL);
}

int zh_boot_root_create_at(HcclRootInfo *info, const char *fallback_ip)
{
    const zc_config_t *cfg = zc_config();
    char ipbuf[ZH_RI_OFFSET + 1];
    ZC_CHECK(zh_boot_pick_ip(cfg, fallback_ip, ipbuf, sizeof(ipbuf)));
    const char *ip = ipbuf;
    if (strlen(ip) >= ZH_RI_OFFSET) {
        ZC_WARN(ZC_SUB_BOOT, "HCCL_IF_IP=\"%s\" is too long", ip);
        return ZC_ERR_INVAL;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
        ZC_WARN(ZC_SUB_BOOT, "HCCL_IF_IP=\"%s\" is not an IPv4 address", ip);
        return ZC_ERR_INVAL;
    }
    zh_rootrec_t rec = {ZH_RI_MAGIC, 0, 0, (int32_t)getpid(), 0, zc_host_id(), {0}};
    if (zc_random_bytes(rec.uuid, sizeof(rec.uuid)) != 0) {
        ZC_WARN(ZC_SUB_BOOT, "root: getrandom failed: %s", strerror(errno));
        return ZC_ERR_SYS;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        ZC_WARN(ZC_SUB_BOOT, "root: socket() failed: %s", strerror(errno));
        return ZC_ERR_SYS;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, ZH_MAX_PENDING) != 0) {
        ZC_WARN(ZC_SUB_BOOT, "root: bind/listen on %s failed: %s", ip, strerror(errno));
        close(fd);
        return ZC_ERR_CONNECT;
    }
    socklen_t len = sizeof(sa);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    rec.port = ntohs(sa.sin_port);
    uint64_t deadline = zc_time_ns() + cfg->connect_timeout_s * 1000000000ull;
    ZC_CHECK(zh_boot_root_serve(fd, rec.uuid, deadline));
    memset(info, 0, sizeof(*info));
    memcpy(info->internal, ip, strlen(ip) + 1);
    memcpy(info->internal + ZH_RI_OFFSET, &rec, sizeof(rec));
    ZC_INFO(ZC_SUB_BOOT, "root listener on %s:%u", ip, (unsigned)rec.port);
    return ZC_OK;
}
