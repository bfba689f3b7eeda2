/*
 * HCCL ops issued on a capturing stream (aclmdlRICaptureBegin .. End).
 *
 * The op is checked as usual, then kept in the model being captured instead
 * of being queued: a template {comm handle, op, copies of its count arrays}.
 * Each aclmdlRIExecuteAsync of the model submits the template again, on the
 * stream the model runs on, as a new op: it takes its own sequence number in
 * issue order and is matched across ranks like any other op. A template holds
 * no reference that keeps its communicator alive (the comm is looked up at
 * each replay; a destroyed one fails the replay with a clear error), so
 * HcclCommDestroy never waits for a model.
 */
#ifndef HCCL_CAPTURE_H
#define HCCL_CAPTURE_H

#include "hccl_internal.h"

/** Keep collective op for replays of the model capturing on stream. */
HcclResult zh_capture_op(zh_comm_t *c, const zh_op_t *op, aclrtStream stream);

/** Keep a send/recv batch of n items for replays of the model capturing on stream. */
HcclResult zh_capture_p2p(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n,
                          aclrtStream stream);

#endif /* HCCL_CAPTURE_H */
