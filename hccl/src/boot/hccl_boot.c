/*
 * Bootstrap, rank side (wire protocol in hccl_boot.h; HcclGetRootInfo and
 * the listener are hccl_boot_root.c, the socket helpers both sides use
 * hccl_boot_sock.c).
 *
 * A rank joins by connecting, answering
 * the challenge with a hello that proves it holds the root info, and waiting
 * for the table (every rank's entry); it checks the table's proof, attaches
 * its peers, reports its status and gets the worst one back.
 *
 * Failures during init, as the caller sees them (HcclResult in hccl_comm.h):
 *  - the root's process is gone (its pid in the root info has exited: seen
 *    by pidfd before connecting, at any refused connection and whenever the
 *    root's connection closes), or a rank that joined died before init was
 *    over (the root saw its connection close; each rank holds a pidfd of
 *    every peer from the table on): ZC_ERR_REMOTE, within about a second,
 *    on every surviving rank;
 *  - the root's process lives but refuses connections (its session is over:
 *    the root info was used up or timed out), or the root refused our hello
 *    (the root info is from another session, another uid): ZC_ERR_INVAL or
 *    ZC_ERR_PERM (both HCCL_E_PARA), at once;
 *  - not every rank joined within the connect timeout: ZC_ERR_TIMEOUT.
 * A connection the root dropped without an answer (its pending table was
 * full) or that could not be made is retried until the deadline, after a
 * jittered backoff (ZH_BACKOFF_MIN_MS doubling to ZH_BACKOFF_MAX_MS, each
 * wait drawn from [d/2, d]) so that a thousand ranks do not come back in
 * lockstep.
 */
#include "boot/hccl_boot.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zc/config.h"
#include "zc/log.h"
#include "zc/sync.h"

/* An attempt that may be repeated (the root dropped us without a word). */
#define ZH_RETRY 1
/* How long a closed connection waits for the root's pidfd to say it died. */
#define ZH_DEATH_GRACE_MS 200
/* How long past our connect timeout we wait for the root's verdict. */
#define ZH_VERDICT_GRACE_MS 1000

struct zh_boot {
    int fd;
    int root_pidfd;
    int nranks;
    int pidfd[ZH_MAX_COMM_RANKS]; /* -1 for ourselves and ranks in our process */
    int32_t pid[ZH_MAX_COMM_RANKS];
    uint8_t here[ZH_MAX_COMM_RANKS]; /* on this host: its pid means something here */
    uint8_t uuid[16];
    uint8_t nonce_s[ZH_NONCE_LEN];
    uint8_t nonce_c[ZH_NONCE_LEN];
};

static int zh_pidfd_open(int32_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* True when the process behind pidfd (or pid, without a pidfd) has exited,
 * waiting up to ms for it. */
static int zh_gone(int pidfd, int32_t pid, int ms)
{
    if (pidfd < 0) {
        return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
    }
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    return poll(&p, 1, ms) > 0;
}

void zh_key_with_secret(const uint8_t in[16], char domain, uint8_t out[16])
{
    const char *secret = zc_config()->job_secret;
    if (secret[0] == '\0') {
        memmove(out, in, 16);
        return;
    }
    uint8_t k[16];
    zh_boot_mac(in, domain, secret, strlen(secret), NULL, 0, NULL, 0, k);
    memcpy(out, k, sizeof(k));
}

void zh_boot_net_key(const HcclRootInfo *info, uint8_t key[16])
{
    uint8_t k[16];
    memcpy(k, info->internal + ZH_RI_OFFSET + offsetof(zh_rootrec_t, uuid), sizeof(k));
    zh_key_with_secret(k, 'S', k);
    zh_boot_mac(k, 'N', NULL, 0, NULL, 0, NULL, 0, key);
}

/* ---- joining ------------------------------------------------------------------------ */

typedef struct {
    const HcclRootInfo *info;
    zh_rootrec_t rec;
    int root_pidfd;
    uint32_t nranks;
    uint32_t rank;
    const zh_boot_entry_t *mine;
    uint64_t deadline;
    uint8_t nonce_s[ZH_NONCE_LEN]; /* of the attempt that got the table */
    uint8_t nonce_c[ZH_NONCE_LEN];
} zh_join_t;

/* The root's process died (checked with a grace for its exit to complete). */
static int zh_root_gone(const zh_join_t *j, int grace_ms)
{
    if (j->rec.host_id != j->mine->host_id) {
        return 0; /* its pid means nothing here; its connection tells */
    }
    if (zh_gone(j->root_pidfd, j->rec.pid, grace_ms)) {
        ZC_WARN(ZC_SUB_BOOT, "rank %u: the root (pid %d) died during init", j->rank,
                (int)j->rec.pid);
        return 1;
    }
    return 0;
}

/* One connect, bounded by what is left of the connect timeout; ZC_OK with
 * *out, ZH_RETRY, or a final error. */
static int zh_join_connect(const zh_join_t *j, int *out)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(j->rec.port);
    char ip[ZH_RI_OFFSET];
    memcpy(ip, j->info->internal, sizeof(ip));
    ip[sizeof(ip) - 1] = '\0';
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
        ZC_WARN(ZC_SUB_BOOT, "root info holds IP \"%s\", not an IPv4 address", ip);
        return ZC_ERR_INVAL;
    }
    uint64_t now = zc_time_ns();
    uint64_t left_ms = j->deadline > now ? (j->deadline - now) / 1000000ull + 1 : 1;
    int fd = zh_sock_connect((struct sockaddr *)&sa, sizeof(sa), (int)ZC_MIN(left_ms, 60000ull));
    if (fd >= 0) {
        *out = fd;
        return ZC_OK;
    }
    int e = errno;
    if (e == ECONNREFUSED) {
        /* The listener exists from HcclGetRootInfo until its session ends. */
        if (zh_root_gone(j, ZH_DEATH_GRACE_MS)) {
            return ZC_ERR_REMOTE;
        }
        ZC_WARN(ZC_SUB_BOOT,
                "rank %u: the root at %s:%u (pid %d) refuses connections: its "
                "session is over (root info used already or timed out)",
                j->rank, ip, (unsigned)j->rec.port, (int)j->rec.pid);
        return ZC_ERR_INVAL;
    }
    if (zc_time_ns() >= j->deadline) {
        ZC_WARN(ZC_SUB_BOOT,
                "rank %u: cannot connect to the root at %s:%u within the connect "
                "timeout: %s",
                j->rank, ip, (unsigned)j->rec.port, strerror(e));
        return ZC_ERR_CONNECT;
    }
    return ZH_RETRY;
}

/* Wait until fd is readable, the root dies or the deadline passes. The
 * root's own deadline came first (it started before us), so waiting a grace
 * beyond ours lets its verdict (HCCL_E_TIMEOUT for everyone) arrive, rather
 * than our leaving fail the others differently. */
static int zh_join_wait(const zh_join_t *j, int fd)
{
    uint64_t deadline = j->deadline + ZH_VERDICT_GRACE_MS * 1000000ull;
    for (;;) {
        uint64_t now = zc_time_ns();
        if (now >= deadline) {
            ZC_WARN(ZC_SUB_BOOT, "rank %u: not all %u ranks joined within the connect timeout",
                    j->rank, j->nranks);
            return ZC_ERR_TIMEOUT;
        }
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
                              {.fd = j->root_pidfd, .events = POLLIN}};
        uint64_t ms = ZC_MIN((deadline - now) / 1000000ull + 1, 1000ull);
        int n = poll(p, j->root_pidfd >= 0 ? 2 : 1, (int)ms);
        if (n > 0 && (p[0].revents != 0)) {
            return ZC_OK;
        }
        if ((n > 0 && p[1].revents != 0) || (j->root_pidfd < 0 && zh_root_gone(j, 0))) {
            (void)zh_root_gone(j, 0);
            return ZC_ERR_REMOTE;
        }
    }
}

/* A reply the root closed without: it died (REMOTE) or dropped us (retry). */
static int zh_join_lost(const zh_join_t *j)
{
    return zh_root_gone(j, ZH_DEATH_GRACE_MS) ? ZC_ERR_REMOTE : ZH_RETRY;
}

/* Read the table that follows rep and check its mac. */
static int zh_join_table(const zh_join_t *j, int fd, const zh_reply_t *rep, const uint8_t *nonce_s,
                         const zh_hello_t *h, zh_boot_entry_t *table)
{
    uint8_t msg[sizeof(zh_reply_t) + ZH_MAX_COMM_RANKS * sizeof(zh_boot_entry_t)];
    uint8_t mac[ZH_MAC_LEN];
    uint8_t want[ZH_MAC_LEN];
    size_t len = sizeof(*rep) + sizeof(table[0]) * j->nranks;
    if (rep->nranks != j->nranks) {
        ZC_WARN(ZC_SUB_BOOT, "rank %u: bad table from the root (nranks %u)", j->rank, rep->nranks);
        return ZC_ERR_IO;
    }
    memcpy(msg, rep, sizeof(*rep));
    if (zh_io_full(fd, msg + sizeof(*rep), len - sizeof(*rep), 0) != ZC_OK ||
        zh_io_full(fd, mac, sizeof(mac), 0) != ZC_OK) {
        return zh_join_lost(j) == ZC_ERR_REMOTE ? ZC_ERR_REMOTE : ZC_ERR_IO;
    }
    zh_boot_mac(j->rec.uuid, 'T', nonce_s, ZH_NONCE_LEN, h->nonce, ZH_NONCE_LEN, msg, len, want);
    if (!zh_mac_equal(mac, want)) {
        ZC_WARN(ZC_SUB_BOOT,
                "rank %u: the table fails the session proof: whoever serves %u is "
                "not our root; refused",
                j->rank, (unsigned)j->rec.port);
        return ZC_ERR_PERM;
    }
    memcpy(table, msg + sizeof(*rep), len - sizeof(*rep));
    return ZC_OK;
}

/* One attempt: connect, answer the challenge, get the table. */
static int zh_join_attempt(zh_join_t *j, int *out, zh_boot_entry_t *table)
{
    int fd = -1;
    int st = zh_join_connect(j, &fd);
    if (st != ZC_OK) {
        return st;
    }
    zh_sock_timeouts(fd, ZH_IO_TIMEOUT_MS);
    /* The first 16 bytes are a refusal or the start of a challenge. */
    union {
        zh_chal_t ch;
        zh_reply_t rep;
    } first;
    if ((st = zh_join_wait(j, fd)) != ZC_OK) {
        goto fail;
    }
    if (zh_io_full(fd, &first, sizeof(first.rep), 0) != ZC_OK) {
        st = zh_join_lost(j);
        goto fail;
    }
    if (first.rep.magic == ZH_MSG_TABLE) {
        st = first.rep.status < 0 ? first.rep.status : ZC_ERR_IO;
        ZC_WARN(ZC_SUB_BOOT, "rank %u: the root refused us: %s", j->rank,
                st == ZC_ERR_PERM ? "not of its uid" : zc_status_str((zc_status_t)st));
        goto fail;
    }
    if (first.ch.magic != ZH_MSG_CHAL || first.ch.version != ZH_BOOT_VERSION ||
        zh_io_full(fd, (char *)&first + sizeof(first.rep), sizeof(first.ch) - sizeof(first.rep),
                   0) != ZC_OK) {
        ZC_WARN(ZC_SUB_BOOT, "rank %u: the root sent no challenge (magic 0x%08x)", j->rank,
                first.ch.magic);
        st = ZC_ERR_IO;
        goto fail;
    }
    zh_hello_t h;
    memset(&h, 0, sizeof(h));
    h.magic = ZH_MSG_HELLO;
    h.version = ZH_BOOT_VERSION;
    h.nranks = j->nranks;
    h.rank = j->rank;
    h.entry = *j->mine;
    if (zc_random_bytes(h.nonce, sizeof(h.nonce)) != 0) {
        st = ZC_ERR_SYS;
        goto fail;
    }
    zh_hello_mac(j->rec.uuid, first.ch.nonce, &h, h.mac);
    if (zh_io_full(fd, &h, sizeof(h), 1) != ZC_OK) {
        st = zh_join_lost(j);
        goto fail;
    }
    /* The table comes when everyone joined. */
    zh_reply_t rep;
    if ((st = zh_join_wait(j, fd)) != ZC_OK) {
        goto fail;
    }
    if (zh_io_full(fd, &rep, sizeof(rep), 0) != ZC_OK) {
        st = zh_join_lost(j);
        goto fail;
    }
    if (rep.magic != ZH_MSG_TABLE) {
        ZC_WARN(ZC_SUB_BOOT, "rank %u: the root sent magic 0x%08x, not a table", j->rank,
                rep.magic);
        st = ZC_ERR_IO;
        goto fail;
    }
    if (rep.status != ZC_OK) {
        st = rep.status < 0 ? rep.status : ZC_ERR_IO;
        ZC_WARN(ZC_SUB_BOOT, "rank %u: the root refused the communicator: %s", j->rank,
                zc_status_str((zc_status_t)st));
        goto fail;
    }
    if ((st = zh_join_table(j, fd, &rep, first.ch.nonce, &h, table)) != ZC_OK) {
        goto fail;
    }
    memcpy(j->nonce_s, first.ch.nonce, ZH_NONCE_LEN);
    memcpy(j->nonce_c, h.nonce, ZH_NONCE_LEN);
    *out = fd;
    return ZC_OK;
fail:
    close(fd);
    return st;
}

/* The bootstrap state once the table is in: pidfds of every peer process on
 * this host (a peer on another host is watched through the root, which sees
 * its connection close). */
static zh_boot_t *zh_boot_new(const zh_join_t *j, int fd, const zh_boot_entry_t *table)
{
    zh_boot_t *b = malloc(sizeof(*b));
    if (b == NULL) {
        return NULL;
    }
    b->fd = fd;
    b->root_pidfd = j->root_pidfd;
    b->nranks = (int)j->nranks;
    memcpy(b->uuid, j->rec.uuid, sizeof(b->uuid));
    memcpy(b->nonce_s, j->nonce_s, ZH_NONCE_LEN);
    memcpy(b->nonce_c, j->nonce_c, ZH_NONCE_LEN);
    for (int r = 0; r < b->nranks; r++) {
        b->pid[r] = table[r].pid;
        b->here[r] = table[r].host_id == j->mine->host_id;
        b->pidfd[r] =
            !b->here[r] || table[r].pid == (int32_t)getpid() ? -1 : zh_pidfd_open(table[r].pid);
    }
    return b;
}

int zh_boot_join(const HcclRootInfo *info, uint32_t nranks, uint32_t rank,
                 const zh_boot_entry_t *mine, uint64_t timeout_ns, zh_boot_t **boot,
                 zh_boot_entry_t *table)
{
    zh_join_t j = {info, {0}, -1, nranks, rank, mine, zc_time_ns() + timeout_ns, {0}, {0}};
    (void)zh_pend_cap(0); /* the descriptor limit raised, once (UCX wants many) */
    memcpy(&j.rec, info->internal + ZH_RI_OFFSET, sizeof(j.rec));
    zh_key_with_secret(j.rec.uuid, 'S', j.rec.uuid); /* ZCCL_JOB_SECRET, when set */
    if (j.rec.magic != ZH_RI_MAGIC || memchr(info->internal, '\0', ZH_RI_OFFSET) == NULL) {
        ZC_WARN(ZC_SUB_BOOT, "rank %u: root info is not from HcclGetRootInfo (magic 0x%08x)", rank,
                j.rec.magic);
        return ZC_ERR_INVAL;
    }
    /* The root's pid is watched only when it is on this host; a root on
     * another host is seen dying by its connection closing. */
    if (j.rec.host_id == mine->host_id && j.rec.pid != (int32_t)getpid()) {
        j.root_pidfd = zh_pidfd_open(j.rec.pid);
        if (j.root_pidfd < 0 && errno == ESRCH) {
            ZC_WARN(ZC_SUB_BOOT, "rank %u: the root (pid %d) is gone", rank, (int)j.rec.pid);
            return ZC_ERR_REMOTE;
        }
    }
    int fd = -1;
    int st;
    uint32_t backoff_ms = ZH_BACKOFF_MIN_MS;
    for (;;) {
        st = zh_join_attempt(&j, &fd, table);
        if (st != ZH_RETRY || zc_time_ns() >= j.deadline) {
            break;
        }
        zh_backoff(&backoff_ms, j.deadline);
    }
    if (st == ZH_RETRY) {
        ZC_WARN(ZC_SUB_BOOT, "rank %u: the root dropped every hello until the connect timeout",
                rank);
        st = ZC_ERR_TIMEOUT;
    }
    if (st == ZC_OK) {
        *boot = zh_boot_new(&j, fd, table);
        st = *boot == NULL ? ZC_ERR_NOMEM : ZC_OK;
    }
    if (st != ZC_OK) {
        if (fd >= 0) {
            close(fd);
        }
        if (j.root_pidfd >= 0) {
            close(j.root_pidfd);
        }
    }
    return st;
}

/* ---- finishing ---------------------------------------------------------------------- */

/* A peer without a pidfd (pidfd_open missing) that has exited; -1 for none. */
static int zh_boot_dead_by_pid(const zh_boot_t *b)
{
    for (int r = 0; r < b->nranks; r++) {
        if (b->here[r] && b->pidfd[r] < 0 && b->pid[r] != (int32_t)getpid() &&
            zh_gone(-1, b->pid[r], 0)) {
            return r;
        }
    }
    return -1;
}

/* The first peer (or the root, -2) whose process died within ms; -1 for none. */
static int zh_boot_dead_peer(const zh_boot_t *b, int ms)
{
    struct pollfd p[ZH_MAX_COMM_RANKS + 1];
    int who[ZH_MAX_COMM_RANKS + 1];
    int n = 0;
    for (int r = 0; r < b->nranks; r++) {
        if (b->pidfd[r] >= 0) {
            who[n] = r;
            p[n++] = (struct pollfd){.fd = b->pidfd[r], .events = POLLIN};
        }
    }
    if (b->root_pidfd >= 0) {
        who[n] = -2;
        p[n++] = (struct pollfd){.fd = b->root_pidfd, .events = POLLIN};
    }
    int dead = zh_boot_dead_by_pid(b);
    if (dead != -1) {
        return dead;
    }
    int bypid = 0;
    for (int r = 0; r < b->nranks; r++) {
        bypid += b->here[r] && b->pidfd[r] < 0 && b->pid[r] != (int32_t)getpid();
    }
    if (n == 0 || poll(p, (nfds_t)n, ms) <= 0) {
        if (n == 0 && bypid > 0 && ms > 0) {
            usleep((useconds_t)ms * 1000); /* the grace, for the pid checks */
        }
        return bypid > 0 ? zh_boot_dead_by_pid(b) : -1;
    }
    for (int i = 0; i < n; i++) {
        if (p[i].revents != 0) {
            return who[i];
        }
    }
    return -1;
}

/* The address blobs after a GO (rep->pad bytes), checked against its mac. */
static int zh_boot_read_addrs(zh_boot_t *b, const zh_reply_t *rep, uint8_t **all, size_t *all_len)
{
    size_t n = rep->pad;
    uint8_t mac[ZH_MAC_LEN];
    uint8_t want[ZH_MAC_LEN];
    if (rep->nranks != (uint32_t)b->nranks || n < 4u * (size_t)b->nranks ||
        n > 4u * (size_t)b->nranks + (size_t)b->nranks * ZH_ADDR_MAX) {
        ZC_WARN(ZC_SUB_BOOT, "bad address list from the root (%zu bytes for %u ranks)", n,
                rep->nranks);
        return ZC_ERR_IO;
    }
    uint8_t *buf = malloc(n);
    if (buf == NULL) {
        return ZC_ERR_NOMEM;
    }
    if (zh_io_full(b->fd, buf, n, 0) != ZC_OK || zh_io_full(b->fd, mac, sizeof(mac), 0) != ZC_OK) {
        free(buf);
        ZC_WARN(ZC_SUB_BOOT, "the root's address list was cut short");
        return ZC_ERR_REMOTE;
    }
    zh_go_mac(b->uuid, b->nonce_s, b->nonce_c, rep, buf, n, want);
    if (!zh_mac_equal(mac, want)) {
        free(buf);
        ZC_WARN(ZC_SUB_BOOT, "the address list fails the session proof; refused");
        return ZC_ERR_PERM;
    }
    *all = buf;
    *all_len = n;
    return ZC_OK;
}

/* Wait for the go while watching every peer; returns its status or an error. */
static int zh_boot_wait_go(zh_boot_t *b, int *dead, uint8_t **all, size_t *all_len)
{
    uint64_t deadline = zc_time_ns() + zc_config()->connect_timeout_s * 1000000000ull;
    while (zc_time_ns() < deadline) {
        struct pollfd p = {.fd = b->fd, .events = POLLIN};
        if (poll(&p, 1, 100) > 0) {
            zh_reply_t rep;
            if (zh_io_full(b->fd, &rep, sizeof(rep), 0) != ZC_OK || rep.magic != ZH_MSG_GO) {
                ZC_WARN(ZC_SUB_BOOT, "no go from the root after init");
                return ZC_ERR_IO;
            }
            if (rep.pad > 0 && all != NULL) {
                int st = zh_boot_read_addrs(b, &rep, all, all_len);
                return st != ZC_OK ? st : rep.status;
            }
            return rep.status;
        }
        if ((*dead = zh_boot_dead_peer(b, 0)) != -1) {
            return ZC_ERR_REMOTE;
        }
    }
    ZC_WARN(ZC_SUB_BOOT, "no go from the root within the connect timeout");
    return ZC_ERR_TIMEOUT;
}

int zh_boot_finish(zh_boot_t *boot, int my_status, const void *addr, uint32_t addr_len,
                   uint8_t **all, size_t *all_len)
{
    zh_reply_t rep = {ZH_MSG_READY, my_status, 0, addr_len};
    int dead = -1;
    int st = zh_io_full(boot->fd, &rep, sizeof(rep), 1);
    if (st == ZC_OK && addr_len > 0) {
        st = zh_io_full(boot->fd, (void *)(uintptr_t)addr, addr_len, 1);
    }
    if (st == ZC_OK) {
        st = zh_boot_wait_go(boot, &dead, all, all_len);
    }
    /* Any failure: was it a death? (a peer's exit may lag its sockets closing) */
    if ((st != ZC_OK || my_status != ZC_OK) && dead == -1) {
        dead = zh_boot_dead_peer(boot, ZH_DEATH_GRACE_MS);
    }
    if (dead != -1) {
        if (dead == -2) {
            ZC_WARN(ZC_SUB_BOOT, "the root died during init");
        } else {
            ZC_WARN(ZC_SUB_BOOT, "rank %d (pid %d) died during init", dead, (int)boot->pid[dead]);
        }
        st = ZC_ERR_REMOTE;
    } else if (my_status != ZC_OK) {
        st = my_status;
    }
    if (st != ZC_OK && all != NULL && *all != NULL) {
        free(*all);
        *all = NULL;
    }
    close(boot->fd);
    for (int r = 0; r < boot->nranks; r++) {
        if (boot->pidfd[r] >= 0) {
            close(boot->pidfd[r]);
        }
    }
    if (boot->root_pidfd >= 0) {
        close(boot->root_pidfd);
    }
    free(boot);
    return st;
}
