/*
 * Point-to-point scenarios for the mp, mpi and thread tests (in the test
 * library, zt_coll_p2p.c): HcclSend / HcclRecv, HcclBatchSendRecv and
 * HcclGroupStart / HcclGroupEnd.
 *
 * A case (zt_pc_t) names a traffic pattern and how it is issued; from it
 * every rank derives the full list of messages (source, destination, index
 * k among the messages of that pair, count), so a receiver knows what each
 * message must hold: message k from s to d carries zt_fill()'s copy pattern
 * seeded by (case seed, d, k) for rank s. Patterns:
 *  - ring: rank r sends nmsg messages (counts count, 0, 2 count + 1, 1, ...)
 *    to r + 1 and receives as many from r - 1;
 *  - bidir: the same to both neighbours;
 *  - all-to-all: every ordered pair, uneven counts with zeros;
 *  - pair: rank 0 sends to rank 1 only (used for the mismatch cases).
 * Issue: as one group of HcclSend/HcclRecv calls, as nested groups, as one
 * HcclBatchSendRecv, or ungrouped in the classic even-sends-first order.
 * Grouped and batched items go in a rank-dependent order (sends first,
 * receives first in reverse peer order, or shuffled), always keeping the
 * order of messages within a pair and direction, which is how they match.
 *
 * Checks: every received message element by element, the receive region's
 * gaps and guards untouched, the send region unchanged, and staged bytes:
 * a rank stages exactly the bytes it sends on the buffered path and none on
 * the zero-copy path (both buffers activated, or sender and receiver in one
 * process). The pair mismatch cases want HCCL_E_PARA on both sides, nothing
 * written, and a working exchange afterwards. zt_p2p_badargs_run checks
 * local argument errors.
 */
#ifndef ZT_COLL_P2P_H
#define ZT_COLL_P2P_H

#include "zt_coll_run.h"

enum { ZT_P2P_RING = 0, ZT_P2P_BIDIR, ZT_P2P_A2A, ZT_P2P_PAIR };
enum { ZT_IS_GROUP = 0, ZT_IS_NESTED, ZT_IS_BATCH, ZT_IS_SINGLE };

#define ZT_PC_MAXMSG 96

/** One point-to-point case, the same on every rank. */
typedef struct {
    int pattern;    /**< ZT_P2P_* */
    int issue;      /**< ZT_IS_* */
    int dtype;      /**< HcclDataType */
    uint64_t count; /**< base count */
    int nmsg;       /**< messages per pair and direction */
    int send_zc;    /**< send buffers in activated memory */
    int recv_zc;    /**< receive buffers in activated memory */
    int misalign;   /**< buffers one element past an aligned address */
    int deviate;    /**< pair: rank 1 receives count + 1 (1) or another same-size type (2) */
    int with_coll;  /**< a Broadcast is issued inside the group */
    uint64_t seed;
} zt_pc_t;

/** One message of this rank. */
typedef struct {
    int dir; /* HCCL_SEND or HCCL_RECV */
    int peer;
    int k;          /* index among the messages of this pair and direction */
    uint64_t count; /* what this rank passes */
    int dtype;
    size_t off; /* offset in its arena half */
} zt_pmsg_t;

void zt_pc_str(const zt_pc_t *c, char *buf, size_t len);

#define ZT_PC_FAIL(env, c, ...)                                                                    \
    do {                                                                                           \
        char cs_[256];                                                                             \
        char m_[320];                                                                              \
        zt_pc_str((c), cs_, sizeof(cs_));                                                          \
        snprintf(m_, sizeof(m_), __VA_ARGS__);                                                     \
        zt_report((env), "%s: %s", cs_, m_);                                                       \
    } while (0)

#define ZT_PC_BCAST 1000 /* elements of the Broadcast issued inside a group */

/* A growable case list, seeds drawn in order. */
typedef struct {
    zt_pc_t *v;
    int n;
    int cap;
    uint64_t seq;
    uint64_t base;
} zt_pclist_t;

/** Rings (and neighbour exchanges) of Send/Recv; big: a message the staging must chunk. */
int zt_p2p_ring_run(zt_env_t *env, int same_proc, uint64_t big, uint64_t seed);

/** All-to-all exchanges as one HcclBatchSendRecv, a group, nested groups. */
int zt_p2p_a2a_run(zt_env_t *env, int same_proc, uint64_t big, uint64_t seed);

/** Count and type mismatches between rank 0's send and rank 1's receive. */
int zt_p2p_mismatch_run(zt_env_t *env, int same_proc, uint64_t seed);

/** Local argument errors of the point-to-point calls; then a checked ring. */
int zt_p2p_badargs_run(zt_env_t *env, int same_proc);

#endif /* ZT_COLL_P2P_H */
