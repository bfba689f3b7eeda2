/*
 * libhccl's profiling and statistics hooks (hccl_prof.c).
 *
 * The op path calls three one-line hooks: zh_prof_issue when an op is
 * queued, zh_prof_begin / zh_prof_end around its execution. With profiling
 * off each is one relaxed load of the recorder's mask (zccl/prof_ext.h) and
 * a branch; with it on, zh_prof_end turns the op into one trace record.
 * The path an op took is read from the communicator's path counters (ops of
 * one communicator run one at a time), so the op path itself only counts.
 */
#ifndef HCCL_PROF_H
#define HCCL_PROF_H

#include "core/hccl_internal.h"
#include "zc/sync.h"
#include "zccl/prof_ext.h"

/** Kept with a queued op: when it was issued and on which stream. */
typedef struct {
    uint64_t t_enq; /* 0: not recording when issued */
    aclrtStream stream;
} zh_prof_mark_t;

/** Taken when an op starts running (t0 = 0: not recording). */
typedef struct {
    uint64_t t0;
    uint64_t zc, inl, buf; /* path counters before the op */
} zh_prof_snap_t;

static inline void zh_prof_issue(zh_prof_mark_t *m, aclrtStream stream)
{
    m->stream = stream;
    m->t_enq = zccl_prof_on(ZCCL_PROF_HCCL) ? zc_time_ns() : 0;
}

void zh_prof_snap(zh_comm_t *c, zh_prof_snap_t *s);

static inline void zh_prof_begin(zh_comm_t *c, zh_prof_snap_t *s)
{
    s->t0 = 0;
    if (zccl_prof_on(ZCCL_PROF_HCCL)) {
        zh_prof_snap(c, s);
    }
}

/** Record collective op (after it ran with result r). */
void zh_prof_op(zh_comm_t *c, const zh_op_t *op, const zh_prof_mark_t *m, const zh_prof_snap_t *s,
                HcclResult r);

/** Record a send/recv batch of n items. */
void zh_prof_p2p(zh_comm_t *c, const HcclSendRecvItem *items, size_t stride, uint32_t n,
                 const zh_prof_mark_t *m, const zh_prof_snap_t *s, HcclResult r);

#define zh_prof_end(c, op, m, s, r)                                                                \
    do {                                                                                           \
        if ((s)->t0 != 0) {                                                                        \
            zh_prof_op((c), (op), (m), (s), (r));                                                  \
        }                                                                                          \
    } while (0)

/** ZCCL_PRINT_STATS: print the comm's path line (at destroy). */
void zh_stats_print(zh_comm_t *c);

#endif /* HCCL_PROF_H */
