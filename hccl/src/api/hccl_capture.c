/*
 * HCCL ops captured into aclmdlRI models (hccl_capture.h).
 *
 * A template keeps what zh_submit_op / zh_submit_p2p need to issue the op
 * again: the communicator handle with its name and rank (a handle alone could
 * name a newer communicator at a recycled address), the op with private
 * copies of its count arrays, or the send/recv items. Replaying looks the
 * communicator up and submits on the replay's stream; the submit paths take
 * the op's sequence number then, so replays interleave correctly with ops
 * issued one by one.
 */
#include "api/hccl_capture.h"

#include <stdlib.h>
#include <string.h>

#include "zc/log.h"
#include "zccl/vmm_ext.h"

typedef struct {
    HcclComm handle;
    int rank;
    char name[ZH_NAME_MAX];
    zh_op_t op;
    uint32_t nitems; /* p2p: items follow; collective: 0 */
    uint64_t *v;     /* collective: copies of op.v (ZH_V_* x nranks), after the struct */
    HcclSendRecvItem items[];
} zh_capture_t;

static zh_capture_t *zh_capture_new(zh_comm_t *c, uint32_t nitems, size_t nwords)
{
    size_t items = (size_t)nitems * sizeof(HcclSendRecvItem);
    zh_capture_t *t = calloc(1, sizeof(*t) + items + nwords * sizeof(uint64_t));
    if (t == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory capturing an op", c->rank);
        return NULL;
    }
    t->handle = zh_comm_handle(c);
    t->rank = c->rank;
    memcpy(t->name, c->name, sizeof(t->name));
    t->nitems = nitems;
    t->v = (uint64_t *)(void *)((char *)(t + 1) + items);
    return t;
}

/* The template's communicator, if it is still the one that was captured. */
static zh_comm_t *zh_capture_comm(const zh_capture_t *t)
{
    zh_comm_t *c = zh_comm_lookup(t->handle);
    if (c == NULL || c->rank != t->rank || strcmp(c->name, t->name) != 0) {
        ZC_WARN(ZC_SUB_COLL, "replay of a captured op: communicator %s (rank %d) was destroyed",
                t->name, t->rank);
        return NULL;
    }
    return c;
}

static aclError zh_capture_acl(HcclResult r)
{
    switch (r) {
    case HCCL_SUCCESS:
        return ACL_SUCCESS;
    case HCCL_E_PARA:
    case HCCL_E_PTR:
        return ACL_ERROR_INVALID_PARAM;
    case HCCL_E_MEMORY:
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    default:
        return ACL_ERROR_RT_INTERNAL_ERROR;
    }
}

static aclError zh_capture_replay(void *arg, aclrtStream target)
{
    zh_capture_t *t = arg;
    zh_comm_t *c = zh_capture_comm(t);
    if (c == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    if (t->nitems > 0 || t->op.kind == 0) {
        return zh_capture_acl(zh_submit_p2p(c, t->items, t->nitems, target));
    }
    return zh_capture_acl(zh_submit_op(c, &t->op, target));
}

static HcclResult zh_capture_keep(zh_comm_t *c, zh_capture_t *t, aclrtStream stream)
{
    aclError e = zccl_stream_capture_add(stream, zh_capture_replay, t, free);
    if (e != ACL_SUCCESS) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: cannot capture an op on stream %p (aclError %d)", c->rank,
                stream, (int)e);
        free(t);
        return e == ACL_ERROR_RT_MEMORY_ALLOCATION ? HCCL_E_MEMORY : HCCL_E_RUNTIME;
    }
    return HCCL_SUCCESS;
}

static HcclResult zh_capture_op(zh_comm_t *c, const zh_op_t *op, aclrtStream stream)
{
    size_t n = (size_t)c->nranks;
    zh_capture_t *t = zh_capture_new(c, 0, ZH_V_ARRAYS * n);
    if (t == NULL) {
        return HCCL_E_MEMORY;
    }
    t->op = *op;
    for (int i = 0; i < ZH_V_ARRAYS; i++) {
        if (op->v[i] != NULL) {
            memcpy(t->v + (size_t)i * n, op->v[i], sizeof(uint64_t) * n);
            t->op.v[i] = t->v + (size_t)i * n;
        }
    }
    return zh_capture_keep(c, t, stream);
}

static HcclResult zh_capture_p2p(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n,
                                 aclrtStream stream)
{
    zh_capture_t *t = zh_capture_new(c, n, 0);
    if (t == NULL) {
        return HCCL_E_MEMORY;
    }
    memcpy(t->items, items, (size_t)n * sizeof(*items));
    return zh_capture_keep(c, t, stream);
}

HcclResult zh_submit_op(zh_comm_t *c, const zh_op_t *op, aclrtStream stream)
{
    if (c->hier != NULL) {
        return zh_hier_submit(c, op, stream); /* the comm spans hosts */
    }
    if (zccl_stream_capturing(stream)) {
        return zh_capture_op(c, op, stream); /* recorded for aclmdlRI replays, not run */
    }
    return zh_op_submit(c, op, stream);
}

HcclResult zh_submit_p2p(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n,
                         aclrtStream stream)
{
    ZH_CHECK_RESULT(zh_p2p_check(c, items, n));
    if (c->hier != NULL) {
        return zh_hier_p2p_submit(c, items, n, stream); /* the comm spans hosts */
    }
    if (zccl_stream_capturing(stream)) {
        return zh_capture_p2p(c, items, n, stream); /* recorded for aclmdlRI replays, not run */
    }
    return zh_p2p_start(c, items, n, stream);
}
