/*
 * Bootstrap: the root listener and the rank side of communicator init.
 *
 * HcclGetRootInfo opens a TCP listener (HCCL_IF_IP, else loopback) served by
 * one thread, and writes into the 4108-byte root info: the IP string first
 * (NUL-terminated, as clients read it), then at ZH_RI_OFFSET a record with a
 * magic word, the port, the server's pid and host id, and a 128-bit random
 * unique id. Every rank connects and sends a hello {uuid, nranks, rank, pid,
 * device, host id, control segment token}. When all nranks hellos agree the
 * server sends everyone the table; each rank then attaches its peers and
 * reports a status; the server answers with the worst status ("go").
 *
 * A hello that conflicts (other nranks, duplicate or out-of-range rank,
 * another host) fails the whole session: every connected rank gets the error
 * at once, and later hellos get it too until the connect timeout, so no rank
 * waits for peers that will never come. Garbage (wrong magic, wrong uuid,
 * truncated messages) is refused with a log line; the listener keeps serving.
 */
#include "hccl_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zc/config.h"
#include "zc/log.h"
#include "zc/sync.h"

#define ZH_RI_OFFSET 64
#define ZH_RI_MAGIC 0x5a435249u /* "ZCRI" */
#define ZH_MSG_HELLO 0x5a434248u
#define ZH_MSG_TABLE 0x5a434254u
#define ZH_MSG_READY 0x5a434252u
#define ZH_MSG_GO 0x5a434247u
#define ZH_BOOT_VERSION 1u
#define ZH_IO_TIMEOUT_MS 2000
#define ZH_HELLO_TIMEOUT_MS 1000

typedef struct {
    uint32_t magic;
    uint16_t port;
    uint16_t pad;
    int32_t pid;
    uint32_t pad2;
    uint64_t host_id;
    uint8_t uuid[16];
} zh_rootrec_t;

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint8_t uuid[16];
    uint32_t nranks;
    uint32_t rank;
    zh_boot_entry_t entry;
} zh_hello_t;

typedef struct {
    uint32_t magic;
    int32_t status;
    uint32_t nranks;
    uint32_t pad;
} zh_reply_t;

struct zh_boot {
    int fd;
};

typedef struct {
    int lfd;
    uint8_t uuid[16];
    uint64_t deadline;
} zh_server_t;

static int zh_io_full(int fd, void *buf, size_t n, int writing)
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

static void zh_sock_timeouts(int fd, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void zh_send_status(int fd, uint32_t magic, int status)
{
    zh_reply_t rep = {magic, status, 0, 0};
    (void)zh_io_full(fd, &rep, sizeof(rep), 1);
}

/* Validate a hello against the session so far; returns ZC_OK or the error the
 * whole session fails with (and logs why). */
static int zh_server_check(const zh_hello_t *h, const zh_hello_t *first, const int *conn)
{
    if (h->nranks == 0 || h->nranks > ZH_MAX_RANKS) {
        ZC_WARN(ZC_SUB_BOOT, "root: rank %u asks for nranks %u (must be 1..%d)", h->rank,
                h->nranks, ZH_MAX_RANKS);
        return ZC_ERR_INVAL;
    }
    if (first != NULL && h->nranks != first->nranks) {
        ZC_WARN(ZC_SUB_BOOT, "root: rank %u says nranks %u but rank %u said %u", h->rank,
                h->nranks, first->rank, first->nranks);
        return ZC_ERR_INVAL;
    }
    if (h->rank >= h->nranks) {
        ZC_WARN(ZC_SUB_BOOT, "root: rank %u out of range (nranks %u)", h->rank, h->nranks);
        return ZC_ERR_INVAL;
    }
    if (conn[h->rank] >= 0) {
        ZC_WARN(ZC_SUB_BOOT, "root: rank %u joined twice (pids %d)", h->rank, (int)h->entry.pid);
        return ZC_ERR_INVAL;
    }
    if (first != NULL && h->entry.host_id != first->entry.host_id) {
        ZC_WARN(ZC_SUB_BOOT, "root: rank %u is on another host than rank %u: multi-host "
                "communicators are not supported", h->rank, first->rank);
        return ZC_ERR_NOT_SUPPORT;
    }
    return ZC_OK;
}

/* Read a hello from a new connection; returns 0 and fills h, or -1 (logged). */
static int zh_server_read_hello(zh_server_t *s, int fd, zh_hello_t *h)
{
    if (zh_io_full(fd, h, sizeof(*h), 0) != ZC_OK) {
        ZC_WARN(ZC_SUB_BOOT, "root: a client sent a truncated hello; dropped");
        return -1;
    }
    if (h->magic != ZH_MSG_HELLO || h->version != ZH_BOOT_VERSION) {
        ZC_WARN(ZC_SUB_BOOT, "root: a client sent magic 0x%08x version %u (want 0x%08x v%u); "
                "dropped", h->magic, h->version, ZH_MSG_HELLO, ZH_BOOT_VERSION);
        return -1;
    }
    if (memcmp(h->uuid, s->uuid, sizeof(s->uuid)) != 0) {
        ZC_WARN(ZC_SUB_BOOT, "root: rank %u presented another root info's unique id; dropped",
                h->rank);
        return -1;
    }
    return 0;
}

static void *zh_server_main(void *arg)
{
    zh_server_t *s = arg;
    int conn[ZH_MAX_RANKS];
    zh_hello_t hello[ZH_MAX_RANKS];
    zh_hello_t first;
    int have_first = 0;
    int joined = 0;
    int failed = ZC_OK;
    int worst = ZC_OK;
    for (int i = 0; i < ZH_MAX_RANKS; i++) {
        conn[i] = -1;
    }
    while (zc_time_ns() < s->deadline) {
        /* Watch the joined ranks too: one that dies (its socket closes)
         * before everyone joined fails the session at once. */
        struct pollfd pfd[ZH_MAX_RANKS + 1];
        int rank_of[ZH_MAX_RANKS + 1];
        int n = 0;
        pfd[n++] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        for (int r = 0; r < ZH_MAX_RANKS; r++) {
            if (conn[r] >= 0) {
                rank_of[n] = r;
                pfd[n++] = (struct pollfd){.fd = conn[r], .events = POLLIN};
            }
        }
        if (poll(pfd, (nfds_t)n, 200) <= 0) {
            continue;
        }
        int lost = -1;
        for (int i = 1; i < n; i++) {
            if (pfd[i].revents != 0) {
                lost = rank_of[i]; /* a joined rank must not talk before the table */
            }
        }
        if (lost >= 0 && failed == ZC_OK) {
            ZC_WARN(ZC_SUB_BOOT, "root: rank %d (pid %d) left before all ranks joined", lost,
                    (int)hello[lost].entry.pid);
            failed = ZC_ERR_REMOTE;
            for (int r = 0; r < ZH_MAX_RANKS; r++) {
                if (conn[r] >= 0) {
                    zh_send_status(conn[r], ZH_MSG_TABLE, failed);
                    close(conn[r]);
                    conn[r] = -1;
                }
            }
        }
        if (!(pfd[0].revents & POLLIN)) {
            continue;
        }
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        /* A real rank sends its hello right after connecting; a silent
         * client may hold the listener only this long. */
        zh_sock_timeouts(fd, ZH_HELLO_TIMEOUT_MS);
        zh_hello_t h;
        if (zh_server_read_hello(s, fd, &h) != 0) {
            close(fd);
            continue;
        }
        zh_sock_timeouts(fd, ZH_IO_TIMEOUT_MS);
        if (failed != ZC_OK) {
            zh_send_status(fd, ZH_MSG_TABLE, failed);
            close(fd);
            continue;
        }
        int st = zh_server_check(&h, have_first ? &first : NULL, conn);
        if (st != ZC_OK) {
            failed = st;
            zh_send_status(fd, ZH_MSG_TABLE, failed);
            close(fd);
            for (int r = 0; r < ZH_MAX_RANKS; r++) {
                if (conn[r] >= 0) {
                    zh_send_status(conn[r], ZH_MSG_TABLE, failed);
                    close(conn[r]);
                    conn[r] = -1;
                }
            }
            continue;
        }
        if (!have_first) {
            first = h;
            have_first = 1;
        }
        conn[h.rank] = fd;
        hello[h.rank] = h;
        joined++;
        if (joined == (int)first.nranks) {
            break;
        }
    }
    if (joined != (int)(have_first ? first.nranks : 0) || !have_first || failed != ZC_OK) {
        if (failed == ZC_OK && have_first) {
            ZC_WARN(ZC_SUB_BOOT, "root: only %d of %u ranks joined before the connect timeout",
                    joined, first.nranks);
        }
        for (int r = 0; r < ZH_MAX_RANKS; r++) {
            if (conn[r] >= 0) {
                zh_send_status(conn[r], ZH_MSG_TABLE, failed != ZC_OK ? failed : ZC_ERR_TIMEOUT);
                close(conn[r]);
            }
        }
        goto out;
    }
    /* Send the table, then collect one ready status from every rank. */
    int nr = (int)first.nranks;
    zh_boot_entry_t table[ZH_MAX_RANKS];
    for (int r = 0; r < nr; r++) {
        table[r] = hello[r].entry;
    }
    for (int r = 0; r < nr; r++) {
        zh_reply_t rep = {ZH_MSG_TABLE, ZC_OK, (uint32_t)nr, 0};
        if (zh_io_full(conn[r], &rep, sizeof(rep), 1) != ZC_OK ||
            zh_io_full(conn[r], table, sizeof(table[0]) * (size_t)nr, 1) != ZC_OK) {
            ZC_WARN(ZC_SUB_BOOT, "root: sending the table to rank %d failed", r);
            worst = ZC_ERR_REMOTE;
        }
    }
    int got[ZH_MAX_RANKS] = {0};
    int nready = 0;
    while (nready < nr && zc_time_ns() < s->deadline) {
        struct pollfd pfd[ZH_MAX_RANKS];
        int rank_of[ZH_MAX_RANKS];
        int n = 0;
        for (int r = 0; r < nr; r++) {
            if (!got[r]) {
                rank_of[n] = r;
                pfd[n++] = (struct pollfd){.fd = conn[r], .events = POLLIN};
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
            zh_reply_t rep;
            if (zh_io_full(conn[r], &rep, sizeof(rep), 0) != ZC_OK || rep.magic != ZH_MSG_READY) {
                ZC_WARN(ZC_SUB_BOOT, "root: rank %d left before reporting ready", r);
                rep.status = ZC_ERR_REMOTE;
            } else if (rep.status != ZC_OK) {
                ZC_WARN(ZC_SUB_BOOT, "root: rank %d reported init failure %d", r, rep.status);
            }
            if (rep.status != ZC_OK && worst == ZC_OK) {
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
    for (int r = 0; r < nr; r++) {
        zh_send_status(conn[r], ZH_MSG_GO, worst);
        close(conn[r]);
    }
out:
    close(s->lfd);
    free(s);
    return NULL;
}

int zh_boot_root_create(HcclRootInfo *info)
{
    const zc_config_t *cfg = zc_config();
    const char *ip = cfg->if_ip[0] != '\0' ? cfg->if_ip : "127.0.0.1";
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
        ZC_WARN(ZC_SUB_BOOT, "HCCL_IF_IP=\"%s\" is not an IPv4 address", ip);
        return ZC_ERR_INVAL;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ZC_WARN(ZC_SUB_BOOT, "root: socket() failed: %s", strerror(errno));
        return ZC_ERR_SYS;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 128) != 0) {
        ZC_WARN(ZC_SUB_BOOT, "root: bind/listen on %s failed: %s", ip, strerror(errno));
        close(fd);
        return ZC_ERR_CONNECT;
    }
    socklen_t len = sizeof(sa);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    zh_server_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        close(fd);
        return ZC_ERR_NOMEM;
    }
    s->lfd = fd;
    if (zc_random_bytes(s->uuid, sizeof(s->uuid)) != 0) {
        ZC_WARN(ZC_SUB_BOOT, "root: getrandom failed: %s", strerror(errno));
        close(fd);
        free(s);
        return ZC_ERR_SYS;
    }
    s->deadline = zc_time_ns() + cfg->connect_timeout_s * 1000000000ull;
    memset(info, 0, sizeof(*info));
    if (strlen(ip) >= ZH_RI_OFFSET) {
        ZC_WARN(ZC_SUB_BOOT, "HCCL_IF_IP=\"%s\" is too long", ip);
        close(fd);
        free(s);
        return ZC_ERR_INVAL;
    }
    memcpy(info->internal, ip, strlen(ip) + 1);
    zh_rootrec_t rec = {ZH_RI_MAGIC, ntohs(sa.sin_port), 0, (int32_t)getpid(), 0, zc_host_id(),
                        {0}};
    memcpy(rec.uuid, s->uuid, sizeof(rec.uuid));
    memcpy(info->internal + ZH_RI_OFFSET, &rec, sizeof(rec));
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &attr, zh_server_main, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        ZC_WARN(ZC_SUB_BOOT, "root: cannot start the listener thread: %s", strerror(rc));
        close(fd);
        free(s);
        return ZC_ERR_SYS;
    }
    ZC_INFO(ZC_SUB_BOOT, "root listener on %s:%u", ip, (unsigned)rec.port);
    return ZC_OK;
}

static int zh_boot_connect(const HcclRootInfo *info, const zh_rootrec_t *rec, uint64_t deadline,
                           int *out)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(rec->port);
    char ip[ZH_RI_OFFSET];
    memcpy(ip, info->internal, sizeof(ip));
    ip[sizeof(ip) - 1] = '\0';
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
        ZC_WARN(ZC_SUB_BOOT, "root info holds IP \"%s\", not an IPv4 address", ip);
        return ZC_ERR_INVAL;
    }
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            return ZC_ERR_SYS;
        }
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            *out = fd;
            return ZC_OK;
        }
        int e = errno;
        close(fd);
        if (zc_time_ns() > deadline) {
            ZC_WARN(ZC_SUB_BOOT, "cannot connect to the root at %s:%u: %s", ip,
                    (unsigned)rec->port, strerror(e));
            return ZC_ERR_CONNECT;
        }
        usleep(20000);
    }
}

int zh_boot_join(const HcclRootInfo *info, uint32_t nranks, uint32_t rank,
                 const zh_boot_entry_t *mine, uint64_t timeout_ns, zh_boot_t **boot,
                 zh_boot_entry_t *table)
{
    zh_rootrec_t rec;
    memcpy(&rec, info->internal + ZH_RI_OFFSET, sizeof(rec));
    if (rec.magic != ZH_RI_MAGIC || memchr(info->internal, '\0', ZH_RI_OFFSET) == NULL) {
        ZC_WARN(ZC_SUB_BOOT, "rank %u: root info is not from HcclGetRootInfo (magic 0x%08x)", rank,
                rec.magic);
        return ZC_ERR_INVAL;
    }
    if (rec.host_id != mine->host_id) {
        ZC_WARN(ZC_SUB_BOOT, "rank %u: the root is on another host: multi-host communicators "
                "are not supported", rank);
        return ZC_ERR_NOT_SUPPORT;
    }
    uint64_t deadline = zc_time_ns() + timeout_ns;
    int fd = -1;
    ZC_CHECK(zh_boot_connect(info, &rec, deadline, &fd));
    zh_sock_timeouts(fd, ZH_IO_TIMEOUT_MS);
    zh_hello_t h;
    memset(&h, 0, sizeof(h));
    h.magic = ZH_MSG_HELLO;
    h.version = ZH_BOOT_VERSION;
    memcpy(h.uuid, rec.uuid, sizeof(h.uuid));
    h.nranks = nranks;
    h.rank = rank;
    h.entry = *mine;
    if (zh_io_full(fd, &h, sizeof(h), 1) != ZC_OK) {
        ZC_WARN(ZC_SUB_BOOT, "rank %u: sending hello to the root failed", rank);
        close(fd);
        return ZC_ERR_IO;
    }
    /* The table comes when everyone joined: poll up to the deadline. */
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int64_t left_ms = (int64_t)(deadline - zc_time_ns()) / 1000000;
    if (left_ms < 0 || poll(&pfd, 1, (int)(left_ms > 0 ? left_ms : 0)) <= 0) {
        ZC_WARN(ZC_SUB_BOOT, "rank %u: not all %u ranks joined within %llu s (connect timeout)",
                rank, nranks, (unsigned long long)(timeout_ns / 1000000000ull));
        close(fd);
        return ZC_ERR_TIMEOUT;
    }
    zh_reply_t rep;
    if (zh_io_full(fd, &rep, sizeof(rep), 0) != ZC_OK || rep.magic != ZH_MSG_TABLE) {
        ZC_WARN(ZC_SUB_BOOT, "rank %u: the root closed the connection without a table", rank);
        close(fd);
        return ZC_ERR_IO;
    }
    if (rep.status != ZC_OK) {
        ZC_WARN(ZC_SUB_BOOT, "rank %u: the root refused the communicator: %s", rank,
                zc_status_str((zc_status_t)rep.status));
        close(fd);
        return rep.status;
    }
    if (rep.nranks != nranks ||
        zh_io_full(fd, table, sizeof(table[0]) * nranks, 0) != ZC_OK) {
        ZC_WARN(ZC_SUB_BOOT, "rank %u: bad table from the root (nranks %u)", rank, rep.nranks);
        close(fd);
        return ZC_ERR_IO;
    }
    *boot = malloc(sizeof(**boot));
    if (*boot == NULL) {
        close(fd);
        return ZC_ERR_NOMEM;
    }
    (*boot)->fd = fd;
    return ZC_OK;
}

int zh_boot_finish(zh_boot_t *boot, int my_status)
{
    zh_reply_t rep = {ZH_MSG_READY, my_status, 0, 0};
    int st = zh_io_full(boot->fd, &rep, sizeof(rep), 1);
    if (st == ZC_OK) {
        /* Everyone's attach may take a while (mapping); wait generously. */
        struct pollfd pfd = {.fd = boot->fd, .events = POLLIN};
        uint64_t cfg_ms = zc_config()->connect_timeout_s * 1000ull;
        if (poll(&pfd, 1, (int)(cfg_ms > INT32_MAX ? INT32_MAX : cfg_ms)) <= 0 ||
            zh_io_full(boot->fd, &rep, sizeof(rep), 0) != ZC_OK || rep.magic != ZH_MSG_GO) {
            ZC_WARN(ZC_SUB_BOOT, "no go from the root after init");
            st = ZC_ERR_IO;
        } else {
            st = rep.status;
        }
    }
    close(boot->fd);
    free(boot);
    return st;
}
