/*
 * Zero-copy memory: the process's ranges and activated blocks.
 *
 * Visibility: as CANN documents, a range set through any communicator is
 * visible to every communicator of the process, and so is a block activated
 * through any of them. The process keeps one table (ranges, blocks, each with
 * a generation); every live communicator's control segment holds a copy of
 * it, rewritten (under that segment's seqlock) whenever it changes and when a
 * communicator is created. So a framework with several process groups
 * registers its pool once, and ops on every group see the same blocks.
 *
 * Who exports: one broker offer per block, made at activation; every
 * cross-process peer's pid (of every communicator, present or created later)
 * is on its allow list.
 * Who maps: each peer, per communicator, in its shadow windows of our ranges
 * (hccl_memwin.c), from the copy of the table in that communicator's segment.
 * Lifetime: Deactivate withdraws the offer (peers drop their mapping at their
 * next op); when the last communicator of the process is destroyed the table
 * is cleared, as no call could reach it any more.
 *
 * Rules checked here: a range lies inside one aclrtReserveMemAddress
 * reservation, starts on a page and does not wrap; alignment and flags are
 * reserved (a framework passes flags 1): nonzero values are logged at info
 * and ignored. A block must be exactly what the runtime maps there: the
 * handle's mapping starts at the block's address (offset 0) and covers it.
 */
#include "core/hccl_internal.h"

#include <string.h>
#include <unistd.h>

#include "zc/log.h"
#include "zccl/vmm_ext.h"

#define ZH_PM_MAX_COMMS 1024

typedef struct {
    pthread_mutex_t lock;
    zh_range_t ranges[ZH_MAX_RANGES];
    zh_block_t blocks[ZH_MAX_BLOCKS];
    aclrtDrvMemHandle handle[ZH_MAX_BLOCKS];
    uint16_t sorted[ZH_MAX_BLOCKS]; /* active block indices by address */
    int nsorted;
    _Atomic uint64_t sorted_gen;       /* bumped whenever sorted[] changes */
    zh_comm_t *comms[ZH_PM_MAX_COMMS]; /* attached communicators */
    int ncomms;
} zh_pm_t;

static zh_pm_t zh_pm = {.lock = PTHREAD_MUTEX_INITIALIZER, .sorted_gen = 1};

/* Each thread remembers the last extents zh_mem_local_covers found covered,
 * with the table's generation then, so an op on the same buffers as the
 * last one is checked without the table lock (two extents: send and recv). */
typedef struct {
    uint64_t gen, lo, hi;
} zh_cover_t;

static _Thread_local zh_cover_t zh_cover_cache[2];
static _Thread_local unsigned zh_cover_next;
static pthread_once_t zh_pm_once = PTHREAD_ONCE_INIT;

/* A child forked while another thread held the table lock must not inherit
 * it locked (its communicators are unusable, but destroying them must not
 * hang). */
static void zh_pm_fork_prepare(void)
{
    pthread_mutex_lock(&zh_pm.lock);
}

static void zh_pm_fork_release(void)
{
    pthread_mutex_unlock(&zh_pm.lock);
}

static void zh_pm_init(void)
{
    (void)pthread_atfork(zh_pm_fork_prepare, zh_pm_fork_release, zh_pm_fork_release);
}

static int zh_overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
    return a < b + bn && b < a + an;
}

static int zh_inside(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
    return a >= b && an <= bn && a - b <= bn - an;
}

/* Copy the table into every attached communicator's segment. Lock held. */
static void zh_pm_publish(void)
{
    for (int i = 0; i < zh_pm.ncomms; i++) {
        zh_comm_t *c = zh_pm.comms[i];
        pthread_mutex_lock(&c->lock);
        zh_table_begin(c);
        memcpy(c->ctrl->ranges, zh_pm.ranges, sizeof(zh_pm.ranges));
        memcpy(c->ctrl->blocks, zh_pm.blocks, sizeof(zh_pm.blocks));
        zh_table_end(c);
        pthread_mutex_unlock(&c->lock);
    }
}

static void zh_pm_sort(void)
{
    int n = 0;
    for (int k = 0; k < ZH_MAX_BLOCKS; k++) {
        if (zh_pm.blocks[k].state != ZH_ENTRY_LIVE) {
            continue;
        }
        int j = n++;
        while (j > 0 && zh_pm.blocks[zh_pm.sorted[j - 1]].va > zh_pm.blocks[k].va) {
            zh_pm.sorted[j] = zh_pm.sorted[j - 1];
            j--;
        }
        zh_pm.sorted[j] = (uint16_t)k;
    }
    zh_pm.nsorted = n;
    atomic_fetch_add_explicit(&zh_pm.sorted_gen, 1, memory_order_release);
}

/* Let c's cross-process peers fetch block k (offered at activation). */
static int zh_pm_allow(zh_comm_t *c, int k)
{
    return c->nxproc_pids == 0
               ? ZC_OK
               : zccl_broker_allow(zh_pm.blocks[k].token, c->xproc_pids, c->nxproc_pids);
}

int zh_mem_attach(zh_comm_t *c)
{
    int st = ZC_OK;
    pthread_once(&zh_pm_once, zh_pm_init);
    pthread_mutex_lock(&zh_pm.lock);
    if (zh_pm.ncomms == ZH_PM_MAX_COMMS) {
        st = ZC_ERR_OVERLIMIT;
    }
    for (int k = 0; k < ZH_MAX_BLOCKS && st == ZC_OK; k++) {
        if (zh_pm.blocks[k].state == ZH_ENTRY_LIVE) {
            st = zh_pm_allow(c, k);
        }
    }
    if (st == ZC_OK) {
        zh_pm.comms[zh_pm.ncomms++] = c;
        c->mem_attached = 1;
        zh_table_begin(c);
        memcpy(c->ctrl->ranges, zh_pm.ranges, sizeof(zh_pm.ranges));
        memcpy(c->ctrl->blocks, zh_pm.blocks, sizeof(zh_pm.blocks));
        zh_table_end(c);
    }
    pthread_mutex_unlock(&zh_pm.lock);
    return st;
}

void zh_mem_detach(zh_comm_t *c)
{
    pthread_mutex_lock(&zh_pm.lock);
    for (int i = 0; i < zh_pm.ncomms && c->mem_attached; i++) {
        if (zh_pm.comms[i] == c) {
            zh_pm.comms[i] = zh_pm.comms[--zh_pm.ncomms];
            c->mem_attached = 0;
        }
    }
    if (zh_pm.ncomms == 0) {
        for (int k = 0; k < ZH_MAX_BLOCKS; k++) {
            if (zh_pm.blocks[k].token != 0) {
                (void)zccl_broker_withdraw(zh_pm.blocks[k].token);
            }
            zh_pm.blocks[k].token = 0;
            zh_pm.blocks[k].state = ZH_ENTRY_FREE;
        }
        for (int i = 0; i < ZH_MAX_RANGES; i++) {
            zh_pm.ranges[i].state = ZH_ENTRY_FREE;
        }
        zh_pm.nsorted = 0;
        atomic_fetch_add_explicit(&zh_pm.sorted_gen, 1, memory_order_release);
    }
    pthread_mutex_unlock(&zh_pm.lock);
}

static int zh_mem_range_check(zh_comm_t *c, void *base, size_t size, size_t align, uint64_t flags)
{
    uint64_t b = (uint64_t)(uintptr_t)base;
    long page = sysconf(_SC_PAGESIZE);
    zccl_vmm_info_t vi;
    if (size == 0 || size > UINT64_MAX - b) {
        ZC_WARN(ZC_SUB_ZCOPY,
                "rank %d: SetMemoryRange(base %p, size %zu): size must be > 0 and "
                "not wrap the address space",
                c->rank, base, size);
        return ZC_ERR_INVAL;
    }
    if (b % (uint64_t)page != 0) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: SetMemoryRange(base %p): base is not page aligned", c->rank,
                base);
        return ZC_ERR_INVAL;
    }
    if (zccl_vmm_query(base, &vi) != ZC_OK ||
        !zh_inside(b, size, (uint64_t)vi.resv_base, (uint64_t)vi.resv_size)) {
        ZC_WARN(ZC_SUB_ZCOPY,
                "rank %d: SetMemoryRange(base %p, size %zu): not inside one "
                "reservation made by aclrtReserveMemAddress",
                c->rank, base, size);
        return ZC_ERR_INVAL;
    }
    if (align != 0 || flags != 0) {
        ZC_INFO(ZC_SUB_ZCOPY,
                "rank %d: SetMemoryRange(base %p): reserved alignment %zu / flags "
                "0x%llx ignored",
                c->rank, base, align, (unsigned long long)flags);
    }
    return ZC_OK;
}

int zh_mem_set_range(zh_comm_t *c, void *base, size_t size, size_t align, uint64_t flags)
{
    uint64_t b = (uint64_t)(uintptr_t)base;
    int st = zh_mem_range_check(c, base, size, align, flags);
    if (st != ZC_OK) {
        return st;
    }
    pthread_mutex_lock(&zh_pm.lock);
    int slot = -1;
    for (int i = 0; i < ZH_MAX_RANGES; i++) {
        zh_range_t *r = &zh_pm.ranges[i];
        if (r->state == ZH_ENTRY_LIVE && zh_overlap(b, size, r->base, r->size)) {
            ZC_WARN(ZC_SUB_ZCOPY, "rank %d: range [%p, +%zu) overlaps range [0x%llx, +%llu)",
                    c->rank, base, size, (unsigned long long)r->base, (unsigned long long)r->size);
            pthread_mutex_unlock(&zh_pm.lock);
            return ZC_ERR_INVAL;
        }
        if (r->state == ZH_ENTRY_FREE && slot < 0) {
            slot = i;
        }
    }
    if (slot < 0) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: more than %d memory ranges in one process", c->rank,
                ZH_MAX_RANGES);
        pthread_mutex_unlock(&zh_pm.lock);
        return ZC_ERR_OVERLIMIT;
    }
    zh_range_t *r = &zh_pm.ranges[slot];
    r->base = b;
    r->size = size;
    r->gen++;
    r->state = ZH_ENTRY_LIVE;
    zh_pm_publish();
    pthread_mutex_unlock(&zh_pm.lock);
    pthread_mutex_lock(&c->lock);
    int first = !c->ranges_linked;
    c->ranges_linked = 1;
    pthread_mutex_unlock(&c->lock);
    /* As in HCCL, the first call on a comm is collective (every rank
     * publishes its range, then windows are reserved eagerly); later calls
     * are local, and peers reserve their windows at their next op. */
    if (!first) {
        return ZC_OK;
    }
    st = zh_ctrl_barrier(c);
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
    pthread_mutex_lock(&zh_pm.lock);
    for (int i = 0; i < ZH_MAX_RANGES; i++) {
        zh_range_t *r = &zh_pm.ranges[i];
        if (r->state != ZH_ENTRY_LIVE || r->base != b) {
            continue;
        }
        for (int k = 0; k < ZH_MAX_BLOCKS; k++) {
            zh_block_t *g = &zh_pm.blocks[k];
            if (g->state == ZH_ENTRY_LIVE && g->range == (uint32_t)i) {
                ZC_WARN(ZC_SUB_ZCOPY, "rank %d: UnsetMemoryRange(%p): block %p is still active",
                        c->rank, base, (void *)(uintptr_t)g->va);
                pthread_mutex_unlock(&zh_pm.lock);
                return ZC_ERR_INVAL;
            }
        }
        r->state = ZH_ENTRY_FREE;
        r->gen++;
        zh_pm_publish();
        pthread_mutex_unlock(&zh_pm.lock);
        return ZC_OK;
    }
    pthread_mutex_unlock(&zh_pm.lock);
    ZC_WARN(ZC_SUB_ZCOPY, "rank %d: UnsetMemoryRange(%p): no range starts there", c->rank, base);
    return ZC_ERR_NOT_FOUND;
}

/* Is handle the allocation the runtime maps at va, from its offset 0, over
 * at least size bytes? Logs why not. */
static int zh_mem_handle_check(zh_comm_t *c, void *va, size_t size, void *handle)
{
    zccl_vmm_info_t vi;
    size_t hsize = 0;
    int fd = -1;
    if (zccl_phys_fd(handle, &fd, &hsize) != ZC_OK) {
        ZC_WARN(ZC_SUB_ZCOPY,
                "rank %d: ActivateCommMemory: handle %p is not a physical "
                "allocation",
                c->rank, handle);
        return ZC_ERR_INVAL;
    }
    if (size > hsize) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: ActivateCommMemory: size %zu exceeds the handle's %zu",
                c->rank, size, hsize);
        return ZC_ERR_INVAL;
    }
    if (zccl_vmm_query(va, &vi) != ZC_OK || vi.handle == NULL) {
        ZC_WARN(ZC_SUB_ZCOPY,
                "rank %d: ActivateCommMemory(%p): no physical memory is mapped "
                "there",
                c->rank, va);
        return ZC_ERR_INVAL;
    }
    if (vi.handle != handle) {
        ZC_WARN(ZC_SUB_ZCOPY,
                "rank %d: ActivateCommMemory(%p): handle %p is not the allocation "
                "mapped there (%p is)",
                c->rank, va, handle, vi.handle);
        return ZC_ERR_INVAL;
    }
    uint64_t off = (uint64_t)(uintptr_t)va - vi.map_va;
    if (off != 0 || size > vi.map_size) {
        ZC_WARN(ZC_SUB_ZCOPY,
                "rank %d: ActivateCommMemory(%p, size %zu): the address is at "
                "offset %llu of handle %p's mapping (+%zu at %p), not at its start",
                c->rank, va, size, (unsigned long long)off, handle, vi.map_size, (void *)vi.map_va);
        return ZC_ERR_INVAL;
    }
    return ZC_OK;
}

/* The free block slot for [v, +size) inside a set range, or an error. */
static int zh_mem_block_slot(zh_comm_t *c, uint64_t v, size_t size, int *range, int *slot)
{
    *range = -1;
    *slot = -1;
    for (int i = 0; i < ZH_MAX_RANGES; i++) {
        zh_range_t *r = &zh_pm.ranges[i];
        if (r->state == ZH_ENTRY_LIVE && zh_inside(v, size, r->base, r->size)) {
            *range = i;
        }
    }
    if (*range < 0) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: ActivateCommMemory: [%p, +%zu) is not inside a set range",
                c->rank, (void *)(uintptr_t)v, size);
        return ZC_ERR_INVAL;
    }
    for (int k = 0; k < ZH_MAX_BLOCKS; k++) {
        zh_block_t *g = &zh_pm.blocks[k];
        if (g->state == ZH_ENTRY_LIVE && zh_overlap(v, size, g->va, g->size)) {
            ZC_WARN(ZC_SUB_ZCOPY,
                    "rank %d: ActivateCommMemory: [%p, +%zu) overlaps active "
                    "block [0x%llx, +%llu)",
                    c->rank, (void *)(uintptr_t)v, size, (unsigned long long)g->va,
                    (unsigned long long)g->size);
            return ZC_ERR_INVAL;
        }
        if (g->state == ZH_ENTRY_FREE && *slot < 0) {
            *slot = k;
        }
    }
    if (*slot < 0) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: more than %d active blocks in one process", c->rank,
                ZH_MAX_BLOCKS);
        return ZC_ERR_OVERLIMIT;
    }
    return ZC_OK;
}

int zh_mem_activate(zh_comm_t *c, void *va, size_t size, size_t offset, void *handle,
                    uint64_t flags)
{
    uint64_t v = (uint64_t)(uintptr_t)va;
    if (size == 0 || offset != 0 || flags != 0) {
        ZC_WARN(ZC_SUB_ZCOPY,
                "rank %d: ActivateCommMemory(%p, size %zu, offset %zu, flags "
                "0x%llx): size must be > 0, offset and flags 0",
                c->rank, va, size, offset, (unsigned long long)flags);
        return ZC_ERR_INVAL;
    }
    int st = zh_mem_handle_check(c, va, size, handle);
    if (st != ZC_OK) {
        return st;
    }
    pthread_mutex_lock(&zh_pm.lock);
    int range = -1;
    int slot = -1;
    st = zh_mem_block_slot(c, v, size, &range, &slot);
    if (st == ZC_OK) {
        zh_block_t *g = &zh_pm.blocks[slot];
        g->va = v;
        g->size = size;
        g->token = 0;
        g->range = (uint32_t)range;
        zh_pm.handle[slot] = handle;
        /* Offered now, while the handle is surely alive: a communicator
         * created later (after the caller released the handle, which the
         * mapping keeps alive) only extends the allow list. */
        int fd = -1;
        size_t hsize = 0;
        st = zccl_phys_fd(handle, &fd, &hsize);
        if (st == ZC_OK) {
            st = zccl_broker_offer(fd, hsize, 1, &g->token);
        }
        for (int i = 0; i < zh_pm.ncomms && st == ZC_OK; i++) {
            st = zh_pm_allow(zh_pm.comms[i], slot);
        }
        if (st == ZC_OK) {
            g->gen++;
            g->state = ZH_ENTRY_LIVE;
            zh_pm_sort();
            zh_pm_publish();
        } else if (g->token != 0) {
            (void)zccl_broker_withdraw(g->token);
            g->token = 0;
        }
    }
    pthread_mutex_unlock(&zh_pm.lock);
    return st;
}

int zh_mem_deactivate(zh_comm_t *c, void *va)
{
    uint64_t v = (uint64_t)(uintptr_t)va;
    pthread_mutex_lock(&zh_pm.lock);
    for (int k = 0; k < ZH_MAX_BLOCKS; k++) {
        zh_block_t *g = &zh_pm.blocks[k];
        if (g->state != ZH_ENTRY_LIVE || g->va != v) {
            continue;
        }
        g->state = ZH_ENTRY_FREE;
        g->gen++;
        if (g->token != 0) {
            (void)zccl_broker_withdraw(g->token);
        }
        g->token = 0;
        zh_pm.handle[k] = NULL;
        zh_pm_sort();
        zh_pm_publish();
        pthread_mutex_unlock(&zh_pm.lock);
        return ZC_OK;
    }
    pthread_mutex_unlock(&zh_pm.lock);
    ZC_WARN(ZC_SUB_ZCOPY, "rank %d: DeactivateCommMemory(%p): no active block starts there",
            c->rank, va);
    return ZC_ERR_NOT_FOUND;
}

/* Index in sorted of the last active block starting at or below va, or -1. */
static int zh_pm_search(uint64_t va)
{
    int lo = 0;
    int hi = zh_pm.nsorted - 1;
    int found = -1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (zh_pm.blocks[zh_pm.sorted[mid]].va <= va) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found;
}

static int zh_cover_hit(uint64_t gen, uint64_t va, uint64_t bytes)
{
    for (int i = 0; i < 2; i++) {
        const zh_cover_t *e = &zh_cover_cache[i];
        if (e->gen == gen && va >= e->lo && va < e->hi && bytes <= e->hi - va) {
            return 1;
        }
    }
    return 0;
}

int zh_mem_local_covers(zh_comm_t *c, uint64_t va, uint64_t bytes)
{
    (void)c;
    if (bytes == 0) {
        return 1;
    }
    if (bytes > UINT64_MAX - va) {
        return 0;
    }
    uint64_t gen = atomic_load_explicit(&zh_pm.sorted_gen, memory_order_acquire);
    if (zh_cover_hit(gen, va, bytes)) {
        return 1;
    }
    uint64_t end = va + bytes;
    int ok = 0;
    pthread_mutex_lock(&zh_pm.lock);
    gen = atomic_load_explicit(&zh_pm.sorted_gen, memory_order_relaxed);
    int i = zh_pm_search(va);
    if (i >= 0) {
        /* Walk adjacent blocks of one range until the extent is covered. */
        const zh_block_t *g = &zh_pm.blocks[zh_pm.sorted[i]];
        uint32_t range = g->range;
        uint64_t lo = g->va;
        uint64_t cur = va;
        while (g->range == range && cur >= g->va && cur - g->va < g->size) {
            cur = g->va + g->size;
            if (cur >= end) {
                ok = 1;
                zh_cover_cache[zh_cover_next++ & 1u] = (zh_cover_t){gen, lo, cur};
                break;
            }
            if (++i == zh_pm.nsorted) {
                break;
            }
            g = &zh_pm.blocks[zh_pm.sorted[i]];
        }
    }
    pthread_mutex_unlock(&zh_pm.lock);
    return ok;
}

int zh_mem_range_covers(const void *va, size_t size)
{
    int found = 0;
    pthread_mutex_lock(&zh_pm.lock);
    for (int i = 0; i < ZH_MAX_RANGES; i++) {
        const zh_range_t *r = &zh_pm.ranges[i];
        found |=
            r->state == ZH_ENTRY_LIVE && zh_inside((uint64_t)(uintptr_t)va, size, r->base, r->size);
    }
    pthread_mutex_unlock(&zh_pm.lock);
    return found;
}

int zh_mem_block_find(const void *ptr, void **va, size_t *size, aclrtDrvMemHandle *handle)
{
    int st = ZC_ERR_NOT_FOUND;
    pthread_mutex_lock(&zh_pm.lock);
    int i = zh_pm_search((uint64_t)(uintptr_t)ptr);
    if (i >= 0) {
        int k = zh_pm.sorted[i];
        const zh_block_t *g = &zh_pm.blocks[k];
        if ((uint64_t)(uintptr_t)ptr - g->va < g->size) {
            *va = (void *)(uintptr_t)g->va;
            *size = g->size;
            *handle = zh_pm.handle[k];
            st = ZC_OK;
        }
    }
    pthread_mutex_unlock(&zh_pm.lock);
    return st;
}
