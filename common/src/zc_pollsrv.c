/* A listener's pending clients, served by poll (zc/pollsrv.h). */
#include "zc/pollsrv.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zc/sync.h"

static zc_pend_t *zc_pend_at(const zc_pollsrv_t *s, int i)
{
    return (zc_pend_t *)(void *)((unsigned char *)s->pend + s->size * (size_t)i);
}

int zc_pollsrv_fds(const zc_pollsrv_t *s, struct pollfd *pfd)
{
    pfd[0] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
    for (int i = 0; i < s->npend; i++) {
        pfd[1 + i] = (struct pollfd){.fd = zc_pend_at(s, i)->fd, .events = POLLIN};
    }
    return 1 + s->npend;
}

int zc_pollsrv_wait_ms(const zc_pollsrv_t *s)
{
    if (s->ops->limit_ns == 0 || s->npend == 0) {
        return -1;
    }
    uint64_t now = zc_time_ns();
    uint64_t first = zc_pend_at(s, 0)->since + s->ops->limit_ns; /* the oldest's runs out first */
    return first <= now ? 0 : (int)((first - now) / 1000000ull) + 1;
}

void zc_pollsrv_sweep(zc_pollsrv_t *s, const struct pollfd *pfd)
{
    uint64_t now = s->ops->limit_ns != 0 ? zc_time_ns() : 0;
    int kept = 0;
    for (int i = 0; i < s->npend; i++) {
        zc_pend_t *p = zc_pend_at(s, i);
        int v = ZC_PEND_KEEP;
        if (pfd[1 + i].revents != 0) {
            v = s->ops->ready(s, p);
        } else if (s->ops->limit_ns != 0 && now >= p->since + s->ops->limit_ns) {
            if (s->ops->expired != NULL) {
                s->ops->expired(s, p);
            }
            v = ZC_PEND_CLOSE;
        }
        if (v == ZC_PEND_CLOSE) {
            close(p->fd);
        }
        if (v != ZC_PEND_KEEP) {
            continue;
        }
        if (kept != i) {
            memcpy(zc_pend_at(s, kept), p, s->size);
        }
        kept++;
    }
    s->npend = kept;
}

/* Close the oldest client and shift the rest down, when it is evict_ns old;
 * returns 0, or -1 when it may not go yet (or the table is empty). */
static int zc_pollsrv_evict(zc_pollsrv_t *s)
{
    zc_pend_t *oldest = zc_pend_at(s, 0);
    if (s->npend == 0 || zc_time_ns() - oldest->since < s->ops->evict_ns) {
        return -1;
    }
    close(oldest->fd);
    s->npend--;
    s->evicted++;
    memmove(oldest, zc_pend_at(s, 1), s->size * (size_t)s->npend);
    return 0;
}

/* Accept one client into a table that may hold cap: its fd, -2 when the
 * newcomer was closed (full), -1 when none can be taken now. */
static int zc_pollsrv_accept1(zc_pollsrv_t *s, int cap)
{
    int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    int err = fd < 0 ? errno : 0;
    if ((err == EMFILE || err == ENFILE) && zc_pollsrv_evict(s) == 0) {
        /* Out of descriptors all the same (other threads): one made. */
        fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    } else if (err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS) {
        if (s->ops->starved != NULL) {
            s->ops->starved(s, err);
        }
        usleep(10000); /* nothing to evict yet: the listener stays readable */
        return -1;
    }
    if (fd < 0) {
        return -1;
    }
    if (s->npend >= cap && zc_pollsrv_evict(s) != 0) {
        close(fd);
        return -2;
    }
    return fd;
}

void zc_pollsrv_accept(zc_pollsrv_t *s, const struct pollfd *pfd, int cap)
{
    if ((pfd[0].revents & POLLIN) == 0) {
        return;
    }
    for (;;) {
        int fd = zc_pollsrv_accept1(s, cap);
        if (fd == -2 && s->ops->full != NULL) {
            s->ops->full(s, cap);
        }
        if (fd == -1) {
            return;
        }
        if (fd >= 0) {
            s->ops->admit(s, fd);
        }
    }
}

void *zc_pollsrv_add(zc_pollsrv_t *s, int fd)
{
    zc_pend_t *p = zc_pend_at(s, s->npend++);
    memset(p, 0, s->size);
    p->fd = fd;
    p->since = zc_time_ns();
    return p;
}

void zc_pollsrv_close(zc_pollsrv_t *s)
{
    for (int i = 0; i < s->npend; i++) {
        close(zc_pend_at(s, i)->fd);
    }
}
