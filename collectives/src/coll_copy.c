/*
 * Bulk copy for the algorithms.
 *
 * Below nt_min bytes this is memcpy. From nt_min on, the destination is
 * written with non-temporal (streaming) stores: a large collective's output
 * is not read again by the writing core soon, and streaming it avoids the
 * read-for-ownership of every destination line and the eviction of the
 * sources still being worked on. The unaligned head up to the first 64-byte
 * boundary and the tail under one line use memcpy; the body moves one cache
 * line per iteration, with AVX2 where the CPU has it (two 32-byte loads and
 * streaming stores; SSE2's four 16-byte ones took about 1.7x the CPU time
 * per byte of the benchmark reference's AVX2 loop in a profile of a 64 MiB
 * AllGather) and SSE2 (baseline on x86-64) elsewhere, and an sfence makes the
 * weakly ordered streaming stores visible before any later flag store.
 * Other architectures use memcpy throughout.
 */
#include "coll_kernel.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#include <stdatomic.h>
#endif

void coll_store_fence(void)
{
#if defined(__x86_64__)
    _mm_sfence();
#endif
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static void coll_stream_avx2(unsigned char *d,
                                                             const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i += 64) {
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 32));
        _mm256_stream_si256((__m256i *)(void *)(d + i), x0);
        _mm256_stream_si256((__m256i *)(void *)(d + i + 32), x1);
    }
}

static void coll_stream_sse2(unsigned char *d, const unsigned char *s, size_t n)
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

/* 1 AVX2, 0 not, -1 not asked yet (the answer is the same for every thread). */
static atomic_int coll_has_avx2 = -1;
#endif

void coll_copy_stream(void *dst, const void *src, size_t bytes)
{
#if defined(__x86_64__)
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t head = (64u - ((uintptr_t)d & 63u)) & 63u;
    if (head >= bytes) {
        memcpy(d, s, bytes);
        return;
    }
    memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    size_t body = bytes & ~(size_t)63;
    int avx2 = atomic_load_explicit(&coll_has_avx2, memory_order_relaxed);
    if (avx2 < 0) {
        avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
        atomic_store_explicit(&coll_has_avx2, avx2, memory_order_relaxed);
    }
    if (avx2) {
        coll_stream_avx2(d, s, body);
    } else {
        coll_stream_sse2(d, s, body);
    }
    memcpy(d + body, s + body, bytes - body);
#else
    memcpy(dst, src, bytes);
#endif
}

void coll_copy(void *dst, const void *src, size_t bytes, size_t nt_min)
{
    if (bytes == 0 || dst == src) {
        return;
    }
    if (nt_min == 0 || bytes < nt_min) {
        memcpy(dst, src, bytes);
        return;
    }
    coll_copy_stream(dst, src, bytes);
    coll_store_fence();
}
