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
 *
 * So this file sits above the op path, the send/recv path and the tier
 * across hosts: every HCCL call that issues work comes through zh_submit_op /
 * zh_submit_p2p, which hand a comm that spans hosts to that tier, keep the
 * call when the stream captures and issue it otherwise.
 */
#ifndef HCCL_CAPTURE_H
#define HCCL_CAPTURE_H

#include "core/hccl_internal.h"

/** Issue collective op on stream (zh_op_submit), or keep it for replays when
 *  stream is capturing. */
HcclResult zh_submit_op(zh_comm_t *c, const zh_op_t *op, aclrtStream stream);

/** Check a send/recv batch of n items and issue it on stream (zh_p2p_start),
 *  or keep it for replays when stream is capturing. */
HcclResult zh_submit_p2p(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n,
                         aclrtStream stream);

#endif /* HCCL_CAPTURE_H */
