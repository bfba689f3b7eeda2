/*
 * The op path: numbering, ordering, descriptor, agreement, path choice,
 * algorithm, exit handshake.
 *
 * Issue (the caller's thread). An HCCL collective call checks its local
 * arguments, enters the comm's issue window (one thread at a time: a second
 * thread overlapping the window is refused with HCCL_E_PARA and breaks the
 * comm, since the two threads' ops would interleave differently on each
 * rank), reserves a slot on the stream's task ring and takes the op's
 * sequence number there. Issuing from another thread after the first one
 * left the window is allowed (a hand-off under the program's own lock, as
 * DDP's autograd hooks do), and so it cannot be told from a race that never
 * overlaps: two threads issuing identical ops whose order differs between
 * ranks are indistinguishable, to any library, from one order. So ops
 * of one comm are numbered in issue order whatever streams carry them, and
 * op k of every rank is the k-th collective its caller issued.
 *
 * Order. Op k starts only when op k - 1 finished on this rank (exec_done);
 * an op that reaches the front of its stream early waits for it (spin, then
 * futex sleeps, bounded by the exec timeout, failing at once when the comm
 * broke). Post slots are by k & 1, so two ops of one comm never overlap.
 *
 * Per op every rank:
 *   1. publishes its descriptor and post line (slot k & 1);
 *   2. waits for every peer's post line of op k (entry);
 *   3. compares every post with rank 0's (same for all ranks, so every rank
 *      reaches the same verdict: a mismatch fails the op with HCCL_E_PARA
 *      everywhere, logged with the rank and field that differ);
 *   4. small AllReduce / AllGather on activated memory everywhere: finishes
 *      from the post slots (no exit barrier). Otherwise zero-copy if every
 *      rank's buffers lie wholly in activated memory, else buffered;
 *   5. resolves pointers (translation for zero-copy, CCL buffers otherwise)
 *      and runs the algorithm from collectives/;
 *   6. barrier (exit): nobody returns while a peer may still read its buffers.
 * A local failure (translation, mapping) raises the rank's error flag so that
 * peers fail their waits at once instead of timing out; the exit barrier is
 * still attempted so buffers are not released under a reader.
 *
 * The caller-thread path. A Barrier, an op small enough for step 4, or a
 * zero-copy collective within the comm's caller_max per buffer
 * (zh_op_caller_ok), whose stream is idle (nothing queued or running, vmm
 * decides) and whose predecessors are done, runs on the caller's thread: it
 * posts, waits at most ZH_INLINE_WAIT_NS for the peers' posts, and finishes
 * (steps 3-6). If the peers are late, or the posts show the op needs the
 * buffered path, the claimed slot is handed to the stream worker, which goes
 * on from step 2. Past step 2 nothing can be late for good: every rank has
 * posted op k, so each has a thread in op k that needs nothing but op k's
 * own steps, and the caller may wait in the algorithm and the exit barrier
 * like the worker would (bounded by the exec timeout). Work that
 * other threads queue on the stream meanwhile lands behind that slot, so
 * stream order holds, and a program that relies on asynchronous streams
 * (rank 0 waits in an op on stream A while its peer first needs a Send that
 * rank 0 queued on stream B) still completes.
 *
 * Files: hccl_op.c (issue: the issue window, numbering, the caller-thread
 * path), hccl_op_post.c (step 1 and the agreement of step 3),
 * hccl_op_path.c (steps 4-6: path choice, translation, dispatch, exit),
 * hccl_op_task.c (the stream task: order, the result, retirement). This
 * header is private to those files.
 */
#ifndef HCCL_OP_H
#define HCCL_OP_H

#include "core/hccl_internal.h"
#include "core/hccl_prof.h"

#include "zccl/vmm_ext.h"

enum { ZH_STEP_ISSUED, ZH_STEP_POSTED, ZH_STEP_RETIRED };

/* An op's task, in its stream slot's payload (no allocation per op). */
typedef struct {
    zh_comm_t *comm;
    zh_op_t op;
    uint64_t *arrays; /* V collectives only: copies of op.v (ZH_V_* x nranks) */
    uint32_t seq;     /* issue order on the comm */
    int step;         /* ZH_STEP_*: how far it got */
    zh_prof_mark_t prof;
} zh_task_t;
_Static_assert(sizeof(zh_task_t) <= ZCCL_TASK_PAYLOAD, "an op task fits a stream slot");

typedef int (*zh_coll_fn)(const coll_args_t *a);

/* Add n to one of the comm's op counters. Only ops count, and a comm's ops
 * run one at a time (op k after op k - 1 retired): a plain increment, no
 * locked instruction. */
static inline void zh_count(atomic_uint_fast64_t *v, uint64_t n)
{
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* Per collective: its algorithms and which arguments must agree across ranks. */
typedef struct {
    zh_coll_fn direct;
    zh_coll_fn staged;
    unsigned has_root : 1;
    unsigned has_redop : 1;
    unsigned count_equal : 1; /* count must match across ranks */
} zh_op_info_t;

extern const zh_op_info_t zh_ops[ZH_OP_MAX];

/* hccl_op_post.c */
int zh_op_inlinable(const zh_op_t *op);
int zh_op_caller_ok(const zh_comm_t *c, const zh_op_t *op);
void zh_op_post(zh_comm_t *c, const zh_task_t *t);
size_t zh_post_offset(uint32_t seq);
int zh_op_unposted(zh_comm_t *c, uint32_t seq);
int zh_op_agree(zh_comm_t *c, const zh_post_t *d0, const zh_post_t *dq, int q, uint32_t seq);

/* hccl_op_path.c */
int zh_op_complete(zh_comm_t *c, const zh_task_t *t, int inline_only);

/* hccl_op_task.c */
int zh_op_turn(zh_comm_t *c, uint32_t seq);
void zh_op_retire(zh_comm_t *c, uint32_t seq);
HcclResult zh_op_result(zh_comm_t *c, uint32_t seq, int st);
int zh_op_task(void *arg);
void zh_op_task_free(void *arg);

#endif
