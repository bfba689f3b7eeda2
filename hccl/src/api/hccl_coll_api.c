/*
 * The exported collectives: local argument checks, then one op descriptor
 * handed to the op path (hccl_op.c) on the caller's stream.
 *
 * Each call computes the extent of the send and receive buffers it touches
 * (send_bytes, recv_bytes): the op path uses them to decide whether the
 * buffers lie wholly in activated memory (zero-copy) and to translate them
 * on the peers.
 */
#include "core/hccl_internal.h"
#include "api/hccl_capture.h"

#include <string.h>

#include "zc/log.h"

/* Element size of a dtype, or an error naming it. */
static HcclResult zh_check_dtype(const char *fn, int dtype, size_t *size)
{
    *size = coll_dtype_size(dtype);
    if (*size == 0) {
        ZC_WARN(ZC_SUB_COLL, "%s: dataType %d is not a valid HcclDataType", fn, dtype);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

static HcclResult zh_check_redop(const char *fn, int dtype, int op)
{
    if (op < HCCL_REDUCE_SUM || op > HCCL_REDUCE_MIN) {
        ZC_WARN(ZC_SUB_COLL, "%s: op %d is not a valid HcclReduceOp", fn, op);
        return HCCL_E_PARA;
    }
    if (!coll_reducible(dtype, op)) {
        ZC_WARN(ZC_SUB_COLL,
                "%s: reduction %d is not supported on dataType %d (int128 and the "
                "8-bit float types are copy-only)",
                fn, op, dtype);
        return HCCL_E_NOT_SUPPORT;
    }
    return HCCL_SUCCESS;
}

/* bytes = count * size * mult, refusing overflow (past half the address
 * space). No division: this runs for every op. */
static HcclResult zh_bytes(const char *fn, const char *what, uint64_t count, size_t size,
                           uint64_t mult, uint64_t *bytes)
{
    uint64_t b = 0;
    if (count != 0 && (size * mult == 0 || __builtin_mul_overflow(count, (uint64_t)size, &b) ||
                       __builtin_mul_overflow(b, mult, &b) || b > UINT64_MAX / 2)) {
        ZC_WARN(ZC_SUB_COLL, "%s: %s %llu elements overflows the address space", fn, what,
                (unsigned long long)count);
        return HCCL_E_PARA;
    }
    *bytes = b;
    return HCCL_SUCCESS;
}

static HcclResult zh_check_buf(const char *fn, const char *what, const void *p, uint64_t bytes)
{
    if (p == NULL && bytes != 0) {
        ZC_WARN(ZC_SUB_COLL, "%s: %s is NULL with %llu bytes to move", fn, what,
                (unsigned long long)bytes);
        return HCCL_E_PTR;
    }
    return HCCL_SUCCESS;
}

static HcclResult zh_check_root(const char *fn, const zh_comm_t *c, uint32_t root)
{
    if (root >= (uint32_t)c->nranks) {
        ZC_WARN(ZC_SUB_COLL, "%s: root %u out of range (nranks %d)", fn, root, c->nranks);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

/* My own entry of a V array must equal the count I pass. */
static HcclResult zh_check_own(const char *fn, const zh_comm_t *c, const char *mine, uint64_t count,
                               const char *array, const uint64_t *v)
{
    if (v[c->rank] != count) {
        ZC_WARN(ZC_SUB_COLL, "%s: rank %d %s %llu differs from %s[%d] %llu", fn, c->rank, mine,
                (unsigned long long)count, array, c->rank, (unsigned long long)v[c->rank]);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

/* Extent of a counts/displacements pair: max(displ[i] + count[i]) elements. */
static HcclResult zh_extent(const char *fn, const char *what, const zh_comm_t *c,
                            const uint64_t *counts, const uint64_t *displs, size_t size,
                            uint64_t *bytes)
{
    if (counts == NULL || displs == NULL) {
        ZC_WARN(ZC_SUB_COLL, "%s: %s counts or displacements array is NULL", fn, what);
        return HCCL_E_PTR;
    }
    uint64_t end = 0;
    for (int i = 0; i < c->nranks; i++) {
        if (counts[i] > UINT64_MAX / 4 / size || displs[i] > UINT64_MAX / 4 / size) {
            ZC_WARN(ZC_SUB_COLL, "%s: %s count %llu / displacement %llu of rank %d is absurd", fn,
                    what, (unsigned long long)counts[i], (unsigned long long)displs[i], i);
            return HCCL_E_PARA;
        }
        if (counts[i] != 0 && displs[i] + counts[i] > end) {
            end = displs[i] + counts[i];
        }
    }
    *bytes = end * size;
    return HCCL_SUCCESS;
}

/* How a fixed-shape collective's buffers relate to its count: each buffer
 * holds count x mult elements on every rank, or on the root only. */
typedef struct {
    zh_op_kind_t kind;
    const char *count_name;
    const char *send_name;
    const char *recv_name;
    uint64_t send_mult; /* 0: n (the number of ranks) */
    uint64_t recv_mult; /* 0: n */
    unsigned has_redop : 1;
    unsigned has_root : 1;
    unsigned send_root_only : 1;
    unsigned recv_root_only : 1;
} zh_shape_t;

static HcclResult zh_coll_submit(zh_comm_t *c, const char *fn, const zh_shape_t *sh, int dtype,
                                 int redop, uint32_t root, uint64_t count, const void *send,
                                 void *recv, aclrtStream stream)
{
    size_t sz = 0;
    uint64_t sb = 0;
    uint64_t rb = 0;
    uint64_t n = (uint64_t)c->nranks;
    int is_root = (uint32_t)c->rank == root;
    ZH_CHECK_RESULT(zh_check_dtype(fn, dtype, &sz));
    if (sh->has_redop) {
        ZH_CHECK_RESULT(zh_check_redop(fn, dtype, redop));
    }
    if (sh->has_root) {
        ZH_CHECK_RESULT(zh_check_root(fn, c, root));
    }
    ZH_CHECK_RESULT(
        zh_bytes(fn, sh->count_name, count, sz, sh->send_mult ? sh->send_mult : n, &sb));
    ZH_CHECK_RESULT(
        zh_bytes(fn, sh->count_name, count, sz, sh->recv_mult ? sh->recv_mult : n, &rb));
    if (sh->send_root_only && !is_root) {
        sb = 0;
    }
    if (sh->recv_root_only && !is_root) {
        rb = 0;
    }
    ZH_CHECK_RESULT(zh_check_buf(fn, sh->send_name, send, sb));
    ZH_CHECK_RESULT(zh_check_buf(fn, sh->recv_name, recv, rb));
    zh_op_t o = {sh->kind,
                 dtype,
                 sh->has_redop ? redop : 0,
                 sh->has_root ? (int)root : 0,
                 count,
                 send,
                 recv,
                 sb,
                 rb,
                 {0}};
    return zh_submit_op(c, &o, stream);
}

ZC_EXPORT HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count,
                                   HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                   aclrtStream stream)
{
    static const zh_shape_t sh = {ZH_OP_ALLREDUCE, "count", "sendBuf", "recvBuf", 1, 1, 1, 0, 0, 0};
    ZH_COMM_OR_RETURN(c, comm);
    return zh_coll_submit(c, __func__, &sh, dataType, op, 0, count, sendBuf, recvBuf, stream);
}

ZC_EXPORT HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount,
                                   HcclDataType dataType, HcclComm comm, aclrtStream stream)
{
    static const zh_shape_t sh = {
        ZH_OP_ALLGATHER, "sendCount", "sendBuf", "recvBuf", 1, 0, 0, 0, 0, 0};
    ZH_COMM_OR_RETURN(c, comm);
    return zh_coll_submit(c, __func__, &sh, dataType, 0, 0, sendCount, sendBuf, recvBuf, stream);
}

ZC_EXPORT HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                                       HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                       aclrtStream stream)
{
    static const zh_shape_t sh = {
        ZH_OP_REDUCESCATTER, "recvCount", "sendBuf", "recvBuf", 0, 1, 1, 0, 0, 0};
    ZH_COMM_OR_RETURN(c, comm);
    return zh_coll_submit(c, __func__, &sh, dataType, op, 0, recvCount, sendBuf, recvBuf, stream);
}

ZC_EXPORT HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
                                   HcclComm comm, aclrtStream stream)
{
    static const zh_shape_t sh = {ZH_OP_BROADCAST, "count", "buf", "buf", 1, 1, 0, 1, 0, 0};
    ZH_COMM_OR_RETURN(c, comm);
    return zh_coll_submit(c, __func__, &sh, dataType, 0, root, count, buf, buf, stream);
}

ZC_EXPORT HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                                HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream)
{
    static const zh_shape_t sh = {ZH_OP_REDUCE, "count", "sendBuf", "recvBuf", 1, 1, 1, 1, 0, 1};
    ZH_COMM_OR_RETURN(c, comm);
    return zh_coll_submit(c, __func__, &sh, dataType, op, root, count, sendBuf, recvBuf, stream);
}

ZC_EXPORT HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                                 HcclDataType dataType, uint32_t root, HcclComm comm,
                                 aclrtStream stream)
{
    static const zh_shape_t sh = {
        ZH_OP_SCATTER, "recvCount", "sendBuf", "recvBuf", 0, 1, 0, 1, 1, 0};
    ZH_COMM_OR_RETURN(c, comm);
    return zh_coll_submit(c, __func__, &sh, dataType, 0, root, recvCount, sendBuf, recvBuf, stream);
}

ZC_EXPORT HcclResult HcclAllGatherV(void *sendBuf, uint64_t sendCount, void *recvBuf,
                                    const void *recvCounts, const void *recvDispls,
                                    HcclDataType dataType, HcclComm comm, aclrtStream stream)
{
    ZH_COMM_OR_RETURN(c, comm);
    size_t sz = 0;
    uint64_t sb = 0;
    uint64_t rb = 0;
    const uint64_t *rc = recvCounts;
    const uint64_t *rd = recvDispls;
    ZH_CHECK_RESULT(zh_check_dtype(__func__, dataType, &sz));
    ZH_CHECK_RESULT(zh_bytes(__func__, "sendCount", sendCount, sz, 1, &sb));
    ZH_CHECK_RESULT(zh_extent(__func__, "recv", c, rc, rd, sz, &rb));
    ZH_CHECK_RESULT(zh_check_own(__func__, c, "sendCount", sendCount, "recvCounts", rc));
    ZH_CHECK_RESULT(zh_check_buf(__func__, "sendBuf", sendBuf, sb));
    ZH_CHECK_RESULT(zh_check_buf(__func__, "recvBuf", recvBuf, rb));
    zh_op_t o = {.kind = ZH_OP_ALLGATHERV,
                 .dtype = dataType,
                 .count = sendCount,
                 .send = sendBuf,
                 .recv = recvBuf,
                 .send_bytes = sb,
                 .recv_bytes = rb,
                 .v = {[ZH_V_RECV_COUNTS] = rc, [ZH_V_RECV_DISPLS] = rd}};
    return zh_submit_op(c, &o, stream);
}

ZC_EXPORT HcclResult HcclReduceScatterV(void *sendBuf, const void *sendCounts,
                                        const void *sendDispls, void *recvBuf, uint64_t recvCount,
                                        HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                        aclrtStream stream)
{
    ZH_COMM_OR_RETURN(c, comm);
    size_t sz = 0;
    uint64_t sb = 0;
    uint64_t rb = 0;
    const uint64_t *sc = sendCounts;
    const uint64_t *sd = sendDispls;
    ZH_CHECK_RESULT(zh_check_dtype(__func__, dataType, &sz));
    ZH_CHECK_RESULT(zh_check_redop(__func__, dataType, op));
    ZH_CHECK_RESULT(zh_extent(__func__, "send", c, sc, sd, sz, &sb));
    ZH_CHECK_RESULT(zh_bytes(__func__, "recvCount", recvCount, sz, 1, &rb));
    ZH_CHECK_RESULT(zh_check_own(__func__, c, "recvCount", recvCount, "sendCounts", sc));
    ZH_CHECK_RESULT(zh_check_buf(__func__, "sendBuf", sendBuf, sb));
    ZH_CHECK_RESULT(zh_check_buf(__func__, "recvBuf", recvBuf, rb));
    zh_op_t o = {.kind = ZH_OP_REDUCESCATTERV,
                 .dtype = dataType,
                 .redop = op,
                 .count = recvCount,
                 .send = sendBuf,
                 .recv = recvBuf,
                 .send_bytes = sb,
                 .recv_bytes = rb,
                 .v = {[ZH_V_SEND_COUNTS] = sc, [ZH_V_SEND_DISPLS] = sd}};
    return zh_submit_op(c, &o, stream);
}

ZC_EXPORT HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
                                  const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
                                  HcclComm comm, aclrtStream stream)
{
    ZH_COMM_OR_RETURN(c, comm);
    size_t sz = 0;
    size_t rsz = 0;
    uint64_t sb = 0;
    uint64_t rb = 0;
    ZH_CHECK_RESULT(zh_check_dtype(__func__, sendType, &sz));
    ZH_CHECK_RESULT(zh_check_dtype(__func__, recvType, &rsz));
    if (sendType != recvType || sendCount != recvCount) {
        ZC_WARN(ZC_SUB_COLL, "%s: send (%llu x type %d) and recv (%llu x type %d) must match",
                __func__, (unsigned long long)sendCount, sendType, (unsigned long long)recvCount,
                recvType);
        return HCCL_E_PARA;
    }
    ZH_CHECK_RESULT(zh_bytes(__func__, "sendCount", sendCount, sz, (uint64_t)c->nranks, &sb));
    rb = sb;
    ZH_CHECK_RESULT(zh_check_buf(__func__, "sendBuf", sendBuf, sb));
    ZH_CHECK_RESULT(zh_check_buf(__func__, "recvBuf", recvBuf, rb));
    zh_op_t o = {ZH_OP_ALLTOALL,
                 sendType,
                 0,
                 0,
                 sendCount,
                 sendBuf,
                 (void *)(uintptr_t)recvBuf,
                 sb,
                 rb,
                 {0}};
    return zh_submit_op(c, &o, stream);
}

static HcclResult zh_alltoallv(zh_comm_t *c, const char *fn, const void *sendBuf,
                               const uint64_t *sc, const uint64_t *sd, HcclDataType sendType,
                               const void *recvBuf, const uint64_t *rc, const uint64_t *rd,
                               HcclDataType recvType, aclrtStream stream)
{
    size_t sz = 0;
    size_t rsz = 0;
    uint64_t sb = 0;
    uint64_t rb = 0;
    ZH_CHECK_RESULT(zh_check_dtype(fn, sendType, &sz));
    ZH_CHECK_RESULT(zh_check_dtype(fn, recvType, &rsz));
    if (sendType != recvType) {
        ZC_WARN(ZC_SUB_COLL, "%s: sendType %d and recvType %d must be equal", fn, sendType,
                recvType);
        return HCCL_E_PARA;
    }
    ZH_CHECK_RESULT(zh_extent(fn, "send", c, sc, sd, sz, &sb));
    ZH_CHECK_RESULT(zh_extent(fn, "recv", c, rc, rd, sz, &rb));
    ZH_CHECK_RESULT(zh_check_buf(fn, "sendBuf", sendBuf, sb));
    ZH_CHECK_RESULT(zh_check_buf(fn, "recvBuf", recvBuf, rb));
    zh_op_t o = {.kind = ZH_OP_ALLTOALLV,
                 .dtype = sendType,
                 .send = sendBuf,
                 .recv = (void *)(uintptr_t)recvBuf,
                 .send_bytes = sb,
                 .recv_bytes = rb,
                 .v = {[ZH_V_SEND_COUNTS] = sc,
                       [ZH_V_SEND_DISPLS] = sd,
                       [ZH_V_RECV_COUNTS] = rc,
                       [ZH_V_RECV_DISPLS] = rd}};
    return zh_submit_op(c, &o, stream);
}

ZC_EXPORT HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
                                   HcclDataType sendType, const void *recvBuf,
                                   const void *recvCounts, const void *rdispls,
                                   HcclDataType recvType, HcclComm comm, aclrtStream stream)
{
    ZH_COMM_OR_RETURN(c, comm);
    return zh_alltoallv(c, __func__, sendBuf, sendCounts, sdispls, sendType, recvBuf, recvCounts,
                        rdispls, recvType, stream);
}

ZC_EXPORT HcclResult HcclAlltoAllVC(const void *sendBuf, const void *sendCountMatrix,
                                    HcclDataType sendType, const void *recvBuf,
                                    HcclDataType recvType, HcclComm comm, aclrtStream stream)
{
    ZH_COMM_OR_RETURN(c, comm);
    if (sendCountMatrix == NULL) {
        ZC_WARN(ZC_SUB_COLL, "%s: sendCountMatrix is NULL", __func__);
        return HCCL_E_PTR;
    }
    /* Row i of the n x n matrix is what rank i sends to each rank: derive
     * this rank's V arguments with packed displacements. */
    const uint64_t *m = sendCountMatrix;
    uint64_t sc[ZH_MAX_COMM_RANKS];
    uint64_t sd[ZH_MAX_COMM_RANKS];
    uint64_t rc[ZH_MAX_COMM_RANKS];
    uint64_t rd[ZH_MAX_COMM_RANKS];
    uint64_t so = 0;
    uint64_t ro = 0;
    int n = c->nranks;
    for (int j = 0; j < n; j++) {
        sc[j] = m[(size_t)c->rank * (size_t)n + (size_t)j];
        rc[j] = m[(size_t)j * (size_t)n + (size_t)c->rank];
        if (sc[j] > UINT64_MAX / 8 / (uint64_t)n || rc[j] > UINT64_MAX / 8 / (uint64_t)n) {
            ZC_WARN(ZC_SUB_COLL, "%s: count matrix entry %llu/%llu is absurd", __func__,
                    (unsigned long long)sc[j], (unsigned long long)rc[j]);
            return HCCL_E_PARA;
        }
        sd[j] = so;
        rd[j] = ro;
        so += sc[j];
        ro += rc[j];
    }
    return zh_alltoallv(c, __func__, sendBuf, sc, sd, sendType, recvBuf, rc, rd, recvType, stream);
}
