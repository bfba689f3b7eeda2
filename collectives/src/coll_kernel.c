/*
 * Reduction kernels: dst = src[0] op src[1] op ... op src[n-1], left to right.
 *
 * One X-macro (dtype x op) generates two typed loops per pair, both with
 * restrict pointers so the compiler vectorises them without alias checks:
 *   k2: d[i] = a[i] op b[i]   (first pass, d distinct from a and b)
 *   k1: d[i] = d[i] op b[i]   (every later pass)
 * The output is processed in blocks of COLL_BLK_BYTES: the accumulator block
 * stays in L1 while each source block streams through it once. When dst is
 * also one of the sources (in-place), a source read after the first pass
 * would already be overwritten, so the block is accumulated in a stack
 * buffer and copied out after every source has been read (dst == src[0]
 * alone needs no buffer: it is the accumulator's starting value).
 *
 * Semantics (every rank computes the same bits, since the order is fixed):
 *  - integers: SUM and PROD wrap modulo 2^bits (done in unsigned arithmetic,
 *    so there is no signed-overflow UB); MAX/MIN as usual.
 *  - fp MAX/MIN propagate NaN: the result is NaN if any input is NaN (the
 *    first NaN operand in rank order wins); between equal values (+0 / -0)
 *    the later operand is returned.
 *  - fp16/bf16 are widened to fp32, reduced in fp32 over all n inputs and
 *    rounded to nearest even once, in one fused pass (coll_kernel_half.c);
 *    on x86, when NaNs meet in SUM or PROD the earlier one's payload
 *    survives, whichever kernel runs.
 */
#include "coll_kernel.h"

#include "zc/export.h"

#include <string.h>

/* X(DT, C type, arithmetic type, kind): the types reduced natively. */
#define COLL_NATIVE_TYPES(X)                                                                       \
    X(INT8, int8_t, uint32_t, INT)                                                                 \
    X(UINT8, uint8_t, uint32_t, INT)                                                               \
    X(INT16, int16_t, uint32_t, INT)                                                               \
    X(UINT16, uint16_t, uint32_t, INT)                                                             \
    X(INT32, int32_t, uint32_t, INT)                                                               \
    X(UINT32, uint32_t, uint32_t, INT)                                                             \
    X(INT64, int64_t, uint64_t, INT)                                                               \
    X(UINT64, uint64_t, uint64_t, INT)                                                             \
    X(FP32, float, float, FLT)                                                                     \
    X(FP64, double, double, FLT)

/* The binary operators, per kind. W is the type the arithmetic happens in:
 * unsigned for integers, where wrap-around is defined. */
#define COLL_OP_INT_SUM(T, W, x, y) ((T)((W)(x) + (W)(y)))
#define COLL_OP_INT_PROD(T, W, x, y) ((T)((W)(x) * (W)(y)))
#define COLL_OP_INT_MAX(T, W, x, y) ((x) > (y) ? (x) : (y))
#define COLL_OP_INT_MIN(T, W, x, y) ((x) < (y) ? (x) : (y))
#define COLL_OP_FLT_SUM(T, W, x, y) ((x) + (y))
#define COLL_OP_FLT_PROD(T, W, x, y) ((x) * (y))
#define COLL_OP_FLT_MAX(T, W, x, y) (((x) > (y) || (x) != (x)) ? (x) : (y))
#define COLL_OP_FLT_MIN(T, W, x, y) (((x) < (y) || (x) != (x)) ? (x) : (y))

/* Each typed loop also gets an AVX2 clone, chosen once at load time where the
 * CPU has AVX2: twice the lanes of the x86-64 baseline, which matters while
 * the data is cache-resident (up to a few MiB per rank). The same clone runs
 * on every rank of a host, and + - * max min give the same bits at any
 * vector width, so results stay identical across ranks. */
/* Not under ThreadSanitizer: a clone's resolver is an IFUNC that the dynamic
 * loader runs while relocating libhccl, before the TSan runtime can serve
 * instrumented code, and the process dies there. */
#if defined(__x86_64__) && defined(__has_attribute) && !defined(__SANITIZE_THREAD__)
#if __has_attribute(target_clones)
#define COLL_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef COLL_CLONES
#define COLL_CLONES
#endif

/* Element access types that assume neither alignment nor a declared type. */
#define COLL_GEN_UTYPE(DT, T, W, K) typedef T coll_u_##DT __attribute__((aligned(1), may_alias));
COLL_NATIVE_TYPES(COLL_GEN_UTYPE)
#undef COLL_GEN_UTYPE

#define COLL_GEN_KERN(DT, T, W, K, OP)                                                             \
    COLL_CLONES static void coll_k2_##DT##_##OP(void *restrict d, const void *restrict a,          \
                                                const void *restrict b, size_t n)                  \
    {                                                                                              \
        coll_u_##DT *restrict dp = d;                                                              \
        const coll_u_##DT *restrict ap = a;                                                        \
        const coll_u_##DT *restrict bp = b;                                                        \
        for (size_t i = 0; i < n; i++) {                                                           \
            T x = ap[i];                                                                           \
            T y = bp[i];                                                                           \
            dp[i] = COLL_OP_##K##_##OP(T, W, x, y);                                                \
        }                                                                                          \
    }                                                                                              \
    COLL_CLONES static void coll_k1_##DT##_##OP(void *restrict d, const void *restrict b,          \
                                                size_t n)                                          \
    {                                                                                              \
        coll_u_##DT *restrict dp = d;                                                              \
        const coll_u_##DT *restrict bp = b;                                                        \
        for (size_t i = 0; i < n; i++) {                                                           \
            T x = dp[i];                                                                           \
            T y = bp[i];                                                                           \
            dp[i] = COLL_OP_##K##_##OP(T, W, x, y);                                                \
        }                                                                                          \
    }

#define COLL_GEN_OPS(DT, T, W, K)                                                                  \
    COLL_GEN_KERN(DT, T, W, K, SUM)                                                                \
    COLL_GEN_KERN(DT, T, W, K, PROD)                                                               \
    COLL_GEN_KERN(DT, T, W, K, MAX)                                                                \
    COLL_GEN_KERN(DT, T, W, K, MIN)
COLL_NATIVE_TYPES(COLL_GEN_OPS)
#undef COLL_GEN_OPS
#undef COLL_GEN_KERN

typedef void (*coll_k2_fn)(void *restrict, const void *restrict, const void *restrict, size_t);
typedef void (*coll_k1_fn)(void *restrict, const void *restrict, size_t);

typedef struct {
    coll_k2_fn k2;
    coll_k1_fn k1;
} coll_kern_t;

#define COLL_TAB_ENTRY(DT, OP) [COLL_##OP] = {coll_k2_##DT##_##OP, coll_k1_##DT##_##OP}
#define COLL_TAB_ROW(DT, T, W, K)                                                                  \
    [COLL_##DT] = {COLL_TAB_ENTRY(DT, SUM), COLL_TAB_ENTRY(DT, PROD), COLL_TAB_ENTRY(DT, MAX),     \
                   COLL_TAB_ENTRY(DT, MIN)},
static const coll_kern_t coll_kern_tab[COLL_DTYPE_LIMIT][4] = {COLL_NATIVE_TYPES(COLL_TAB_ROW)};
#undef COLL_TAB_ROW
#undef COLL_TAB_ENTRY

/* X(DT, bytes): every type, reducible or copy-only. */
#define COLL_ALL_TYPES(X)                                                                          \
    X(INT8, 1)                                                                                     \
    X(INT16, 2)                                                                                    \
    X(INT32, 4)                                                                                    \
    X(FP16, 2)                                                                                     \
    X(FP32, 4)                                                                                     \
    X(INT64, 8)                                                                                    \
    X(UINT64, 8)                                                                                   \
    X(UINT8, 1)                                                                                    \
    X(UINT16, 2)                                                                                   \
    X(UINT32, 4)                                                                                   \
    X(FP64, 8)                                                                                     \
    X(BF16, 2)                                                                                     \
    X(INT128, 16)                                                                                  \
    X(HIF8, 1)                                                                                     \
    X(FP8E4M3, 1)                                                                                  \
    X(FP8E5M2, 1)                                                                                  \
    X(FP8E8M0, 1)

#define COLL_SIZE_ENTRY(DT, bytes) [COLL_##DT] = (bytes),
static const unsigned char coll_size_tab[COLL_DTYPE_LIMIT] = {COLL_ALL_TYPES(COLL_SIZE_ENTRY)};
#undef COLL_SIZE_ENTRY

size_t coll_dtype_size(int dtype)
{
    if (dtype < 0 || dtype >= COLL_DTYPE_LIMIT) {
        return 0;
    }
    return coll_size_tab[dtype];
}

static int coll_is_half(int dtype)
{
    return dtype == COLL_FP16 || dtype == COLL_BF16;
}

int coll_reducible(int dtype, int op)
{
    if (op < COLL_SUM || op > COLL_MIN || dtype < 0 || dtype >= COLL_DTYPE_LIMIT) {
        return 0;
    }
    return coll_kern_tab[dtype][op].k2 != NULL || coll_is_half(dtype);
}

void coll_reduce_at(void *dst, const void *const *src, size_t off, int n, size_t count, int dtype,
                    int op)
{
    size_t es = coll_dtype_size(dtype);
    if (count == 0 || n <= 0 || !coll_reducible(dtype, op)) {
        return;
    }
    if (n == 1) {
        const char *s = (const char *)src[0] + off;
        if (s != (const char *)dst) {
            memmove(dst, s, count * es);
        }
        return;
    }
    if (coll_is_half(dtype)) {
        coll_reduce_half(dst, src, off, n, count, dtype, op);
        return;
    }

    const coll_kern_t *k = &coll_kern_tab[dtype][op];
    /* dst == src[0] accumulates in place; dst equal to any later source
     * would be read after being written, so such blocks go through tmp. */
    int acc_is_s0 = (const char *)src[0] + off == (const char *)dst;
    int use_tmp = 0;
    for (int s = 1; s < n; s++) {
        if ((const char *)src[s] + off == (const char *)dst) {
            use_tmp = 1;
            acc_is_s0 = 0;
        }
    }
    unsigned char tmp[COLL_BLK_BYTES] __attribute__((aligned(64)));
    size_t blk = COLL_BLK_BYTES / es;

    for (size_t i = 0; i < count; i += blk) {
        size_t m = ZC_MIN(blk, count - i);
        size_t bo = off + i * es;
        char *out = (char *)dst + i * es;
        void *acc = use_tmp ? (void *)tmp : (void *)out;
        int s = 1;
        if (!acc_is_s0) {
            k->k2(acc, (const char *)src[0] + bo, (const char *)src[1] + bo, m);
            s = 2;
        }
        for (; s < n; s++) {
            k->k1(acc, (const char *)src[s] + bo, m);
        }
        if (use_tmp) {
            memcpy(out, tmp, m * es);
        }
    }
}

void coll_reduce_n(void *dst, const void *const *src, int n, size_t count, int dtype, int op)
{
    coll_reduce_at(dst, src, 0, n, count, dtype, op);
}
