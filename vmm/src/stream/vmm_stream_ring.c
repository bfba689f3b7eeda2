/*
 * The stream task ring, producer side: reserve a slot, publish it, push a
 * task (the waits for `done` are vmm_stream_wait.c's). See vmm_stream.h.
 */
#include "stream/vmm_stream.h"

#include "zc/export.h"
#include "zc/log.h"
#include "zc/sync.h"

/* ---- enqueue --------------------------------------------------------------------- */

/* May work run on the caller's thread in place of a task of s? Only when
 * nothing is queued or running on s (event waits are tasks, so a pending one
 * counts) and s is not closing. The one place this decision lives. */
int vmm_stream_idle(vmm_stream_t *s)
{
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 && vmm_capture_on(s)) {
        return 0; /* its work is recorded for replays, never run here */
    }
    return !atomic_load_explicit(&s->closing, memory_order_relaxed) &&
           atomic_load_explicit(&s->done, memory_order_acquire) ==
               atomic_load_explicit(&s->tail, memory_order_acquire);
}

/* Reserve the next slot. With want_idle, take it only when the stream is
 * idle (*idle = 1), else reserve it anyway (*idle = 0). */
aclError vmm_stream_reserve(vmm_stream_t *s, int want_idle, uint64_t *pos, int *idle)
{
    int self = vmm_stream_is_self(s);
    atomic_fetch_add_explicit(&s->producers, 1, memory_order_seq_cst);
    for (;;) {
        if (atomic_load_explicit(&s->closing, memory_order_seq_cst)) {
            atomic_fetch_sub_explicit(&s->producers, 1, memory_order_seq_cst);
            vmm_stream_kick(s); /* the worker may wait for producers to leave */
            ZC_WARN(ZC_SUB_STREAM, "enqueue on stream %p: the stream is being destroyed",
                    (void *)s);
            return ACL_ERROR_RT_INVALID_HANDLE;
        }
        uint64_t t = atomic_load_explicit(&s->tail, memory_order_acquire);
        uint64_t seq =
            atomic_load_explicit(&s->ring[t & (VMM_STREAM_DEPTH - 1)].seq, memory_order_acquire);
        if (seq == t) {
            int was_idle = want_idle && vmm_stream_idle(s) &&
                           atomic_load_explicit(&s->done, memory_order_acquire) == t;
            /* seq_cst: a claimer finishing slot t - 1 reads tail after it
             * stored head (zccl_task_finish) and must see this reservation,
             * or this producer's later kick sees the worker past the claim */
            if (atomic_compare_exchange_weak_explicit(&s->tail, &t, t + 1, memory_order_seq_cst,
                                                      memory_order_relaxed)) {
                *pos = t;
                *idle = was_idle;
                return ACL_SUCCESS;
            }
            continue;
        }
        if ((int64_t)(seq - t) > 0) {
            continue; /* another producer took t */
        }
        if (self) {
            atomic_fetch_sub_explicit(&s->producers, 1, memory_order_seq_cst);
            ZC_WARN(ZC_SUB_STREAM,
                    "enqueue on stream %p from its own task: the queue is full "
                    "(%u tasks)",
                    (void *)s, VMM_STREAM_DEPTH);
            return ACL_ERROR_RT_NO_STREAM_RESOURCE;
        }
        /* Full: run the queued work here while the worker is not running it
         * (then the stream is idle again and small ops go back to the
         * caller's thread), else sleep until half the ring is free (the
         * worker needs the core more than a spinning producer does). */
        vmm_stream_help(s, t);
        (void)vmm_stream_wait_done(s, t - VMM_STREAM_DEPTH / 2, zc_time_ns() + VMM_SLICE_NS, 1);
    }
}

/* Publish reserved slot pos to the worker. */
void vmm_stream_publish(vmm_stream_t *s, uint64_t pos, zccl_task_fn fn, void *arg,
                        void (*dtor)(void *), struct vmm_issuer *who, int helpable)
{
    vmm_slot_t *t = &s->ring[pos & (VMM_STREAM_DEPTH - 1)];
    t->fn = fn;
    t->arg = arg;
    t->dtor = dtor;
    t->who = who;
    t->helpable = helpable;
    atomic_store_explicit(&t->seq, pos + 1, memory_order_seq_cst);
    atomic_fetch_sub_explicit(&s->producers, 1, memory_order_seq_cst);
    vmm_stream_kick(s);
}

aclError vmm_stream_push(vmm_stream_t *s, zccl_task_fn fn, void *arg, void (*dtor)(void *))
{
    aclError captured;
    if (atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 &&
        vmm_capture_push(s, fn, arg, dtor, &captured)) {
        return captured; /* kept by graph capture for replays, not run */
    }
    uint64_t pos;
    int idle;
    aclError rc = vmm_stream_reserve(s, 0, &pos, &idle);
    if (rc == ACL_SUCCESS) {
        vmm_stream_publish(s, pos, fn, arg, dtor, NULL, 0);
    }
    return rc;
}
