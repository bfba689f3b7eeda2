/*
 * fp16 and bf16 <-> fp32 conversion for the reduction kernels.
 *
 * fp16 uses the F16C instructions (vcvtph2ps / vcvtps2ph, round to nearest
 * even) when the CPU has them and the OS saves AVX state, checked once at
 * run time; elsewhere a portable scalar path gives the same bits: subnormals
 * exact, overflow to infinity, NaN quietened with its payload kept (top bits).
 * bf16 is plain integer arithmetic: widening is a 16-bit shift (vectorised
 * by the compiler); narrowing rounds to nearest even and quietens NaN, with
 * SSE2 intrinsics on x86-64 and AVX2 ones where the CPU has them (checked
 * once), the same integer steps as the scalar tail, so the same bits. The
 * bf16 path keeps denormals (no AVX512-BF16 vcvtneps2bf16, which flushes
 * them).
 */
#include "coll_kernel.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define COLL_HAVE_F16C 1
#else
#define COLL_HAVE_F16C 0
#endif

typedef uint16_t coll_u16a __attribute__((aligned(1), may_alias));
typedef uint32_t coll_u32a __attribute__((aligned(1), may_alias));

static uint32_t coll_f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float coll_u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

float coll_fp16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f) {
        /* inf stays inf; a NaN keeps its payload and becomes quiet */
        return coll_u2f(sign | 0x7f800000u | (m << 13) | (m != 0 ? 0x400000u : 0));
    }
    if (e == 0) {
        /* zero or subnormal: m * 2^-24 is exact in fp32 */
        return coll_u2f(sign | coll_f2u((float)m * 0x1p-24f));
    }
    return coll_u2f(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t coll_fp16_from_float(float f)
{
    uint32_t x = coll_f2u(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) {
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    }
    if (ax >= 0x477ff000u) {
        /* 65520 and above (infinity included) round to infinity */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (ax >= 0x38800000u) {
        /* normal half: rebias the exponent, round the 13 dropped bits */
        uint32_t r = ax - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (ax <= 0x33000000u) {
        /* at most 2^-25, half the smallest subnormal: ties to even give 0 */
        return sign;
    }
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) {
        q++;
    }
    return (uint16_t)(sign | q);
}

float coll_bf16_to_float(uint16_t h)
{
    return coll_u2f((uint32_t)h << 16);
}

uint16_t coll_bf16_from_float(float f)
{
    uint32_t u = coll_f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x40u);
    }
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#if COLL_HAVE_F16C
/* F16C needs the instructions and the OS saving the AVX (ymm) state. */
static int coll_cpu_has_f16c(void)
{
#if defined(__GNUC__) && !defined(__clang__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
#else
    unsigned eax, ebx, ecx, edx, lo, hi;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        return 0;
    }
    if (!(ecx & bit_OSXSAVE) || !(ecx & bit_AVX) || !(ecx & bit_F16C)) {
        return 0;
    }
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 6u) == 6u;
#endif
}
#endif

/* -1 unknown, 0 portable, 1 F16C; forced_off is the tests' override. */
static atomic_int coll_f16c_state = -1;
static atomic_int coll_f16c_forced_off = 0;

int coll_half_uses_f16c(void)
{
    if (atomic_load_explicit(&coll_f16c_forced_off, memory_order_relaxed)) {
        return 0;
    }
    int s = atomic_load_explicit(&coll_f16c_state, memory_order_relaxed);
    if (s < 0) {
#if COLL_HAVE_F16C
        s = coll_cpu_has_f16c();
#else
        s = 0;
#endif
        /* every thread computes the same value, so a racing store is harmless */
        atomic_store_explicit(&coll_f16c_state, s, memory_order_relaxed);
    }
    return s;
}

void coll_half_force_portable(int on)
{
    atomic_store_explicit(&coll_f16c_forced_off, on != 0, memory_order_relaxed);
}

#if COLL_HAVE_F16C
__attribute__((target("avx,f16c"))) static void coll_f16c_to_float(float *dst, const void *src,
                                                                   size_t n)
{
    const unsigned char *s = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(s + i * 2));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    if (i < n) {
        uint16_t hb[8] = {0};
        float fb[8];
        memcpy(hb, s + i * 2, (n - i) * 2);
        _mm256_storeu_ps(fb, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(void *)hb)));
        memcpy(dst + i, fb, (n - i) * sizeof(float));
    }
}

__attribute__((target("avx,f16c"))) static void coll_f16c_from_float(void *dst, const float *src,
                                                                     size_t n)
{
    unsigned char *d = dst;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(void *)(d + i * 2), h);
    }
    if (i < n) {
        float fb[8] = {0};
        uint16_t hb[8];
        memcpy(fb, src + i, (n - i) * sizeof(float));
        _mm_storeu_si128((__m128i *)(void *)hb,
                         _mm256_cvtps_ph(_mm256_loadu_ps(fb), _MM_FROUND_TO_NEAREST_INT));
        memcpy(d + i * 2, hb, (n - i) * 2);
    }
}
#endif

#if defined(__x86_64__)
#include <emmintrin.h>

/* Four floats to bf16, each result sign-extended in its 32-bit lane. */
static inline __m128i coll_bf16_round4(__m128i u)
{
    __m128i lsb = _mm_and_si128(_mm_srli_epi32(u, 16), _mm_set1_epi32(1));
    __m128i r = _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(u, _mm_set1_epi32(0x7fff)), lsb), 16);
    __m128i q = _mm_or_si128(_mm_srai_epi32(u, 16), _mm_set1_epi32(0x40));
    __m128i nan =
        _mm_cmpgt_epi32(_mm_and_si128(u, _mm_set1_epi32(0x7fffffff)), _mm_set1_epi32(0x7f800000));
    return _mm_or_si128(_mm_and_si128(nan, q), _mm_andnot_si128(nan, r));
}

/* The same eight lanes at a time, where the CPU has AVX2. */
__attribute__((target("avx2"))) static inline __m256i coll_bf16_round8(__m256i u)
{
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srai_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256i q = _mm256_or_si256(_mm256_srai_epi32(u, 16), _mm256_set1_epi32(0x40));
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(r, q, nan);
}

__attribute__((target("avx2"))) static size_t coll_bf16_narrow_avx2(uint16_t *d, const uint32_t *s,
                                                                    size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = coll_bf16_round8(_mm256_loadu_si256((const __m256i *)(const void *)(s + i)));
        __m256i b =
            coll_bf16_round8(_mm256_loadu_si256((const __m256i *)(const void *)(s + i + 8)));
        /* packs works within 128-bit halves: put the quadwords back in order */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xd8);
        _mm256_storeu_si256((__m256i *)(void *)(d + i), p);
    }
    return i;
}

static atomic_int coll_avx2_state = -1;

static int coll_cpu_has_avx2(void)
{
    int s = atomic_load_explicit(&coll_avx2_state, memory_order_relaxed);
    if (s < 0) {
        __builtin_cpu_init();
        s = __builtin_cpu_supports("avx2") ? 1 : 0;
        atomic_store_explicit(&coll_avx2_state, s, memory_order_relaxed);
    }
    return s;
}
#endif

/* fp32 -> bf16, round to nearest even, NaN quietened. On x86-64 the body
 * uses SIMD directly: the compiler narrows the 32-bit lanes with a chain of
 * shuffles, while the lanes already hold sign-extended 16-bit values that
 * one saturating pack (packssdw) narrows exactly, 3x faster. */
static void coll_bf16_narrow(void *restrict dst, const float *restrict src, size_t n)
{
    coll_u16a *restrict d = dst;
    const coll_u32a *restrict s = (const coll_u32a *)(const void *)src;
    size_t i = 0;
#if defined(__x86_64__)
    if (!atomic_load_explicit(&coll_f16c_forced_off, memory_order_relaxed) && coll_cpu_has_avx2()) {
        i = coll_bf16_narrow_avx2((uint16_t *)dst, (const uint32_t *)(const void *)src, n);
    }
    for (; i + 8 <= n; i += 8) {
        __m128i a = coll_bf16_round4(_mm_loadu_si128((const __m128i *)(const void *)(s + i)));
        __m128i b = coll_bf16_round4(_mm_loadu_si128((const __m128i *)(const void *)(s + i + 4)));
        _mm_storeu_si128((__m128i *)(void *)(d + i), _mm_packs_epi32(a, b));
    }
#endif
    for (; i < n; i++) {
        uint32_t u = s[i];
        uint16_t rounded = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        uint16_t quiet = (uint16_t)((u >> 16) | 0x40u);
        d[i] = (u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
    }
}

void coll_half_to_float(float *dst, const void *src, size_t n, int dtype)
{
    const coll_u16a *s = src;
    if (dtype == COLL_BF16) {
        coll_u32a *d = (coll_u32a *)(void *)dst;
        for (size_t i = 0; i < n; i++) {
            d[i] = (uint32_t)s[i] << 16;
        }
        return;
    }
#if COLL_HAVE_F16C
    if (coll_half_uses_f16c()) {
        coll_f16c_to_float(dst, src, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) {
        dst[i] = coll_fp16_to_float(s[i]);
    }
}

void coll_float_to_half(void *dst, const float *src, size_t n, int dtype)
{
    coll_u16a *d = dst;
    if (dtype == COLL_BF16) {
        coll_bf16_narrow(dst, src, n);
        return;
    }
#if COLL_HAVE_F16C
    if (coll_half_uses_f16c()) {
        coll_f16c_from_float(dst, src, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) {
        d[i] = coll_fp16_from_float(src[i]);
    }
}
