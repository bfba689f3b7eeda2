/*
 * Shared harness of the nccl-tests-style benchmark tools.
 *
 * Each tool (all_reduce_perf.c, ...) describes one collective in a bench_coll_t:
 * how a message size maps to counts and buffers, how to launch it on zccl and
 * on MPI, what every output element must hold, the bus-bandwidth factor and
 * the reference kernel (bench_ref.c) that gives the limit zccl is held to.
 * bench_main() does the rest, the same way for every tool, exactly as a CANN
 * program would:
 *
 *   MPI_Init; aclInit; aclrtSetDevice(rank % devices); aclrtCreateStream;
 *   rank 0 HcclGetRootInfo, MPI_Bcast of the root info, HcclCommInitRootInfo;
 *   buffers for the largest size (or the cold-cache pool), once: activated
 *   memory (-z 1: reserve, map physical memory, HcclCommSetMemoryRange,
 *   HcclCommActivateCommMemory) or plain aclrtMalloc (-z 0, the buffered
 *   path through the CCL buffer); the reference's shared mapping of the
 *   same layout;
 *   per size: warm-up, a timed batch (ops enqueued back to back on the
 *   stream and one aclrtSynchronizeStream per batch, or with --blocking 1 a
 *   synchronize after every op; time = max over ranks / iterations), a
 *   checked run, the matching MPI collective with -m 1, and the reference
 *   kernel's variants on the same sizes (its best time is the limit).
 *
 * MPI does only three things: broadcast the root info, run the baseline and
 * start / time the batches (it never carries the reference's data).
 */
#ifndef BENCH_HARNESS_H
#define BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "acl/acl.h"
#include "hccl/hccl.h"

struct bench_ref_args;

/** One op as launched: the same description drives zccl, MPI and the check. */
typedef struct bench_op {
    int rank;          /**< this rank */
    int nranks;        /**< ranks in the communicator */
    int dtype;         /**< HcclDataType */
    int redop;         /**< HcclReduceOp (SUM for collectives that do not reduce) */
    uint32_t root;     /**< root rank of rooted collectives */
    size_t esize;      /**< bytes per element */
    uint64_t count;    /**< the count argument the collective takes */
    size_t send_elems; /**< elements the op reads from send */
    size_t recv_elems; /**< elements the op writes into recv */
    void *send;        /**< send buffer (may alias recv in place) */
    void *recv;        /**< receive buffer */
} bench_op_t;

/** bench_coll_t.flags */
enum {
    BENCH_REDUCES = 1u << 0,    /**< takes a reduction (-o) */
    BENCH_ROOTED = 1u << 1,     /**< takes a root (-r) */
    BENCH_NO_INPLACE = 1u << 2, /**< has no in-place form (-I 1 refused) */
    BENCH_REF_SPREAD = 1u << 3, /**< ref has a form writing peers' outputs too */
};

/** What one tool tells the harness about its collective. */
typedef struct bench_coll {
    const char *tool;     /**< program name, e.g. "all_reduce_perf" */
    const char *name;     /**< HCCL name, e.g. "AllReduce" */
    const char *mpi_name; /**< baseline, e.g. "MPI_Allreduce" */
    unsigned flags;       /**< BENCH_REDUCES | BENCH_ROOTED | BENCH_NO_INPLACE */
    /**
     * Set op->count, send_elems, recv_elems, send and recv for a message of
     * `elems` elements of the size column (rounded down to what the collective
     * can move), from the two buffers; in place when `inplace` is 1.
     */
    void (*shape)(bench_op_t *op, size_t elems, void *sendbuf, void *recvbuf, int inplace);
    /** busbw = algbw * bus_factor(nranks) (nccl-tests' definitions). */
    double (*bus_factor)(int nranks);
    /** Launch the op on the stream (asynchronous). */
    HcclResult (*run)(const bench_op_t *op, HcclComm comm, aclrtStream stream);
    /** Run the matching MPI collective (blocking); returns an MPI error code. */
    int (*run_mpi)(const bench_op_t *op, MPI_Comm comm);
    /** Value recv element i must hold after the op; 0 when it is not checked. */
    int (*expect)(const bench_op_t *op, size_t i, double *value);
    /** The reference kernel (see bench_ref.c); NULL: no reference. */
    void (*ref)(const struct bench_ref_args *r);
} bench_coll_t;

/**
 * Run a tool: parse argv (nccl-tests and HCCL test-tool flags), set up,
 * sweep the sizes, print the table, tear down.
 * @return the process exit status: 0, 1 when any result was wrong, 2 on
 *         bad usage (errors in a call abort every rank through MPI_Abort).
 */
int bench_main(int argc, char **argv, const bench_coll_t *coll);

/** base + off bytes; NULL stays NULL (shapes are also computed without buffers). */
static inline void *bench_at(void *base, size_t off)
{
    return base != NULL ? (char *)base + off : NULL;
}

/* ---- data (bench_data.c) ------------------------------------------------------- */

/**
 * Input element i of `rank`'s send buffer: small integers, so every sum,
 * product, max and min of up to 64 ranks is exact in every type (fp16 and
 * bf16 included) and the check can compare bit for bit.
 */
double bench_value(const bench_op_t *op, int rank, size_t i);

/** bench_value() of every rank at index i, reduced with op->redop in rank order. */
double bench_fold(const bench_op_t *op, size_t i);

/** Element size of an HcclDataType; 0 when the benchmarks do not know it. */
size_t bench_dtype_size(int dtype);

/** Type name as nccl-tests prints it ("float", "half", ...). */
const char *bench_dtype_name(int dtype);

/** Parse a type name (nccl-tests' or HCCL's spelling); -1 when unknown. */
int bench_dtype_parse(const char *name);

/** Reduction name ("sum", ...) and its parser (-1 when unknown). */
const char *bench_redop_name(int redop);
int bench_redop_parse(const char *name);

/** Write bench_value(op, op->rank, i) into send[0..send_elems). */
void bench_fill_send(const bench_op_t *op);

/** Overwrite recv[0..recv_elems) with a byte pattern no result can equal. */
void bench_poison_recv(const bench_op_t *op);

/** Count the recv elements that differ from what coll->expect() says. */
uint64_t bench_check_recv(const bench_coll_t *coll, const bench_op_t *op);

/* ---- MPI baseline (bench_mpi.c) -------------------------------------------------- */

/** MPI datatype of an HcclDataType; MPI_DATATYPE_NULL when MPI has none (fp16, bf16). */
MPI_Datatype bench_mpi_dtype(int dtype);

/** MPI reduction of an HcclReduceOp. */
MPI_Op bench_mpi_op(int redop);

int bench_mpi_allreduce(const bench_op_t *op, MPI_Comm comm);
int bench_mpi_allgather(const bench_op_t *op, MPI_Comm comm);
int bench_mpi_reduce_scatter(const bench_op_t *op, MPI_Comm comm);
int bench_mpi_broadcast(const bench_op_t *op, MPI_Comm comm);
int bench_mpi_reduce(const bench_op_t *op, MPI_Comm comm);
int bench_mpi_alltoall(const bench_op_t *op, MPI_Comm comm);
int bench_mpi_sendrecv(const bench_op_t *op, MPI_Comm comm);

/* ---- the reference kernels' building blocks (bench_ref_kern.c) ------------------ */

/** Most ranks the reference runs with (kernels keep per-rank arrays on the stack). */
#define BENCH_REF_MAX_RANKS 256

/** What a tool's reference kernel gets for one op. */
typedef struct bench_ref_args {
    const bench_op_t *op;  /**< the op's shape (counts, type, reduction, root) */
    const void *const *in; /**< in[q]: rank q's input, mapped in this process */
    void *const *out;      /**< out[q]: rank q's output, mapped in this process */
    int own_only;          /**< 1: write only out[rank] (reads any in[q]) */
    int nt;                /**< 1: non-temporal stores, 0: cached stores */
} bench_ref_args_t;

/** Copy bytes; nt: streaming stores for the 64-byte-aligned body (fenced by
 *  the reference's next barrier). */
void bench_ref_copy(void *dst, const void *src, size_t bytes, int nt);

/** 1 when bench_ref_reduce handles (dtype, redop): fp32, fp64, int32, int64. */
int bench_ref_reducible(int dtype, int redop);

/**
 * Reduce src[0..nsrc) at byte offset src_off, count elements, in rank order,
 * one L1-sized block at a time, and write each block to every dst[0..ndst)
 * at byte offset dst_off (cached or streaming stores; with cached stores
 * and dst[0] not an input, each block is reduced in dst[0] itself and
 * copied from there).
 */
void bench_ref_reduce(void *const *dst, int ndst, size_t dst_off, const void *const *src, int nsrc,
                      size_t src_off, size_t count, int dtype, int redop, int nt);

/** Slice r of n over count elements of es bytes, in whole 64-byte lines. */
void bench_ref_slice(size_t count, int n, int r, size_t es, size_t *off, size_t *len);

/* ---- probes (bench_probe.c) ------------------------------------------------------ */

/**
 * This process's resident memory in kB outside Open MPI's own shared memory
 * (summed from /proc/self/smaps), or -1 when unreadable; *mpi_kb, when not
 * NULL, gets the part inside it.
 */
long bench_probe_rss_kb(long *mpi_kb);

/** Monotonic time in seconds. */
double bench_now(void);

#endif /* BENCH_HARNESS_H */
