/*
 * fp16/bf16 reductions, fused: per chunk of elements every source is loaded,
 * widened to fp32 in registers and folded in rank order, and the chunk is
 * rounded once and stored. One pass over the data, no fp32 staging buffer.
 *
 * Kernels: scalar (portable C, the one the others are tested against), AVX2
 * (with F16C), AVX-512 (F and BW, for the masked tails) and AVX-512 with
 * AVX512-BF16 (and DQ), picked once at run time from what the CPU and the OS
 * support and ZCCL_KERNEL. Each element goes through the same fp32
 * operations in the same order in every kernel, and is rounded by the same
 * integer steps or by vcvtne2ps2bf16 where that gives the same bits (bf16:
 * it flushes denormals, so a chunk with a denormal sum takes the integer
 * steps), or by vcvtps2ph, whose results coll_fp16_from_float reproduces
 * (fp16): the same bits whichever kernel runs, and every rank of a host
 * runs the same one.
 *
 * bf16 lanes: a 32-bit lane holding two bf16 values is, masked with
 * 0xffff0000, its odd element as an fp32 and, shifted left by 16, its even
 * one, so widening needs no shuffles; the two halves are reduced apart and
 * merged back into one lane when stored.
 *
 * In place: dst may equal any source at the same offset; every chunk reads
 * all its sources before it is stored, and chunks do not overlap.
 *
 * The wide forms (coll_reduce_wide, the hierarchical algorithms' fp32
 * partials) read or store fp32 in place of one side's 16-bit values, by the
 * same steps: scalar, or AVX2 when any vector kernel is active.
 */
#include "coll_kernel.h"

#include "zc/config.h"
#include "zc/log.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define COLL_KERN_X86 1
#else
#define COLL_KERN_X86 0
#endif

typedef uint16_t coll_h16 __attribute__((aligned(1), may_alias));
typedef float coll_f32 __attribute__((aligned(1), may_alias));

static const char *const coll_kern_names[COLL_KERN_COUNT] = {"scalar", "avx2", "avx512",
                                                             "avx512bf16"};

/* ------------------------------------------------------------------ scalar */

static inline float coll_half_widen(uint16_t h, int dtype)
{
    return dtype == COLL_BF16 ? coll_bf16_to_float(h) : coll_fp16_to_float(h);
}

static inline uint16_t coll_half_narrow(float f, int dtype)
{
    return dtype == COLL_BF16 ? coll_bf16_from_float(f) : coll_fp16_from_float(f);
}

/* SUM and PROD: when both operands are NaN, x86 returns the first one
 * (quietened), and a compiler may swap the operands of + and *, so which
 * payload survives would depend on code generation; the instructions are
 * written out with the accumulator first, in every kernel alike. */
#if COLL_KERN_X86
#define COLL_PINNED(insn, out, x, y, cx) __asm__(insn " %2, %1, %0" : "=" cx(out) : cx(x), cx(y))
#define COLL_PINNED_SS(insn, x, y) __asm__(insn " %1, %0" : "+x"(x) : "x"(y))
#endif

/* x + y, or x * y when mul. */
static inline float coll_half_arith(float x, float y, int mul)
{
#if COLL_KERN_X86
    if (mul) {
        COLL_PINNED_SS("mulss", x, y);
    } else {
        COLL_PINNED_SS("addss", x, y);
    }
    return x;
#else
    return mul ? x * y : x + y;
#endif
}

/* The operators as coll_kernel.c defines them for fp32 (MAX/MIN: the first
 * NaN in rank order wins; between equal values the later one). */
static inline float coll_half_op(float x, float y, int op)
{
    switch (op) {
    case COLL_SUM:
        return coll_half_arith(x, y, 0);
    case COLL_PROD:
        return coll_half_arith(x, y, 1);
    case COLL_MAX:
        return (x > y || x != x) ? x : y;
    default:
        return (x < y || x != x) ? x : y;
    }
}

/* Elements lo..hi-1 in blocks of COLL_SCALAR_BLK: every source's block folded
 * into a small fp32 block, which is rounded and stored after the last one
 * (so in place is safe). Loops of one source each, with the types and op
 * constant after inlining, which the compiler can vectorise (bf16 at least)
 * where no vector kernel runs. sdt / ddt: the sources' and dst's types,
 * fp16 / bf16 or COLL_FP32 (wide partials: read or stored as they are). */
#define COLL_SCALAR_BLK 64

static inline float coll_wide_load(const char *p, size_t j, int sdt)
{
    if (sdt == COLL_FP32) {
        return ((const coll_f32 *)(const void *)p)[j];
    }
    return coll_half_widen(((const coll_h16 *)(const void *)p)[j], sdt);
}

static inline void coll_wide_store(void *d, size_t j, float f, int ddt)
{
    if (ddt == COLL_FP32) {
        ((coll_f32 *)d)[j] = f;
    } else {
        ((coll_h16 *)d)[j] = coll_half_narrow(f, ddt);
    }
}

static inline __attribute__((always_inline)) void
coll_half_scalar_body(void *dst, const void *const *src, size_t off, int n, size_t lo, size_t hi,
                      int sdt, int ddt, int op)
{
    size_t ses = sdt == COLL_FP32 ? 4 : 2;
    size_t des = ddt == COLL_FP32 ? 4 : 2;
    float acc[COLL_SCALAR_BLK];
    for (size_t b = lo; b < hi; b += COLL_SCALAR_BLK) {
        size_t m = hi - b < COLL_SCALAR_BLK ? hi - b : COLL_SCALAR_BLK;
        const char *p = (const char *)src[0] + off + b * ses;
        for (size_t j = 0; j < m; j++) {
            acc[j] = coll_wide_load(p, j, sdt);
        }
        for (int s = 1; s < n; s++) {
            p = (const char *)src[s] + off + b * ses;
            for (size_t j = 0; j < m; j++) {
                acc[j] = coll_half_op(acc[j], coll_wide_load(p, j, sdt), op);
            }
        }
        char *d = (char *)dst + b * des;
        for (size_t j = 0; j < m; j++) {
            coll_wide_store(d, j, acc[j], ddt);
        }
    }
}

/* One switch per call on the operator, so each inlined body below is
 * specialised for a constant op. */
#define COLL_HALF_BY_OP(body, ...)                                                                 \
    do {                                                                                           \
        switch (op) {                                                                              \
        case COLL_SUM:                                                                             \
            body(__VA_ARGS__, COLL_SUM);                                                           \
            break;                                                                                 \
        case COLL_PROD:                                                                            \
            body(__VA_ARGS__, COLL_PROD);                                                          \
            break;                                                                                 \
        case COLL_MAX:                                                                             \
            body(__VA_ARGS__, COLL_MAX);                                                           \
            break;                                                                                 \
        default:                                                                                   \
            body(__VA_ARGS__, COLL_MIN);                                                           \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

static inline __attribute__((always_inline)) void
coll_half_scalar_dt(void *dst, const void *const *src, size_t off, int n, size_t lo, size_t hi,
                    int sdt, int ddt, int op)
{
    COLL_HALF_BY_OP(coll_half_scalar_body, dst, src, off, n, lo, hi, sdt, ddt);
}

/* The scalar kernel, and the vector kernels' tails (not inlined into them:
 * compiled for the baseline, its legacy SSE instructions never meet dirty
 * upper vector halves, as the compiler clears them before a call). */
static __attribute__((noinline)) void coll_half_scalar(void *dst, const void *const *src,
                                                       size_t off, int n, size_t lo, size_t hi,
                                                       int dtype, int op)
{
    if (dtype == COLL_BF16) {
        coll_half_scalar_dt(dst, src, off, n, lo, hi, COLL_BF16, COLL_BF16, op);
    } else {
        coll_half_scalar_dt(dst, src, off, n, lo, hi, COLL_FP16, COLL_FP16, op);
    }
}

/* The wide forms (fp32 partials), elements lo..hi-1: half sources into
 * fp32, fp32 sources into half; the scalar kernel and the AVX2 one's tail. */
static __attribute__((noinline)) void coll_half_wide(void *dst, const void *const *src, int n,
                                                     size_t lo, size_t hi, int sdt, int ddt, int op)
{
    if (sdt == COLL_BF16) {
        coll_half_scalar_dt(dst, src, 0, n, lo, hi, COLL_BF16, COLL_FP32, op);
    } else if (sdt == COLL_FP16) {
        coll_half_scalar_dt(dst, src, 0, n, lo, hi, COLL_FP16, COLL_FP32, op);
    } else if (ddt == COLL_BF16) {
        coll_half_scalar_dt(dst, src, 0, n, lo, hi, COLL_FP32, COLL_BF16, op);
    } else {
        coll_half_scalar_dt(dst, src, 0, n, lo, hi, COLL_FP32, COLL_FP16, op);
    }
}

#if COLL_KERN_X86
#define COLL_INLINE static inline __attribute__((always_inline))

/* Source s of the chunk at element i. p1 is source 1 hoisted out of the
 * loop: a store to dst may alias the src array as far as the compiler
 * knows, so src[s] is otherwise reloaded every chunk. */
#define COLL_SRC(s, i) ((s) == 1 ? p1 + (i)*2 : (const char *)src[s] + off + (i)*2)

/* Every vector body with n = 2 (two ranks: the common case, the loop over
 * sources unrolled away) and with any n. */
#define COLL_HALF_BY_N(body, ...)                                                                  \
    do {                                                                                           \
        if (n == 2) {                                                                              \
            body(dst, src, off, 2, count, __VA_ARGS__);                                            \
        } else {                                                                                   \
            body(dst, src, off, n, count, __VA_ARGS__);                                            \
        }                                                                                          \
    } while (0)

/* -------------------------------------------------------------------- AVX2 */
#define COLL_AVX2 __attribute__((target("avx2,f16c")))

COLL_AVX2 COLL_INLINE __m256 coll_op8(__m256 x, __m256 y, int op)
{
    switch (op) {
    case COLL_SUM:
        COLL_PINNED("vaddps", x, x, y, "x");
        return x;
    case COLL_PROD:
        COLL_PINNED("vmulps", x, x, y, "x");
        return x;
    case COLL_MAX:
        return _mm256_blendv_ps(
            y, x, _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_GT_OQ), _mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
    default:
        return _mm256_blendv_ps(
            y, x, _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_LT_OQ), _mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
    }
}

/* fp32 lanes rounded to bf16 in their upper 16 bits (coll_bf16_from_float). */
COLL_AVX2 COLL_INLINE __m256i coll_bf16_round8(__m256 f)
{
    __m256i u = _mm256_castps_si256(f);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
    __m256i q = _mm256_or_si256(u, _mm256_set1_epi32(0x400000));
    __m256 nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
    return _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(q), nan));
}

COLL_AVX2 COLL_INLINE void coll_bf16_avx2(void *dst, const void *const *src, size_t off, int n,
                                          size_t count, int op)
{
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    const char *p1 = (const char *)src[n > 1] + off;
    size_t i = 0;
    for (; i + 16 <= count; i += 16) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)COLL_SRC(0, i));
        __m256 ev = _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
        __m256 od = _mm256_castsi256_ps(_mm256_and_si256(u, hi));
        for (int s = 1; s < n; s++) {
            u = _mm256_loadu_si256((const __m256i *)(const void *)COLL_SRC(s, i));
            ev = coll_op8(ev, _mm256_castsi256_ps(_mm256_slli_epi32(u, 16)), op);
            od = coll_op8(od, _mm256_castsi256_ps(_mm256_and_si256(u, hi)), op);
        }
        __m256i out = _mm256_or_si256(_mm256_and_si256(coll_bf16_round8(od), hi),
                                      _mm256_srli_epi32(coll_bf16_round8(ev), 16));
        _mm256_storeu_si256((__m256i *)(void *)((char *)dst + i * 2), out);
    }
    coll_half_scalar(dst, src, off, n, i, count, COLL_BF16, op);
}

COLL_AVX2 COLL_INLINE void coll_fp16_avx2(void *dst, const void *const *src, size_t off, int n,
                                          size_t count, int op)
{
    const char *p1 = (const char *)src[n > 1] + off;
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256 acc =
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)COLL_SRC(0, i)));
        for (int s = 1; s < n; s++) {
            __m128i h = _mm_loadu_si128((const __m128i *)(const void *)COLL_SRC(s, i));
            acc = coll_op8(acc, _mm256_cvtph_ps(h), op);
        }
        _mm_storeu_si128((__m128i *)(void *)((char *)dst + i * 2),
                         _mm256_cvtps_ph(acc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    coll_half_scalar(dst, src, off, n, i, count, COLL_FP16, op);
}

COLL_AVX2 COLL_INLINE void coll_bf16_avx2_op(void *dst, const void *const *src, size_t off, int n,
                                             size_t count, int op)
{
    COLL_HALF_BY_N(coll_bf16_avx2, op);
}

COLL_AVX2 COLL_INLINE void coll_fp16_avx2_op(void *dst, const void *const *src, size_t off, int n,
                                             size_t count, int op)
{
    COLL_HALF_BY_N(coll_fp16_avx2, op);
}

COLL_AVX2 static void coll_half_avx2(void *dst, const void *const *src, size_t off, int n,
                                     size_t count, int dtype, int op)
{
    if (dtype == COLL_BF16) {
        COLL_HALF_BY_OP(coll_bf16_avx2_op, dst, src, off, n, count);
    } else {
        COLL_HALF_BY_OP(coll_fp16_avx2_op, dst, src, off, n, count);
    }
}

/* The wide forms with AVX2 (every vector kernel runs them): 8 elements of
 * sdt widened, and 8 fp32 stored as ddt, by the fused kernels' steps. */
COLL_AVX2 COLL_INLINE __m256 coll_wide_load8(const char *p, int sdt)
{
    if (sdt == COLL_FP32) {
        return _mm256_loadu_ps((const float *)(const void *)p);
    }
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    if (sdt == COLL_FP16) {
        return _mm256_cvtph_ps(h);
    }
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

COLL_AVX2 COLL_INLINE void coll_wide_store8(char *p, __m256 f, int ddt)
{
    __m128i h;
    if (ddt == COLL_FP32) {
        _mm256_storeu_ps((float *)(void *)p, f);
        return;
    }
    if (ddt == COLL_FP16) {
        h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else {
        __m256i r = _mm256_srli_epi32(coll_bf16_round8(f), 16);
        h = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    }
    _mm_storeu_si128((__m128i *)(void *)p, h);
}

COLL_AVX2 COLL_INLINE void coll_wide_avx2_body(void *dst, const void *const *src, int n,
                                               size_t count, int sdt, int ddt, int op)
{
    size_t ses = sdt == COLL_FP32 ? 4 : 2;
    size_t des = ddt == COLL_FP32 ? 4 : 2;
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256 acc = coll_wide_load8((const char *)src[0] + i * ses, sdt);
        for (int s = 1; s < n; s++) {
            acc = coll_op8(acc, coll_wide_load8((const char *)src[s] + i * ses, sdt), op);
        }
        coll_wide_store8((char *)dst + i * des, acc, ddt);
    }
    coll_half_wide(dst, src, n, i, count, sdt, ddt, op);
}

COLL_AVX2 static void coll_wide_avx2(void *dst, const void *const *src, int n, size_t count,
                                     int sdt, int ddt, int op)
{
    if (sdt == COLL_BF16) {
        COLL_HALF_BY_OP(coll_wide_avx2_body, dst, src, n, count, COLL_BF16, COLL_FP32);
    } else if (sdt == COLL_FP16) {
        COLL_HALF_BY_OP(coll_wide_avx2_body, dst, src, n, count, COLL_FP16, COLL_FP32);
    } else if (ddt == COLL_BF16) {
        COLL_HALF_BY_OP(coll_wide_avx2_body, dst, src, n, count, COLL_FP32, COLL_BF16);
    } else {
        COLL_HALF_BY_OP(coll_wide_avx2_body, dst, src, n, count, COLL_FP32, COLL_FP16);
    }
}

/* ----------------------------------------------------------------- AVX-512 */
#define COLL_AVX512 __attribute__((target("avx512f,avx512bw")))

COLL_AVX512 COLL_INLINE __m512 coll_op16(__m512 x, __m512 y, int op)
{
    switch (op) {
    case COLL_SUM:
        COLL_PINNED("vaddps", x, x, y, "v");
        return x;
    case COLL_PROD:
        COLL_PINNED("vmulps", x, x, y, "v");
        return x;
    case COLL_MAX:
        return _mm512_mask_blend_ps(
            _mm512_cmp_ps_mask(x, y, _CMP_GT_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
    default:
        return _mm512_mask_blend_ps(
            _mm512_cmp_ps_mask(x, y, _CMP_LT_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
    }
}

/* u + 0x7fff + lsb as u + 0x8000 where the lsb is set, else u + 0x7fff, and
 * NaN found by an fp compare: 5 instructions where the AVX2 form takes 7. */
COLL_AVX512 COLL_INLINE __m512i coll_bf16_round16(__m512 f)
{
    __m512i u = _mm512_castps_si512(f);
    __mmask16 lsb = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x10000));
    __m512i r = _mm512_mask_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb, u,
                                      _mm512_set1_epi32(0x8000));
    __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
    return _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000));
}

/* Loads of a whole chunk (k all ones, folded away in the main loop) or of the
 * last, partial one; masked-off lanes read as 0 and are never stored. */
COLL_AVX512 COLL_INLINE __m512i coll_load512(const char *p, __mmask32 k, int whole)
{
    return whole ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(k, p);
}

COLL_AVX512 COLL_INLINE void coll_store512(char *p, __m512i v, __mmask32 k, int whole)
{
    if (whole) {
        _mm512_storeu_si512(p, v);
    } else {
        _mm512_mask_storeu_epi16(p, k, v);
    }
}

/* A chunk of 32 bf16 from element i (all of them when whole, else those in
 * k) reduced into its even and odd elements. */
COLL_AVX512 COLL_INLINE void coll_bf16_sum512(const void *const *src, size_t off, const char *p1,
                                              int n, size_t i, __mmask32 k, int whole, int op,
                                              __m512 *ev, __m512 *od)
{
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    __m512i u = coll_load512(COLL_SRC(0, i), k, whole);
    __m512 e = _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
    __m512 o = _mm512_castsi512_ps(_mm512_and_si512(u, hi));
    for (int s = 1; s < n; s++) {
        u = coll_load512(COLL_SRC(s, i), k, whole);
        e = coll_op16(e, _mm512_castsi512_ps(_mm512_slli_epi32(u, 16)), op);
        o = coll_op16(o, _mm512_castsi512_ps(_mm512_and_si512(u, hi)), op);
    }
    *ev = e;
    *od = o;
}

/* The even and odd sums rounded and merged back into 32 bf16 in order. */
COLL_AVX512 COLL_INLINE __m512i coll_bf16_pack512(__m512 ev, __m512 od)
{
    return _mm512_ternarylogic_epi32(_mm512_set1_epi32((int)0xffff0000u), coll_bf16_round16(od),
                                     _mm512_srli_epi32(coll_bf16_round16(ev), 16),
                                     0xea); /* (hi & od) | ev */
}

/* The same with AVX512-BF16 where it gives the same bits: vcvtne2ps2bf16
 * rounds as coll_bf16_from_float but flushes denormals, so a chunk with a
 * denormal sum takes the integer steps. It packs its inputs one after the
 * other; vpermw interleaves them again. */
#define COLL_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16")))
#define COLL_ILV(j) (short)((j) / 2 + ((j)&1) * 16)
#define COLL_ILV4(j) COLL_ILV(j + 3), COLL_ILV(j + 2), COLL_ILV(j + 1), COLL_ILV(j)

COLL_AVX512BF16 COLL_INLINE __m512i coll_bf16_pack512bf(__m512 ev, __m512 od)
{
    if ((_mm512_fpclass_ps_mask(ev, 0x20) | _mm512_fpclass_ps_mask(od, 0x20)) != 0) {
        return coll_bf16_pack512(ev, od);
    }
    const __m512i ilv = _mm512_set_epi16(COLL_ILV4(28), COLL_ILV4(24), COLL_ILV4(20), COLL_ILV4(16),
                                         COLL_ILV4(12), COLL_ILV4(8), COLL_ILV4(4), COLL_ILV4(0));
    return _mm512_permutexvar_epi16(ilv, (__m512i)_mm512_cvtne2ps_pbh(od, ev));
}

/* The bf16 kernel for one target and packing: chunks, then the switches
 * over n and op (the target decides which instructions may be inlined). */
#define COLL_GEN_BF16_512(NAME, TARGET, PACK)                                                      \
    TARGET COLL_INLINE void NAME##_n(void *dst, const void *const *src, size_t off, int n,         \
                                     size_t count, int op)                                         \
    {                                                                                              \
        const char *p1 = (const char *)src[n > 1] + off;                                           \
        __m512 ev, od;                                                                             \
        size_t i = 0;                                                                              \
        for (; i + 32 <= count; i += 32) {                                                         \
            coll_bf16_sum512(src, off, p1, n, i, ~(__mmask32)0, 1, op, &ev, &od);                  \
            _mm512_storeu_si512((char *)dst + i * 2, PACK(ev, od));                                \
        }                                                                                          \
        if (i < count) {                                                                           \
            __mmask32 k = ((__mmask32)1 << (count - i)) - 1;                                       \
            coll_bf16_sum512(src, off, p1, n, i, k, 0, op, &ev, &od);                              \
            _mm512_mask_storeu_epi16((char *)dst + i * 2, k, PACK(ev, od));                        \
        }                                                                                          \
    }                                                                                              \
    TARGET COLL_INLINE void NAME##_op(void *dst, const void *const *src, size_t off, int n,        \
                                      size_t count, int op)                                        \
    {                                                                                              \
        COLL_HALF_BY_N(NAME##_n, op);                                                              \
    }                                                                                              \
    TARGET static void NAME(void *dst, const void *const *src, size_t off, int n, size_t count,    \
                            int op)                                                                \
    {                                                                                              \
        COLL_HALF_BY_OP(NAME##_op, dst, src, off, n, count);                                       \
    }

COLL_GEN_BF16_512(coll_bf16_avx512, COLL_AVX512, coll_bf16_pack512)
COLL_GEN_BF16_512(coll_bf16_avx512bf, COLL_AVX512BF16, coll_bf16_pack512bf)

/* 16 fp16 at p widened (those in k unless whole: then 32 bytes, no more). */
COLL_AVX512 COLL_INLINE __m512 coll_fp16_load512(const char *p, __mmask32 k, int whole)
{
    __m256i h = whole ? _mm256_loadu_si256((const __m256i *)(const void *)p)
                      : _mm512_castsi512_si256(_mm512_maskz_loadu_epi16(k, p));
    return _mm512_cvtph_ps(h);
}

/* 16 fp16 from element i (those in k unless whole). */
COLL_AVX512 COLL_INLINE void coll_fp16_step512(char *dst, const void *const *src, size_t off,
                                               const char *p1, int n, size_t i, __mmask32 k,
                                               int whole, int op)
{
    __m512 acc = coll_fp16_load512(COLL_SRC(0, i), k, whole);
    for (int s = 1; s < n; s++) {
        acc = coll_op16(acc, coll_fp16_load512(COLL_SRC(s, i), k, whole), op);
    }
    __m256i out = _mm512_cvtps_ph(acc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (whole) {
        _mm256_storeu_si256((__m256i *)(void *)(dst + i * 2), out);
    } else {
        _mm512_mask_storeu_epi16(dst + i * 2, k, _mm512_castsi256_si512(out));
    }
}

COLL_AVX512 COLL_INLINE void coll_fp16_avx512(void *dst, const void *const *src, size_t off, int n,
                                              size_t count, int op)
{
    const char *p1 = (const char *)src[n > 1] + off;
    size_t i = 0;
    for (; i + 16 <= count; i += 16) {
        coll_fp16_step512(dst, src, off, p1, n, i, 0xffff, 1, op);
    }
    if (i < count) {
        coll_fp16_step512(dst, src, off, p1, n, i, ((__mmask32)1 << (count - i)) - 1, 0, op);
    }
}

COLL_AVX512 COLL_INLINE void coll_fp16_avx512_op(void *dst, const void *const *src, size_t off,
                                                 int n, size_t count, int op)
{
    COLL_HALF_BY_N(coll_fp16_avx512, op);
}

COLL_AVX512 static void coll_fp16_avx512_all(void *dst, const void *const *src, size_t off, int n,
                                             size_t count, int op)
{
    COLL_HALF_BY_OP(coll_fp16_avx512_op, dst, src, off, n, count);
}

/* What the CPU and the OS allow: AVX2 + F16C with the ymm state saved;
 * AVX-512 F + BW with the opmask and zmm states saved too. */
static int coll_kern_probe(void)
{
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX) ||
        !(c & bit_F16C)) {
        return COLL_KERN_SCALAR;
    }
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & 0x6u) != 0x6u || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & bit_AVX2)) {
        return COLL_KERN_SCALAR;
    }
    if (!(b & bit_AVX512F) || !(b & bit_AVX512BW) || (lo & 0xe6u) != 0xe6u) {
        return COLL_KERN_AVX2;
    }
    if ((b & bit_AVX512DQ) && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & bit_AVX512BF16)) {
        return COLL_KERN_AVX512BF16;
    }
    return COLL_KERN_AVX512;
}
#else
static int coll_kern_probe(void)
{
    return COLL_KERN_SCALAR;
}
#endif

/* ------------------------------------------------------------------ picker */

int coll_kern_best(void)
{
    static atomic_int best = -1;
    int b = atomic_load_explicit(&best, memory_order_relaxed);
    if (b < 0) {
        /* every thread computes the same value, so a racing store is harmless */
        b = coll_kern_probe();
        atomic_store_explicit(&best, b, memory_order_relaxed);
    }
    return b;
}

const char *coll_kern_name(int kern)
{
    return kern >= 0 && kern < COLL_KERN_COUNT ? coll_kern_names[kern] : "?";
}

static int coll_kern_is_auto(const char *want)
{
    return want == NULL || want[0] == '\0' || strcmp(want, "auto") == 0;
}

int coll_kern_pick(const char *want, int best)
{
    if (coll_kern_is_auto(want)) {
        return best;
    }
    for (int k = 0; k < COLL_KERN_COUNT; k++) {
        if (strcmp(want, coll_kern_names[k]) == 0) {
            if (k > best) {
                ZC_WARN(ZC_SUB_COLL, "ZCCL_KERNEL=%s: this CPU cannot run it; using %s", want,
                        coll_kern_names[best]);
                return best;
            }
            return k;
        }
    }
    ZC_WARN(ZC_SUB_COLL,
            "ZCCL_KERNEL=%.32s is not auto, scalar, avx2, avx512 or avx512bf16; using %s", want,
            coll_kern_names[best]);
    return best;
}

static atomic_int coll_kern_forced = -1;

void coll_kern_force(int kern)
{
    atomic_store_explicit(&coll_kern_forced, kern, memory_order_relaxed);
}

/* ZCCL_KERNEL's pick: the kernel, plus COLL_KERN_AUTO when it was auto. */
#define COLL_KERN_AUTO 0x100

static int coll_kern_configured(void)
{
    static atomic_int picked = -1;
    int k = atomic_load_explicit(&picked, memory_order_relaxed);
    if (k < 0) {
        /* racing first calls may each warn once; they agree on the value */
        const char *want = zc_config()->kernel;
        k = coll_kern_pick(want, coll_kern_best());
        ZC_INFO(ZC_SUB_COLL, "fp16/bf16 reduction kernel: %s", coll_kern_names[k]);
        if (coll_kern_is_auto(want)) {
            k |= COLL_KERN_AUTO;
        }
        atomic_store_explicit(&picked, k, memory_order_relaxed);
    }
    return k;
}

/* The kernel in use, plus COLL_KERN_AUTO when ZCCL_KERNEL left it to the CPU
 * and no test forced one. */
static int coll_kern_choice(void)
{
    int f = atomic_load_explicit(&coll_kern_forced, memory_order_relaxed);
    if (f >= 0) {
        return f < coll_kern_best() ? f : coll_kern_best();
    }
    return coll_kern_configured();
}

int coll_kern_active(void)
{
    return coll_kern_choice() & ~COLL_KERN_AUTO;
}

/* Calls of fewer elements than this run the AVX2 kernel where AVX-512's was
 * picked automatically (same bits): on a CPU that lowers its clock while
 * 512-bit instructions run, everything around a small op pays for it, which
 * through PyTorch outweighs what the wide kernel gains on a few KiB
 * (decision 0030). A large op reduces blocks of COLL_BLK_BYTES, which keep
 * the wide kernel. */
#define COLL_HALF_WIDE_MIN 4096u
_Static_assert(COLL_HALF_WIDE_MIN <= COLL_BLK_BYTES / 2, "a large op's blocks stay wide");

/* The kernel for one call of count elements. */
static int coll_kern_for(size_t count)
{
    int choice = coll_kern_choice();
    int kern = choice & ~COLL_KERN_AUTO;
    if ((choice & COLL_KERN_AUTO) && kern >= COLL_KERN_AVX512 && count < COLL_HALF_WIDE_MIN) {
        return COLL_KERN_AVX2;
    }
    return kern;
}

void coll_reduce_half(void *dst, const void *const *src, size_t off, int n, size_t count, int dtype,
                      int op)
{
    int kern = coll_kern_for(count);
#if COLL_KERN_X86
    if (kern >= COLL_KERN_AVX512) {
        if (dtype == COLL_FP16) {
            coll_fp16_avx512_all(dst, src, off, n, count, op);
        } else if (kern == COLL_KERN_AVX512BF16) {
            coll_bf16_avx512bf(dst, src, off, n, count, op);
        } else {
            coll_bf16_avx512(dst, src, off, n, count, op);
        }
        return;
    }
    if (kern == COLL_KERN_AVX2) {
        coll_half_avx2(dst, src, off, n, count, dtype, op);
        return;
    }
#endif
    (void)kern;
    coll_half_scalar(dst, src, off, n, 0, count, dtype, op);
}

void coll_reduce_wide(void *dst, int ddt, const void *const *src, int sdt, int n, size_t count,
                      int op)
{
    if (sdt == ddt) {
        coll_reduce_at(dst, src, 0, n, count, ddt, op);
        return;
    }
    if (count == 0 || n <= 0) {
        return;
    }
#if COLL_KERN_X86
    if (coll_kern_active() >= COLL_KERN_AVX2) {
        coll_wide_avx2(dst, src, n, count, sdt, ddt, op);
        return;
    }
#endif
    coll_half_wide(dst, src, n, 0, count, sdt, ddt, op);
}
