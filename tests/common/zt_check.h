/*
 * Test data and checks for collectives, shared by the mp (forked), mpi and
 * thread tests.
 *
 * Data: every element a rank contributes is a pure function of
 * (seed, rank, index) and of the pattern (dtype, op, mode, nranks), so any
 * rank can rebuild every other rank's input and compute the expected result
 * serially, with no communication. EXACT patterns are chosen so that the
 * result does not depend on reduction order or rounding: small integers for
 * SUM (no overflow for nranks ranks), {1, -1, 2, 0} for PROD plus 0.5 for
 * float types (2 and 0.5 only from ranks below 6, so products stay within
 * 2^6), quarter-integers that fp16/bf16 represent exactly for float
 * SUM/MAX/MIN, raw random bits for copies (ZT_OP_NONE), and small positive
 * codes for the fp8 types (only ever reduced with identical inputs). ROUNDING patterns (float types
 * only) need rounding, so they check that the library reduces in rank order 0..n-1 and, for
 * fp16/bf16, accumulates in fp32 and rounds once (docs/ARCHITECTURE.md, reductions).
 *
 * The reference reducer works in rank order 0..n-1; fp16/bf16 accumulate in
 * fp32 and round once (round to nearest even). Comparisons are bitwise and
 * print the first mismatch with both values.
 *
 * Cases: zt_case_run() runs one AllReduce / AllGather on a communicator with
 * buffers at an odd offset in zero-copy (activated) or plain memory, checks
 * every element, the bytes around the output, the input (where it must stay
 * unchanged) and the staged-byte / path counters. Whole scenarios built from
 * cases are in zt_launch.h.
 */
#ifndef ZT_CHECK_H
#define ZT_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "zt_launch.h"

/** A deterministic 64-bit value for (seed, rank, index): splitmix64. */
uint64_t zt_pattern(uint64_t seed, int rank, size_t index);

/* ---- data ------------------------------------------------------------------ */

/** Pattern op for copy-only collectives: raw random bits of every type. */
#define ZT_OP_NONE (-1)

enum { ZT_FILL_EXACT = 0, ZT_FILL_ROUNDING = 1 };

/** What a rank's input looks like. */
typedef struct {
    int dtype;     /**< HcclDataType */
    int op;        /**< HcclReduceOp the data is meant for, or ZT_OP_NONE */
    int mode;      /**< ZT_FILL_EXACT or ZT_FILL_ROUNDING */
    int nranks;    /**< ranks that contribute (bounds the values) */
    uint64_t seed; /**< selects the data */
} zt_pat_t;

/** Element size in bytes of an HcclDataType; 0 for an unknown type. */
size_t zt_dtype_size(int dtype);

/** Short names for messages ("fp16", "sum"). */
const char *zt_dtype_name(int dtype);
const char *zt_op_name(int op);

/** IEEE binary16 / bfloat16 conversions (round to nearest even). */
uint16_t zt_fp16_from_float(float f);
float zt_fp16_to_float(uint16_t h);
uint16_t zt_bf16_from_float(float f);
float zt_bf16_to_float(uint16_t h);

/**
 * Write elements [first, first + count) of rank's input into buf (any
 * alignment). Types the generator does not know (fp8) get raw bits.
 */
void zt_fill(void *buf, size_t first, size_t count, const zt_pat_t *p, int rank);

/**
 * Serial reference: out[i] = in[0][i] op in[1][i] op ... op in[n-1][i], left
 * to right; fp16/bf16 accumulate in fp32 and round once. out may alias in[0].
 * Returns 0, or -1 for a (dtype, op) it cannot compute (fp8, INT128 PROD).
 */
int zt_ref_reduce(void *out, const void *const *in, int n, size_t count, int dtype, int op);

/**
 * Ranks on several hosts (the multihost tests): from now on the reference
 * reduces in the order zccl's hierarchical algorithms do, each host's ranks
 * in rank order with the host's partial stored in the dtype (fp16/bf16
 * rounded once per host), then the host partials in host order (hosts in
 * the order of their first rank). host_of[r]: any id of rank r's host. With
 * one host (or nranks 0) the reference is one rank order again.
 */
void zt_ref_set_hosts(int nranks, const int *host_of);

/** Ranks on rank's host by the table of zt_ref_set_hosts (nranks without one). */
int zt_ref_host_ranks(int rank, int nranks);

/** Are ranks a and b on one host by that table (always 1 without one)? */
int zt_ref_same_host(int a, int b, int nranks);

/** Expected AllReduce output (count elements) for pattern p over p->nranks ranks. */
int zt_ref_allreduce(void *out, size_t count, const zt_pat_t *p);

/** Expected AllGather output: rank r's count elements at out + r * count. */
void zt_ref_allgather(void *out, size_t count, const zt_pat_t *p);

/**
 * Bitwise comparison of count elements. Returns the number of differing
 * elements; when non-zero prints "<what>: k of count differ; first at [i]:
 * got X want Y" to stderr.
 */
size_t zt_compare(const char *what, const void *got, const void *want, size_t count, int dtype);

/* ---- cases ----------------------------------------------------------------- */

enum { ZT_ALLREDUCE = 0, ZT_ALLGATHER = 1 };

/** One collective call to run and check. */
typedef struct {
    int coll;      /**< ZT_ALLREDUCE or ZT_ALLGATHER */
    int dtype;     /**< HcclDataType */
    int op;        /**< HcclReduceOp (AllReduce) */
    size_t count;  /**< AllReduce count / AllGather send count */
    int zero_copy; /**< buffers in activated memory (1) or plain aclrtMalloc memory (0) */
    int in_place;  /**< recv == send (AllGather: send is this rank's slot of recv) */
    int misalign;  /**< 1: buffers one element past an aligned address (3 bytes for 1-byte types) */
    int mode;      /**< ZT_FILL_EXACT or ZT_FILL_ROUNDING */
    uint64_t seed; /**< data selector */
    int expect_buffered;    /**< zero-copy arena, but not activated: expect the buffered path */
    int expect_unsupported; /**< the call must return HCCL_E_NOT_SUPPORT, output untouched */
    int same_data;          /**< every rank contributes rank 0's data (MAX / MIN only) */
    int skip_counters;      /**< other ops on the comm run between start and finish */
    int expect_para;        /**< must fail with HCCL_E_PARA (call or sync), output untouched */
} zt_case_t;

/** Print a case as "allreduce fp16 sum count=7 zero-copy in-place odd seed=..". */
void zt_case_str(const zt_case_t *c, char *buf, size_t len);

/** Bytes a zt_arena_t half must hold for a case of count elements on n ranks. */
size_t zt_case_bytes(int coll, int dtype, size_t count, int nranks);

/**
 * Run one case on env and check it: result element by element against the
 * reference, 64 bytes either side of the output untouched, the input intact
 * (AllGather always, AllReduce on the buffered path), staged bytes unchanged
 * on the zero-copy path and grown on the buffered path (nranks > 1, count >
 * 0), and the zero-copy / buffered op counters. Returns 0, 1 when a check
 * failed, or 2 when the call or the stream failed (the communicator may then
 * be out of step with its peers: stop issuing ops). Failures are printed with
 * the case.
 */
int zt_case_run(zt_env_t *env, const zt_case_t *c);

/** The same in two steps, so several ops can be enqueued before one sync. */
typedef struct {
    zt_case_t c;
    zt_env_t *env;
    unsigned char *send;
    unsigned char *recv;
    size_t sbytes;
    size_t rbytes;
    int unsupported; /**< the call said HCCL_E_NOT_SUPPORT (expected) */
    int call_para;   /**< the call said HCCL_E_PARA (expected) */
    uint64_t staged0;
    uint64_t zc_ops0;
    uint64_t buf_ops0;
} zt_pending_t;

/** Fill the buffers and enqueue the op (no sync). Returns 0 or 2. */
int zt_case_start(zt_env_t *env, const zt_case_t *c, zt_pending_t *pd);

/** Check a started case given what aclrtSynchronizeStream returned. Returns 0, 1 or 2. */
int zt_case_finish(zt_pending_t *pd, aclError sync_rc);

/** Print "[rank r/n] FAIL <what>" for env, at most 50 times per process. */
void zt_report(const zt_env_t *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/**
 * AllReduce INT32 SUM of count elements at send / recv on comm (env's stream),
 * checked element by element. want_zc 1: the op must have run zero-copy (one
 * zero-copy op, nothing staged); 0: buffered (no zero-copy op, and bytes
 * staged when there are peers); -1: either. Returns the failures it printed.
 */
int zt_allreduce_path(zt_env_t *env, HcclComm comm, void *send, void *recv, size_t count,
                      int want_zc, int line);

/** zt_report "line <line>: <message>" (ZT_EXPECT's failure path). */
void zt_expect_fail(const zt_env_t *env, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** In a rank function: reports a false cond with its line (printf-style message) and counts
 *  it in the caller's local `fails`; evaluates to the condition (1 or 0). */
#define ZT_EXPECT(env, cond, ...)                                                                  \
    ((cond) ? 1 : (zt_expect_fail((env), __LINE__, __VA_ARGS__), fails++, 0))

/** ZT_EXPECT that call returns want (an HcclResult); reports what it returned otherwise. */
#define ZT_EXPECT_RC(env, call, want, what)                                                        \
    do {                                                                                           \
        HcclResult rc_ = (call);                                                                   \
        ZT_EXPECT(env, rc_ == (want), "%s: got %d (%s), want %d (%s)", what, (int)rc_,             \
                  HcclGetErrorString(rc_), (int)(want), HcclGetErrorString(want));                 \
    } while (0)

#endif /* ZT_CHECK_H */
