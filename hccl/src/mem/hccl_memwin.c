/*
 * Zero-copy memory, the peer side: shadow windows and translation.
 *
 * Each rank reserves, per communicator and per cross-process peer, a
 * PROT_NONE shadow window the size of every range in that peer's table
 * (eagerly after the collective first HcclCommSetMemoryRange, else at the
 * first op that sees the range) and maps each of the peer's blocks at the
 * same offset in the window the first time an op touches it. So a peer
 * address translates as window + (va - range base), and a buffer spanning
 * several adjacent blocks of one range is contiguous in the window once each
 * block it touches is mapped: the whole extent translates at once.
 * Generations make a stale mapping unusable: a peer whose table changed
 * since the last op gets its stale mappings swept (PROT_NONE put back)
 * before anything is translated, and a block is re-mapped when its
 * generation differs. Same-process peers (ranks as threads) use addresses as
 * they are. Windows are per communicator: two communicators with the same
 * peer process reserve address space twice (no memory), which keeps every
 * window's lifetime that of its communicator.
 */
#include "core/hccl_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zc/log.h"
#include "zccl/vmm_ext.h"

static int zh_win_inside(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
    return a >= b && an <= bn && a - b <= bn - an;
}

/* Where a window starts. An AllReduce or AllGather streams through every
 * rank's buffer at the same offset at once, and on AMD Zen two lines whose
 * addresses agree in bits 12-27 cannot both sit in one L1 set: its way
 * predictor tells lines apart by a hash of those bits (the "utag"). Left to
 * the kernel, a window lands next to the caller's own reservation, a
 * multiple of 2 MiB away, where the peer's input can match this rank's
 * output in those bits (and always does at a multiple of 256 MiB), and the
 * two evict each other from L1. So peer q's window for range i starts
 * 37 x 2 MiB x slot (modulo 256 MiB) from this rank's own range i, slot =
 * 1..127 from q's distance to this rank: still 2 MiB aligned (huge pages
 * can map it), different for every peer up to 127, and an odd step, so it
 * lands on no small multiple of 2 MiB, where user buffers of a range
 * usually start. */
#define ZH_WIN_COLOR_SPAN ((uint64_t)1 << 28)
#define ZH_WIN_COLOR_STEP ((uint64_t)2 << 20)
#define ZH_WIN_COLORS (ZH_WIN_COLOR_SPAN / ZH_WIN_COLOR_STEP)
#define ZH_WIN_COLOR_ODD 37u

/* Reserve size bytes (PROT_NONE) for peer q's range i at its colour; NULL
 * with errno set when the address space is short. */
static void *zh_mem_reserve_window(const zh_comm_t *c, int q, int i, uint64_t size)
{
    uint64_t span = size + ZH_WIN_COLOR_SPAN;
    if (span < size || span > SIZE_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    char *w =
        mmap(NULL, (size_t)span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (w == MAP_FAILED) {
        return NULL;
    }
    const zh_range_t *own = &c->ctrl->ranges[i];
    uint64_t anchor = own->state == ZH_ENTRY_LIVE ? own->base : 0;
    uint64_t slot = (uint64_t)((q - c->rank + c->nranks) % c->nranks);
    uint64_t color = ((slot - 1) % (ZH_WIN_COLORS - 1) + 1) * ZH_WIN_COLOR_ODD * ZH_WIN_COLOR_STEP;
    uint64_t lead = (anchor + color - (uintptr_t)w) % ZH_WIN_COLOR_SPAN;
    if (lead > 0) {
        munmap(w, (size_t)lead);
    }
    if (span - lead > size) {
        munmap(w + lead + size, (size_t)(span - lead - size));
    }
    return w + lead;
}

/* Put PROT_NONE back over a mapping inside a window (keeps the reservation). */
static void zh_mem_unmap_in_window(void *addr, uint64_t size)
{
    void *p =
        mmap(addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    (void)p;
}

/* Copy a peer's tables consistently (seqlock read). */
static void zh_mem_read_table(const zh_ctrl_t *pc, zh_range_t *ranges, zh_block_t *blocks,
                              uint32_t *version)
{
    for (;;) {
        uint32_t v1 = atomic_load_explicit(&pc->table.value, memory_order_acquire);
        if (v1 & 1u) {
            continue;
        }
        memcpy(ranges, pc->ranges, sizeof(pc->ranges));
        memcpy(blocks, pc->blocks, sizeof(pc->blocks));
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
    zh_block_t blocks[ZH_MAX_BLOCKS];
    uint32_t version = 0;
    zh_mem_read_table(p->ctrl, ranges, blocks, &version);
    /* Drop mappings of blocks that changed, then windows of ranges that did. */
    for (int k = 0; k < ZH_MAX_BLOCKS; k++) {
        if (p->map_gen[k] == 0) {
            continue;
        }
        uint32_t ri = p->map_range[k];
        int stale = blocks[k].state != ZH_ENTRY_LIVE || blocks[k].gen != p->map_gen[k] ||
                    p->win_gen[ri] != ranges[ri].gen || ranges[ri].state != ZH_ENTRY_LIVE;
        if (stale) {
            if (p->win[ri] != NULL && p->win_gen[ri] == ranges[ri].gen) {
                zh_mem_unmap_in_window((char *)p->win[ri] + (p->map_va[k] - ranges[ri].base),
                                       p->map_size[k]);
            }
            p->map_gen[k] = 0;
        }
    }
    for (int i = 0; i < ZH_MAX_RANGES; i++) {
        int want = ranges[i].state == ZH_ENTRY_LIVE;
        if (p->win[i] != NULL && (!want || p->win_gen[i] != ranges[i].gen)) {
            munmap(p->win[i], p->win_size[i]);
            p->win[i] = NULL;
            p->win_gen[i] = 0;
        }
        if (want && p->win[i] == NULL) {
            void *w = zh_mem_reserve_window(c, q, i, ranges[i].size);
            if (w == NULL) {
                ZC_WARN(ZC_SUB_ZCOPY,
                        "rank %d: cannot reserve a %llu-byte shadow window for "
                        "rank %d: %s",
                        c->rank, (unsigned long long)ranges[i].size, q, strerror(errno));
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

/* The peer's active block holding address a, trying hint first; -1 if none. */
static int zh_mem_peer_block(const zh_ctrl_t *pc, uint64_t a, int hint)
{
    if (hint >= 0 && hint < ZH_MAX_BLOCKS && pc->blocks[hint].state == ZH_ENTRY_LIVE &&
        a - pc->blocks[hint].va < pc->blocks[hint].size && a >= pc->blocks[hint].va) {
        return hint;
    }
    for (int k = 0; k < ZH_MAX_BLOCKS; k++) {
        const zh_block_t *g = &pc->blocks[k];
        if (g->state == ZH_ENTRY_LIVE && a >= g->va && a - g->va < g->size) {
            return k;
        }
    }
    return -1;
}

/* Map peer block k into its window (if not mapped at this generation). */
static int zh_mem_map_block(zh_comm_t *c, int q, int k, const zh_block_t *g, char *win,
                            uint64_t base)
{
    zh_peer_t *p = &c->peers[q];
    if (p->map_gen[k] == g->gen) {
        return ZC_OK;
    }
    int fd = -1;
    size_t fsz = 0;
    int st = zccl_broker_fetch(g->token, &fd, &fsz);
    if (st != ZC_OK) {
        return st;
    }
    void *m = mmap(win + (g->va - base), g->size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: mapping rank %d's block 0x%llx (+%llu) failed: %s", c->rank,
                q, (unsigned long long)g->va, (unsigned long long)g->size, strerror(errno));
        return ZC_ERR_NOMEM;
    }
    p->map_gen[k] = g->gen;
    p->map_range[k] = g->range;
    p->map_va[k] = g->va;
    p->map_size[k] = g->size;
    return ZC_OK;
}

/* Translate under the comm lock: every block of one range that the extent
 * touches must be active; each is mapped, then the window is contiguous. */
static int zh_mem_translate_locked(zh_comm_t *c, int q, uint64_t va, uint64_t bytes, void **out)
{
    zh_peer_t *p = &c->peers[q];
    const zh_ctrl_t *pc = p->ctrl;
    int k = zh_mem_peer_block(pc, va, (int)p->last_block);
    if (k < 0 || bytes > UINT64_MAX - va) {
        return ZC_ERR_NOT_FOUND;
    }
    zh_block_t g = pc->blocks[k];
    uint32_t ri = g.range;
    zh_range_t r = pc->ranges[ri];
    if (!zh_win_inside(va, bytes, r.base, r.size)) {
        return ZC_ERR_NOT_FOUND;
    }
    if (p->win[ri] == NULL || p->win_gen[ri] != r.gen) {
        return ZC_ERR_INTERNAL;
    }
    char *win = p->win[ri];
    p->last_block = (uint32_t)k;
    uint64_t end = va + bytes;
    for (;;) {
        int st = zh_mem_map_block(c, q, k, &g, win, r.base);
        if (st != ZC_OK) {
            return st;
        }
        uint64_t next = g.va + g.size;
        if (next >= end) {
            break;
        }
        k = zh_mem_peer_block(pc, next, k + 1);
        if (k < 0 || pc->blocks[k].range != ri) {
            return ZC_ERR_NOT_FOUND;
        }
        g = pc->blocks[k];
    }
    *out = win + (va - r.base);
    return ZC_OK;
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
    int st = zh_mem_translate_locked(c, q, va, bytes, out);
    pthread_mutex_unlock(&c->lock);
    if (st == ZC_ERR_NOT_FOUND) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: rank %d's buffer 0x%llx (+%llu) is not in active blocks",
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
    pthread_mutex_unlock(&c->lock);
}
