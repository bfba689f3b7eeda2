/*
 * hccl/hccl_comm.h - communicator management and zero-copy memory, zccl's
 * implementation of CANN's hccl_comm.h.
 *
 * Lifetime of a communicator: one rank calls HcclGetRootInfo() and hands the
 * HcclRootInfo to all ranks out of band (MPI, a file, a socket); every rank
 * then calls HcclCommInitRootInfo[Config]() with the same rank count and its
 * own rank id, which blocks until all ranks have joined. Collectives
 * (hccl.h) are issued on a stream; HcclCommDestroy() releases everything.
 *
 * Zero-copy memory: all ranks call HcclCommSetMemoryRange() together to tell
 * the library which virtual range (reserved with aclrtReserveMemAddress) may
 * carry user buffers; HcclCommActivateCommMemory() then binds each physical
 * allocation mapped inside that range. As in CANN, ranges and activated
 * blocks are visible to every communicator of the process, whichever one
 * they were set through. An operation whose input and output lie wholly in
 * activated memory on every rank (one block or several adjacent blocks of one
 * range) moves data directly between ranks' buffers; any other operation
 * uses the internal CCL buffer. Symmetric windows (HcclCommSymWinRegister)
 * are a range and an activated block made in one collective call.
 *
 * Handles: every function taking an HcclComm returns HCCL_E_PTR for NULL and
 * HCCL_E_PARA (with one log line) for a value that is not a live
 * communicator of this process, including the handle of a communicator
 * already destroyed: handles are never reused, so a stale one can never
 * reach a communicator created later. A communicator does not survive
 * fork(): in the child, every call on one created by the parent (including
 * HcclCommDestroy) returns HCCL_E_NOT_SUPPORT with a line naming both pids,
 * and changes nothing the parent or its peers can see; the child may create
 * communicators of its own.
 *
 * Lifetimes: HcclCommDeactivateCommMemory, HcclCommUnsetMemoryRange and
 * HcclCommDestroy are ordered after the communicator's queued operations
 * (they wait for them); called from a stream task while operations are
 * queued they return HCCL_E_NOT_SUPPORT instead, as they cannot wait there.
 * Freeing or unmapping memory (aclrtFree, aclrtUnmapMem, ...) likewise waits
 * for the work the calling thread queued on the streams.
 *
 * Unlike CANN this header does not declare the functions weak: a program that
 * uses them must link libhccl, and a missing library is a link error.
 */
#ifndef HCCL_COMM_H_
#define HCCL_COMM_H_

#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base.h"
#include "acl/acl_rt.h"
#include "hccl/hccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Create this rank's communicator from a rank-table JSON file.
 *
 * Both CANN layouts are read: version 1.x ("server_list" of servers with a
 * "device" list of {device_id, rank_id}) and version 2.0 ("rank_list" of
 * {rank_id, device_id, ...}). The table must describe this one host (one
 * server; a server_id or host_ip written as an IP must be one of this host's
 * addresses). The calling thread's device becomes the table's device_id.
 * Ranks start independently with only the path and their rank: the table's
 * rank 0 serves the bootstrap through a local socket named after the file's
 * contents and the user, which the others wait for up to HCCL_CONNECT_TIMEOUT.
 *
 * @param clusterInfo path of the rank table describing every rank (< 4096 bytes).
 * @param rank this process's rank_id in the table.
 * @param comm receives the new communicator on success.
 * @return HCCL_SUCCESS; HCCL_E_PTR if an argument is NULL; HCCL_E_PARA if the
 *         table is malformed (one log line names the file, field and value),
 *         describes another host, or @p rank is not in it;
 *         HCCL_E_OPEN_FILE_FAILURE if the file cannot be read; HCCL_E_UNAVAIL
 *         if rank 0 cannot serve the bootstrap socket (the same table is in
 *         use); HCCL_E_TIMEOUT if rank 0 or the peers do not come in time.
 */
HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm);

/**
 * @brief Like HcclCommInitClusterInfo(), with per-communicator settings.
 *
 * @param clusterInfo path of the rank table describing every rank.
 * @param rank this process's rank id in the table.
 * @param config settings filled by HcclCommConfigInit() and then edited.
 * @param comm receives the new communicator on success.
 * @return as HcclCommInitClusterInfo(); HCCL_E_PARA also for a config whose
 *         magic word is wrong or whose field values are out of range.
 */
HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank,
                                         HcclCommConfig *config, HcclComm *comm);

/**
 * @brief Create a communicator over a subset of an existing one's ranks.
 *
 * Every rank listed in @p rankIds calls it with the same list and id.
 *
 * @param comm pointer to the parent communicator handle.
 * @param rankNum number of entries in @p rankIds.
 * @param rankIds parent ranks that form the sub-communicator, in new-rank order.
 * @param subCommId identifier of this sub-communicator, unique in the parent.
 * @param subCommRankId this process's rank in the sub-communicator.
 * @param config settings for the new communicator, or NULL for defaults.
 * @param subComm receives the new communicator on success.
 * @return HCCL_SUCCESS; HCCL_E_PTR for a NULL handle or list; HCCL_E_PARA for
 *         an empty or repeated rank list, a rank outside the parent, or a
 *         @p subCommRankId that does not match this process's position.
 */
HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds,
                                   uint64_t subCommId, uint32_t subCommRankId,
                                   HcclCommConfig *config, HcclComm *subComm);

/**
 * @brief Make the rendezvous information for a new communicator.
 *
 * Called on one rank (normally rank 0); the result is sent to all ranks.
 *
 * @param rootInfo receives the rendezvous information.
 * @return HCCL_SUCCESS; HCCL_E_PTR if @p rootInfo is NULL; HCCL_E_INTERNAL or
 *         HCCL_E_SYSCALL if the rendezvous listener cannot be started.
 */
HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo);

/**
 * @brief Join a communicator of @p nRanks ranks; blocks until all have joined.
 *
 * @param nRanks number of ranks in the communicator.
 * @param rootInfo rendezvous information from HcclGetRootInfo().
 * @param rank this process's rank, in [0, nRanks).
 * @param comm receives the new communicator on success.
 * Joining is tied to the root info and to the caller's uid: the root
 * refuses a process of another uid, and one that cannot prove it holds this
 * root info's unique id (which never crosses the wire); a refused join
 * changes nothing for the real ranks.
 *
 * @return HCCL_SUCCESS; HCCL_E_PTR if a pointer is NULL; HCCL_E_PARA if
 *         @p nRanks is 0 or @p rank is out of range or peers disagree, or at
 *         once when the root refuses this process (another uid, a root info
 *         of another session) or the root info's session is over (it was
 *         used up or timed out; the root's process still runs);
 *         HCCL_E_REMOTE within about a second when the root's process or a
 *         rank that had joined dies during init (every survivor gets this
 *         one code), or a peer's init failed; HCCL_E_TIMEOUT if not every
 *         rank joins within HCCL_CONNECT_TIMEOUT.
 */
HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                HcclComm *comm);

/**
 * @brief Like HcclCommInitRootInfo(), with per-communicator settings.
 *
 * @param nRanks number of ranks in the communicator.
 * @param rootInfo rendezvous information from HcclGetRootInfo().
 * @param rank this process's rank, in [0, nRanks).
 * @param config settings filled by HcclCommConfigInit() and then edited.
 * @param comm receives the new communicator on success.
 * @return as HcclCommInitRootInfo(); HCCL_E_PARA also for a config whose
 *         magic word is wrong or whose field values are out of range.
 */
HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                      const HcclCommConfig *config, HcclComm *comm);

/**
 * @brief Copy the communicator's name.
 *
 * @param comm the communicator.
 * @param commName buffer of at least COMM_NAME_MAX_LENGTH bytes; receives a
 *        NUL-terminated name.
 * @return HCCL_SUCCESS; HCCL_E_PTR if an argument is NULL.
 */
HcclResult HcclGetCommName(HcclComm comm, char *commName);

/**
 * @brief Report the number of ranks in the communicator.
 *
 * @param comm the communicator.
 * @param rankSize receives the rank count.
 * @return HCCL_SUCCESS; HCCL_E_PTR if an argument is NULL.
 */
HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);

/**
 * @brief Report this process's rank in the communicator.
 *
 * @param comm the communicator.
 * @param rank receives the rank id.
 * @return HCCL_SUCCESS; HCCL_E_PTR if an argument is NULL.
 */
HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);

/**
 * @brief Enqueue a barrier: work queued after it on @p stream starts only
 *        when every rank has reached the barrier.
 *
 * @param comm the communicator.
 * @param stream stream to enqueue on.
 * A NULL @p stream is the current device's default stream.
 * @return HCCL_SUCCESS; HCCL_E_PTR if @p comm is NULL;
 *         HCCL_E_SUSPENDING if the communicator is suspended.
 */
HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);

/**
 * @brief Destroy a communicator and release its resources.
 *
 * Work already enqueued on streams is completed first.
 *
 * @param comm the communicator; invalid after the call (its handle is never
 *        given out again).
 * @return HCCL_SUCCESS; HCCL_E_PTR if @p comm is NULL; HCCL_E_PARA if it is
 *         not a live communicator; HCCL_E_NOT_SUPPORT in a forked child (the
 *         parent's communicator is left alone) or from a stream task while
 *         operations of @p comm are queued.
 */
HcclResult HcclCommDestroy(HcclComm comm);

/**
 * @brief Create one communicator per device in a single process.
 *
 * Rank i of the result runs on device @p devices[i]; all ranks are local.
 *
 * @param ndev number of devices and of communicators made.
 * @param devices logical device ids, @p ndev entries, no repeats.
 * @param comms array of @p ndev handles that receives the communicators.
 * @return HCCL_SUCCESS; HCCL_E_PTR if an array is NULL; HCCL_E_PARA if
 *         @p ndev is 0, a device id is invalid or repeated.
 */
HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms);

/**
 * @brief Read the first asynchronous error seen by the communicator.
 *
 * @param comm the communicator.
 * @param asyncError receives HCCL_SUCCESS or the recorded error.
 * @return HCCL_SUCCESS; HCCL_E_PTR if an argument is NULL.
 */
HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError);

/**
 * @brief Describe a status code in a short English phrase.
 *
 * @param code any value.
 * @return a static string, never NULL ("unknown error" for undefined codes).
 */
const char *HcclGetErrorString(HcclResult code);

/**
 * @brief Report which HcclCommConfig settings this library accepts.
 *
 * @return a count, not a mask: HcclCommConfigCapability value v is supported
 *         when the result is greater than v (here HCCL_COMM_CONFIG_RESERVED:
 *         every field of the layout is accepted).
 */
uint32_t HcclGetCommConfigCapability(void);

/**
 * @brief Fill @p config with the current layout header and "not set" values.
 *
 * Inline so the size and version recorded are those the caller compiled
 * against. Does nothing when @p config is NULL.
 *
 * @param config the settings to initialise.
 */
static inline void HcclCommConfigInit(HcclCommConfig *config)
{
    size_t i;
    unsigned char *bytes = (unsigned char *)config;

    if (config == NULL) {
        return;
    }
    /* Clear padding too, so no uninitialised byte ever reaches the library. */
    for (i = 0; i < sizeof(*config); i++) {
        bytes[i] = 0;
    }
    config->size = sizeof(HcclCommConfig);
    config->magicWord = HCCL_COMM_CONFIG_MAGIC_WORD;
    config->version = HCCL_COMM_CONFIG_VERSION;
    config->reserved = 0;
    config->hcclBufferSize = HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET;
    config->hcclDeterministic = HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET;
    config->hcclOpExpansionMode = HCCL_COMM_DEFAULT_OP_EXPANSION_MODE;
    config->hcclRdmaTrafficClass = HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET;
    config->hcclRdmaServiceLevel = HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET;
    config->hcclWorldRankID = 0;
    config->hcclJobID = 0;
    config->aclGraphZeroCopyEnable = 0;
    config->hcclExecTimeOut = HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET;
    config->hcclQos = HCCL_COMM_QOS_CONFIG_NOT_SET;
    config->hcclSymWinMaxMemSizePerRank = HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE;
    config->hcclChannelSqDepth = HCCL_COMM_SQ_DEPTH_CONFIG_NOT_SET;
}

/**
 * @brief Suspend the communicator (NPU link recovery in CANN).
 *
 * zccl has no links to suspend: it always returns HCCL_E_NOT_SUPPORT and logs
 * one line saying so.
 *
 * @param comm the communicator.
 * @return HCCL_E_NOT_SUPPORT.
 */
HcclResult HcclCommSuspend(HcclComm comm);

/**
 * @brief Resume a suspended communicator (NPU link recovery in CANN).
 *
 * zccl never suspends: it always returns HCCL_E_NOT_SUPPORT and logs one line.
 *
 * @param comm the communicator.
 * @return HCCL_E_NOT_SUPPORT.
 */
HcclResult HcclCommResume(HcclComm comm);

/**
 * @brief Declare a reserved virtual range that may hold zero-copy buffers.
 *
 * The first call on a communicator is collective (all its ranks call it
 * together); later calls are local. The range is visible to every
 * communicator of the process: set it once. Ranges must not overlap.
 *
 * @param comm the communicator.
 * @param baseVirPtr page-aligned start, inside one reservation made with
 *        aclrtReserveMemAddress().
 * @param size length of the range in bytes, non-zero, inside that reservation.
 * @param alignment reserved: a non-zero value is logged (info) and ignored.
 * @param flags reserved: a non-zero value (frameworks pass 1) is logged
 *        (info) and ignored.
 * @return HCCL_SUCCESS; HCCL_E_PTR if @p comm or @p baseVirPtr is NULL;
 *         HCCL_E_PARA for a zero size, a size that wraps the address space, an
 *         unaligned base, memory that is not one reservation (malloc(),
 *         aclrtMalloc()), or an overlap with a range already set.
 */
HcclResult HcclCommSetMemoryRange(HcclComm comm, void *baseVirPtr, size_t size, size_t alignment,
                                  uint64_t flags);

/**
 * @brief Withdraw a range set by HcclCommSetMemoryRange().
 *
 * @param comm the communicator.
 * @param baseVirPtr the base passed to HcclCommSetMemoryRange().
 * Waits for the communicator's queued operations first.
 *
 * @return HCCL_SUCCESS; HCCL_E_PTR if an argument is NULL; HCCL_E_NOT_FOUND if
 *         no range starts there; HCCL_E_PARA while blocks in it are active;
 *         HCCL_E_NOT_SUPPORT from a stream task while operations are queued.
 */
HcclResult HcclCommUnsetMemoryRange(HcclComm comm, void *baseVirPtr);

/**
 * @brief Activate a mapped physical allocation for zero-copy transfers.
 *
 * The block is active for every communicator of the process. Blocks may be
 * activated one at a time as a pool grows: a buffer spanning adjacent active
 * blocks of one range is zero-copy.
 *
 * @param comm the communicator.
 * @param virPtr start of the block, inside a range already set.
 * @param size length of the block in bytes, non-zero.
 * @param offset must be 0.
 * @param handle the physical allocation aclrtMapMem() mapped at @p virPtr,
 *        from the allocation's start, covering @p size bytes.
 * @param flags must be 0.
 * @return HCCL_SUCCESS; HCCL_E_PTR for a NULL pointer or handle; HCCL_E_PARA
 *         if the block is not wholly inside a set range, overlaps an active
 *         block, @p offset or @p flags is non-zero, or @p handle is not the
 *         allocation mapped at @p virPtr (another block's handle, or the right
 *         handle at an address that is not the start of its mapping).
 */
HcclResult HcclCommActivateCommMemory(HcclComm comm, void *virPtr, size_t size, size_t offset,
                                      aclrtDrvMemHandle handle, uint64_t flags);

/**
 * @brief Deactivate a whole block activated by HcclCommActivateCommMemory().
 *
 * @param comm the communicator.
 * @param virPtr the start address passed when activating.
 * Waits for the communicator's queued operations first, so an operation
 * issued before the call still sees the block active.
 *
 * @return HCCL_SUCCESS; HCCL_E_PTR if an argument is NULL; HCCL_E_NOT_FOUND if
 *         no active block starts at @p virPtr; HCCL_E_NOT_SUPPORT from a
 *         stream task while operations are queued.
 */
HcclResult HcclCommDeactivateCommMemory(HcclComm comm, void *virPtr);

/**
 * @brief Open a group: point-to-point and collective calls made until the
 *        matching HcclGroupEnd() are issued together. Groups nest.
 *
 * @return HCCL_SUCCESS.
 */
HcclResult HcclGroupStart(void);

/**
 * @brief Close the innermost group; the outermost close issues its calls.
 *
 * @return HCCL_SUCCESS; HCCL_E_PARA without a matching HcclGroupStart(); the
 *         first error of a grouped call otherwise.
 */
HcclResult HcclGroupEnd(void);

/**
 * @brief Register memory as a symmetric window of the communicator.
 *
 * All ranks call it together with the same @p size; the window is the whole
 * physical allocation mapped at @p addr (its size is that allocation's) and
 * takes the next offset of the per-rank symmetric heap, the same on every
 * rank. Collectives whose buffers lie in windows run zero-copy.
 *
 * @param comm the communicator.
 * @param addr start of a physical allocation mapped with aclrtMapMem() in a
 *        reservation.
 * @param size bytes, non-zero, at most the allocation and the per-rank heap
 *        (HcclCommConfig.hcclSymWinMaxMemSizePerRank GB, default 16).
 * @param winHandle receives the window handle.
 * @param flag HCCL_WIN_COLL_SYMMETRIC (1).
 * @return HCCL_SUCCESS; HCCL_E_PTR if a pointer is NULL; HCCL_E_PARA on every
 *         rank when any rank's arguments are wrong or the sizes or heap
 *         offsets differ between ranks, and for a flag other than 0 and 1;
 *         HCCL_E_NOT_SUPPORT for HCCL_WIN_DEFAULT (0).
 */
HcclResult HcclCommSymWinRegister(HcclComm comm, void *addr, uint64_t size,
                                  HcclCommSymWindow *winHandle, uint32_t flag);

/**
 * @brief Deregister a window made by HcclCommSymWinRegister().
 *
 * Local (not collective). The window's block and range are withdrawn
 * unless the caller had set them up itself; HcclCommDestroy() deregisters
 * the windows left.
 *
 * @param winHandle the window; invalid after the call.
 * @return HCCL_SUCCESS; HCCL_E_PTR if @p winHandle is NULL; HCCL_E_NOT_FOUND
 *         if it is not a registered window.
 */
HcclResult HcclCommSymWinDeregister(HcclCommSymWindow winHandle);

/**
 * @brief Find the registered window holding [ptr, ptr + size).
 *
 * @param comm the communicator.
 * @param ptr an address inside a registered window.
 * @param size length in bytes, non-zero; the span must end inside the window.
 * @param winHandle receives the window handle.
 * @param offset receives @p ptr minus the window's start.
 * @return HCCL_SUCCESS; HCCL_E_PTR if a pointer is NULL; HCCL_E_PARA for a
 *         zero size; HCCL_E_NOT_FOUND if no window holds the span.
 */
HcclResult HcclCommSymWinGet(HcclComm comm, void *ptr, size_t size, HcclCommSymWindow *winHandle,
                             size_t *offset);

#ifdef __cplusplus
}
#endif

#endif /* HCCL_COMM_H_ */
