/*
 * The exported HCCL symbols of communicators, memory and errors. Local arguments are checked here,
 * on the caller's thread, with a log line naming the argument and its value; what needs the peers
 * (agreement between ranks) is checked by the op path.
 *
 * Lifetimes: HcclCommDeactivateCommMemory, HcclCommUnsetMemoryRange and
 * HcclCommDestroy are ordered after the comm's queued ops (they wait for them,
 * as a free waits for the streams), so an op never runs on memory withdrawn
 * after it was issued.
 */
#include "core/hccl_internal.h"
#include "api/hccl_capture.h"

#include <string.h>

#include "core/hccl_test_api.h"
#include "topo/hccl_topo.h"
#include "zc/log.h"

#define ZH_PTR_OR_RETURN(ptr)                                                                      \
    do {                                                                                           \
        if ((ptr) == NULL) {                                                                       \
            ZC_WARN(ZC_SUB_COMM, "%s: %s is NULL", __func__, #ptr);                                \
            return HCCL_E_PTR;                                                                     \
        }                                                                                          \
    } while (0)

/* ---- error strings --------------------------------------------------------- */

ZC_EXPORT const char *HcclGetErrorString(HcclResult code)
{
    switch (code) {
    case HCCL_SUCCESS:
        return "no error";
    case HCCL_E_PARA:
        return "parameter error";
    case HCCL_E_PTR:
        return "empty pointer";
    case HCCL_E_MEMORY:
        return "memory error";
    case HCCL_E_INTERNAL:
        return "internal error";
    case HCCL_E_NOT_SUPPORT:
        return "not support feature";
    case HCCL_E_NOT_FOUND:
        return "not found specific resource";
    case HCCL_E_UNAVAIL:
        return "resource unavailable";
    case HCCL_E_SYSCALL:
        return "call system interface error";
    case HCCL_E_TIMEOUT:
        return "timeout";
    case HCCL_E_OPEN_FILE_FAILURE:
        return "open file fail";
    case HCCL_E_TCP_CONNECT:
        return "tcp connect fail";
    case HCCL_E_ROCE_CONNECT:
        return "roce connect fail";
    case HCCL_E_TCP_TRANSFER:
        return "tcp transfer fail";
    case HCCL_E_ROCE_TRANSFER:
        return "roce transfer fail";
    case HCCL_E_RUNTIME:
        return "call runtime api fail";
    case HCCL_E_DRV:
        return "call driver api fail";
    case HCCL_E_PROFILING:
        return "call profiling api fail";
    case HCCL_E_CCE:
        return "call cce api fail";
    case HCCL_E_NETWORK:
        return "call network api fail";
    case HCCL_E_AGAIN:
        return "try again";
    case HCCL_E_REMOTE:
        return "error cqe";
    case HCCL_E_SUSPENDING:
        return "error communicator suspending";
    case HCCL_E_OPRETRY_FAIL:
        return "retry constraint";
    case HCCL_E_OOM:
        return "out of memory";
    case HCCL_E_IN_STATUS:
        return "in status";
    default:
        return "unknown error";
    }
}

/* ---- communicators ---------------------------------------------------------- */

ZC_EXPORT HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo)
{
    ZH_PTR_OR_RETURN(rootInfo);
    return zh_result(zh_boot_root_create(rootInfo));
}

static HcclResult zh_init_checked(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                  const HcclCommConfig *config, HcclComm *comm)
{
    /* Local argument errors fail here, before any rank is contacted; ranks
     * that did join then see the session fail or time out at the root. */
    if (nRanks == 0 || nRanks > ZH_MAX_COMM_RANKS || rank >= nRanks) {
        ZC_WARN(ZC_SUB_INIT,
                "HcclCommInitRootInfo: rank %u of nRanks %u is invalid (nRanks "
                "1..%d, rank < nRanks)",
                rank, nRanks, ZH_MAX_COMM_RANKS);
        return HCCL_E_PARA;
    }
    return zh_comm_init(nRanks, rootInfo, rank, config, comm);
}

ZC_EXPORT HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo,
                                                uint32_t rank, const HcclCommConfig *config,
                                                HcclComm *comm)
{
    ZH_PTR_OR_RETURN(rootInfo);
    ZH_PTR_OR_RETURN(config);
    ZH_PTR_OR_RETURN(comm);
    return zh_init_checked(nRanks, rootInfo, rank, config, comm);
}

ZC_EXPORT HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo,
                                          uint32_t rank, HcclComm *comm)
{
    ZH_PTR_OR_RETURN(rootInfo);
    ZH_PTR_OR_RETURN(comm);
    return zh_init_checked(nRanks, rootInfo, rank, NULL, comm);
}

ZC_EXPORT HcclResult HcclCommDestroy(HcclComm comm)
{
    ZH_COMM_OR_RETURN(c, comm);
    ZH_CHECK_RESULT(zh_comm_quiesce(c, __func__));
    return zh_comm_destroy(c);
}

ZC_EXPORT HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize)
{
    ZH_COMM_OR_RETURN(c, comm);
    ZH_PTR_OR_RETURN(rankSize);
    *rankSize = (uint32_t)c->nranks;
    return HCCL_SUCCESS;
}

ZC_EXPORT HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank)
{
    ZH_COMM_OR_RETURN(c, comm);
    ZH_PTR_OR_RETURN(rank);
    *rank = (uint32_t)c->rank;
    return HCCL_SUCCESS;
}

ZC_EXPORT HcclResult HcclGetCommName(HcclComm comm, char *commName)
{
    ZH_COMM_OR_RETURN(c, comm);
    ZH_PTR_OR_RETURN(commName);
    memcpy(commName, c->name, strlen(c->name) + 1);
    return HCCL_SUCCESS;
}

ZC_EXPORT HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError)
{
    ZH_COMM_OR_RETURN(c, comm);
    ZH_PTR_OR_RETURN(asyncError);
    *asyncError = (HcclResult)atomic_load_explicit(&c->async_error, memory_order_acquire);
    return HCCL_SUCCESS;
}

ZC_EXPORT uint32_t HcclGetCommConfigCapability(void)
{
    /* As CANN: one past the last HcclCommConfigCapability value this layout
     * knows, so `cap > HCCL_COMM_CONFIG_X` holds for every field. Each field
     * is accepted; those with no meaning on a host are ignored (README). */
    return (uint32_t)HCCL_COMM_CONFIG_RESERVED;
}

ZC_EXPORT HcclResult HcclBarrier(HcclComm comm, aclrtStream stream)
{
    ZH_COMM_OR_RETURN(c, comm);
    zh_op_t op = {.kind = ZH_OP_BARRIER, .dtype = HCCL_DATA_TYPE_INT8};
    return zh_submit_op(c, &op, stream);
}

/* ---- zero-copy memory ------------------------------------------------------- */

ZC_EXPORT HcclResult HcclCommSetMemoryRange(HcclComm comm, void *baseVirPtr, size_t size,
                                            size_t alignment, uint64_t flags)
{
    ZH_COMM_OR_RETURN(g, comm);
    zh_comm_t *c = zh_comm_inner(g);
    ZH_PTR_OR_RETURN(baseVirPtr);
    return zh_result(zh_mem_set_range(c, baseVirPtr, size, alignment, flags));
}

ZC_EXPORT HcclResult HcclCommUnsetMemoryRange(HcclComm comm, void *baseVirPtr)
{
    ZH_COMM_OR_RETURN(g, comm);
    zh_comm_t *c = zh_comm_inner(g);
    ZH_PTR_OR_RETURN(baseVirPtr);
    ZH_CHECK_RESULT(zh_comm_quiesce(c, __func__));
    return zh_result(zh_mem_unset_range(c, baseVirPtr));
}

ZC_EXPORT HcclResult HcclCommActivateCommMemory(HcclComm comm, void *virPtr, size_t size,
                                                size_t offset, aclrtDrvMemHandle handle,
                                                uint64_t flags)
{
    ZH_COMM_OR_RETURN(g, comm);
    zh_comm_t *c = zh_comm_inner(g);
    ZH_PTR_OR_RETURN(virPtr);
    ZH_PTR_OR_RETURN(handle);
    return zh_result(zh_mem_activate(c, virPtr, size, offset, handle, flags));
}

ZC_EXPORT HcclResult HcclCommDeactivateCommMemory(HcclComm comm, void *virPtr)
{
    ZH_COMM_OR_RETURN(g, comm);
    zh_comm_t *c = zh_comm_inner(g);
    ZH_PTR_OR_RETURN(virPtr);
    ZH_CHECK_RESULT(zh_comm_quiesce(c, __func__));
    return zh_result(zh_mem_deactivate(c, virPtr));
}

/* ---- test introspection ----------------------------------------------------- */

ZC_EXPORT uint64_t zccl_comm_staged_bytes(HcclComm comm)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    return c != NULL ? (uint64_t)atomic_load(&c->staged_bytes) : 0;
}

ZC_EXPORT uint64_t zccl_comm_zero_copy_ops(HcclComm comm)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    return c != NULL ? (uint64_t)atomic_load(&c->zc_ops) : 0;
}

ZC_EXPORT uint64_t zccl_comm_hier_ops(HcclComm comm)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    return c != NULL ? (uint64_t)atomic_load(&c->hier_ops) : 0;
}

ZC_EXPORT uint64_t zccl_comm_buffered_ops(HcclComm comm)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    return c != NULL ? (uint64_t)atomic_load(&c->buf_ops) : 0;
}

ZC_EXPORT uint64_t zccl_comm_inline_bytes(HcclComm comm)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    return c != NULL ? (uint64_t)atomic_load(&c->inline_bytes) : 0;
}

ZC_EXPORT uint64_t zccl_comm_store_kind_ops(HcclComm comm, int streaming)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    c = c != NULL ? zh_comm_inner(c) : NULL;
    return c != NULL
               ? atomic_load_explicit(&c->reuse.kind_ops[streaming != 0], memory_order_relaxed)
               : 0;
}

ZC_EXPORT int zccl_comm_ccl_allocated(HcclComm comm)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    c = c != NULL ? zh_comm_inner(c) : NULL;
    return c != NULL && c->ccl_local != NULL;
}

ZC_EXPORT uint64_t zccl_comm_net_bytes(HcclComm comm)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    return c != NULL && c->hier != NULL ? zh_hier_net_bytes(c) : 0;
}

ZC_EXPORT size_t zccl_comm_net_address(HcclComm comm, void *buf, size_t cap)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    size_t len = 0;
    const void *a = c != NULL && c->hier != NULL ? zh_hier_net_address(c, &len) : NULL;
    if (a == NULL || len > cap) {
        return 0;
    }
    memcpy(buf, a, len);
    return len;
}

ZC_EXPORT uint64_t zccl_comm_net_dropped(HcclComm comm)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    return c != NULL && c->hier != NULL ? zh_hier_net_dropped(c) : 0;
}

ZC_EXPORT int zccl_comm_poke_p2p_part(HcclComm comm, uint64_t part)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    if (c == NULL || c->p2p_local == NULL) {
        return -1;
    }
    c->ctrl->p2p_part = part;
    return 0;
}

ZC_EXPORT int zccl_comm_level(HcclComm comm, int i, int *kind, int *group_of, int *index_of)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    if (c == NULL || c->levels == NULL || i < 0 || i >= c->levels->n) {
        return 0;
    }
    const zh_level_t *lv = &c->levels->level[i];
    *kind = lv->kind;
    for (int r = 0; r < c->levels->nranks; r++) {
        if (group_of != NULL) {
            group_of[r] = lv->group_of[r];
        }
        if (index_of != NULL) {
            index_of[r] = lv->index_of[r];
        }
    }
    return lv->ngroups;
}

ZC_EXPORT int zccl_comm_hosts(HcclComm comm)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    return c == NULL ? 0 : c->hier != NULL ? zh_hier_hosts(c) : 1;
}

ZC_EXPORT void *zccl_comm_peer_addr(HcclComm comm, uint32_t peer, const void *va, uint64_t bytes)
{
    zh_comm_t *c = zh_comm_lookup(comm);
    c = c != NULL ? zh_comm_inner(c) : NULL;
    void *out = NULL;
    if (c == NULL || c->hier != NULL || peer >= (uint32_t)c->nranks ||
        zh_mem_translate(c, (int)peer, (uint64_t)(uintptr_t)va, bytes, &out) != ZC_OK) {
        return NULL;
    }
    return out;
}
