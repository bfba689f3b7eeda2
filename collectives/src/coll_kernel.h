/*
 * Private interface of the reduction and copy kernels (coll_kernel.c,
 * coll_kernel_half.c, coll_half.c, coll_copy.c), used by the algorithm
 * files and by the unit tests, which may reach internals.
 *
 * Kernels read and write through 1-byte-aligned, may_alias types, so any
 * buffer address works (an fp32 buffer at an odd byte offset included) and
 * the compiler still vectorises with unaligned loads and stores.
 */
#ifndef COLL_KERNEL_H
#define COLL_KERNEL_H

#include "coll/coll.h"

#include <stddef.h>
#include <stdint.h>

/* Bytes of output a reduction processes per block: the accumulator block
 * stays in L1 while the n sources stream through it. */
#define COLL_BLK_BYTES 8192

/* Largest dtype value + 1 (table size). */
#define COLL_DTYPE_LIMIT 18

/**
 * coll_reduce_n over src[k] + src_off (bytes) for every k: saves the
 * algorithms building a pointer array per block. dst may alias any
 * src[k] + src_off exactly (not partially).
 */
void coll_reduce_at(void *dst, const void *const *src, size_t src_off, int n, size_t count,
                    int dtype, int op);

/** memcpy with non-temporal stores for the 64-byte-aligned body of dst and no
 *  fence: the caller issues coll_store_fence() before anyone may read dst. */
void coll_copy_stream(void *dst, const void *src, size_t bytes);

/** Orders preceding non-temporal stores before later stores (sfence on x86). */
void coll_store_fence(void);

/** Scalar, portable, bit-exact conversions (the fallback and the reference). */
float coll_fp16_to_float(uint16_t h);
uint16_t coll_fp16_from_float(float f);
float coll_bf16_to_float(uint16_t h);
uint16_t coll_bf16_from_float(float f);

/* The fp16/bf16 kernels (coll_kernel_half.c), best last. */
enum { COLL_KERN_SCALAR, COLL_KERN_AVX2, COLL_KERN_AVX512, COLL_KERN_AVX512BF16, COLL_KERN_COUNT };

/** dst = src[0] op ... op src[n-1] (each + src_off) for fp16/bf16, n >= 1, with the kernel
 *  coll_kern_active() names. */
void coll_reduce_half(void *dst, const void *const *src, size_t src_off, int n, size_t count,
                      int dtype, int op);

/** fp16/bf16 with fp32 partials (the hierarchical algorithms): dst = src[0] op ... op src[n-1]
 *  where the sources are of type sdt and dst of ddt, one of them COLL_FP32 and the other fp16 or
 *  bf16: folded in fp32 as coll_reduce_half does, stored as fp32 or rounded once. dst must not
 *  overlap a source. sdt == ddt is coll_reduce_at's reduction of that type. */
void coll_reduce_wide(void *dst, int ddt, const void *const *src, int sdt, int n, size_t count,
                      int op);

/** The best kernel this CPU and OS can run (checked once). */
int coll_kern_best(void);

/** The kernel ZCCL_KERNEL asks for (auto, scalar, avx2, avx512, avx512bf16; empty = auto), or best
 * when the CPU cannot run it or the value is none of these (one warning naming it). */
int coll_kern_pick(const char *want, int best);

/** The kernel in use: the forced one (at most the best), else coll_kern_pick of ZCCL_KERNEL. */
int coll_kern_active(void);

/** Tests: force a kernel (-1 returns to ZCCL_KERNEL). */
void coll_kern_force(int kern);

/** "scalar", "avx2", "avx512", "avx512bf16". */
const char *coll_kern_name(int kern);

#endif /* COLL_KERNEL_H */
