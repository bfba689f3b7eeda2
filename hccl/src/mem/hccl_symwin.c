/*
 * Symmetric windows (HcclCommSymWinRegister / Deregister / Get).
 *
 * CANN's model: every rank reserves the same per-rank symmetric heap
 * (HcclCommConfig.hcclSymWinMaxMemSizePerRank GB, default 16) and windows
 * sit at the same offset of it on every rank. Here a window is memory the
 * caller reserved (aclrtReserveMemAddress) and mapped (aclrtMapMem); its size
 * is that of the physical allocation mapped at its start, as in CANN. The
 * comm hands windows consecutive offsets of a virtual heap of the configured
 * size, so "window handle + offset" names the same bytes on every rank.
 *
 * Registration is collective: each rank checks its own arguments, then all
 * publish {status, size, window size, heap offset} in their control segments
 * between two control barriers; any failure or difference fails every rank
 * with HCCL_E_PARA (the rank that differs is logged). A registered window is
 * a memory range plus an activated block (unless the caller had already
 * set / activated them), so collectives whose buffers lie in windows run
 * zero-copy, and so do those on the process's other communicators.
 * Deregistration is local; the comm's windows are also released at destroy.
 */
#include "core/hccl_internal.h"

#include <stdlib.h>
#include <string.h>

#include "zc/log.h"
#include "zccl/vmm_ext.h"

#define ZH_SYMWIN_MAGIC 0x7a63777eu

typedef struct zh_symwin {
    uint32_t magic;
    zh_comm_t *comm;
    char *addr;
    uint64_t size;     /* the physical allocation's size */
    uint64_t heap_off; /* same on every rank */
    int own_range;     /* the range was set by the registration */
    int own_block;     /* the block was activated by the registration */
    struct zh_symwin *next;
} zh_symwin_t;

static pthread_mutex_t zh_symwin_lock = PTHREAD_MUTEX_INITIALIZER;
static zh_symwin_t *zh_symwins;

/* Local checks; fills the window size. Logs why an argument is refused. */
static int zh_symwin_check(zh_comm_t *c, void *addr, uint64_t size, uint64_t *wsize)
{
    zccl_vmm_info_t vi;
    if (size == 0 || size > c->symwin_max) {
        ZC_WARN(ZC_SUB_ZCOPY,
                "rank %d: SymWinRegister: size %llu must be in 1..%llu "
                "(hcclSymWinMaxMemSizePerRank)",
                c->rank, (unsigned long long)size, (unsigned long long)c->symwin_max);
        return ZC_ERR_INVAL;
    }
    if (zccl_vmm_query(addr, &vi) != ZC_OK || vi.handle == NULL || vi.map_va != (uintptr_t)addr) {
        ZC_WARN(ZC_SUB_ZCOPY,
                "rank %d: SymWinRegister: addr %p is not the start of a physical "
                "allocation mapped with aclrtMapMem in a reservation",
                c->rank, addr);
        return ZC_ERR_INVAL;
    }
    if (size > vi.map_size) {
        ZC_WARN(ZC_SUB_ZCOPY,
                "rank %d: SymWinRegister: size %llu exceeds the %zu bytes of "
                "physical memory mapped at %p",
                c->rank, (unsigned long long)size, vi.map_size, addr);
        return ZC_ERR_INVAL;
    }
    if (vi.map_size > c->symwin_max - c->symwin_used) {
        ZC_WARN(ZC_SUB_ZCOPY,
                "rank %d: SymWinRegister: a %zu-byte window does not fit the "
                "symmetric heap (%llu of %llu bytes used)",
                c->rank, vi.map_size, (unsigned long long)c->symwin_used,
                (unsigned long long)c->symwin_max);
        return ZC_ERR_INVAL;
    }
    *wsize = vi.map_size;
    return ZC_OK;
}

/* Publish mine, compare everyone's: ZC_OK only if every rank agrees. */
static int zh_symwin_agree(zh_comm_t *c, int local, uint64_t size, uint64_t wsize)
{
    c->ctrl->agree[0] = local == ZC_OK ? 1 : 2;
    c->ctrl->agree[1] = size;
    c->ctrl->agree[2] = wsize;
    c->ctrl->agree[3] = c->symwin_used;
    int st = zh_ctrl_barrier(c);
    if (st != ZC_OK) {
        return st;
    }
    int verdict = local;
    for (int q = 0; q < c->nranks; q++) {
        const uint64_t *a = c->peers[q].ctrl->agree;
        if (q == c->rank) {
            continue;
        }
        if (verdict != ZC_OK) {
            break; /* one line: the first rank that failed or differs */
        }
        if (a[0] != 1) {
            ZC_WARN(ZC_SUB_ZCOPY, "rank %d: SymWinRegister failed on rank %d", c->rank, q);
            verdict = ZC_ERR_INVAL;
        } else if (local == ZC_OK && (a[1] != size || a[2] != wsize || a[3] != c->symwin_used)) {
            ZC_WARN(ZC_SUB_ZCOPY,
                    "rank %d: SymWinRegister: rank %d registers size %llu (window "
                    "%llu at heap offset %llu), this rank size %llu (window %llu at %llu): the "
                    "layout must be the same on every rank",
                    c->rank, q, (unsigned long long)a[1], (unsigned long long)a[2],
                    (unsigned long long)a[3], (unsigned long long)size, (unsigned long long)wsize,
                    (unsigned long long)c->symwin_used);
            verdict = ZC_ERR_INVAL;
        }
    }
    /* Nobody may overwrite agree[] before everyone read it. */
    st = zh_ctrl_barrier(c);
    return st != ZC_OK ? st : verdict;
}

/* Make [addr, +wsize) a range and an active block unless it already is. */
static int zh_symwin_activate(zh_comm_t *c, zh_symwin_t *w)
{
    void *bva = NULL;
    size_t bsize = 0;
    aclrtDrvMemHandle h = NULL;
    if (zh_mem_block_find(w->addr, &bva, &bsize, &h) == ZC_OK) {
        if (bva == w->addr && bsize == w->size) {
            return ZC_OK; /* the caller activated it already */
        }
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: SymWinRegister(%p): overlaps active block %p (+%zu)",
                c->rank, (void *)w->addr, bva, bsize);
        return ZC_ERR_INVAL;
    }
    zccl_vmm_info_t vi;
    if (zccl_vmm_query(w->addr, &vi) != ZC_OK) {
        return ZC_ERR_INVAL;
    }
    pthread_mutex_lock(&c->lock);
    c->ranges_linked = 1; /* registration did its own collective step */
    pthread_mutex_unlock(&c->lock);
    int st = ZC_OK;
    /* A range already covering the window (the caller's pool) is kept. */
    if (!zh_mem_range_covers(w->addr, w->size)) {
        st = zh_mem_set_range(c, w->addr, w->size, 0, 0);
        if (st != ZC_OK) {
            return st;
        }
        w->own_range = 1;
    }
    st = zh_mem_activate(c, w->addr, w->size, 0, vi.handle, 0);
    if (st != ZC_OK && w->own_range) {
        (void)zh_mem_unset_range(c, w->addr);
        w->own_range = 0;
    }
    w->own_block = st == ZC_OK;
    return st;
}

ZC_EXPORT HcclResult HcclCommSymWinRegister(HcclComm comm, void *addr, uint64_t size,
                                            HcclCommSymWindow *winHandle, uint32_t flag)
{
    ZH_COMM_OR_RETURN(c, comm);
    if (c->hier != NULL) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: %s: symmetric windows need every rank on one host", c->rank,
                __func__);
        return HCCL_E_NOT_SUPPORT;
    }
    /* A local refusal still takes part in the agreement, so the other ranks
     * fail at once instead of waiting for this one. */
    HcclResult pre = HCCL_SUCCESS;
    if (addr == NULL || winHandle == NULL) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: %s: addr %p or winHandle %p is NULL", c->rank, __func__,
                addr, (void *)winHandle);
        pre = HCCL_E_PTR;
    } else if (flag != HCCL_WIN_COLL_SYMMETRIC) {
        ZC_WARN(ZC_SUB_ZCOPY,
                "rank %d: %s: flag %u: only HCCL_WIN_COLL_SYMMETRIC (1) is "
                "supported",
                c->rank, __func__, flag);
        pre = flag == HCCL_WIN_DEFAULT ? HCCL_E_NOT_SUPPORT : HCCL_E_PARA;
    }
    uint64_t wsize = 0;
    int local = pre != HCCL_SUCCESS ? ZC_ERR_INVAL : zh_symwin_check(c, addr, size, &wsize);
    int st = zh_symwin_agree(c, local, size, wsize);
    if (pre != HCCL_SUCCESS) {
        return pre;
    }
    if (st != ZC_OK) {
        return zh_result(st);
    }
    zh_symwin_t *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: SymWinRegister: out of memory", c->rank);
        return HCCL_E_MEMORY;
    }
    *w = (zh_symwin_t){ZH_SYMWIN_MAGIC, c, addr, wsize, c->symwin_used, 0, 0, NULL};
    st = zh_symwin_activate(c, w);
    if (st != ZC_OK) {
        free(w);
        return zh_result(st);
    }
    c->symwin_used += wsize;
    pthread_mutex_lock(&zh_symwin_lock);
    w->next = zh_symwins;
    zh_symwins = w;
    pthread_mutex_unlock(&zh_symwin_lock);
    *winHandle = w;
    return HCCL_SUCCESS;
}

/* Undo a window's range and block. */
static void zh_symwin_free(zh_symwin_t *w)
{
    zh_comm_t *c = w->comm;
    if (w->own_block) {
        (void)zh_mem_deactivate(c, w->addr);
    }
    if (w->own_range) {
        (void)zh_mem_unset_range(c, w->addr);
    }
    if (w->heap_off + w->size == c->symwin_used) {
        c->symwin_used = w->heap_off;
    }
    w->magic = 0;
    free(w);
}

/* Unlink window w (or, with w NULL, the first window of comm c). Lock held. */
static zh_symwin_t *zh_symwin_unlink(zh_symwin_t *w, zh_comm_t *c)
{
    for (zh_symwin_t **pp = &zh_symwins; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == w || (w == NULL && (*pp)->comm == c)) {
            zh_symwin_t *found = *pp;
            *pp = found->next;
            return found;
        }
    }
    return NULL;
}

ZC_EXPORT HcclResult HcclCommSymWinDeregister(HcclCommSymWindow winHandle)
{
    if (winHandle == NULL) {
        ZC_WARN(ZC_SUB_ZCOPY, "%s: winHandle is NULL", __func__);
        return HCCL_E_PTR;
    }
    pthread_mutex_lock(&zh_symwin_lock);
    zh_symwin_t *w = zh_symwin_unlink((zh_symwin_t *)winHandle, NULL);
    pthread_mutex_unlock(&zh_symwin_lock);
    if (w == NULL) {
        ZC_WARN(ZC_SUB_ZCOPY, "%s: %p is not a registered window", __func__, winHandle);
        return HCCL_E_NOT_FOUND;
    }
    zh_symwin_free(w);
    return HCCL_SUCCESS;
}

ZC_EXPORT HcclResult HcclCommSymWinGet(HcclComm comm, void *ptr, size_t size,
                                       HcclCommSymWindow *winHandle, size_t *offset)
{
    ZH_COMM_OR_RETURN(c, comm);
    if (ptr == NULL || winHandle == NULL || offset == NULL) {
        ZC_WARN(ZC_SUB_ZCOPY, "%s: ptr %p, winHandle %p or offset %p is NULL", __func__, ptr,
                (void *)winHandle, (void *)offset);
        return HCCL_E_PTR;
    }
    if (size == 0) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: %s(%p): size is 0", c->rank, __func__, ptr);
        return HCCL_E_PARA;
    }
    const char *p = ptr;
    zh_symwin_t *found = NULL;
    pthread_mutex_lock(&zh_symwin_lock);
    for (zh_symwin_t *w = zh_symwins; w != NULL && found == NULL; w = w->next) {
        if (w->comm == c && p >= w->addr && (uint64_t)(p - w->addr) < w->size &&
            size <= w->size - (uint64_t)(p - w->addr)) {
            found = w;
        }
    }
    pthread_mutex_unlock(&zh_symwin_lock);
    if (found == NULL) {
        ZC_WARN(ZC_SUB_ZCOPY, "rank %d: %s: [%p, +%zu) is not inside a registered window", c->rank,
                __func__, ptr, size);
        return HCCL_E_NOT_FOUND;
    }
    *winHandle = found;
    *offset = (size_t)(p - found->addr);
    return HCCL_SUCCESS;
}

void zh_symwin_release(zh_comm_t *c)
{
    for (;;) {
        pthread_mutex_lock(&zh_symwin_lock);
        zh_symwin_t *w = zh_symwin_unlink(NULL, c);
        pthread_mutex_unlock(&zh_symwin_lock);
        if (w == NULL) {
            return;
        }
        zh_symwin_free(w);
    }
}
