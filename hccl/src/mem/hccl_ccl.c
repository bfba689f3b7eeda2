/*
 * CCL buffers of the buffered path.
 *
 * Created on first use, inside the first op that all ranks agreed to run
 * buffered (so creation is collective without a separate round): each rank
 * creates a memfd of HCCL_BUFFSIZE (or hcclBufferSize) MB, offers it to its
 * peers' pids through the broker and publishes the token in its control
 * segment; after a barrier every rank maps every peer's buffer. The usable
 * size is the smallest of all ranks', so chunk loops agree. Lifetime: until
 * HcclCommDestroy. A comm that only ever runs zero-copy never creates one.
 */
#include "core/hccl_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zc/log.h"
#include "zccl/vmm_ext.h"

int zh_ccl_ensure(zh_comm_t *c)
{
    if (c->ccl_local != NULL) {
        return ZC_OK;
    }
    size_t sz = (size_t)c->buffsize;
    int st = ZC_OK;
    int fd = memfd_create("zccl-ccl", MFD_CLOEXEC);
    void *m = MAP_FAILED;
    uint64_t token = 0;
    if (fd < 0 || ftruncate(fd, (off_t)sz) != 0) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: cannot create a %zu-byte CCL buffer: %s", c->rank, sz,
                strerror(errno));
        st = ZC_ERR_NOMEM;
        goto fail;
    }
    m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: cannot map the %zu-byte CCL buffer: %s", c->rank, sz,
                strerror(errno));
        st = ZC_ERR_NOMEM;
        goto fail;
    }
    ZC_CHECK_GOTO(zccl_broker_offer(fd, sz, 1, &token), st, fail);
    ZC_CHECK_GOTO(zccl_broker_allow(token, c->peer_pids, c->npeer_pids), st, fail);
    c->ctrl->ccl_token = token;
    c->ctrl->ccl_bytes = sz;
    ZC_CHECK_GOTO(zh_barrier(c), st, fail);
    size_t common = sz;
    for (int r = 0; r < c->nranks; r++) {
        zh_peer_t *p = &c->peers[r];
        if (r == c->rank) {
            p->ccl = m;
            continue;
        }
        int pfd = -1;
        size_t psz = 0;
        ZC_CHECK_GOTO(zccl_broker_fetch(p->ctrl->ccl_token, &pfd, &psz), st, fail);
        p->ccl = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
        close(pfd);
        if (p->ccl == MAP_FAILED) {
            p->ccl = NULL;
            ZC_WARN(ZC_SUB_COMM, "rank %d: cannot map rank %d's CCL buffer (%zu bytes)", c->rank, r,
                    psz);
            st = ZC_ERR_NOMEM;
            goto fail;
        }
        common = ZC_MIN(common, psz);
    }
    c->ccl_fd = fd;
    c->ccl_local = m;
    c->ccl_bytes = common;
    ZC_INFO(ZC_SUB_COMM, "rank %d: CCL buffer of %zu bytes created", c->rank, sz);
    return ZC_OK;
fail:
    for (int r = 0; r < c->nranks; r++) {
        if (r != c->rank && c->peers[r].ccl != NULL) {
            munmap(c->peers[r].ccl, c->peers[r].ctrl->ccl_bytes);
        }
        c->peers[r].ccl = NULL;
    }
    if (token != 0) {
        (void)zccl_broker_withdraw(token);
    }
    if (m != MAP_FAILED) {
        munmap(m, sz);
    }
    if (fd >= 0) {
        close(fd);
    }
    return st;
}

void zh_ccl_release(zh_comm_t *c)
{
    if (c->ccl_local == NULL) {
        return;
    }
    for (int r = 0; r < c->nranks; r++) {
        zh_peer_t *p = &c->peers[r];
        if (r != c->rank && p->ccl != NULL && p->ctrl != NULL) {
            munmap(p->ccl, p->ctrl->ccl_bytes);
        }
        p->ccl = NULL;
    }
    if (c->ctrl->ccl_token != 0) {
        (void)zccl_broker_withdraw(c->ctrl->ccl_token);
    }
    munmap(c->ccl_local, (size_t)c->ctrl->ccl_bytes);
    close(c->ccl_fd);
    c->ccl_local = NULL;
    c->ccl_fd = -1;
}
