/*
 * Helpers shared by the algorithm files (one file per collective).
 *
 * Rules every algorithm follows:
 *  - Checks that decide between returning early and calling barrier() use
 *    only values every rank sees alike (nranks, dtype, op, count, root,
 *    ccl_bytes, the per-rank arrays and, on the direct path, every rank's
 *    in[]/out[] pointers), so all ranks take the same branch and call
 *    barrier() the same number of times.
 *  - A failure only this rank can see (a local pointer, a failed malloc) on
 *    the staged path still calls barrier() as often as success would
 *    (coll_fail_staged), so the peers do not hang; the error is returned.
 *  - Streaming (non-temporal) stores are fenced before the algorithm's next
 *    barrier and before it returns.
 */
#ifndef COLL_INTERNAL_H
#define COLL_INTERNAL_H

#include "coll/coll.h"
#include "coll_kernel.h"

#include "zc/export.h"
#include "zc/log.h"
#include "zc/status.h"

#include <stddef.h>
#include <stdint.h>

/* Defaults when the caller passes no tuning (unit tests; libhccl always passes the
 * config table's values, whose ZCCL_NT_MIN default is 8 MiB, not this 4 MiB). */
#define COLL_DEFAULT_ONESHOT_MAX 16384
#define COLL_DEFAULT_NT_MIN (4u << 20)

/* AllGather output bytes per rank from which the direct path pushes, or
 * pulls as coll_form.c finds (every rank computes the same answer from the
 * op's count, dtype and nranks). */
#define COLL_AG_PUSH_MIN ((size_t)512 << 10)

/* What coll_check validates besides rank, nranks and dtype. */
enum {
    COLL_F_REDUCE = 1u << 0, /* (dtype, op) must be reducible */
    COLL_F_ROOT = 1u << 1,   /* root must be a rank */
    COLL_F_STAGED = 1u << 2, /* sync, ccl[] of every rank, ccl_bytes */
    COLL_F_DIRECT = 1u << 3, /* in[] and out[] arrays */
};

/**
 * Validate the arguments every rank shares. Logs one line naming the bad
 * argument. Returns ZC_OK, ZC_ERR_INVAL or ZC_ERR_PTR.
 */
int coll_check(const coll_args_t *a, unsigned flags, const char *what);

/** ZC_OK when p is non-NULL or unused (bytes == 0), else logs and ZC_ERR_PTR. */
int coll_check_buf(const void *p, size_t bytes, const char *what, const char *name, int rank);

/** count * es * mul without overflow, else logs and returns ZC_ERR_INVAL. */
int coll_bytes(size_t count, size_t es, size_t mul, const char *what, size_t *out);

/**
 * What every fixed-count algorithm starts with: coll_check(a, flags, what),
 * then *es (element size), *bytes (count elements) and, when total is not
 * NULL, *total (nranks blocks of *bytes). Returns the first failure (logged).
 */
int coll_begin(const coll_args_t *a, unsigned flags, const char *what, size_t *es, size_t *bytes,
               size_t *total);

/** Bytes covered by the blocks cnt[q] at displ[q] (elements of es bytes), q < n. */
size_t coll_extent(const uint64_t *cnt, const uint64_t *displ, int n, size_t es);

/**
 * The V collectives' per-rank count / displacement arrays: both arrays and
 * every rank's row must be non-NULL (names, "send_counts / send_displs" say,
 * is what the log line calls them). Returns ZC_OK or ZC_ERR_PTR (logged).
 */
int coll_check_vec(const coll_args_t *a, const uint64_t *const *counts,
                   const uint64_t *const *displs, const char *names, const char *what);

/** Rank r's block of c elements at displacement d fits in size_t bytes
 *  (es bytes each). Returns ZC_OK or ZC_ERR_INVAL (logged). */
int coll_check_span(const coll_args_t *a, int r, uint64_t c, uint64_t d, size_t es,
                    const char *what);

/** The op's barrier; a failure is returned unchanged. */
int coll_barrier(const coll_args_t *a);

/** Call barrier nbar times (stopping at a barrier failure), return st. */
int coll_fail_staged(const coll_args_t *a, size_t nbar, int st);

/** Elements per part when the CCL buffer is cut into `parts` equal parts:
 *  a multiple of 64 bytes when possible; 0 (logged) when not one fits. */
size_t coll_stage_elems(const coll_args_t *a, size_t parts, const char *what);

/**
 * Staged chunking: *per elements per part when the CCL buffer is cut into
 * `parts` parts (coll_stage_elems), *rounds to move maxc elements. Returns
 * ZC_OK, or ZC_ERR_INVAL when no element fits (logged).
 */
int coll_stage_plan(const coll_args_t *a, size_t parts, uint64_t maxc, const char *what,
                    size_t *per, size_t *rounds);

/** Copy into this rank's CCL buffer, counting the bytes in *staged_bytes. */
void coll_stage_in(const coll_args_t *a, void *ccl_dst, const void *src, size_t bytes);

/** Streaming stores for this op? (message of msg_bytes vs tune->nt_min) */
int coll_use_nt(const coll_args_t *a, size_t msg_bytes);

/**
 * Streaming stores for a direct op whose every rank reads in_bytes and
 * writes out_bytes? Yes once the op's data over all ranks, (in + out) x
 * nranks, reaches 2 x tune->nt_min, the whole last-level cache by default:
 * from there it no longer fits beside everything else, and a cached store
 * would cost a read-for-ownership plus a write-back of every line. A
 * smaller threshold would stream ops whose data still fits the cache. Below
 * 2 W (W = 2 x tune->nt_min) a trial may still keep an op cached
 * (coll_nt_choose).
 */
int coll_use_nt_op(const coll_args_t *a, size_t in_bytes, size_t out_bytes);

/**
 * Cached (0) or streaming (1) stores for this rank's part of a large direct
 * AllReduce or AllGather whose every rank reads in_bytes and writes
 * out_bytes: streaming when the op's data cannot stay cached or its output
 * was probably evicted since it was last used; near the cache's size, the
 * kind a trial of both found faster (coll_nt.c). Notes the op in a->reuse,
 * so call it once per op.
 */
int coll_nt_choose(const coll_args_t *a, size_t in_bytes, size_t out_bytes);

/** The pending trial sample took ns nanoseconds (coll_nt_done's second
 *  half, for tests); nothing when none is pending. */
void coll_nt_learn(coll_reuse_t *r, uint64_t ns);

/** Will such an op's stores be cached and stay so for a while (coll_nt.c):
 *  the model keeps it cached from a history that reaches its output,
 *  outside its trial's band, or inside it the shape's trial holds a cached
 *  verdict (past the op that adopted the ranks' majority)? Changes
 *  nothing. */
int coll_nt_settled_cached(const coll_reuse_t *r, const coll_tuning_t *tune, int nranks,
                           size_t in_bytes, size_t out_bytes, const void *out);

/** The number of the shape's store-kind trial under way or last held
 *  (1 for the first), 0 while it settles or when it has none. */
uint32_t coll_nt_trial_number(const coll_reuse_t *r, size_t in_bytes, size_t out_bytes);

/** AllGather's form trial (coll_form.c): the op ran the direct push or
 *  pull (pull says which) from start_ns, the op's common start (0:
 *  unknown); the op is over on every rank (coll_nt_done calls it); the
 *  pending sample took ns nanoseconds (its second half, for tests). */
void coll_form_ran(coll_reuse_t *r, int pull, uint64_t start_ns);
void coll_form_done(coll_reuse_t *r);
void coll_form_learn(coll_reuse_t *r, uint64_t ns);

/** AllReduce one-shot threshold in bytes. */
size_t coll_oneshot_max(const coll_args_t *a);

/** Copy, streaming when nt; dst == src is a no-op. Fence before sharing. */
static inline void coll_put(void *dst, const void *src, size_t bytes, int nt)
{
    if (bytes == 0 || dst == src) {
        return;
    }
    if (nt) {
        coll_copy_stream(dst, src, bytes);
    } else {
        coll_copy(dst, src, bytes, 0);
    }
}

/** One copy of bytes, streaming (and fenced) when the message calls for it. */
static inline void coll_put_fenced(const coll_args_t *a, void *dst, const void *src, size_t bytes)
{
    int nt = coll_use_nt(a, bytes);
    coll_put(dst, src, bytes, nt);
    if (nt) {
        coll_store_fence();
    }
}

/** Slice r of n over count elements: equal slices of whole 64-byte lines
 *  (the last one shorter, trailing ones possibly empty), so ranks writing
 *  neighbouring slices of one buffer do not share cache lines. */
void coll_slice(size_t count, int n, int r, size_t es, size_t *off, size_t *len);

/** 1 when [p, p+plen) and [q, q+qlen) share a byte. */
int coll_overlap(const void *p, size_t plen, const void *q, size_t qlen);

/** n pointers, on the stack up to COLL_PTRS_INLINE. */
#define COLL_PTRS_INLINE 64
typedef struct {
    const void **p;
    const void *inl[COLL_PTRS_INLINE];
} coll_ptrs_t;

/** Make room for n pointers. Returns ZC_OK or ZC_ERR_NOMEM (logged). */
int coll_ptrs_init(coll_ptrs_t *v, int n);
void coll_ptrs_fini(coll_ptrs_t *v);

/** Largest of the n values of arr (0 when n == 0). */
uint64_t coll_max_u64(const uint64_t *arr, int n);

/**
 * The send buffer a staged algorithm should read: a->send itself when it
 * does not overlap recv or overlaps it only in a form the algorithm handles
 * (safe != 0), else a private copy (*snap, to be freed). ZC_ERR_NOMEM when
 * the copy cannot be made (logged).
 */
int coll_stage_send(const coll_args_t *a, size_t send_bytes, size_t recv_bytes, int safe,
                    const char **send, void **snap);

/**
 * The staged prologue of the algorithms where every rank sends and
 * receives: send (send_bytes) and recv (recv_bytes) must be non-NULL where
 * used, then *send / *snap as coll_stage_send gives them. A failure (seen by
 * this rank only) still joins the nbar barriers of a successful call
 * (coll_fail_staged) and is returned.
 */
int coll_stage_io(const coll_args_t *a, size_t send_bytes, size_t recv_bytes, int safe,
                  const char *what, size_t nbar, const char **send, void **snap);

/*
 * Direct algorithms whose only writes go to this rank's own output, for the
 * case where some rank's output overlaps its own input that peers still
 * read (in-place AlltoAll, say). Ranks without such an overlap write their
 * output directly; a rank with one computes into a private buffer of
 * tmp_bytes, waits at one barrier until every peer has finished reading,
 * then commits. All ranks call the barrier when conflict_any is set.
 *
 * work(a, base, ctx) writes the result as if base were out[rank];
 * commit(a, tmp, ctx) copies the written parts of tmp to out[rank]
 * (NULL: the first tmp_bytes bytes, contiguous).
 */
typedef int (*coll_work_fn)(const coll_args_t *a, char *base, void *ctx);
typedef void (*coll_commit_fn)(const coll_args_t *a, const char *tmp, void *ctx);
int coll_run_owned(const coll_args_t *a, int conflict_any, int conflict_me, size_t tmp_bytes,
                   coll_work_fn work, coll_commit_fn commit, void *ctx);

/** The in-place form a fixed-count direct algorithm handles with no barrier. */
enum {
    COLL_INPLACE_NONE = 0, /* any overlap of in[q] and out[q] conflicts */
    COLL_INPLACE_IN_SLOT,  /* in[q] == out[q] + q * bytes (AllGather) */
    COLL_INPLACE_OUT_SLOT, /* out[q] == in[q] + q * bytes (ReduceScatter) */
};

/**
 * Checks every in[q] (in_bytes) and out[q] (out_bytes) for NULL (logged,
 * ZC_ERR_PTR), then *any = 1 when some in[q] and out[q] overlap other than
 * in the `inplace` form (blocks of `bytes`), *me = 1 when this rank's do.
 */
int coll_blocks_conflicts(const coll_args_t *a, size_t in_bytes, size_t out_bytes, int inplace,
                          const char *what, size_t bytes, int *any, int *me);

/**
 * Direct algorithms over nranks blocks of bytes: checks every in[q]
 * (in_bytes) and out[q] (out_bytes), then runs work through coll_run_owned
 * (tmp of out_bytes, ctx = &bytes) with a conflict wherever in[q] and
 * out[q] overlap other than in the `inplace` form.
 */
int coll_run_blocks(const coll_args_t *a, size_t in_bytes, size_t out_bytes, int inplace,
                    const char *what, coll_work_fn work, size_t *bytes);

/** Pull: base block q = bytes of in[q] from byte src_off, for every q starting
 *  at q = rank (streaming stores and a fence when nt). */
void coll_pull_blocks(const coll_args_t *a, char *base, size_t bytes, size_t src_off, int nt);

/**
 * The staged reduction loop of AllReduce (root < 0: every rank copies the
 * result out) and Reduce (only root does). Arguments already checked.
 */
int coll_reduce_staged_run(const coll_args_t *a, int root, const char *what);

/** How AllReduce's reduce-scatter-write writes a block (measurements and tests). */
typedef enum {
    /** Default: by store kind, COLL_AR_WRITE_OWN_OUTPUT with cached stores,
     *  COLL_AR_WRITE_STACK_BLOCK with streaming stores. */
    COLL_AR_WRITE_BY_STORES = 0,
    /** Forces reducing into a stack block and writing every output from it. */
    COLL_AR_WRITE_STACK_BLOCK = 1,
    /** Forces reducing into out[rank] and copying it to the other outputs. */
    COLL_AR_WRITE_OWN_OUTPUT = 2,
} coll_ar_write_t;

/** Set the write mode of every later AllReduce of this process. */
void coll_allreduce_set_write_mode(coll_ar_write_t mode);

#endif /* COLL_INTERNAL_H */
