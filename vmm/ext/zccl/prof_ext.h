/*
 * The op recorder behind aclprof* (libascendcl's private interface; not
 * installed, not public).
 *
 * Layering: the recorder lives in libascendcl (it sees stream copies, and
 * libhccl already depends on it); libhccl calls zccl_prof_record() for each
 * collective and point-to-point op; libmsprofiler implements aclprofInit /
 * Start / Stop / Finalize on top of zccl_prof_begin / end / take and writes
 * the trace files. Nothing here knows about communicators beyond the
 * record's plain fields.
 *
 * Cost when off: a hook is one relaxed load of zccl_prof_mask (a plain
 * exported word); zero means nothing is recorded and no clock is read.
 *
 * Protocol: zccl_prof_begin() allocates one buffer of records for the
 * process and publishes the mask; a writer reserves a slot with one atomic
 * add and copies its record in. zccl_prof_end() clears the mask and waits
 * for writers that had already passed their check, after which
 * zccl_prof_take() hands the records to the caller (slots beyond the
 * capacity are counted as dropped, never overwritten).
 */
#ifndef ZCCL_PROF_EXT_H
#define ZCCL_PROF_EXT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZCCL_PROF_HCCL 0x1u /* collectives and point-to-point ops */
#define ZCCL_PROF_COPY 0x2u /* stream copies and fills */
#define ZCCL_PROF_TX 0x4u   /* the program's own marks and ranges (msproftx) */

typedef enum {
    ZCCL_PROF_PATH_NONE = 0, /* no data moved (Barrier, a failed op) */
    ZCCL_PROF_PATH_ZERO_COPY,
    ZCCL_PROF_PATH_INLINE,
    ZCCL_PROF_PATH_BUFFERED,
    ZCCL_PROF_PATH_COPY, /* a stream copy */
    ZCCL_PROF_PATH_TX    /* a mark (t_end == t_start) or range of the program; comm = message */
} zccl_prof_path_t;

#define ZCCL_PROF_NAME_MAX 128

typedef struct {
    uint64_t t_enq; /* CLOCK_MONOTONIC ns: issued, started, finished */
    uint64_t t_start;
    uint64_t t_end;
    uint64_t count; /* elements (bytes for copies) */
    uint64_t send_bytes;
    uint64_t recv_bytes;
    uint64_t stream; /* the aclrtStream handle as issued (0 = default stream) */
    uint32_t seq;    /* op sequence number of the communicator (0 for copies) */
    int32_t rank;    /* -1 for copies */
    int32_t nranks;
    int32_t device;
    int32_t dtype;  /* HcclDataType, -1 for copies */
    int32_t peer;   /* root or remote rank, -1 when none */
    int32_t path;   /* zccl_prof_path_t */
    int32_t result; /* HcclResult / aclError of the op */
    char op[32];    /* "HcclAllReduce", "aclrtMemcpyAsync", ... */
    char comm[ZCCL_PROF_NAME_MAX];
} zccl_prof_rec_t;

/** What is being recorded now (ZCCL_PROF_* bits); 0 when off. */
extern __attribute__((visibility("default"))) atomic_uint zccl_prof_mask;

/** The hot-path check: one relaxed load. */
static inline unsigned zccl_prof_on(unsigned what)
{
    return atomic_load_explicit(&zccl_prof_mask, memory_order_relaxed) & what;
}

/** Append r (if recording of its kind is still on; dropped when full). */
__attribute__((visibility("default"))) void zccl_prof_record(const zccl_prof_rec_t *r,
                                                             unsigned what);

/** Start recording `what` into a buffer of capacity records. Returns 0, or
 *  -1 when already recording or out of memory (logged). */
__attribute__((visibility("default"))) int zccl_prof_begin(unsigned what, size_t capacity);

/** Stop recording; returns once no writer can still touch the buffer. */
__attribute__((visibility("default"))) void zccl_prof_end(void);

/** After zccl_prof_end: the records in arrival order (caller frees *recs)
 *  and how many were dropped for want of room. Returns the count. */
__attribute__((visibility("default"))) size_t zccl_prof_take(zccl_prof_rec_t **recs,
                                                             uint64_t *dropped);

#ifdef __cplusplus
}
#endif

#endif /* ZCCL_PROF_EXT_H */
