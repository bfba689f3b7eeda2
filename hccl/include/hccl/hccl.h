/*
 * hccl/hccl.h - collective and point-to-point operations, zccl's
 * implementation of CANN's hccl.h. Including it also brings in the types
 * (hccl_types.h), communicator management (hccl_comm.h) and the ACL runtime
 * types the calls take.
 *
 * Every operation is asynchronous with respect to the host: it is enqueued on
 * @p stream and complete when aclrtSynchronizeStream() (or an event recorded
 * after it) says so. Every rank of the communicator must issue the same
 * collectives in the same order with matching counts and types. Counts are
 * numbers of elements, never bytes. Buffers may be in activated zero-copy
 * memory (see hccl_comm.h) or any other device memory.
 *
 * A NULL stream is the current device's default stream, as in ACL.
 *
 * Errors common to all calls: HCCL_E_PTR for a NULL communicator or a NULL
 * buffer with elements to move; HCCL_E_PARA for an unknown communicator,
 * data type or reduction, a root or peer rank outside the communicator, or
 * counts that overflow; HCCL_E_NOT_SUPPORT for a reduction on a copy-only type
 * (int128, hif8, the fp8 types). Errors found once the operation runs (ranks
 * that disagree: HCCL_E_PARA on every rank; a dead peer: HCCL_E_REMOTE; a
 * stuck one: HCCL_E_TIMEOUT) come back from aclrtSynchronizeStream() as the
 * HcclResult value and from HcclGetCommAsyncError().
 */
#ifndef HCCL_H_
#define HCCL_H_

#include <stdint.h>

#include "acl/acl_base.h"
#include "acl/acl_rt.h"
#include "hccl/hccl_comm.h"
#include "hccl/hccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Reduce @p count elements across all ranks; every rank gets the result.
 *
 * @param sendBuf this rank's input, @p count elements.
 * @param recvBuf receives the result, @p count elements; may equal @p sendBuf.
 * @param count number of elements.
 * @param dataType element type.
 * @param op reduction: sum, prod, max or min.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file.
 */
HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                         HcclReduceOp op, HcclComm comm, aclrtStream stream);

/**
 * @brief Copy @p count elements from the root's @p buf into every rank's @p buf.
 *
 * @param buf source on the root, destination elsewhere.
 * @param count number of elements.
 * @param dataType element type.
 * @param root rank that holds the data.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file.
 */
HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
                         HcclComm comm, aclrtStream stream);

/**
 * @brief Reduce across ranks and leave block i of the result on rank i.
 *
 * @param sendBuf this rank's input, @p recvCount * rank-count elements.
 * @param recvBuf receives this rank's block, @p recvCount elements.
 * @param recvCount number of elements per rank.
 * @param dataType element type.
 * @param op reduction: sum, prod, max or min.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file.
 */
HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                             HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                             aclrtStream stream);

/**
 * @brief Reduce-scatter with a different block size and place per rank.
 *
 * @param sendBuf this rank's input.
 * @param sendCounts uint64_t array: entry i is the elements of block i.
 * @param sendDispls uint64_t array: entry i is block i's offset in @p sendBuf,
 *        in elements.
 * @param recvBuf receives this rank's block.
 * @param recvCount number of elements this rank receives; equals
 *        sendCounts[this rank].
 * @param dataType element type.
 * @param op reduction: sum, prod, max or min.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file.
 */
HcclResult HcclReduceScatterV(void *sendBuf, const void *sendCounts, const void *sendDispls,
                              void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                              HcclReduceOp op, HcclComm comm, aclrtStream stream);

/**
 * @brief Send block i of the root's @p sendBuf to rank i.
 *
 * @param sendBuf on the root, @p recvCount * rank-count elements; ignored
 *        elsewhere.
 * @param recvBuf receives this rank's block, @p recvCount elements.
 * @param recvCount number of elements per rank.
 * @param dataType element type.
 * @param root rank that holds the data.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file.
 */
HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                       uint32_t root, HcclComm comm, aclrtStream stream);

/**
 * @brief Gather every rank's @p sendCount elements, in rank order, on all ranks.
 *
 * @param sendBuf this rank's input, @p sendCount elements.
 * @param recvBuf receives @p sendCount * rank-count elements.
 * @param sendCount number of elements each rank contributes.
 * @param dataType element type.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file.
 */
HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                         HcclComm comm, aclrtStream stream);

/**
 * @brief All-gather with a different contribution size and place per rank.
 *
 * @param sendBuf this rank's input, @p sendCount elements.
 * @param sendCount number of elements this rank contributes; equals
 *        recvCounts[this rank].
 * @param recvBuf receives every rank's contribution.
 * @param recvCounts uint64_t array: entry i is the elements from rank i.
 * @param recvDispls uint64_t array: entry i is where rank i's data goes in
 *        @p recvBuf, in elements.
 * @param dataType element type.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file.
 */
HcclResult HcclAllGatherV(void *sendBuf, uint64_t sendCount, void *recvBuf, const void *recvCounts,
                          const void *recvDispls, HcclDataType dataType, HcclComm comm,
                          aclrtStream stream);

/**
 * @brief Send @p count elements to @p destRank, which posts a matching HcclRecv().
 *
 * @param sendBuf data to send.
 * @param count number of elements.
 * @param dataType element type.
 * @param destRank receiving rank.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file.
 */
HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,
                    HcclComm comm, aclrtStream stream);

/**
 * @brief Receive @p count elements from @p srcRank, which posts a matching HcclSend().
 *
 * @param recvBuf receives the data.
 * @param count number of elements.
 * @param dataType element type.
 * @param srcRank sending rank.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file.
 */
HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
                    HcclComm comm, aclrtStream stream);

/**
 * @brief All-to-all where every rank knows the full count matrix.
 *
 * Entry [i * n + j] of the matrix is the elements rank i sends to rank j.
 * Blocks are packed in rank order on both sides.
 *
 * @param sendBuf this rank's outgoing blocks.
 * @param sendCountMatrix uint64_t array of rank-count squared entries, the
 *        same on every rank.
 * @param sendType element type sent.
 * @param recvBuf receives the incoming blocks.
 * @param recvType element type received; must equal @p sendType.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file.
 */
HcclResult HcclAlltoAllVC(const void *sendBuf, const void *sendCountMatrix, HcclDataType sendType,
                          const void *recvBuf, HcclDataType recvType, HcclComm comm,
                          aclrtStream stream);

/**
 * @brief All-to-all with per-peer counts and displacements.
 *
 * @param sendBuf this rank's outgoing data.
 * @param sendCounts uint64_t array: entry j is the elements sent to rank j.
 * @param sdispls uint64_t array: entry j is the offset in @p sendBuf of the
 *        data for rank j, in elements.
 * @param sendType element type sent.
 * @param recvBuf receives the incoming data.
 * @param recvCounts uint64_t array: entry i is the elements received from rank i.
 * @param rdispls uint64_t array: entry i is the offset in @p recvBuf where
 *        rank i's data goes, in elements.
 * @param recvType element type received; must equal @p sendType.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file.
 */
HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
                         HcclDataType sendType, const void *recvBuf, const void *recvCounts,
                         const void *rdispls, HcclDataType recvType, HcclComm comm,
                         aclrtStream stream);

/**
 * @brief All-to-all with the same block size for every pair of ranks.
 *
 * @param sendBuf this rank's outgoing blocks, @p sendCount per rank, in rank order.
 * @param sendCount elements sent to each rank.
 * @param sendType element type sent.
 * @param recvBuf receives @p recvCount elements from each rank, in rank order.
 * @param recvCount elements received from each rank.
 * @param recvType element type received; must equal @p sendType.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file.
 */
HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
                        const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
                        HcclComm comm, aclrtStream stream);

/**
 * @brief Reduce @p count elements across all ranks into the root's @p recvBuf.
 *
 * @param sendBuf this rank's input, @p count elements.
 * @param recvBuf on the root, receives the result; ignored elsewhere.
 * @param count number of elements.
 * @param dataType element type.
 * @param op reduction: sum, prod, max or min.
 * @param root rank that receives the result.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file.
 */
HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                      HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream);

/**
 * @brief Issue a set of sends and receives together, in any order, without
 *        deadlock between them.
 *
 * @param sendRecvInfo array of @p itemNum transfers.
 * @param itemNum number of items.
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * @return HCCL_SUCCESS or one of the errors listed at the top of this file;
 *         HCCL_E_PARA also for an item whose direction is neither HCCL_SEND
 *         nor HCCL_RECV.
 */
HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum, HcclComm comm,
                             aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* HCCL_H_ */
