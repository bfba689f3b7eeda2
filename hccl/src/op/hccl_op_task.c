/*
 * Ops: the stream task. Op k waits its turn (op k - 1 done here), runs steps
 * 1-6 (or goes on from where the caller-thread path stopped), maps its
 * status to its result and retires, letting op k + 1 start. See hccl_op.h.
 */
#include "op/hccl_op.h"

#include <stdlib.h>

#include "zc/log.h"
#include "zc/sync.h"

/* ---- ordering: op seq runs after op seq - 1 of this comm ------------------------------- */

int zh_op_turn(zh_comm_t *c, uint32_t seq)
{
    return (int32_t)(atomic_load_explicit(&c->exec_done, memory_order_acquire) - (seq - 1u)) >= 0;
}

/* Wait until every op issued before seq finished here (they may run on
 * other streams), bounded by the exec timeout, failing at once when the
 * comm broke or a peer failed. */
static int zh_op_wait_turn(zh_comm_t *c, uint32_t seq)
{
    for (uint32_t i = 0; i < c->spin_iters + 256u; i++) {
        if (zh_op_turn(c, seq)) {
            return ZC_OK;
        }
        if (i < c->spin_iters) {
            zc_cpu_relax();
        } else if (!zc_yield()) {
            break;
        }
    }
    uint64_t start = zc_time_ns();
    for (;;) {
        unsigned v = atomic_load_explicit(&c->exec_done, memory_order_seq_cst);
        if (zh_op_turn(c, seq)) {
            return ZC_OK;
        }
        if (atomic_load_explicit(&c->async_error, memory_order_acquire) != HCCL_SUCCESS) {
            return ZC_ERR_REMOTE;
        }
        int st = zh_wait_check(c, -1, start);
        if (st != ZC_OK) {
            ZC_WARN(ZC_SUB_COLL,
                    "rank %d: op %u gave up waiting for op %u (issued before it "
                    "on another stream)",
                    c->rank, seq, seq - 1u);
            return st;
        }
        atomic_fetch_add_explicit(&c->exec_sleepers, 1, memory_order_seq_cst);
        if (!zh_op_turn(c, seq)) {
            (void)zc_futex_wait_private(&c->exec_done, v, 100000000ull);
        }
        atomic_fetch_sub_explicit(&c->exec_sleepers, 1, memory_order_seq_cst);
    }
}

/* Op seq is over here (done, failed or dropped): let op seq + 1 start. */
void zh_op_retire(zh_comm_t *c, uint32_t seq)
{
    unsigned v = atomic_load_explicit(&c->exec_done, memory_order_relaxed);
    while ((int32_t)(seq - v) > 0 &&
           !atomic_compare_exchange_weak_explicit(&c->exec_done, &v, seq, memory_order_seq_cst,
                                                  memory_order_relaxed)) {
    }
    if (atomic_load_explicit(&c->exec_sleepers, memory_order_seq_cst) != 0) {
        zc_futex_wake_private(&c->exec_done, INT32_MAX);
    }
}

/* ---- the stream task ------------------------------------------------------------------ */

/* Map an op's internal status to its result; a lost peer or a timeout
 * breaks the comm and says who is late. */
HcclResult zh_op_result(zh_comm_t *c, uint32_t seq, int st)
{
    HcclResult r = zh_result(st);
    int err = atomic_load_explicit(&c->async_error, memory_order_acquire);
    if (err != HCCL_SUCCESS) {
        /* Broken meanwhile (another op, a misuse): that is why it failed, and
         * an op that ran while a second thread issued may have been matched
         * with the wrong op of a peer, so it must not report success. */
        return (HcclResult)err;
    }
    if (st == ZC_ERR_REMOTE || st == ZC_ERR_TIMEOUT) {
        zh_diag_report(c, seq, st == ZC_ERR_TIMEOUT ? "timed out" : "lost a peer");
        zh_comm_fail(c, st);
    }
    return r;
}

int zh_op_task(void *arg)
{
    zh_task_t *t = arg;
    zh_comm_t *c = t->comm;
    int prev_rank = zc_log_rank_enter(c->rank);
    int st = t->step == ZH_STEP_POSTED ? ZC_OK : zh_op_wait_turn(c, t->seq);
    int err = atomic_load_explicit(&c->async_error, memory_order_acquire);
    HcclResult r;
    if (err != HCCL_SUCCESS) {
        r = (HcclResult)err; /* a broken comm fails every later op at once */
    } else if (st != ZC_OK) {
        r = zh_op_result(c, t->seq, st);
    } else {
        zh_prof_snap_t snap;
        zh_prof_begin(c, &snap);
        if (t->step != ZH_STEP_POSTED) {
            zh_op_post(c, t);
        }
        atomic_store_explicit(&c->waiting_seq, t->seq, memory_order_relaxed);
        st = c->nranks == 1 ? ZC_OK : zh_wait_peers(c, zh_post_offset(t->seq), t->seq);
        atomic_store_explicit(&c->waiting_seq, 0, memory_order_relaxed);
        if (st == ZC_OK) {
            st = zh_op_complete(c, t, 0);
        }
        r = zh_op_result(c, t->seq, st);
        zh_prof_end(c, &t->op, &t->prof, &snap, r);
    }
    t->step = ZH_STEP_RETIRED;
    zh_op_retire(c, t->seq);
    zc_log_rank_leave(prev_rank, c->rank);
    return (int)r;
}

void zh_op_task_free(void *arg)
{
    zh_task_t *t = arg;
    zh_comm_t *c = t->comm;
    if (t->step != ZH_STEP_RETIRED) {
        /* Dropped by its stream (force destroy, stop-on-failure): the peers
         * will never see this rank's op, and ops after it cannot be matched. */
        ZC_WARN(ZC_SUB_COLL,
                "rank %d: op %u (%s) was dropped by its stream; the communicator "
                "is now unusable",
                c->rank, t->seq, zh_op_name(t->op.kind));
        zh_comm_fail(c, ZC_ERR_INTERNAL);
        zh_op_retire(c, t->seq);
    }
    free(t->arrays);
    atomic_fetch_sub_explicit(&c->inflight, 1, memory_order_release);
}
