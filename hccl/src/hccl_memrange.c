/*
 * Zero-copy memory: ranges, activated blocks, shadow windows, translation.
 * (Ranges are per communicator here; HCCL documents them as visible to every
 * communicator of the process, a difference only a program that activates
 * on one comm and runs ops on another can see: it gets the buffered path.)
 *
 * Who exports: the rank that activates a block offers the block's memfd
 * (from its physical handle) through the broker to the pids of its
 * cross-process peers and publishes {va, size, token, generation} in its
 * control segment's region table. Who maps: each peer reserves a PROT_NONE
 * shadow window the size of every range of every cross-process peer (eagerly
 * in HcclCommSetMemoryRange, which is collective, or on first use) and maps a
 * block at the same offset in the window the first time an op touches it,
 * so a peer address translates as window + (va - range base). Generations
 * make a stale mapping unusable: a peer whose table changed since the last op
 * gets its stale mappings swept (PROT_NONE put back) before anything is
 * translated, and a block is re-mapped when its generation differs.
 * Same-process peers (ranks as threads) use addresses as they are.
 * Lifetime: Deactivate withdraws the offer (peers drop their mapping at their
 * next op or at destroy); the memory lives until the last mapping is gone.
 */
#include "hccl_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zc/log.h"
#include "zccl/vmm_ext.h"

static int zh_overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
    return a < b + bn && b < a + an;
}

static int zh_inside(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
    return a >= b && an <= bn && a - b <= bn - an;
}

int zh_mem_set_range(zh_comm_t *c, void *base, size_t size, size_t align, uint64_t flags)
{
    uint64_t b = (uint64_t)(uintptr_t)base;
    if (size == 0 || flags != 0 || align != 0) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: SetMemoryRange(base %p, size %zu, alignment %zu, flags "
                "0x%llx): size must be > 0, alignment and flags 0 (reserved)", c->rank, base, size,
                align, (unsigned long long)flags);
        return ZC_ERR_INVAL;
    }
    pthread_mutex_lock(&c->lock);
    int slot = -1;
    for (int i = 0; i < ZH_MAX_RANGES; i++) {
        zh_range_t *r = &c->ctrl->ranges[i];
        if (r->state == 1 && zh_overlap(b, size, r->base, r->size)) {
            ZC_WARN(ZC_SUB_ZCOPY, "rank %d: range [%p, +%zu) overlaps range [0x%llx, +%llu)",
                    c->rank, base, size, (unsigned long long)r->base,
                    (unsigned long long)r->size);
            pthread_mutex_unlock(&c->lock);
            return ZC_ERR_INVAL;
        }
        if (r->state == 0 && slot < 0) {
            slot = i;
        }
    }
    if (slot < 0) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: more than %d memory ranges on one communicator",
                c->rank, ZH_MAX_RANGES);
        pthread_mutex_unlock(&c->lock);
        return ZC_ERR_OVERLIMIT;
    }
    zh_table_begin(c);
    zh_range_t *r = &c->ctrl->ranges[slot];
    r->base = b;
    r->size = size;
    r->gen++;
    r->state = 1;
    zh_table_end(c);
    int first = !c->ranges_linked;
    c->ranges_linked = 1;
    pthread_mutex_unlock(&c->lock);
    /* As in HCCL, the first call on a comm is collective (every rank
     * publishes its range, then windows are reserved eagerly); later calls
     * are local, and peers reserve their windows at their next op. */
    if (!first) {
        return ZC_OK;
    }
    int st = zh_ctrl_barrier(c);
    if (st != ZC_OK) {
        return st;
    }
    pthread_mutex_lock(&c->lock);
    zh_mem_sweep_peers(c);
    pthread_mutex_unlock(&c->lock);
    return ZC_OK;
}

int zh_mem_unset_range(zh_comm_t *c, void *base)
{
    uint64_t b = (uint64_t)(uintptr_t)base;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < ZH_MAX_RANGES; i++) {
        zh_range_t *r = &c->ctrl->ranges[i];
        if (r->state != 1 || r->base != b) {
            continue;
        }
        for (int k = 0; k < ZH_MAX_REGIONS; k++) {
            zh_region_t *g = &c->ctrl->regions[k];
            if (g->state == 1 && g->range == (uint32_t)i) {
                ZC_WARN(ZC_SUB_ZCOPY, "rank %d: UnsetMemoryRange(%p): block %p is still active",
                        c->rank, base, (void *)(uintptr_t)g->va);
                pthread_mutex_unlock(&c->lock);
                return ZC_ERR_INVAL;
            }
        }
        zh_table_begin(c);
        r->state = 0;
        r->gen++;
        zh_table_end(c);
        pthread_mutex_unlock(&c->lock);
        return ZC_OK;
    }
    pthread_mutex_unlock(&c->lock);
    ZC_WARN(ZC_SUB_ZCOPY, "rank %d: UnsetMemoryRange(%p): no range starts there", c->rank, base);
    return ZC_ERR_NOT_FOUND;
}

int zh_mem_activate(zh_comm_t *c, void *va, size_t size, size_t offset, void *handle,
                    uint64_t flags)
{
    uint64_t v = (uint64_t)(uintptr_t)va;
    if (size == 0 || offset != 0 || flags != 0) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: ActivateCommMemory(%p, size %zu, offset %zu, flags "
                "0x%llx): size must be > 0, offset and flags 0", c->rank, va, size, offset,
                (unsigned long long)flags);
        return ZC_ERR_INVAL;
    }
    int fd = -1;
    size_t hsize = 0;
    if (zccl_phys_fd(handle, &fd, &hsize) != ZC_OK) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: ActivateCommMemory: handle %p is not a physical "
                "allocation", c->rank, handle);
        return ZC_ERR_INVAL;
    }
    if (size > hsize) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: ActivateCommMemory: size %zu exceeds the handle's %zu",
                c->rank, size, hsize);
        return ZC_ERR_INVAL;
    }
    pthread_mutex_lock(&c->lock);
    int range = -1;
    for (int i = 0; i < ZH_MAX_RANGES; i++) {
        zh_range_t *r = &c->ctrl->ranges[i];
        if (r->state == 1 && zh_inside(v, size, r->base, r->size)) {
            range = i;
        }
    }
    int slot = -1;
    int st = ZC_OK;
    if (range < 0) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: ActivateCommMemory: [%p, +%zu) is not inside a set range",
                c->rank, va, size);
        st = ZC_ERR_INVAL;
        goto out;
    }
    for (int k = 0; k < ZH_MAX_REGIONS; k++) {
        zh_region_t *g = &c->ctrl->regions[k];
        if (g->state == 1 && zh_overlap(v, size, g->va, g->size)) {
            ZC_WARN(ZC_SUB_ZCOPY, "rank %d: ActivateCommMemory: [%p, +%zu) overlaps active "
                    "block [0x%llx, +%llu)", c->rank, va, size, (unsigned long long)g->va,
                    (unsigned long long)g->size);
            st = ZC_ERR_INVAL;
            goto out;
        }
        if (g->state == 0 && slot < 0) {
            slot = k;
        }
    }
    if (slot < 0) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: more than %d active blocks", c->rank, ZH_MAX_REGIONS);
        st = ZC_ERR_OVERLIMIT;
        goto out;
    }
    uint64_t token = 0;
    int32_t pids[ZH_MAX_RANKS];
    size_t npids = 0;
    for (int r = 0; r < c->nranks; r++) {
        if (!c->peers[r].same_proc) {
            pids[npids++] = c->peers[r].pid;
        }
    }
    if (npids > 0) {
        st = zccl_broker_offer(fd, hsize, 1, &token);
        if (st == ZC_OK) {
            st = zccl_broker_allow(token, pids, npids);
        }
        if (st != ZC_OK) {
            goto out;
        }
    }
    c->region_token[slot] = token;
    zh_table_begin(c);
    zh_region_t *g = &c->ctrl->regions[slot];
    g->va = v;
    g->size = size;
    g->token = token;
    g->range = (uint32_t)range;
    g->gen++;
    g->state = 1;
    zh_table_end(c);
out:
    pthread_mutex_unlock(&c->lock);
    return st;
}

int zh_mem_deactivate(zh_comm_t *c, void *va)
{
    uint64_t v = (uint64_t)(uintptr_t)va;
    pthread_mutex_lock(&c->lock);
    for (int k = 0; k < ZH_MAX_REGIONS; k++) {
        zh_region_t *g = &c->ctrl->regions[k];
        if (g->state != 1 || g->va != v) {
            continue;
        }
        zh_table_begin(c);
        g->state = 0;
        g->gen++;
        zh_table_end(c);
        if (c->region_token[k] != 0) {
            (void)zccl_broker_withdraw(c->region_token[k]);
        }
        c->region_token[k] = 0;
        pthread_mutex_unlock(&c->lock);
        return ZC_OK;
    }
    pthread_mutex_unlock(&c->lock);
    ZC_WARN(ZC_SUB_ZCOPY, "rank %d: DeactivateCommMemory(%p): no active block starts there",
            c->rank, va);
    return ZC_ERR_NOT_FOUND;
}

int zh_mem_local_covers(zh_comm_t *c, uint64_t va, uint64_t bytes)
{
    if (bytes == 0) {
        return 1;
    }
    for (int k = 0; k < ZH_MAX_REGIONS; k++) {
        zh_region_t *g = &c->ctrl->regions[k];
        if (g->state == 1 && zh_inside(va, bytes, g->va, g->size)) {
            return 1;
        }
    }
    return 0;
}

/* Put PROT_NONE back over a mapping inside a window (keeps the reservation). */
static void zh_mem_unmap_in_window(void *addr, uint64_t size)
{
    void *p = mmap(addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                   -1, 0);
    (void)p;
}

/* Copy a peer's tables consistently (seqlock read). */
static void zh_mem_read_table(const zh_ctrl_t *pc, zh_range_t *ranges, zh_region_t *regions,
                              uint32_t *version)
{
    for (;;) {
        uint32_t v1 = atomic_load_explicit(&pc->table.value, memory_order_acquire);
        if (v1 & 1u) {
            continue;
        }
        memcpy(ranges, pc->ranges, sizeof(pc->ranges));
        memcpy(regions, pc->regions, sizeof(pc->regions));
        if (atomic_load_explicit(&pc->table.value, memory_order_seq_cst) == v1) {
            *version = v1;
            return;
        }
    }
}

/* Bring my windows of peer q in line with its current table. Call with the
 * comm lock held. */
static void zh_mem_sweep_peer(zh_comm_t *c, int q)
{
    zh_peer_t *p = &c->peers[q];
    /* Fast path of every op: the peer's table did not change. */
    if (atomic_load_explicit(&p->ctrl->table.value, memory_order_acquire) == p->table_seen) {
        return;
    }
    zh_range_t ranges[ZH_MAX_RANGES];
    zh_region_t regions[ZH_MAX_REGIONS];
    uint32_t version = 0;
    zh_mem_read_table(p->ctrl, ranges, regions, &version);
    /* Drop mappings of blocks that changed, then windows of ranges that did. */
    for (int k = 0; k < ZH_MAX_REGIONS; k++) {
        if (p->map_gen[k] == 0) {
            continue;
        }
        uint32_t ri = p->map_range[k];
        int stale = regions[k].state != 1 || regions[k].gen != p->map_gen[k] ||
                    p->win_gen[ri] != ranges[ri].gen || ranges[ri].state != 1;
        if (stale) {
            if (p->win[ri] != NULL && p->win_gen[ri] == ranges[ri].gen) {
                zh_mem_unmap_in_window((char *)p->win[ri] + (p->map_va[k] - ranges[ri].base),
                                       p->map_size[k]);
            }
            p->map_gen[k] = 0;
        }
    }
    for (int i = 0; i < ZH_MAX_RANGES; i++) {
        int want = ranges[i].state == 1;
        if (p->win[i] != NULL && (!want || p->win_gen[i] != ranges[i].gen)) {
            munmap(p->win[i], p->win_size[i]);
            p->win[i] = NULL;
            p->win_gen[i] = 0;
        }
        if (want && p->win[i] == NULL) {
            void *w = mmap(NULL, ranges[i].size, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (w == MAP_FAILED) {
                ZC_WARN(ZC_SUB_ZCOPY, "rank %d: cannot reserve a %llu-byte shadow window for "
                        "rank %d: %s", c->rank, (unsigned long long)ranges[i].size, q,
                        strerror(errno));
                return; /* table_seen unchanged: retried at the next op */
            }
            p->win[i] = w;
            p->win_gen[i] = ranges[i].gen;
            p->win_size[i] = ranges[i].size;
        }
    }
    p->table_seen = version;
}

void zh_mem_sweep_peers(zh_comm_t *c)
{
    for (int q = 0; q < c->nranks; q++) {
        if (q != c->rank && !c->peers[q].same_proc) {
            zh_mem_sweep_peer(c, q);
        }
    }
}

int zh_mem_translate(zh_comm_t *c, int q, uint64_t va, uint64_t bytes, void **out)
{
    zh_peer_t *p = &c->peers[q];
    if (q == c->rank || p->same_proc) {
        *out = (void *)(uintptr_t)va;
        return ZC_OK;
    }
    if (bytes == 0) {
        *out = NULL;
        return ZC_OK;
    }
    pthread_mutex_lock(&c->lock);
    zh_mem_sweep_peer(c, q);
    const zh_ctrl_t *pc = p->ctrl;
    int st = ZC_ERR_NOT_FOUND;
    /* Ops reuse the same few blocks: try the last block that matched first. */
    for (int i = 0; i <= ZH_MAX_REGIONS; i++) {
        int k = i == 0 ? (int)p->last_region : i - 1;
        if (i > 0 && k == (int)p->last_region) {
            continue;
        }
        zh_region_t g = pc->regions[k];
        if (g.state != 1 || !zh_inside(va, bytes, g.va, g.size)) {
            continue;
        }
        zh_range_t r = pc->ranges[g.range];
        if (p->win[g.range] == NULL || p->win_gen[g.range] != r.gen) {
            st = ZC_ERR_INTERNAL;
            break;
        }
        char *slot = (char *)p->win[g.range] + (g.va - r.base);
        if (p->map_gen[k] != g.gen) {
            int fd = -1;
            size_t fsz = 0;
            st = zccl_broker_fetch(g.token, &fd, &fsz);
            if (st != ZC_OK) {
                break;
            }
            void *m = mmap(slot, g.size, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, 0);
            close(fd);
            if (m == MAP_FAILED) {
                ZC_WARN(ZC_SUB_ZCOPY, "rank %d: mapping rank %d's block 0x%llx (+%llu) failed: %s",
                        c->rank, q, (unsigned long long)g.va, (unsigned long long)g.size,
                        strerror(errno));
                st = ZC_ERR_NOMEM;
                break;
            }
            p->map_gen[k] = g.gen;
            p->map_range[k] = g.range;
            p->map_va[k] = g.va;
            p->map_size[k] = g.size;
        }
        *out = slot + (va - g.va);
        p->last_region = (uint32_t)k;
        st = ZC_OK;
        break;
    }
    pthread_mutex_unlock(&c->lock);
    if (st == ZC_ERR_NOT_FOUND) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: rank %d's buffer 0x%llx (+%llu) is not in an active block",
                c->rank, q, (unsigned long long)va, (unsigned long long)bytes);
    }
    return st;
}

void zh_mem_release_all(zh_comm_t *c)
{
    pthread_mutex_lock(&c->lock);
    for (int q = 0; q < c->nranks; q++) {
        zh_peer_t *p = &c->peers[q];
        for (int i = 0; i < ZH_MAX_RANGES; i++) {
            if (p->win[i] != NULL) {
                munmap(p->win[i], p->win_size[i]);
                p->win[i] = NULL;
            }
        }
        memset(p->map_gen, 0, sizeof(p->map_gen));
    }
    for (int k = 0; k < ZH_MAX_REGIONS; k++) {
        if (c->region_token[k] != 0) {
            (void)zccl_broker_withdraw(c->region_token[k]);
        }
    }
    memset(c->region_token, 0, sizeof(c->region_token));
    pthread_mutex_unlock(&c->lock);
}
