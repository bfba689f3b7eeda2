/*
 * CCL buffers: the buffered path's, and the hierarchical collectives'
 * scratch (op/hccl_op_path.c).
 *
 * Created on first use, inside the first op that all ranks agreed needs
 * them (a buffered op, or a hierarchical one: the choice is made from
 * values every rank shares, so creation is collective without a separate
 * round): each rank creates a memfd of HCCL_BUFFSIZE (or hcclBufferSize)
 * MB, offers it to its peers' pids through the broker and publishes the
 * token in its control segment; after a barrier every rank maps every
 * peer's buffer. The usable size is the smallest of all ranks', so chunk
 * loops agree. Sizes and tokens used to unmap and withdraw are this rank's
 * own copies, never read back from a control segment (peers can write
 * those). A failure breaks the comm (zh_comm_fail): the peers may already
 * be past the barrier, into a schedule this rank will not run. Lifetime:
 * until HcclCommDestroy. A comm that only ever runs flat zero-copy ops
 * never creates one.
 */
#include "core/hccl_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zc/log.h"
#include "zccl/vmm_ext.h"

/* Unmap the peers' buffers mapped so far. */
static void zh_ccl_unmap_peers(zh_comm_t *c)
{
    for (int r = 0; r < c->nranks; r++) {
        zh_peer_t *p = &c->peers[r];
        if (r != c->rank && p->ccl != NULL) {
            munmap(p->ccl, p->ccl_map);
        }
        p->ccl = NULL;
        p->ccl_map = 0;
    }
}

int zh_offer_buffer(zh_comm_t *c, const char *what, size_t sz, zh_offered_t *out)
{
    int fd = memfd_create(what, MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)sz) != 0) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: cannot create a %zu-byte %s buffer: %s", c->rank, sz, what,
                strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return ZC_ERR_NOMEM;
    }
    void *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    uint64_t token = 0;
    int st = m == MAP_FAILED ? ZC_ERR_NOMEM : zccl_broker_offer(fd, sz, 1, &token);
    if (st == ZC_OK) {
        st = zccl_broker_allow(token, c->peer_pids, c->npeer_pids);
    }
    if (st != ZC_OK) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: cannot map or offer the %zu-byte %s buffer (%d)", c->rank,
                sz, what, st);
        if (token != 0) {
            (void)zccl_broker_withdraw(token);
        }
        if (m != MAP_FAILED) {
            munmap(m, sz);
        }
        close(fd);
        return st;
    }
    *out = (zh_offered_t){fd, m, token};
    return ZC_OK;
}

/* My buffer of sz bytes, offered to my peers. */
static int zh_ccl_create(zh_comm_t *c, size_t sz)
{
    zh_offered_t o;
    ZC_CHECK(zh_offer_buffer(c, "zccl-ccl", sz, &o));
    c->ccl_fd = o.fd;
    c->ccl_local = o.map;
    c->ccl_local_bytes = sz;
    c->ccl_offer = o.token;
    return ZC_OK;
}

/* Map every peer's buffer by the token it published; the common size. */
static int zh_ccl_map_peers(zh_comm_t *c, size_t *common)
{
    for (int r = 0; r < c->nranks; r++) {
        zh_peer_t *p = &c->peers[r];
        if (r == c->rank) {
            p->ccl = c->ccl_local;
            continue;
        }
        int pfd = -1;
        size_t psz = 0;
        uint64_t token = *(volatile uint64_t *)&p->ctrl->ccl_token;
        int st = zccl_broker_fetch(token, &pfd, &psz);
        if (st != ZC_OK) {
            ZC_WARN(ZC_SUB_COMM, "rank %d: cannot fetch rank %d's CCL buffer (%d)", c->rank, r, st);
            return st == ZC_ERR_TIMEOUT ? st : ZC_ERR_REMOTE;
        }
        void *m = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
        close(pfd);
        if (m == MAP_FAILED) {
            ZC_WARN(ZC_SUB_COMM, "rank %d: cannot map rank %d's CCL buffer (%zu bytes)", c->rank, r,
                    psz);
            return ZC_ERR_NOMEM;
        }
        p->ccl = m;
        p->ccl_map = psz;
        *common = ZC_MIN(*common, psz);
    }
    return ZC_OK;
}

int zh_ccl_ensure(zh_comm_t *c)
{
    if (c->ccl_bytes != 0) {
        return ZC_OK;
    }
    size_t common = (size_t)c->buffsize;
    int st = zh_ccl_create(c, common); /* a failed set-up released everything */
    if (st == ZC_OK) {
        c->ctrl->ccl_token = c->ccl_offer;
        c->ctrl->ccl_bytes = common;
        st = zh_barrier(c);
    }
    if (st == ZC_OK) {
        st = zh_ccl_map_peers(c, &common);
    }
    if (st != ZC_OK) {
        zh_ccl_release(c);
        st = st == ZC_ERR_INVAL ? ZC_ERR_INTERNAL : st; /* not an agreed refusal (zh_op_exit) */
        zh_comm_fail(c, st);
        return st;
    }
    c->ccl_bytes = common;
    ZC_INFO(ZC_SUB_COMM, "rank %d: CCL buffer of %zu bytes created (%zu common)", c->rank,
            c->ccl_local_bytes, common);
    return ZC_OK;
}

void zh_ccl_release(zh_comm_t *c)
{
    zh_ccl_unmap_peers(c);
    if (c->ctrl != NULL) {
        c->ctrl->ccl_token = 0;
        c->ctrl->ccl_bytes = 0;
    }
    if (c->ccl_offer != 0) {
        (void)zccl_broker_withdraw(c->ccl_offer);
    }
    if (c->ccl_local != NULL) {
        munmap(c->ccl_local, c->ccl_local_bytes);
        close(c->ccl_fd);
    }
    c->ccl_local = NULL;
    c->ccl_local_bytes = 0;
    c->ccl_offer = 0;
    c->ccl_fd = -1;
    c->ccl_bytes = 0;
}
