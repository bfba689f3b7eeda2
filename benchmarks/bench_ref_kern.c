/*
 * Building blocks of the reference kernels (bench_ref.c): a copy with cached
 * or streaming stores and a blocked reduction that writes each reduced block
 * to any number of outputs. They are written for speed, not reuse: no
 * library code, loops the compiler vectorises (this file is built with -O3,
 * and each loop also has an AVX2 clone picked at load time where the CPU has
 * it), and streaming stores of a whole cache line per iteration.
 *
 * The reduction covers fp32, fp64, int32 and int64 with sum, prod, max and
 * min (integers wrap, through unsigned arithmetic), and the bf16 and fp16
 * sums (accumulated in fp32, rounded once; fp16 where the CPU has F16C);
 * other (type, reduction) pairs have no reference and the tables print '-'.
 */
#include "harness.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define BENCH_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define BENCH_CLONES
#endif

/* Bytes of one reduced block: it stays in L1 while the sources stream past. */
#define BENCH_REF_BLK 8192

#if defined(__x86_64__)
__attribute__((target("avx2"))) static void bench_stream_avx2(unsigned char *d,
                                                              const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i += 64) {
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 32));
        _mm256_stream_si256((__m256i *)(void *)(d + i), x0);
        _mm256_stream_si256((__m256i *)(void *)(d + i + 32), x1);
    }
}

static void bench_stream_sse2(unsigned char *d, const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i += 64) {
        __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
        __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
        __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));
        _mm_stream_si128((__m128i *)(void *)(d + i), x0);
        _mm_stream_si128((__m128i *)(void *)(d + i + 16), x1);
        _mm_stream_si128((__m128i *)(void *)(d + i + 32), x2);
        _mm_stream_si128((__m128i *)(void *)(d + i + 48), x3);
    }
}
#endif

void bench_ref_copy(void *dst, const void *src, size_t bytes, int nt)
{
    if (bytes == 0 || dst == src) {
        return;
    }
#if defined(__x86_64__)
    if (nt) {
        unsigned char *d = dst;
        const unsigned char *s = src;
        size_t head = (64u - ((uintptr_t)d & 63u)) & 63u;
        if (head > bytes) {
            head = bytes;
        }
        memcpy(d, s, head);
        size_t body = (bytes - head) & ~(size_t)63;
        static int avx2 = -1;
        if (avx2 < 0) {
            avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
        }
        if (avx2) {
            bench_stream_avx2(d + head, s + head, body);
        } else {
            bench_stream_sse2(d + head, s + head, body);
        }
        memcpy(d + head + body, s + head + body, bytes - head - body);
        return;
    }
#else
    (void)nt;
#endif
    memcpy(dst, src, bytes);
}

/* Integer operators in unsigned arithmetic (wrap-around is defined). */
#define BENCH_SUM(T, U, x, y) ((T)((U)(x) + (U)(y)))
#define BENCH_PROD(T, U, x, y) ((T)((U)(x) * (U)(y)))
#define BENCH_MAX(T, U, x, y) ((x) > (y) ? (x) : (y))
#define BENCH_MIN(T, U, x, y) ((x) < (y) ? (x) : (y))

/* k2: acc = a op b; k1: acc = acc op b. */
#define BENCH_GEN(NAME, T, U, OP)                                                                  \
    BENCH_CLONES static void bench_k2_##NAME##_##OP(void *restrict accv, const void *restrict av,  \
                                                    const void *restrict bv, size_t n)             \
    {                                                                                              \
        T *restrict acc = accv;                                                                    \
        const T *restrict a = av;                                                                  \
        const T *restrict b = bv;                                                                  \
        for (size_t i = 0; i < n; i++) {                                                           \
            acc[i] = BENCH_##OP(T, U, a[i], b[i]);                                                 \
        }                                                                                          \
    }                                                                                              \
    BENCH_CLONES static void bench_k1_##NAME##_##OP(void *restrict accv, const void *restrict bv,  \
                                                    size_t n)                                      \
    {                                                                                              \
        T *restrict acc = accv;                                                                    \
        const T *restrict b = bv;                                                                  \
        for (size_t i = 0; i < n; i++) {                                                           \
            acc[i] = BENCH_##OP(T, U, acc[i], b[i]);                                               \
        }                                                                                          \
    }
#define BENCH_GEN4(NAME, T, U)                                                                     \
    BENCH_GEN(NAME, T, U, SUM)                                                                     \
    BENCH_GEN(NAME, T, U, PROD)                                                                    \
    BENCH_GEN(NAME, T, U, MAX)                                                                     \
    BENCH_GEN(NAME, T, U, MIN)
/* Floats: U is the type itself. */
BENCH_GEN4(f32, float, float)
BENCH_GEN4(f64, double, double)
BENCH_GEN4(i32, int32_t, uint32_t)
BENCH_GEN4(i64, int64_t, uint64_t)

/* fp16 and bf16 sums, fused: each chunk of every source is widened to fp32
 * in registers, summed in rank order and rounded once to nearest even (bf16
 * by integer steps that keep denormals and quieten NaN, fp16 by vcvtps2ph),
 * one pass and no fp32 buffer. A 32-bit lane of bf16 pairs is, masked, the
 * odd element as an fp32 and, shifted left 16, the even one. Each vector
 * body returns how many elements it did; the scalar tail does the rest. */
static uint16_t bench_bf16_round(uint32_t u)
{
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x40u);
    }
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#if defined(__x86_64__)
#define BENCH_AT(s, i) ((const char *)src[s] + so + (i)*2)

/* u + 0x7fff + lsb: u + 0x8000 where the lsb is set, else u + 0x7fff. */
__attribute__((target("avx512f,avx512bw"))) static inline __m512i bench_bf16_r16(__m512 f)
{
    __m512i u = _mm512_castps_si512(f);
    __mmask16 lsb = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x10000));
    __m512i r = _mm512_mask_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb, u,
                                      _mm512_set1_epi32(0x8000));
    return _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), u,
                                _mm512_set1_epi32(0x400000));
}

/* AVX512-BF16's vcvtne2ps2bf16 rounds as bench_bf16_round but flushes
 * denormals: chunks with a denormal sum take the integer steps. It packs its
 * inputs one after the other; vpermw puts the even and odd elements back. */
#define BENCH_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16")))
#define BENCH_ILV(j) (short)((j) / 2 + ((j)&1) * 16)
#define BENCH_ILV4(j) BENCH_ILV(j + 3), BENCH_ILV(j + 2), BENCH_ILV(j + 1), BENCH_ILV(j)

BENCH_BF16_TARGET static inline __m512i bench_bf16_pack_bf(__m512 ev, __m512 od, __m512i hi)
{
    if ((_mm512_fpclass_ps_mask(ev, 0x20) | _mm512_fpclass_ps_mask(od, 0x20)) != 0) {
        return _mm512_ternarylogic_epi32(hi, bench_bf16_r16(od),
                                         _mm512_srli_epi32(bench_bf16_r16(ev), 16), 0xea);
    }
    const __m512i ilv =
        _mm512_set_epi16(BENCH_ILV4(28), BENCH_ILV4(24), BENCH_ILV4(20), BENCH_ILV4(16),
                         BENCH_ILV4(12), BENCH_ILV4(8), BENCH_ILV4(4), BENCH_ILV4(0));
    return _mm512_permutexvar_epi16(ilv, (__m512i)_mm512_cvtne2ps_pbh(od, ev));
}

/* The bf16 sum with the first two sources' pointers in registers. */
BENCH_BF16_TARGET static size_t bench_bf16_sum_bf(void *acc, const void *const *src, int nsrc,
                                                  size_t so, size_t m)
{
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    const char *p0 = BENCH_AT(0, 0), *p1 = BENCH_AT(1, 0);
    size_t i = 0;
    for (; i + 32 <= m; i += 32) {
        __m512i u = _mm512_loadu_si512(p0 + i * 2);
        __m512i v = _mm512_loadu_si512(p1 + i * 2);
        __m512 ev = _mm512_add_ps(_mm512_castsi512_ps(_mm512_slli_epi32(u, 16)),
                                  _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
        __m512 od = _mm512_add_ps(_mm512_castsi512_ps(_mm512_and_si512(u, hi)),
                                  _mm512_castsi512_ps(_mm512_and_si512(v, hi)));
        for (int s = 2; s < nsrc; s++) {
            u = _mm512_loadu_si512(BENCH_AT(s, i));
            ev = _mm512_add_ps(ev, _mm512_castsi512_ps(_mm512_slli_epi32(u, 16)));
            od = _mm512_add_ps(od, _mm512_castsi512_ps(_mm512_and_si512(u, hi)));
        }
        _mm512_storeu_si512((char *)acc + i * 2, bench_bf16_pack_bf(ev, od, hi));
    }
    return i;
}

__attribute__((target("avx512f,avx512bw"))) static size_t
bench_half_sum_avx512(void *acc, const void *const *src, int nsrc, size_t so, size_t m, int bf16)
{
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    size_t i = 0;
    for (; bf16 && i + 32 <= m; i += 32) {
        __m512i u = _mm512_loadu_si512(BENCH_AT(0, i));
        __m512 ev = _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
        __m512 od = _mm512_castsi512_ps(_mm512_and_si512(u, hi));
        for (int s = 1; s < nsrc; s++) {
            u = _mm512_loadu_si512(BENCH_AT(s, i));
            ev = _mm512_add_ps(ev, _mm512_castsi512_ps(_mm512_slli_epi32(u, 16)));
            od = _mm512_add_ps(od, _mm512_castsi512_ps(_mm512_and_si512(u, hi)));
        }
        __m512i out = _mm512_ternarylogic_epi32(hi, bench_bf16_r16(od),
                                                _mm512_srli_epi32(bench_bf16_r16(ev), 16), 0xea);
        _mm512_storeu_si512((char *)acc + i * 2, out);
    }
    for (; !bf16 && i + 16 <= m; i += 16) {
        __m512 a =
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)BENCH_AT(0, i)));
        for (int s = 1; s < nsrc; s++) {
            a = _mm512_add_ps(a, _mm512_cvtph_ps(_mm256_loadu_si256(
                                     (const __m256i *)(const void *)BENCH_AT(s, i))));
        }
        _mm256_storeu_si256((__m256i *)(void *)((char *)acc + i * 2),
                            _mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    return i;
}

__attribute__((target("avx2,f16c"))) static inline __m256i bench_bf16_r8(__m256 f)
{
    __m256i u = _mm256_castps_si256(f);
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)),
                                 _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1)));
    __m256 q = _mm256_castsi256_ps(_mm256_or_si256(u, _mm256_set1_epi32(0x400000)));
    return _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(r), q, _mm256_cmp_ps(f, f, _CMP_UNORD_Q)));
}

__attribute__((target("avx2,f16c"))) static size_t
bench_half_sum_avx2(void *acc, const void *const *src, int nsrc, size_t so, size_t m, int bf16)
{
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    size_t i = 0;
    for (; bf16 && i + 16 <= m; i += 16) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)BENCH_AT(0, i));
        __m256 ev = _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
        __m256 od = _mm256_castsi256_ps(_mm256_and_si256(u, hi));
        for (int s = 1; s < nsrc; s++) {
            u = _mm256_loadu_si256((const __m256i *)(const void *)BENCH_AT(s, i));
            ev = _mm256_add_ps(ev, _mm256_castsi256_ps(_mm256_slli_epi32(u, 16)));
            od = _mm256_add_ps(od, _mm256_castsi256_ps(_mm256_and_si256(u, hi)));
        }
        __m256i out = _mm256_or_si256(_mm256_and_si256(bench_bf16_r8(od), hi),
                                      _mm256_srli_epi32(bench_bf16_r8(ev), 16));
        _mm256_storeu_si256((__m256i *)(void *)((char *)acc + i * 2), out);
    }
    for (; !bf16 && i + 8 <= m; i += 8) {
        __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)BENCH_AT(0, i)));
        for (int s = 1; s < nsrc; s++) {
            a = _mm256_add_ps(
                a, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)BENCH_AT(s, i))));
        }
        _mm_storeu_si128((__m128i *)(void *)((char *)acc + i * 2),
                         _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    return i;
}

__attribute__((target("f16c"))) static float bench_fp16_widen(uint16_t h)
{
    return _cvtsh_ss(h);
}

__attribute__((target("f16c"))) static uint16_t bench_fp16_round(float f)
{
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* 3 AVX-512 with AVX512-BF16, 2 AVX-512, 1 AVX2 + F16C, 0 neither (then
 * there is no fp16 reference). */
static int bench_half_isa(void)
{
    static int isa = -1;
    if (isa < 0) {
        __builtin_cpu_init();
        int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("f16c");
        int bf = __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bf16");
        isa = avx512 ? 2 + bf : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    }
    return isa;
}

static void bench_half_sum(void *acc, const void *const *src, int nsrc, size_t so, size_t m,
                           int bf16)
{
    int isa = bench_half_isa();
    size_t i = isa == 3 && bf16 ? bench_bf16_sum_bf(acc, src, nsrc, so, m)
               : isa >= 2       ? bench_half_sum_avx512(acc, src, nsrc, so, m, bf16)
               : isa == 1       ? bench_half_sum_avx2(acc, src, nsrc, so, m, bf16)
                                : 0;
    for (; i < m; i++) {
        float a = 0.0f;
        for (int s = 0; s < nsrc; s++) {
            uint16_t h;
            memcpy(&h, BENCH_AT(s, i), 2);
            float x;
            uint32_t u = (uint32_t)h << 16;
            memcpy(&x, &u, 4);
            x = bf16 ? x : bench_fp16_widen(h);
            a = s == 0 ? x : a + x;
        }
        uint32_t u;
        memcpy(&u, &a, 4);
        uint16_t r = bf16 ? bench_bf16_round(u) : bench_fp16_round(a);
        memcpy((char *)acc + i * 2, &r, 2);
    }
}
#endif

typedef void (*bench_k2_fn)(void *restrict, const void *restrict, const void *restrict, size_t);
typedef void (*bench_k1_fn)(void *restrict, const void *restrict, size_t);

typedef struct {
    int dtype;
    size_t es;
    bench_k2_fn k2[4];
    bench_k1_fn k1[4];
} bench_ref_kern_t;

#define BENCH_ROW(DT, NAME, T)                                                                     \
    {                                                                                              \
        DT, sizeof(T),                                                                             \
            {bench_k2_##NAME##_SUM, bench_k2_##NAME##_PROD, bench_k2_##NAME##_MAX,                 \
             bench_k2_##NAME##_MIN},                                                               \
        {                                                                                          \
            bench_k1_##NAME##_SUM, bench_k1_##NAME##_PROD, bench_k1_##NAME##_MAX,                  \
                bench_k1_##NAME##_MIN                                                              \
        }                                                                                          \
    }

static const bench_ref_kern_t bench_ref_kerns[] = {
    BENCH_ROW(HCCL_DATA_TYPE_FP32, f32, float),
    BENCH_ROW(HCCL_DATA_TYPE_FP64, f64, double),
    BENCH_ROW(HCCL_DATA_TYPE_INT32, i32, int32_t),
    BENCH_ROW(HCCL_DATA_TYPE_INT64, i64, int64_t),
};

static const bench_ref_kern_t *bench_ref_kern(int dtype, int redop)
{
    if (redop < 0 || redop > 3) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof(bench_ref_kerns) / sizeof(bench_ref_kerns[0]); i++) {
        if (bench_ref_kerns[i].dtype == dtype) {
            return &bench_ref_kerns[i];
        }
    }
    return NULL;
}

/* 1 for a bf16 sum, 2 for an fp16 sum (where the CPU has F16C), else 0. */
static int bench_ref_half(int dtype, int redop)
{
#if defined(__x86_64__)
    if (redop == HCCL_REDUCE_SUM && dtype == HCCL_DATA_TYPE_BFP16) {
        return 1;
    }
    if (redop == HCCL_REDUCE_SUM && dtype == HCCL_DATA_TYPE_FP16 && bench_half_isa() > 0) {
        return 2;
    }
#else
    (void)dtype;
    (void)redop;
#endif
    return 0;
}

int bench_ref_reducible(int dtype, int redop)
{
    return bench_ref_kern(dtype, redop) != NULL || bench_ref_half(dtype, redop) != 0;
}

void bench_ref_reduce(void *const *dst, int ndst, size_t dst_off, const void *const *src, int nsrc,
                      size_t src_off, size_t count, int dtype, int redop, int nt)
{
    const bench_ref_kern_t *k = bench_ref_kern(dtype, redop);
    int half = bench_ref_half(dtype, redop);
    if ((k == NULL && half == 0) || count == 0 || nsrc < 1) {
        return;
    }
    size_t es = half ? 2 : k->es;
    /* With cached stores, reduce straight into the first output and copy
       from there: the block is written once where it stays, one copy fewer
       than going through acc (zccl's cached form). Not when that output is
       also an input (in place) for the k2/k1 kernels, whose operands are
       restrict; the fused half sums read a chunk's sources before storing
       it, so in place is fine for them. */
    int into_dst0 = !nt && ndst > 0;
    for (int s = 0; s < nsrc && !half; s++) {
        into_dst0 &= (const char *)src[s] + src_off != (const char *)dst[0] + dst_off;
    }
    unsigned char blk[BENCH_REF_BLK] __attribute__((aligned(64)));
    size_t per = BENCH_REF_BLK / es;
    for (size_t i = 0; i < count; i += per) {
        size_t m = count - i < per ? count - i : per;
        size_t so = src_off + i * es;
        unsigned char *acc = into_dst0 ? (unsigned char *)dst[0] + dst_off + i * es : blk;
        if (nsrc == 1) {
            memcpy(acc, (const char *)src[0] + so, m * es);
        } else if (half) {
#if defined(__x86_64__)
            bench_half_sum(acc, src, nsrc, so, m, half == 1);
#endif
        } else {
            k->k2[redop](acc, (const char *)src[0] + so, (const char *)src[1] + so, m);
            for (int s = 2; s < nsrc; s++) {
                k->k1[redop](acc, (const char *)src[s] + so, m);
            }
        }
        for (int d = into_dst0; d < ndst; d++) {
            bench_ref_copy((char *)dst[d] + dst_off + i * es, acc, m * es, nt);
        }
    }
}

void bench_ref_slice(size_t count, int n, int r, size_t es, size_t *off, size_t *len)
{
    size_t line = es >= 64 ? 1 : 64 / es;
    size_t lines = (count + line - 1) / line;
    size_t each = (lines + (size_t)n - 1) / (size_t)n * line;
    size_t lo = each * (size_t)r;
    size_t hi = lo + each;
    lo = lo < count ? lo : count;
    hi = hi < count ? hi : count;
    *off = lo;
    *len = hi - lo;
}
