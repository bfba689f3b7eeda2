/*
 * Bulk copy for the algorithms.
 *
 * Below nt_min bytes this is memcpy. From nt_min on, the destination is
 * written with non-temporal (streaming) stores: a large collective's output
 * is not read again by the writing core soon, and streaming it avoids the
 * read-for-ownership of every destination line and the eviction of the
 * sources still being worked on. The unaligned head up to the first 64-byte
 * boundary and the tail under one line use memcpy; the body moves one cache
 * line per iteration with SSE2 (baseline on x86-64), and an sfence makes the
 * weakly ordered streaming stores visible before any later flag store.
 * Other architectures use memcpy throughout.
 */
#include "coll_kernel.h"

#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

void coll_store_fence(void)
{
#if defined(__x86_64__)
    _mm_sfence();
#endif
}

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
    for (size_t i = 0; i < body; i += 64) {
        __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
        __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
        __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));
        _mm_stream_si128((__m128i *)(void *)(d + i), x0);
        _mm_stream_si128((__m128i *)(void *)(d + i + 16), x1);
        _mm_stream_si128((__m128i *)(void *)(d + i + 32), x2);
        _mm_stream_si128((__m128i *)(void *)(d + i + 48), x3);
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
