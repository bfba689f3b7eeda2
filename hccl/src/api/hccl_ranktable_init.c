/*
 * Rank-table init: HcclCommInitClusterInfo[Config] (the file is read and
 * checked by hccl_ranktable.c; a table naming several servers meets over
 * TCP, hccl_ranktable_net.c).
 *
 * Rendezvous on one server (the ranks start independently with only the
 * path and their rank): the table's rank 0 makes a root info
 * (hccl_boot_root.c) and serves it on the abstract Unix socket
 * "zccl-rt-<uid>-<hash of the file's bytes>"; the
 * others connect there (retrying until HCCL_CONNECT_TIMEOUT), check with
 * SO_PEERCRED that the server runs as their uid (the server checks theirs),
 * read the root info, and all run the root-info init. Rank 0 stops serving
 * when its init returns: by then every rank has joined.
 */
#include "boot/hccl_boot.h"
#include "boot/hccl_ranktable.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "zc/config.h"
#include "zc/log.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"

/* ---- rendezvous ------------------------------------------------------------ */

typedef struct {
    int fd;
    atomic_int stop;
    const HcclRootInfo *info;
} zh_rt_sock_t;

/* Abstract socket name: uid plus a 64-bit FNV-1a hash of the file's bytes. */
static socklen_t zh_rt_addr(const char *buf, long len, struct sockaddr_un *a)
{
    uint64_t h = 1469598103934665603ull;
    for (long i = 0; i < len; i++) {
        h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
    }
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "zccl-rt-%u-%016llx",
                     (unsigned)getuid(), (unsigned long long)h);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int zh_rt_peer_uid_ok(int fd)
{
    struct ucred cr;
    socklen_t l = sizeof(cr);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0 && cr.uid == getuid();
}

static void *zh_rt_serve(void *arg)
{
    zh_rt_sock_t *s = arg;
    while (!atomic_load_explicit(&s->stop, memory_order_acquire)) {
        struct pollfd p = {s->fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) {
            continue;
        }
        int cfd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0) {
            continue;
        }
        if (zh_rt_peer_uid_ok(cfd)) {
            /* 4108 bytes fit the socket buffer: this never blocks long. */
            struct timeval tv = {1, 0};
            (void)setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
            (void)send(cfd, s->info, sizeof(*s->info), MSG_NOSIGNAL);
        } else {
            ZC_INFO(ZC_SUB_INIT, "rank table rendezvous: dropped a client of another uid");
        }
        close(cfd);
    }
    return NULL;
}

static HcclResult zh_rt_root(const zh_rt_t *t, const struct sockaddr_un *a, socklen_t alen,
                             const HcclCommConfig *cfg, HcclComm *out)
{
    HcclRootInfo info;
    HcclResult r = zh_result(zh_boot_root_create(&info));
    if (r != HCCL_SUCCESS) {
        return r;
    }
    zh_rt_sock_t s = {socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), 0, &info};
    if (s.fd < 0 || bind(s.fd, (const struct sockaddr *)a, alen) != 0 || listen(s.fd, 64) != 0) {
        ZC_WARN(ZC_SUB_INIT,
                "rank table %s: rank 0 cannot serve the rendezvous socket @%s: %s "
                "(is a job with the same table already running?)",
                t->path, a->sun_path + 1, strerror(errno));
        if (s.fd >= 0) {
            close(s.fd);
        }
        return HCCL_E_UNAVAIL;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, zh_rt_serve, &s) != 0) {
        close(s.fd);
        ZC_WARN(ZC_SUB_INIT, "rank table %s: cannot start the rendezvous thread", t->path);
        return HCCL_E_SYSCALL;
    }
    r = zh_comm_init(t->nranks, &info, 0, cfg, out);
    atomic_store_explicit(&s.stop, 1, memory_order_release);
    pthread_join(th, NULL);
    close(s.fd);
    return r;
}

/* Connect to rank 0's socket until the connect timeout; read the root info. */
static HcclResult zh_rt_fetch(const zh_rt_t *t, uint32_t rank, const struct sockaddr_un *a,
                              socklen_t alen, HcclRootInfo *info)
{
    uint64_t limit = zc_config()->connect_timeout_s * 1000000000ull;
    uint64_t start = zc_time_ns();
    for (;;) {
        uint64_t left = limit - ZC_MIN(zc_time_ns() - start, limit);
        int fd = zh_sock_connect((const struct sockaddr *)a, alen, (int)(left / 1000000ull + 1));
        if (fd < 0 && errno != ECONNREFUSED && errno != ENOENT && errno != ETIMEDOUT &&
            errno != EAGAIN) {
            ZC_WARN(ZC_SUB_INIT, "rank %u: connect to @%s: %s", rank, a->sun_path + 1,
                    strerror(errno));
            return HCCL_E_SYSCALL;
        }
        if (fd >= 0) {
            if (!zh_rt_peer_uid_ok(fd)) {
                close(fd);
                ZC_WARN(ZC_SUB_INIT,
                        "rank %u: rank table %s: the rendezvous socket @%s is held "
                        "by another user",
                        rank, t->path, a->sun_path + 1);
                return HCCL_E_PARA;
            }
            struct timeval tv = {5, 0};
            (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            ssize_t n = recv(fd, info, sizeof(*info), MSG_WAITALL);
            close(fd);
            if (n == (ssize_t)sizeof(*info)) {
                return HCCL_SUCCESS;
            }
        }
        if (zc_time_ns() - start > limit) {
            ZC_WARN(ZC_SUB_INIT,
                    "rank %u: rank table %s: rank 0 did not publish its root info "
                    "within HCCL_CONNECT_TIMEOUT (%llu s)",
                    rank, t->path, (unsigned long long)(limit / 1000000000ull));
            return HCCL_E_TIMEOUT;
        }
        usleep(10000);
    }
}

/* The table's device_id takes precedence, as in CANN. */
static HcclResult zh_rt_device(const zh_rt_t *t, uint32_t rank)
{
    int dev = t->device[rank];
    if (zccl_current_device() != dev) {
        ZC_INFO(ZC_SUB_INIT, "rank %u: rank table %s: using device %d", rank, t->path, dev);
        if (aclrtSetDevice(dev) != ACL_SUCCESS) {
            ZH_RT_BAD(t, "rank %u: aclrtSetDevice(%d) failed", rank, dev);
            return HCCL_E_PARA;
        }
    }
    return HCCL_SUCCESS;
}

/* One server: the abstract socket named after the file's bytes. */
static HcclResult zh_rt_local_init(const zh_rt_t *t, const char *buf, long len, uint32_t rank,
                                   const HcclCommConfig *cfg, HcclComm *out)
{
    struct sockaddr_un a;
    socklen_t alen = zh_rt_addr(buf, len, &a);
    if (rank == 0) {
        return zh_rt_root(t, &a, alen, cfg, out);
    }
    HcclRootInfo info;
    HcclResult r = zh_rt_fetch(t, rank, &a, alen, &info);
    return r != HCCL_SUCCESS ? r : zh_comm_init(t->nranks, &info, rank, cfg, out);
}

/* Several servers: the root info over TCP (hccl_ranktable_net.c); rank 0
 * serves it until its init returns, when every rank has joined. */
static HcclResult zh_rt_net_init(const zh_rt_t *t, const char *buf, long len, uint32_t rank,
                                 const HcclCommConfig *cfg, HcclComm *out)
{
    HcclRootInfo info;
    zh_rt_srv_t *srv = NULL;
    HcclResult r = zh_rt_net_meet(t, buf, len, rank, &info, &srv);
    if (r == HCCL_SUCCESS) {
        r = zh_comm_init(t->nranks, &info, rank, cfg, out);
    }
    zh_rt_net_stop(srv);
    return r;
}

HcclResult zh_ranktable_init(const char *path, uint32_t rank, const HcclCommConfig *cfg,
                             HcclComm *out)
{
    if (path == NULL || out == NULL) {
        ZC_WARN(ZC_SUB_INIT, "HcclCommInitClusterInfo: clusterInfo %p or comm %p is NULL",
                (const void *)path, (void *)out);
        return HCCL_E_PTR;
    }
    if (strnlen(path, ZH_RT_PATH_MAX) >= ZH_RT_PATH_MAX) {
        ZC_WARN(ZC_SUB_INIT, "HcclCommInitClusterInfo: clusterInfo is %d bytes or longer",
                ZH_RT_PATH_MAX);
        return HCCL_E_PARA;
    }
    char *buf = NULL;
    long len = 0;
    int st = zh_rt_read(path, &buf, &len);
    if (st != ZC_OK) {
        return st == ZC_ERR_IO ? HCCL_E_OPEN_FILE_FAILURE : zh_result(st);
    }
    zh_rt_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        free(buf);
        return HCCL_E_MEMORY;
    }
    t->path = path;
    t->me = rank;
    st = zh_rt_parse(t, buf, len);
    if (st == ZC_OK && rank >= t->nranks) {
        ZH_RT_BAD(t, "rank %u is not in the table (%u ranks)", rank, t->nranks);
        st = ZC_ERR_INVAL;
    }
    HcclResult r = st != ZC_OK ? zh_result(st) : zh_rt_device(t, rank);
    if (r == HCCL_SUCCESS) {
        r = t->nservers > 1 ? zh_rt_net_init(t, buf, len, rank, cfg, out)
                            : zh_rt_local_init(t, buf, len, rank, cfg, out);
    }
    free(buf);
    free(t);
    return r;
}

ZC_EXPORT HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm)
{
    return zh_ranktable_init(clusterInfo, rank, NULL, comm);
}

ZC_EXPORT HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank,
                                                   HcclCommConfig *config, HcclComm *comm)
{
    if (config == NULL) {
        ZC_WARN(ZC_SUB_INIT, "%s: config is NULL", __func__);
        return HCCL_E_PTR;
    }
    return zh_ranktable_init(clusterInfo, rank, config, comm);
}
