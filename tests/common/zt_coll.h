/*
 * Cases for the collectives beyond AllReduce / AllGather, shared by the mp,
 * mpi and thread tests: ReduceScatter(V), Reduce, Broadcast, Scatter,
 * AllGatherV and AlltoAll(V, VC), compiled once into the test library
 * (zt_coll.c). This file: cases, arguments, data and the serial reference; running and
 * checking a case: zt_coll_run.h; the scenarios: zt_coll_scen.h.
 *
 * A case (zt_cc_t) is the same value on every rank. zt_cc_plan() derives from
 * it the arguments a given rank passes (counts, per-rank displacements,
 * extents, in-place offsets), so any rank can rebuild any other rank's
 * arguments and input and compute its own expected output serially, with no
 * communication.
 *
 * Data: a rank's input elements are zt_fill()'s elements (zt_check.h) at a
 * logical index that does not depend on where a block sits in memory: block
 * q of a ReduceScatterV input holds logical elements [L(q), L(q) + cnt(q))
 * with L(q) the sum of the counts before q, whatever its displacement. So
 * the serial reference (rank order, fp16/bf16 in fp32) needs only the
 * counts.
 *
 * Layouts: V displacements differ per rank: blocks go in a rank-rotated,
 * reversed order with gaps of 0-2 elements, so a block's place is always
 * computed from the arrays, never assumed packed (AlltoAllVC is packed, as
 * the call defines). Counts follow a shape: even, uneven with zeros (ranks
 * 1, 4, ...), or sparse (one non-zero block).
 *
 * Check (zt_coll_run.h): the output region, with ZT_CC_GUARD bytes either
 * side, is copied before the call; the expected image is that copy with
 * this rank's output blocks written. After the sync every byte of the
 * region must match it: the results element by element against the
 * reference, and unchanged gaps, guards, buffers a rank's role ignores and,
 * in place, input bytes outside the output. Out of place the whole input
 * region must be unchanged. Then the path: on the zero-copy path staged
 * bytes stay put and the zero-copy op counter moves; on the buffered path
 * the buffered one.
 */
#ifndef ZT_COLL_H
#define ZT_COLL_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zt_check.h"

#define ZT_CC_MAXR 8         /* ranks the case tables hold */
#define ZT_CC_ROOM 4096      /* bytes free before each region in an arena half */
#define ZT_CC_GUARD 64       /* bytes either side of a region that must not change */
#define ZT_CC_SENT 0xa5      /* fill of output regions */
#define ZT_CC_SEND_SENT 0x5a /* fill of input regions around the data */

enum {
    ZT_CC_REDUCESCATTER = 0,
    ZT_CC_REDUCESCATTERV,
    ZT_CC_REDUCE,
    ZT_CC_BROADCAST,
    ZT_CC_SCATTER,
    ZT_CC_ALLGATHERV,
    ZT_CC_ALLTOALL,
    ZT_CC_ALLTOALLV,
    ZT_CC_ALLTOALLVC,
    ZT_CC_NCOLLS
};

/** Shapes of V counts. */
enum { ZT_V_EVEN = 0, ZT_V_UNEVEN = 1, ZT_V_SPARSE = 2 };

/** Where buffers live: plain memory, activated memory, or plain on rank 0 only. */
enum { ZT_MEM_PLAIN = 0, ZT_MEM_ZC = 1, ZT_MEM_MIXED = 2 };

/** What the last rank passes differently (the op must fail with HCCL_E_PARA everywhere). */
enum {
    ZT_DEV_NONE = 0,
    ZT_DEV_COUNT,  /* count + 1 */
    ZT_DEV_DTYPE,  /* another type of the same size */
    ZT_DEV_DSIZE,  /* a type of another size */
    ZT_DEV_OP,     /* another reduction */
    ZT_DEV_ROOT,   /* root + 1 */
    ZT_DEV_VARRAY, /* one entry of a V count array (matrix) + 1 */
};

/** One collective call, the same on every rank. */
typedef struct {
    int coll;         /**< ZT_CC_* */
    int dtype;        /**< HcclDataType */
    int op;           /**< HcclReduceOp (reductions only) */
    uint64_t count;   /**< the count argument, or the base of the V counts */
    int root;         /**< Reduce, Broadcast, Scatter */
    int vshape;       /**< ZT_V_* (V collectives) */
    int mem;          /**< ZT_MEM_* */
    int in_place;     /**< 0; 1: the canonical in-place form; 2: the other overlap */
    int misalign;     /**< buffers one element past an aligned address (3 bytes for 1-byte types) */
    int null_ignored; /**< pass NULL for the buffer a rank's role ignores */
    int deviate;      /**< ZT_DEV_* applied on the last rank */
    uint64_t seed;    /**< data selector */
    int mode;         /**< ZT_FILL_EXACT, or ZT_FILL_ROUNDING (float reductions: order shows) */
} zt_cc_t;

/** A rank's arguments for a case. */
typedef struct {
    int n;
    int rank;
    int dtype;
    int op;
    int root;
    size_t es;
    uint64_t count;                        /* the count argument this rank passes */
    uint64_t scnt[ZT_CC_MAXR];             /* ReduceScatterV / AlltoAllV send counts */
    uint64_t sdsp[ZT_CC_MAXR];             /* ... and displacements (AlltoAllVC: packed) */
    uint64_t rcnt[ZT_CC_MAXR];             /* AllGatherV / AlltoAllV recv counts */
    uint64_t rdsp[ZT_CC_MAXR];             /* ... and displacements */
    uint64_t mat[ZT_CC_MAXR * ZT_CC_MAXR]; /* AlltoAllVC count matrix */
    size_t sreg;                           /* bytes of the input region set up */
    size_t rreg;                           /* bytes of the output region set up */
    size_t slib;                           /* bytes the library reads from the input on this rank */
    size_t rlib;                           /* bytes it may write to the output on this rank */
    int in_place;                          /* 0, 1 or 2 after normalisation */
    size_t outer;                          /* in place: bytes of the one buffer */
    size_t soff;                           /* in place: send's offset in it */
    size_t roff;                           /* in place: recv's offset in it */
    int send_null;                         /* send passed as NULL */
    int recv_null;                         /* recv passed as NULL */
    int zc;                                /* this rank's buffers are activated memory */
} zt_cplan_t;

const char *zt_cc_name(int coll);

void zt_cc_str(const zt_cc_t *c, char *buf, size_t len);

/* ---- counts and layouts ------------------------------------------------------ */

/** Another HcclDataType of the same size (other_size 0) or of another size (1). */
int zt_cc_alt_dtype(int dtype, int other_size);

/**
 * Rank rank's arguments for case c on n ranks; with dev, the last rank's
 * deviation (c->deviate) applied. Returns 0, or -1 for a case the tables
 * cannot hold.
 */
int zt_cc_plan(const zt_cc_t *c0, int n, int rank, int dev, zt_cplan_t *p);

/** Bytes an arena half must hold for case c on any rank of n (deviant plans included). */
size_t zt_cc_need(const zt_cc_t *c, int n);

/* ---- data and reference -------------------------------------------------------- */

/** Write this rank's input data at send (the data of its role only). */
void zt_cc_fill_send(const zt_cc_t *c, const zt_cplan_t *p, unsigned char *send);

/** Write this rank's expected output blocks at out (recv). Returns 0 or -1. */
int zt_cc_expect(const zt_cc_t *c, const zt_cplan_t *p, unsigned char *out);

/** Issue the call for plan a (its arrays are the caller's to scribble afterwards). */
HcclResult zt_cc_call(int coll, const zt_cplan_t *a, void *send, void *recv, HcclComm comm,
                      aclrtStream stream);

#endif /* ZT_COLL_H */
