/*
 * Private interface of the reduction and copy kernels (coll_kernel.c,
 * coll_half.c, coll_copy.c), used by the algorithm files and by the unit
 * tests, which may reach internals.
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

/** Convert n fp16 (dtype COLL_FP16) or bf16 (COLL_BF16) values to float. */
void coll_half_to_float(float *dst, const void *src, size_t n, int dtype);

/** Convert n floats to fp16 / bf16, rounding to nearest even (NaN stays NaN). */
void coll_float_to_half(void *dst, const float *src, size_t n, int dtype);

/** Scalar, portable, bit-exact conversions (the fallback and the reference). */
float coll_fp16_to_float(uint16_t h);
uint16_t coll_fp16_from_float(float f);
float coll_bf16_to_float(uint16_t h);
uint16_t coll_bf16_from_float(float f);

/** Tests: 1 forces the portable fp16 conversion and the baseline (SSE2) bf16
 *  narrowing, 0 restores the CPU checks. */
void coll_half_force_portable(int on);

/** 1 when fp16 conversions currently use the F16C instructions. */
int coll_half_uses_f16c(void);

#endif /* COLL_KERNEL_H */
