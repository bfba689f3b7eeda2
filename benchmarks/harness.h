/*
 * Shared harness of the nccl-tests-style benchmark tools.
 *
 * Each tool (all_reduce_perf.c, ...) describes one collective in a bench_coll_t:
 * how a message size maps to counts and buffers, how to launch it on zccl and
 * on MPI, what every output element must hold, the bus-bandwidth factor and the
 * minimal memory traffic of one op. bench_main() does the rest, the same way
 * for every tool, exactly as a CANN program would:
 *
 *   MPI_Init; aclInit; aclrtSetDevice(rank % devices); aclrtCreateStream;
 *   rank 0 HcclGetRootInfo, MPI_Bcast of the root info, HcclCommInitRootInfo;
 *   buffers for the largest size, once: activated memory (-z 1: reserve, map
 *   physical memory, HcclCommSetMemoryRange, HcclCommActivateCommMemory) or
 *   plain aclrtMalloc (-z 0, the buffered path through the CCL buffer);
 *   the STREAM-like copy probe that gives the memory-bandwidth bound;
 *   per size: warm-up, a timed batch (ops enqueued back to back on the stream,
 *   one aclrtSynchronizeStream per batch, time = max over ranks / iterations),
 *   a checked run, then the same for the matching MPI collective with -m 1.
 *
 * MPI does only two things: broadcast the root info and run the baseline.
 */
#ifndef BENCH_HARNESS_H
#define BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "acl/acl.h"
#include "hccl/hccl.h"

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
};

/** What one tool tells the harness about its collective. */
typedef struct bench_coll {
    const char *tool;     /**< program name, e.g. "all_reduce_perf" */
    const char *name;     /**< HCCL name, e.g. "AllReduce" */
    const char *mpi_name; /**< baseline, e.g. "MPI_Allreduce" */
    unsigned flags;       /**< BENCH_REDUCES | BENCH_ROOTED | BENCH_NO_INPLACE */
    /** Text of the traffic model, e.g. "2*N*S" (S = the size column). */
    const char *traffic_text;
    /**
     * Set op->count, send_elems, recv_elems, send and recv for a message of
     * `elems` elements of the size column (rounded down to what the collective
     * can move), from the two buffers; in place when `inplace` is 1.
     */
    void (*shape)(bench_op_t *op, size_t elems, void *sendbuf, void *recvbuf, int inplace);
    /** busbw = algbw * bus_factor(nranks) (nccl-tests' definitions). */
    double (*bus_factor)(int nranks);
    /** Minimal bytes all ranks together read plus write in one op of size S. */
    double (*traffic)(double size_bytes, int nranks);
    /** Launch the op on the stream (asynchronous). */
    HcclResult (*run)(const bench_op_t *op, HcclComm comm, aclrtStream stream);
    /** Run the matching MPI collective (blocking); returns an MPI error code. */
    int (*run_mpi)(const bench_op_t *op, MPI_Comm comm);
    /** Value recv element i must hold after the op; 0 when it is not checked. */
    int (*expect)(const bench_op_t *op, size_t i, double *value);
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

/* ---- probes (bench_probe.c) ------------------------------------------------------ */

/**
 * STREAM-like copy probe run by every rank at once: returns the aggregate
 * copy bandwidth of the machine in bytes read plus written per second.
 */
double bench_probe_copy_bw(MPI_Comm comm, size_t bytes, int reps);

/** This process's resident set size in kB (VmRSS), or -1 when unreadable. */
long bench_probe_rss_kb(void);

/** Monotonic time in seconds. */
double bench_now(void);

#endif /* BENCH_HARNESS_H */
