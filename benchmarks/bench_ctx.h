/*
 * Private state of the benchmark harness, shared by harness.c (options, set
 * up, tear down) and bench_run.c (the size sweep, timing and the tables).
 * Tools see only harness.h.
 */
#ifndef BENCH_CTX_H
#define BENCH_CTX_H

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
    int rss;           /**< --rss: a VmRSS line per size */
    int hccl_format;   /**< --format hccl */
    double budget_s;   /**< --budget: cut iterations so a batch lasts about this */
    const char *csv;   /**< --csv FILE */
} bench_args_t;

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
    double copy_bw;     /**< aggregate bytes/s from the copy probe */
    double bound_busbw; /**< GB/s */
    FILE *csv;
    /* Totals for the footer. */
    uint64_t wrong;
    double busbw_sum;
    double mpi_busbw_sum;
    int nsizes;
    int nmpi;
    double last_fraction; /**< busbw / bound at the largest size */
    size_t last_size;
    long rss_first_kb;  /**< growth over the first zccl timed batch */
    long rss_growth_kb; /**< summed over the later zccl timed batches */
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

#endif /* BENCH_CTX_H */
