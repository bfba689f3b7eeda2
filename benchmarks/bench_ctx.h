/*
 * Private state of the benchmark harness, shared by harness.c (options, set
 * up, tear down) and bench_run.c (the size sweep, timing and the tables).
 * Tools see only harness.h.
 */
#ifndef BENCH_CTX_H
#define BENCH_CTX_H

#include <stdint.h>
#include <stdio.h>

#include "harness.h"

/** Command-line settings (the same on every rank: all parse the same argv). */
typedef struct bench_args {
    size_t min_bytes;  /**< -b */
    size_t max_bytes;  /**< -e */
    size_t step_bytes; /**< -i (additive step when -f is 1) */
    double factor;     /**< -f */
    int iters;         /**< -n */
    int warmup;        /**< -w */
    int check;         /**< -c */
    int dtype;         /**< -d */
    int redop;         /**< -o */
    int root;          /**< -r */
    int zero_copy;     /**< -z: activated memory (1) or aclrtMalloc buffers (0) */
    int mpi;           /**< -m: time the MPI collective too */
    int inplace;       /**< -I */
    int npus;          /**< -p (HCCL's tool): ranks expected, 0 = any */
    int rss;           /**< --rss: a resident-memory line per size */
    int hccl_format;   /**< --format hccl */
    double budget_s;   /**< --budget: cut iterations so a batch lasts about this */
    int cold;          /**< --cold: rotate buffers so no op finds its data cached */
    int repeat;        /**< --repeat: timed rounds per size (best kept) */
    int blocking;      /**< --blocking: synchronize the stream after every op */
    int null_ref;      /**< --null: zccl's column times the reference's lead (bench_ref.c) */
    const char *csv;   /**< --csv FILE */
} bench_args_t;

/** Most --repeat rounds (each round's times are kept for the paired %ref). */
#define BENCH_MAX_REPEAT 64

/** Reference variants (bench_ref.c). */
enum {
    BENCH_REF_DIRECT = 0, /* barrier, kernel, barrier */
    BENCH_REF_DIRECT_NT,  /* the same with streaming stores */
    BENCH_REF_OWN,        /* own-output kernel form, two barriers */
    BENCH_REF_OWN_NT,
    BENCH_REF_SLOT, /* inputs through per-rank slots, one barrier */
    BENCH_REF_NVAR,
};

/** The reference's shared memory: every rank's memfd mapped here, and where
 *  its data lives (zccl's own buffers when they are activated memory). */
typedef struct bench_ref {
    int ok;                         /**< mapped on every rank */
    int yield;                      /**< more ranks than cores: yield while waiting */
    int variant;                    /**< the variant bench_ref_batch runs */
    int lead;                       /**< this row's leading variant so far; -1 none yet */
    int iters[BENCH_REF_NVAR];      /**< per variant at this size; 0: does not apply */
    double best_us[BENCH_REF_NVAR]; /**< per variant: its best round */
    double round_us[BENCH_REF_NVAR][BENCH_MAX_REPEAT]; /**< per variant: every round */
    int pruned[BENCH_REF_NVAR]; /**< per variant: no longer timed (too slow) */
    uint64_t epoch;             /**< barriers passed (my counter's value) */
    size_t send_off;            /**< layout of every region: send area */
    size_t recv_off;            /**< receive area */
    size_t region;              /**< bytes of a region */
    unsigned char **base;       /**< base[q]: rank q's region, mapped here */
    unsigned char **zsend;      /**< zsend[q]: rank q's zccl send buffer seen here, or NULL
                                     (then the data is in the regions' send areas) */
    unsigned char **zrecv;      /**< zrecv[q]: its receive buffer */
    const void **in;            /**< per-op scratch: in[q] */
    void **out;                 /**< per-op scratch: out[q] */
} bench_ref_t;

/** One size's ops: entry j uses buffers j * stride into the pool (cold mode). */
typedef struct bench_ring {
    size_t bytes;   /**< the size column's request */
    int inplace;    /**< shape in place */
    size_t sstride; /**< bytes between entries in the send buffer */
    size_t rstride; /**< bytes between entries in the receive buffer */
    size_t n;       /**< entries (1 in reuse mode) */
} bench_ring_t;

/** One printed row. */
typedef struct bench_row {
    size_t size;  /* bytes: the larger of send and receive */
    size_t count; /* elements of `size` */
    int iters;
    double time_us;
    double algbw;
    double busbw;
    uint64_t wrong;
    int has_mpi;
    int mpi_iters;
    double mpi_time_us;
    double mpi_algbw;
    double mpi_busbw;
    double ref_us;   /* best reference variant's time; 0 when none */
    int ref_variant; /* -1 when none */
    double ref_pct;  /* median over rounds of its time / zccl's in the same round, per order
                      of the pair, averaged; -1 none */
    uint64_t ref_wrong;
    uint64_t net_bytes;  /* bytes sent between hosts per zccl op, all ranks (0 on one host) */
    double probe_ns;     /* the host probe (bench_ref_probe_ns): median of the rounds; 0 none */
    double probe_max_ns; /* and the slowest round's */
    double streamed_pct; /* rank 0's large ops of the rounds that streamed (coll_nt.c); -1 none */
} bench_row_t;

/** One rank's run. */
typedef struct bench_ctx {
    const bench_coll_t *coll;
    bench_args_t a;
    int rank;
    int nranks;
    int device;
    HcclComm comm;
    aclrtStream stream;
    /* Buffers sized for the largest message, allocated once. */
    void *sendbuf;
    void *recvbuf;
    size_t send_cap; /**< bytes */
    size_t recv_cap; /**< bytes */
    void *va;        /**< -z 1: the reservation holding both buffers */
    size_t va_size;
    aclrtDrvMemHandle phys; /**< -z 1: its physical memory */
    int range_set;
    int activated;
    int mapped;
    size_t llc_bytes; /**< the last-level cache (32 MiB when unknown) */
    size_t send_span; /**< send bytes of the largest op */
    size_t recv_span; /**< receive bytes of the largest op */
    bench_ref_t ref;
    FILE *csv;
    /* Totals for the footer. */
    uint64_t wrong;
    double busbw_sum;
    double mpi_busbw_sum;
    int nsizes;
    int nmpi;
    double ref_pct_min; /**< lowest %ref from 1 MiB up (-1: none) */
    size_t ref_pct_min_size;
    int ref_over;       /**< rows above 105 % of the reference */
    double probe_lo_ns; /**< the lowest and highest rows' probe_ns (0: none) */
    double probe_hi_ns;
    long rss_first_kb;     /**< growth over the first zccl timed batch */
    long rss_first_mpi_kb; /**< of Open MPI's shared memory over it (not counted) */
    long rss_growth_kb;    /**< summed over the later zccl timed batches */
    long rss_start_kb;
    uint64_t zccl_ops; /**< ops this rank launched on zccl */
} bench_ctx_t;

/** Print one line naming the failed call, its code and the rank, then MPI_Abort. */
void bench_die(const bench_ctx_t *ctx, const char *call, int code, const char *text);

#define BENCH_ACL(ctx, call)                                                                       \
    do {                                                                                           \
        aclError bench_e_ = (call);                                                                \
        if (bench_e_ != ACL_SUCCESS) {                                                             \
            bench_die((ctx), #call, (int)bench_e_, "aclError");                                    \
        }                                                                                          \
    } while (0)

#define BENCH_HCCL(ctx, call)                                                                      \
    do {                                                                                           \
        HcclResult bench_r_ = (call);                                                              \
        if (bench_r_ != HCCL_SUCCESS) {                                                            \
            bench_die((ctx), #call, (int)bench_r_, HcclGetErrorString(bench_r_));                  \
        }                                                                                          \
    } while (0)

/** Sweep the sizes, print the table (rank 0) and the footer. */
void bench_run_sweep(bench_ctx_t *ctx);

/** Ring of `bytes`-sized ops over the buffers (one entry unless --cold). */
void bench_ring_init(const bench_ctx_t *ctx, bench_ring_t *ring, size_t bytes, int inplace);

/** Entry j of the ring, shaped as rank `rank` passes it, on zccl's buffers. */
void bench_ring_op(const bench_ctx_t *ctx, const bench_ring_t *ring, size_t j, int rank,
                   bench_op_t *op);

/** A timed batch of iters ops; seconds, max over ranks. */
typedef double (*bench_batch_fn)(bench_ctx_t *ctx, const bench_ring_t *ring, int iters);

/** Warm up with batch and choose the timed batch's iterations (-n, --budget). */
int bench_calibrate(bench_ctx_t *ctx, const bench_ring_t *ring, bench_batch_fn batch);

/** Before a timed batch: in reuse mode, one untimed op of `batch`, so the
 *  batch starts with its own data in the cache (see bench_run.c). */
void bench_warm(bench_ctx_t *ctx, const bench_ring_t *ring, bench_batch_fn batch);

/* ---- the reference (bench_ref.c) ---- */

/** The tool has a reference kernel for this type and reduction. */
int bench_ref_usable(const bench_ctx_t *ctx);

/** Map every rank's reference memory: 0, or -1 on every rank (told why). */
int bench_ref_open(bench_ctx_t *ctx);
void bench_ref_close(bench_ctx_t *ctx);

/**
 * Round `round` of the reference: time every variant that applies and is
 * not pruned once (round 0: warm each up and choose its iterations), the
 * leading one next to zccl's batch (after_zccl: first, else last);
 * row->ref_us / ref_variant keep the best over calls.
 */
void bench_ref_measure(bench_ctx_t *ctx, const bench_ring_t *ring, bench_row_t *row, int round,
                       int after_zccl);
/** row->ref_pct from zccl's round times (us) and the chosen variant's. */
void bench_ref_pair(const bench_ctx_t *ctx, const double *zccl_us, int rounds, bench_row_t *row);

/** One checked op of the row's best variant: row->ref_wrong (and ctx->wrong). */
void bench_ref_check_row(bench_ctx_t *ctx, const bench_ring_t *ring, bench_row_t *row);

/** A timed batch of the variant in ctx->ref.variant. */
double bench_ref_batch(bench_ctx_t *ctx, const bench_ring_t *ring, int iters);

/**
 * --null 1, in zccl's place: a timed batch of the row's leading variant so
 * far (direct before the reference's first round). %ref then compares the
 * reference with itself: what this host's noise alone prints.
 */
double bench_ref_null_batch(bench_ctx_t *ctx, const bench_ring_t *ring, int iters);

/**
 * The host probe: ns per flag barrier of the reference's counters over a
 * short batch (every rank calls it at the same point; 0 without a
 * reference). At np 2 it is a cache line's round trip between the ranks'
 * cores, which the host may move.
 */
double bench_ref_probe_ns(bench_ctx_t *ctx);

/** Median of v[0..n) (sorts v). */
double bench_median(double *v, int n);

/** Name of a variant ("direct", "direct+nt", ...; "-" for none). */
const char *bench_ref_name(int variant);

#endif /* BENCH_CTX_H */
