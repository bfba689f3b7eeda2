/*
 * Building blocks of the reference kernels (bench_ref.c): a copy with cached
 * or streaming stores and a blocked reduction that writes each reduced block
 * to any number of outputs. They are written for speed, not reuse: no
 * library code, loops the compiler vectorises (this file is built with -O3,
 * and each loop also has an AVX2 clone picked at load time where the CPU has
 * it), and streaming stores of a whole cache line per iteration.
 *
 * The reduction covers fp32, fp64, int32 and int64 with sum, prod, max and
 * min (integers wrap, through unsigned arithmetic); other (type, reduction)
 * pairs have no reference and the tables print '-'.
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

int bench_ref_reducible(int dtype, int redop)
{
    return bench_ref_kern(dtype, redop) != NULL;
}

void bench_ref_reduce(void *const *dst, int ndst, size_t dst_off, const void *const *src, int nsrc,
                      size_t src_off, size_t count, int dtype, int redop, int nt)
{
    const bench_ref_kern_t *k = bench_ref_kern(dtype, redop);
    if (k == NULL || count == 0 || nsrc < 1) {
        return;
    }
    /* With cached stores, reduce straight into the first output and copy
       from there: the block is written once where it stays, one copy fewer
       than going through acc (zccl's cached form). Not when that output is
       also an input (in place): the kernels' operands are restrict. */
    int into_dst0 = !nt && ndst > 0;
    for (int s = 0; s < nsrc; s++) {
        into_dst0 &= (const char *)src[s] + src_off != (const char *)dst[0] + dst_off;
    }
    unsigned char blk[BENCH_REF_BLK] __attribute__((aligned(64)));
    size_t per = BENCH_REF_BLK / k->es;
    for (size_t i = 0; i < count; i += per) {
        size_t m = count - i < per ? count - i : per;
        size_t so = src_off + i * k->es;
        unsigned char *acc = into_dst0 ? (unsigned char *)dst[0] + dst_off + i * k->es : blk;
        if (nsrc == 1) {
            memcpy(acc, (const char *)src[0] + so, m * k->es);
        } else {
            k->k2[redop](acc, (const char *)src[0] + so, (const char *)src[1] + so, m);
        }
        for (int s = 2; s < nsrc; s++) {
            k->k1[redop](acc, (const char *)src[s] + so, m);
        }
        for (int d = into_dst0; d < ndst; d++) {
            bench_ref_copy((char *)dst[d] + dst_off + i * k->es, acc, m * k->es, nt);
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
