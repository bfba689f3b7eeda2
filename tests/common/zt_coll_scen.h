/*
 * Collective scenarios for the mp, mpi and thread tests, built from the
 * cases of zt_coll.h (in the test library, zt_coll_scen.c):
 *
 *  - zt_cc_matrix_run: every collective x {zero-copy, buffered} x {in place
 *    (both overlaps where the call has two), out of place}, each element
 *    against the serial reference. Reductions: all 12 dtypes x 4 ops at
 *    counts 7 and 1000, counts 0 and 1, values that need rounding (the rank
 *    order and fp32 accumulation show), every Reduce root, past the
 *    one-shot size. Copies: 1-, 2-, 4- and 8-byte types at counts 0, 1, 7,
 *    1000, aligned 4099, int128 and 8-bit float types, every root of
 *    Broadcast and Scatter, NULL for the buffers a role ignores. V counts
 *    even, uneven with zeros and sparse, with per-rank displacements. Large
 *    cases the buffered path chunks under HCCL_BUFFSIZE=1. Then ranks whose
 *    memory is partly plain (every rank must take the buffered path), and
 *    pairs of collectives queued on the stream before one sync.
 *    Zero-copy cases run first on a fresh communicator, so its staged bytes
 *    must still be 0 and its CCL buffer not created when they are done.
 *  - zt_cc_mismatch_run: the last rank passes another count, dtype, op,
 *    root or V array: HCCL_E_PARA on every rank, nothing written, and the
 *    next agreeing op works.
 *  - zt_cc_badargs_run: local argument errors return from the call itself
 *    with the documented code (every rank makes the same bad calls, nothing
 *    is enqueued, so the communicator stays in step).
 *
 * Each returns the number of failures it printed.
 */
#ifndef ZT_COLL_SCEN_H
#define ZT_COLL_SCEN_H

#include "zt_coll_run.h"

/** A growable list of cases. */
typedef struct {
    zt_cc_t *v;
    int n;
    int cap;
    uint64_t seq;  /* seeds drawn so far */
    uint64_t base; /* seed base */
} zt_cclist_t;

/** What the matrix runs. */
typedef struct {
    uint64_t seed;
    uint64_t big;   /**< elements of the large cases (4-byte types); 0: none */
    int full_cross; /**< reductions: every dtype x op both in and out of place (0: alternating) */
} zt_ccmatrix_t;

/** The matrix (see the top of this file). Returns the failures. */
int zt_cc_matrix_run(zt_env_t *env, const zt_ccmatrix_t *m);

/** What zt_cc_mismatch_run runs. */
typedef struct {
    uint64_t seed;
    int vcoll; /**< -1: the count, dtype, op and root mismatches of every collective; else
                    the V-array mismatch of this ZT_CC_ collective only */
    int mem;   /**< with vcoll: ZT_MEM_ZC or ZT_MEM_PLAIN */
} zt_ccmismatch_t;

/**
 * Mismatches between ranks (see the top of this file), each followed by an
 * agreeing op on the same communicator. Returns the failures.
 */
int zt_cc_mismatch_run(zt_env_t *env, const zt_ccmismatch_t *mm);

/** Local argument errors of every collective (see the top of this file). */
int zt_cc_badargs_run(zt_env_t *env);

#endif /* ZT_COLL_SCEN_H */
