/*
 * HcclSend / HcclRecv / HcclBatchSendRecv and HcclGroupStart / HcclGroupEnd.
 *
 * Outside a group a Send or Recv is a batch of one. Inside a group (per
 * thread; groups nest, only the outermost End issues) sends and receives are
 * collected per (communicator, stream) and issued at HcclGroupEnd as one
 * batch each, which the p2p engine advances together: the classic
 * "everyone sends to the right and receives from the left" ring cannot
 * deadlock. Collectives called inside a group are issued at once, in order.
 */
#include "core/hccl_internal.h"
#include "api/hccl_capture.h"

#include <stdlib.h>

#include "zc/log.h"

typedef struct {
    zh_comm_t *comm;
    HcclComm handle; /* to check at GroupEnd that comm is still alive */
    aclrtStream stream;
    HcclSendRecvItem *items;
    uint32_t n;
    uint32_t cap;
} zh_group_batch_t;

static _Thread_local int zh_group_depth;
static _Thread_local zh_group_batch_t *zh_group_batches;
static _Thread_local uint32_t zh_group_nbatches;

static void zh_group_clear(void)
{
    for (uint32_t i = 0; i < zh_group_nbatches; i++) {
        free(zh_group_batches[i].items);
    }
    free(zh_group_batches);
    zh_group_batches = NULL;
    zh_group_nbatches = 0;
}

static HcclResult zh_group_add(zh_comm_t *c, HcclComm handle, aclrtStream stream,
                               const HcclSendRecvItem *it)
{
    zh_group_batch_t *b = NULL;
    for (uint32_t i = 0; i < zh_group_nbatches; i++) {
        if (zh_group_batches[i].comm == c && zh_group_batches[i].stream == stream) {
            b = &zh_group_batches[i];
        }
    }
    if (b == NULL) {
        zh_group_batch_t *nb = realloc(zh_group_batches, sizeof(*nb) * (zh_group_nbatches + 1));
        if (nb == NULL) {
            return HCCL_E_MEMORY;
        }
        zh_group_batches = nb;
        b = &nb[zh_group_nbatches++];
        *b = (zh_group_batch_t){c, handle, stream, NULL, 0, 0};
    }
    if (b->n == b->cap) {
        uint32_t cap = b->cap != 0 ? b->cap * 2 : 8;
        HcclSendRecvItem *ni = realloc(b->items, sizeof(*ni) * cap);
        if (ni == NULL) {
            return HCCL_E_MEMORY;
        }
        b->items = ni;
        b->cap = cap;
    }
    b->items[b->n++] = *it;
    return HCCL_SUCCESS;
}

static HcclResult zh_p2p_one(HcclComm comm, HcclSendRecvType type, void *buf, uint64_t count,
                             HcclDataType dtype, uint32_t peer, aclrtStream stream, const char *fn)
{
    zh_comm_t *c = NULL;
    ZH_CHECK_RESULT(zh_comm_get(comm, fn, &c));
    HcclSendRecvItem it = {type, buf, count, dtype, peer};
    if (zh_group_depth > 0) {
        /* Check now, so a bad item fails at its call and not at GroupEnd. */
        if (peer >= (uint32_t)c->nranks || peer == (uint32_t)c->rank ||
            coll_dtype_size(dtype) == 0 || (buf == NULL && count != 0)) {
            ZC_WARN(ZC_SUB_COLL, "%s: rank %d: peer %u, dataType %d, buf %p, count %llu invalid",
                    fn, c->rank, peer, (int)dtype, buf, (unsigned long long)count);
            return buf == NULL && count != 0 ? HCCL_E_PTR : HCCL_E_PARA;
        }
        return zh_group_add(c, comm, stream, &it);
    }
    return zh_submit_p2p(c, &it, 1, stream);
}

ZC_EXPORT HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType,
                              uint32_t destRank, HcclComm comm, aclrtStream stream)
{
    return zh_p2p_one(comm, HCCL_SEND, sendBuf, count, dataType, destRank, stream, __func__);
}

ZC_EXPORT HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType,
                              uint32_t srcRank, HcclComm comm, aclrtStream stream)
{
    return zh_p2p_one(comm, HCCL_RECV, recvBuf, count, dataType, srcRank, stream, __func__);
}

ZC_EXPORT HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum,
                                       HcclComm comm, aclrtStream stream)
{
    ZH_COMM_OR_RETURN(c, comm);
    if (sendRecvInfo == NULL && itemNum != 0) {
        ZC_WARN(ZC_SUB_COLL, "HcclBatchSendRecv: sendRecvInfo is NULL with itemNum %u", itemNum);
        return HCCL_E_PTR;
    }
    if (itemNum == 0) {
        return HCCL_SUCCESS;
    }
    return zh_submit_p2p(c, sendRecvInfo, itemNum, stream);
}

ZC_EXPORT HcclResult HcclGroupStart(void)
{
    zh_group_depth++;
    return HCCL_SUCCESS;
}

ZC_EXPORT HcclResult HcclGroupEnd(void)
{
    if (zh_group_depth == 0) {
        ZC_WARN(ZC_SUB_COLL, "HcclGroupEnd without HcclGroupStart");
        return HCCL_E_PARA;
    }
    if (--zh_group_depth > 0) {
        return HCCL_SUCCESS;
    }
    HcclResult r = HCCL_SUCCESS;
    for (uint32_t i = 0; i < zh_group_nbatches; i++) {
        zh_group_batch_t *b = &zh_group_batches[i];
        /* The comm may have been destroyed inside the group. */
        if (zh_comm_lookup(b->handle) != b->comm) {
            ZC_WARN(ZC_SUB_COLL, "HcclGroupEnd: a communicator of the group was destroyed");
            r = HCCL_E_PARA;
            continue;
        }
        HcclResult e = zh_submit_p2p(b->comm, b->items, b->n, b->stream);
        if (e != HCCL_SUCCESS && r == HCCL_SUCCESS) {
            r = e;
        }
    }
    zh_group_clear();
    return r;
}
