/*
 * Pure collective algorithms (no ACL, no sockets, no MPI).
 *
 * The caller (libhccl) has already agreed with its peers on the operation and
 * the path, and resolved every pointer into this process's address space:
 *
 *  - direct ("zero-copy") algorithms get in[r] / out[r], the user buffers of
 *    every rank r, and move bytes straight between them;
 *  - staged ("buffered") algorithms get only this rank's own send/recv
 *    buffers plus ccl[r], every rank's CCL buffer of ccl_bytes bytes, and
 *    move user -> own CCL buffer -> peers -> user, in chunks.
 *
 * Ranks meet only through sync->barrier(); every rank calls an algorithm with
 * the same arguments (but its own rank), and the algorithm calls barrier() the
 * same number of times on every rank. Entry (all inputs ready) and exit (no
 * peer still reads my buffers) barriers are the caller's job, not the
 * algorithm's. The reduction order is fixed by rank (rank 0 first), so every
 * rank computes bitwise-identical results; fp16/bf16 accumulate in fp32 and
 * round once.
 *
 * Functions return 0 or a negative zc_status_t (a barrier failure is passed
 * through unchanged).
 *
 * Barriers and buffer lifetime:
 *  - a staged algorithm may return while peers still read ccl[me] (its last
 *    chunk): the caller's exit handshake must complete before ccl[me] is
 *    reused. A failure only one rank sees (a NULL send, a failed malloc)
 *    still calls barrier() as often as success would, then returns the error.
 *  - a direct algorithm calls barrier() only when some rank's output
 *    overlaps its own input in a way peers would read after it was
 *    overwritten (in-place AlltoAll, AllGather with in not at slot rank, ...):
 *    then every rank calls it exactly once and the ranks concerned go through
 *    a private buffer. The supported in-place forms need no barrier:
 *    AllReduce / Reduce out == in, AllGather(V) in == own slot of out,
 *    ReduceScatter(V) out == own block of in, Scatter root out == own block.
 *    Partial overlaps beyond these are handled the same way on both paths
 *    (private copies), never left undefined. Buffers of different ranks must
 *    not overlap each other.
 *  - argument errors are detected before the first barrier from values all
 *    ranks share, so every rank fails alike (logged once, ZC_SUB_COLL).
 */
#ifndef COLL_COLL_H
#define COLL_COLL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Values equal HcclDataType / HcclReduceOp so the API edge maps 1:1. */
typedef enum {
    COLL_INT8 = 0,
    COLL_INT16 = 1,
    COLL_INT32 = 2,
    COLL_FP16 = 3,
    COLL_FP32 = 4,
    COLL_INT64 = 5,
    COLL_UINT64 = 6,
    COLL_UINT8 = 7,
    COLL_UINT16 = 8,
    COLL_UINT32 = 9,
    COLL_FP64 = 10,
    COLL_BF16 = 11,
    COLL_INT128 = 12,
    COLL_HIF8 = 14,
    COLL_FP8E4M3 = 15,
    COLL_FP8E5M2 = 16,
    COLL_FP8E8M0 = 17,
} coll_dtype_t;

typedef enum { COLL_SUM = 0, COLL_PROD = 1, COLL_MAX = 2, COLL_MIN = 3 } coll_op_t;

/** Element size in bytes (INT128 16, the 8-bit float types 1); 0 for an
 *  unknown type. */
size_t coll_dtype_size(int dtype);

/** 1 when coll_reduce_n supports (dtype, op), else 0. Copy-only collectives
 *  accept every type with a non-zero size. */
int coll_reducible(int dtype, int op);

/**
 * dst[i] = src[0][i] op src[1][i] op ... op src[n-1][i], left to right.
 * dst may be any src (each element is read from every source before it is
 * written); partial overlap is not allowed. Any alignment works.
 * Integer SUM / PROD wrap modulo 2^bits. fp MAX / MIN propagate NaN (a NaN in
 * any input gives NaN, the first NaN in rank order); between equal values
 * (+0 / -0) the later operand wins. fp16/bf16 accumulate in fp32 over all n
 * inputs and round to nearest even once. Unsupported (dtype, op) pairs are a
 * no-op: check coll_reducible first.
 */
void coll_reduce_n(void *dst, const void *const *src, int n, size_t count, int dtype, int op);

/** memcpy that switches to non-temporal stores at nt_min bytes (0 = never),
 *  fenced before it returns. dst == src is a no-op; other overlap is not
 *  allowed. */
void coll_copy(void *dst, const void *src, size_t bytes, size_t nt_min);

typedef struct coll_sync {
    /** Wait until every rank of the op called barrier the same number of
     *  times. Returns 0 or a negative zc_status_t (timeout, dead peer). */
    int (*barrier)(struct coll_sync *self);
} coll_sync_t;

typedef struct {
    size_t oneshot_max; /* AllReduce / Reduce bytes up to which one-shot is used */
    size_t nt_min;      /* copies from this size use non-temporal stores (0 = never);
                         * direct AllReduce and AllGather stream once their data
                         * over all ranks (inputs + outputs) reaches 2 x nt_min,
                         * or when their output was not touched within the last
                         * 2 x nt_min bytes of op data (coll_nt.c) */
    size_t ag_pull_min; /* AllGather output bytes per rank from which every rank asks to
                         * pull (coll_args_t.pull) when its output is probably cached;
                         * 0: a timed trial of both forms decides (coll_form.c) */
} coll_tuning_t;

/** nt_min when none is configured, for a last-level cache of llc_bytes (0:
 *  unknown): half of it, so that the window 2 x nt_min is the whole cache
 *  (coll_nt.c); at least 1 MiB; 16 MiB (a 32 MiB cache) when unknown. */
size_t coll_nt_min_for_llc(uint64_t llc_bytes);

/** Entries of a reuse history (see coll_reuse_t). */
#define COLL_REUSE_SLOTS 32

/**
 * Recent large direct AllReduce / AllGather ops of one communicator, which
 * say whether an op's output is likely still cached (coll_nt.c): each entry
 * holds this rank's input and output range of one op and the op-data clock
 * when it ended. Zero-initialised before first use; used only by the thread
 * running the communicator's op (ops of a communicator run one at a time).
 */
typedef struct {
    uintptr_t lo[2], hi[2]; /* input and output range (empty: lo == hi) */
    uint64_t stamp;         /* clock when the op ended; 0: unused entry */
} coll_reuse_ent_t;

/** Op shapes whose store kind is tried out (see coll_trial_t). */
#define COLL_TRIAL_SLOTS 8

/**
 * The trial of one op shape near the cache's size, where the model's answer
 * is a coin toss (coll_nt.c): a few ops of each kind, timed, then the faster
 * kind (the model's unless the other wins by a margin) for a while, then a
 * new trial.
 */
typedef struct {
    uint64_t in_bytes, out_bytes; /* the shape (both 0: unused) */
    uint64_t best_ns[2];          /* fastest timed op of each kind this trial */
    uint32_t step;                /* ops of this shape since the trial began */
    uint32_t used;                /* coll_reuse_t.trials when last used */
    uint32_t number;              /* trials of this shape begun, 1 for the first */
    int nt;                       /* the kind the last trial chose */
    int prior;                    /* the model's kind: kept unless the other wins by the margin */
    int before;                   /* the kind the trial before this one chose */
    uint32_t again;               /* trials in a row that left the prior alike: the hold doubles */
} coll_trial_t;

/** AllGather shapes whose form is tried out (see coll_form_t). */
#define COLL_FORM_SLOTS 4

/**
 * The trial of one AllGather shape between pushing and pulling, where its
 * output is probably cached (coll_form.c): a few ops of each form, timed,
 * then the faster (push unless pull wins by a margin) for a while, then a
 * new trial. Every rank steps it alike, at each op's post.
 */
typedef struct {
    uint64_t in_bytes, out_bytes; /* the shape (both 0: unused) */
    uint64_t best_ns[2];          /* fastest timed op of each form this trial: push, pull */
    uint32_t step;                /* ops of this shape since the trial began */
    uint32_t used;                /* coll_reuse_t.forms when last used */
    uint32_t pulled;              /* ops of this trial's pull run that pulled */
    int pull;                     /* the verdict: the ranks' majority, as the op ran it */
    int found;                    /* a trial has reached a verdict (pull is one) */
} coll_form_t;

typedef struct {
    uint64_t clock; /* bytes of op data (inputs + outputs, all ranks) so far */
    uint32_t next;  /* the entry the next op fills */
    coll_reuse_ent_t ent[COLL_REUSE_SLOTS];
    uint32_t trials; /* ops that went through a trial slot */
    coll_trial_t trial[COLL_TRIAL_SLOTS];
    /* the last op, when it is a timed trial sample (coll_nt_done) */
    int pend_slot;      /* its trial slot + 1; 0: none */
    uint32_t pend_step; /* its step in the trial (the kind follows from it) */
    uint64_t pend_t0;
    /* Verdicts shared between the ranks (coll_nt.c), by trial slot: this
     * rank publishes its own in verdict_out, and the ranks' majority is
     * taken from verdict_in[0 .. verdict_ranks - 1] (every rank's
     * verdict_out, this one's included). NULL / 0: none published or taken
     * (each rank keeps the verdict of its own timings). */
    _Atomic uint64_t *verdict_out;
    const _Atomic uint64_t *const *verdict_in;
    int verdict_ranks;
    /* Ops that chose a store kind (coll_nt_choose), cached [0] and
     * streaming [1]: written by the op's thread only, read by anyone. */
    _Atomic uint64_t kind_ops[2];
    /* AllGather's form trials (coll_form.c) and the last op, when its post
     * made it a timed sample: its slot + 1 (0: none) and the
     * form it ran + 1 (0: it did not run the direct push or pull) */
    uint32_t forms; /* ops that went through a form slot */
    coll_form_t form[COLL_FORM_SLOTS];
    int form_pend_slot;
    int form_ran;
    uint64_t form_t0;
    /* The AllGather posted last, for coll_form_agree: its slot + 1 (0:
     * none) and what its op settles (coll_form.c's COLL_FORM_ROLE_*) */
    int form_op_slot;
    int form_op_role;
} coll_reuse_t;

/** The communicator's last op is done on every rank (after its exit
 *  barrier): when it was a timed trial sample of the store kind
 *  (coll_nt.c) or of AllGather's form (coll_form.c), it takes its time.
 *  Cheap otherwise; call after every op. */
void coll_nt_done(coll_reuse_t *r);

/** Does the store-kind model (coll_nt.c) expect streaming stores for an op
 *  whose every rank reads in_bytes and writes out_bytes, this rank's output
 *  at out, as the next op of r? In the trial's band, the kind the shape's
 *  next op runs: a trial's own kind during a trial (so its cached ops run
 *  the form that goes with cached stores), else the last verdict. Changes
 *  nothing: for the op's post, before it runs (AllGather's form,
 *  coll_allgather.c). */
int coll_nt_expect(const coll_reuse_t *r, const coll_tuning_t *tune, int nranks, size_t in_bytes,
                   size_t out_bytes, const void *out);

typedef struct {
    int rank;
    int nranks;
    int root;     /* Broadcast, Reduce, Scatter */
    int dtype;    /* coll_dtype_t */
    int op;       /* coll_op_t */
    size_t count; /* HCCL's count argument of the collective (elements) */

    /* direct path: every rank's buffers, valid in this process */
    const void *const *in;
    void *const *out;

    /* staged path: this rank's buffers and every rank's CCL buffer */
    const void *send;
    void *recv;
    void *const *ccl;
    size_t ccl_bytes;

    /* V collectives: arrays of nranks elements as passed by each rank r
     * (xxx[r] is rank r's argument), in elements; NULL when unused.
     * AlltoAllVC: the caller converts its n x n matrix M to V form
     * (send_counts[r][q] = M[r][q], recv_counts[r][q] = M[q][r], the
     * displacements packed in rank order). For the V collectives `count` is
     * not used: the arrays, which every rank sees alike, are authoritative. */
    const uint64_t *const *send_counts;
    const uint64_t *const *send_displs;
    const uint64_t *const *recv_counts;
    const uint64_t *const *recv_displs;
    const uint64_t *recv_count_each; /* ReduceScatterV: recv count of each rank (or NULL) */

    coll_sync_t *sync;
    uint64_t *staged_bytes;    /* += bytes copied into CCL buffers (may be NULL) */
    const coll_tuning_t *tune; /* NULL: oneshot_max 16 KiB, nt_min 4 MiB, ag_pull_min 0 */
    coll_reuse_t *reuse;       /* the communicator's history (NULL: size rule only) */
    uint64_t start_ns;         /* when the last rank posted the op (CLOCK_MONOTONIC); 0: unknown */
    /* AllGather: every rank asked to pull, its output probably cached
     * (coll_nt_expect); must be the same on every rank */
    int pull;
} coll_args_t;

/* Each collective has a direct and a staged variant with the same meaning as
 * the HCCL call of the same name (counts in elements of dtype). Per-op notes:
 *  - AllGatherV: rank q sends recv_counts[*][q] elements; every rank must pass
 *    the same recv_counts (else ZC_ERR_INVAL on every rank).
 *  - ReduceScatterV: send_counts[r][q] must equal recv_count_each[q]; when
 *    recv_count_each is NULL, all ranks' send_counts must agree instead.
 *  - AlltoAllV: recv_counts[r][q] must equal send_counts[q][r].
 *  - Broadcast: direct reads in[root] (out[root] when that is NULL); staged,
 *    the root reads send (recv when send is NULL), the others write recv.
 *  - Reduce: only out[root] / the root's recv are written (others may be
 *    NULL). Scatter: only in[root] / the root's send are read. */
int coll_allreduce_direct(const coll_args_t *a);
int coll_allreduce_staged(const coll_args_t *a);
int coll_allgather_direct(const coll_args_t *a); /* count = per-rank send count */
/* What a rank's post says of an AllGather's form (coll_allgather_pull_want):
 * bits. */
#define COLL_FORM_PULL 1 /* asks to pull; at the first op after a trial, votes pull */
#define COLL_FORM_VETO 2 /* the op must push: this rank streams, or asks by no trial or rule */
/* What this rank's post says (COLL_FORM_* bits) of the next AllGather of
 * the communicator whose history is r, every rank reading in_bytes and
 * writing out_bytes, this rank's output at out? With tune->ag_pull_min set,
 * pull from that size when the output is probably cached (else veto); with
 * 0, the default, as the shape's form trial says (coll_form.c). Steps that
 * trial: call it once per AllGather, at its post, on every rank; then
 * coll_form_agree with what the posts decided. */
int coll_allgather_pull_want(coll_reuse_t *r, const coll_tuning_t *tune, int nranks,
                             size_t in_bytes, size_t out_bytes, const void *out);
/* Do more than half of nranks posts ask to pull (`pulls` have
 * COLL_FORM_PULL)? An AllGather pulls when they do and no post has
 * COLL_FORM_VETO: the same answer on every rank. */
int coll_form_pulls(int pulls, int nranks);
/* What the posts of the AllGather posted last decided: `pull`, the form the
 * op runs (1: pull), and `majority`, whether more than half asked to pull
 * (coll_form_pulls, vetoes aside). The first op after a form trial takes the
 * majority as the shape's verdict, so every rank holds the same and their
 * schedules stay in step. Call it on every rank for every AllGather,
 * whatever its path. */
void coll_form_agree(coll_reuse_t *r, int pull, int majority);
int coll_allgather_staged(const coll_args_t *a);
int coll_allgatherv_direct(const coll_args_t *a); /* recv_counts/recv_displs[r] */
int coll_allgatherv_staged(const coll_args_t *a);
int coll_reducescatter_direct(const coll_args_t *a); /* count = recv count */
int coll_reducescatter_staged(const coll_args_t *a);
int coll_reducescatterv_direct(const coll_args_t *a); /* send_counts/send_displs[r] */
int coll_reducescatterv_staged(const coll_args_t *a);
int coll_broadcast_direct(const coll_args_t *a); /* in == out per rank (one buffer) */
int coll_broadcast_staged(const coll_args_t *a);
int coll_reduce_direct(const coll_args_t *a);
int coll_reduce_staged(const coll_args_t *a);
int coll_scatter_direct(const coll_args_t *a); /* count = recv count */
int coll_scatter_staged(const coll_args_t *a);
int coll_alltoall_direct(const coll_args_t *a); /* count = per-peer count */
int coll_alltoall_staged(const coll_args_t *a);
int coll_alltoallv_direct(const coll_args_t *a); /* all four arrays */
int coll_alltoallv_staged(const coll_args_t *a);

#endif /* COLL_COLL_H */
