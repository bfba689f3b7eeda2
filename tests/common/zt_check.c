/*
 * Test data and checks for collectives (see zt_check.h for the patterns and
 * why they are exact). First the pure part (generator, fp16/bf16
 * conversions, serial reference reducer, bitwise comparator), then the case
 * runner, then the scenarios every launcher shares.
 */
#include "zt_check.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hccl_test_api.h"
#include "hccl/hccl.h"

uint64_t zt_pattern(uint64_t seed, int rank, size_t index)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * ((uint64_t)rank * 0x100000001ull + index + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- names and sizes --------------------------------------------------------- */

size_t zt_dtype_size(int dtype)
{
    switch (dtype) {
    case HCCL_DATA_TYPE_INT8:
    case HCCL_DATA_TYPE_UINT8:
    case HCCL_DATA_TYPE_HIF8:
    case HCCL_DATA_TYPE_FP8E4M3:
    case HCCL_DATA_TYPE_FP8E5M2:
    case HCCL_DATA_TYPE_FP8E8M0:
        return 1;
    case HCCL_DATA_TYPE_INT16:
    case HCCL_DATA_TYPE_UINT16:
    case HCCL_DATA_TYPE_FP16:
    case HCCL_DATA_TYPE_BFP16:
        return 2;
    case HCCL_DATA_TYPE_INT32:
    case HCCL_DATA_TYPE_UINT32:
    case HCCL_DATA_TYPE_FP32:
        return 4;
    case HCCL_DATA_TYPE_INT64:
    case HCCL_DATA_TYPE_UINT64:
    case HCCL_DATA_TYPE_FP64:
        return 8;
    case HCCL_DATA_TYPE_INT128:
        return 16;
    default:
        return 0;
    }
}

const char *zt_dtype_name(int dtype)
{
    static const char *const names[] = {
        "int8",   "int16", "int32", "fp16",   "fp32", "int64", "uint64",  "uint8",   "uint16",
        "uint32", "fp64",  "bfp16", "int128", "?13",  "hif8",  "fp8e4m3", "fp8e5m2", "fp8e8m0"};
    if (dtype >= 0 && dtype < (int)(sizeof(names) / sizeof(names[0]))) {
        return names[dtype];
    }
    return "?";
}

const char *zt_op_name(int op)
{
    switch (op) {
    case HCCL_REDUCE_SUM:
        return "sum";
    case HCCL_REDUCE_PROD:
        return "prod";
    case HCCL_REDUCE_MAX:
        return "max";
    case HCCL_REDUCE_MIN:
        return "min";
    case ZT_OP_NONE:
        return "copy";
    default:
        return "?";
    }
}

/* ---- fp16 / bf16 ------------------------------------------------------------- */

uint16_t zt_fp16_from_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) { /* inf stays inf; NaN stays a quiet NaN */
        return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0));
    }
    if (a >= 0x477ff000u) { /* 65520 and up round to inf */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (a < 0x38800000u) { /* below 2^-14: a subnormal (units of 2^-24) or zero */
        int e = (int)(a >> 23);
        if (e < 102) {
            return sign; /* under 2^-25: rounds to zero */
        }
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - e;
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) {
            q++;
        }
        return (uint16_t)(sign | q);
    }
    uint32_t r = a - 0x38000000u; /* rebias the exponent from 127 to 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

float zt_fp16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    uint32_t x;
    if (e == 0) {
        if (m == 0) {
            x = sign;
        } else {
            e = 113; /* normalise the subnormal: value = m * 2^-24 */
            while (!(m & 0x400u)) {
                m <<= 1;
                e--;
            }
            x = sign | (e << 23) | ((m & 0x3ffu) << 13);
        }
    } else if (e == 31) {
        x = sign | 0x7f800000u | (m << 13);
    } else {
        x = sign | ((e + 112) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

uint16_t zt_bf16_from_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x >> 16) | 0x40u);
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float zt_bf16_to_float(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

/* ---- generator --------------------------------------------------------------- */

/* A value in [0, n) from 64 random bits; n == 0 means the whole 2^64 range. */
static uint64_t zt_range(uint64_t p, uint64_t n)
{
    if (n == 0) {
        return p;
    }
    if (n <= 0xffffffffull) {
        return ((p >> 32) * n) >> 32;
    }
    return p % n;
}

static int zt_is_signed(int dtype)
{
    return dtype == HCCL_DATA_TYPE_INT8 || dtype == HCCL_DATA_TYPE_INT16 ||
           dtype == HCCL_DATA_TYPE_INT32 || dtype == HCCL_DATA_TYPE_INT64;
}

static int zt_is_unsigned(int dtype)
{
    return dtype == HCCL_DATA_TYPE_UINT8 || dtype == HCCL_DATA_TYPE_UINT16 ||
           dtype == HCCL_DATA_TYPE_UINT32 || dtype == HCCL_DATA_TYPE_UINT64;
}

static int zt_is_float(int dtype)
{
    return dtype == HCCL_DATA_TYPE_FP16 || dtype == HCCL_DATA_TYPE_BFP16 ||
           dtype == HCCL_DATA_TYPE_FP32 || dtype == HCCL_DATA_TYPE_FP64;
}

/* PROD factors: 0 (1/32), 2 and 0.5 (ranks below 6 only, so |product| stays
 * within 2^6 for any rank count), -1 (signed types), else 1. */
static double zt_prod_factor(uint64_t p, int rank, int is_signed, int allow_half)
{
    unsigned sel = (unsigned)(p >> 59);
    if (sel == 0) {
        return 0.0;
    }
    if (sel <= 6) {
        return rank < 6 ? 2.0 : 1.0;
    }
    if (sel <= 12 && allow_half) {
        return rank < 6 ? 0.5 : 1.0;
    }
    if (sel <= 20 && is_signed) {
        return -1.0;
    }
    return 1.0;
}

/* Largest integer k such that every |partial sum| of quarter-integers stays
 * exact in the type: 2^(significand bits) - 1. */
static uint64_t zt_float_exact_max(int dtype)
{
    switch (dtype) {
    case HCCL_DATA_TYPE_FP16:
        return 2047;
    case HCCL_DATA_TYPE_BFP16:
        return 255;
    case HCCL_DATA_TYPE_FP32:
        return (1ull << 24) - 1;
    default:
        return (1ull << 53) - 1;
    }
}

static void zt_store_float(unsigned char *dst, int dtype, double v)
{
    if (dtype == HCCL_DATA_TYPE_FP64) {
        memcpy(dst, &v, 8);
    } else if (dtype == HCCL_DATA_TYPE_FP32) {
        float f = (float)v;
        memcpy(dst, &f, 4);
    } else {
        uint16_t h = dtype == HCCL_DATA_TYPE_FP16 ? zt_fp16_from_float((float)v)
                                                  : zt_bf16_from_float((float)v);
        memcpy(dst, &h, 2);
    }
}

static double zt_float_value(const zt_pat_t *pt, uint64_t p, int rank)
{
    if (pt->mode == ZT_FILL_ROUNDING) {
        /* +-(1 + f) * 2^e with 52 random fraction bits: needs rounding everywhere. */
        int span = pt->op == HCCL_REDUCE_PROD ? 2 : 6;
        int e = (int)zt_range(p, (uint64_t)(2 * span + 1)) - span;
        double f = 1.0 + (double)(p & ((1ull << 52) - 1)) / (double)(1ull << 52);
        double v = (p >> 63) ? -f : f;
        for (; e > 0; e--) {
            v *= 2.0;
        }
        for (; e < 0; e++) {
            v *= 0.5;
        }
        return v;
    }
    uint64_t m = zt_float_exact_max(pt->dtype);
    switch (pt->op) {
    case HCCL_REDUCE_PROD:
        return zt_prod_factor(p, rank, 1, 1);
    case HCCL_REDUCE_SUM: {
        uint64_t k = m / (uint64_t)(pt->nranks > 0 ? pt->nranks : 1);
        return ((double)zt_range(p, 2 * k + 1) - (double)k) / 4.0;
    }
    default:
        return ((double)zt_range(p, 2 * m + 1) - (double)m) / 4.0;
    }
}

static uint64_t zt_int_value(const zt_pat_t *pt, uint64_t p, int rank, int bits, int is_signed)
{
    uint64_t n = (uint64_t)(pt->nranks > 0 ? pt->nranks : 1);
    switch (pt->op) {
    case HCCL_REDUCE_SUM:
        if (is_signed) {
            uint64_t b = (bits == 64 ? (uint64_t)INT64_MAX : (1ull << (bits - 1)) - 1) / n;
            return zt_range(p, 2 * b + 1) - b; /* two's complement of a value in [-b, b] */
        } else {
            uint64_t b = (bits == 64 ? UINT64_MAX : (1ull << bits) - 1) / n;
            return zt_range(p, b + 1); /* b + 1 wraps to 0 (= any) for 64 bits, 1 rank */
        }
    case HCCL_REDUCE_PROD:
        return (uint64_t)(int64_t)zt_prod_factor(p, rank, is_signed, 0);
    default:
        return p; /* MAX, MIN and copies: the whole range */
    }
}

void zt_fill(void *buf, size_t first, size_t count, const zt_pat_t *pt, int rank)
{
    unsigned char *dst = buf;
    int dt = pt->dtype;
    size_t es = zt_dtype_size(dt);
    for (size_t i = 0; i < count; i++, dst += es) {
        uint64_t p = zt_pattern(pt->seed, rank, first + i);
        int is_fp8 = es == 1 && dt != HCCL_DATA_TYPE_INT8 && dt != HCCL_DATA_TYPE_UINT8;
        if (is_fp8 && pt->op != ZT_OP_NONE) {
            /* fp8 types with a reduction: small positive finite codes in any of
             * the fp8 formats (the tests only reduce identical inputs). */
            dst[0] = (unsigned char)(1 + zt_range(p, 0x30));
            continue;
        }
        if (pt->op == ZT_OP_NONE) {
            memcpy(dst, &p, es < 8 ? es : 8);
            if (es == 16) {
                uint64_t q = zt_pattern(pt->seed ^ 0x5bd1e995ull, rank, first + i);
                memcpy(dst + 8, &q, 8);
            }
        } else if (zt_is_float(dt)) {
            zt_store_float(dst, dt, zt_float_value(pt, p, rank));
        } else if (zt_is_signed(dt) || zt_is_unsigned(dt)) {
            uint64_t v = zt_int_value(pt, p, rank, (int)(es * 8), zt_is_signed(dt));
            memcpy(dst, &v, es); /* little endian: the low bytes */
        } else if (dt == HCCL_DATA_TYPE_INT128) {
            uint64_t lo = zt_int_value(pt, p, rank, 64, 1);
            uint64_t hi = (lo >> 63) ? UINT64_MAX : 0; /* sign-extend */
            if (pt->op == HCCL_REDUCE_MAX || pt->op == HCCL_REDUCE_MIN) {
                hi = zt_pattern(pt->seed ^ 0x5bd1e995ull, rank, first + i);
            }
            memcpy(dst, &lo, 8);
            memcpy(dst + 8, &hi, 8);
        } else {
            memcpy(dst, &p, es);
        }
    }
}

/* ---- serial reference -------------------------------------------------------- */

#define ZT_CHUNK 1024
#define ZT_MAX_RANKS 64

/* Sums and products are computed in W, then cast back to T. Integers use
 * W = uint64_t, so they reduce in the element's width: sums and products
 * wrap (computed in uint64_t, then truncated). fp32 and fp64 use W = T: they
 * reduce in their own precision, rank 0 first. Max and min compare as T. */
#define ZT_DEF_REDUCE(NAME, T, W)                                                                  \
    static void NAME(unsigned char *out, const void *const *in, int n, size_t len, int op)         \
    {                                                                                              \
        T acc[ZT_CHUNK];                                                                           \
        memcpy(acc, in[0], len * sizeof(T));                                                       \
        for (int r = 1; r < n; r++) {                                                              \
            const unsigned char *src = in[r];                                                      \
            for (size_t i = 0; i < len; i++) {                                                     \
                T v;                                                                               \
                memcpy(&v, src + i * sizeof(T), sizeof(T));                                        \
                if (op == HCCL_REDUCE_SUM) {                                                       \
                    acc[i] = (T)((W)acc[i] + (W)v);                                                \
                } else if (op == HCCL_REDUCE_PROD) {                                               \
                    acc[i] = (T)((W)acc[i] * (W)v);                                                \
                } else if (op == HCCL_REDUCE_MAX) {                                                \
                    acc[i] = v > acc[i] ? v : acc[i];                                              \
                } else {                                                                           \
                    acc[i] = v < acc[i] ? v : acc[i];                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        memcpy(out, acc, len * sizeof(T));                                                         \
    }

ZT_DEF_REDUCE(zt_reduce_i8, int8_t, uint64_t)
ZT_DEF_REDUCE(zt_reduce_u8, uint8_t, uint64_t)
ZT_DEF_REDUCE(zt_reduce_i16, int16_t, uint64_t)
ZT_DEF_REDUCE(zt_reduce_u16, uint16_t, uint64_t)
ZT_DEF_REDUCE(zt_reduce_i32, int32_t, uint64_t)
ZT_DEF_REDUCE(zt_reduce_u32, uint32_t, uint64_t)
ZT_DEF_REDUCE(zt_reduce_i64, int64_t, uint64_t)
ZT_DEF_REDUCE(zt_reduce_u64, uint64_t, uint64_t)
ZT_DEF_REDUCE(zt_reduce_f32, float, float)
ZT_DEF_REDUCE(zt_reduce_f64, double, double)

/* fp16 / bf16: accumulate every rank in fp32, round once at the end. */
static void zt_reduce_half(unsigned char *out, const void *const *in, int n, size_t len, int op,
                           int bf)
{
    float acc[ZT_CHUNK];
    for (int r = 0; r < n; r++) {
        const unsigned char *src = in[r];
        for (size_t i = 0; i < len; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            float v = bf ? zt_bf16_to_float(h) : zt_fp16_to_float(h);
            if (r == 0) {
                acc[i] = v;
            } else if (op == HCCL_REDUCE_SUM) {
                acc[i] = acc[i] + v;
            } else if (op == HCCL_REDUCE_PROD) {
                acc[i] = acc[i] * v;
            } else if (op == HCCL_REDUCE_MAX) {
                acc[i] = v > acc[i] ? v : acc[i];
            } else {
                acc[i] = v < acc[i] ? v : acc[i];
            }
        }
    }
    for (size_t i = 0; i < len; i++) {
        uint16_t h = bf ? zt_bf16_from_float(acc[i]) : zt_fp16_from_float(acc[i]);
        memcpy(out + 2 * i, &h, 2);
    }
}

/* 128-bit two's complement integers as (lo, hi) pairs, little endian. */
typedef struct {
    uint64_t lo;
    uint64_t hi;
} zt_u128_t;

static zt_u128_t zt_u128_mul(zt_u128_t a, zt_u128_t b)
{
    uint64_t a0 = a.lo & 0xffffffffu, a1 = a.lo >> 32, b0 = b.lo & 0xffffffffu, b1 = b.lo >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    zt_u128_t r;
    r.lo = (p00 & 0xffffffffu) | (mid << 32);
    r.hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32) + a.hi * b.lo + a.lo * b.hi;
    return r;
}

static int zt_u128_less(zt_u128_t a, zt_u128_t b) /* signed a < b */
{
    if (a.hi != b.hi) {
        return (int64_t)a.hi < (int64_t)b.hi;
    }
    return a.lo < b.lo;
}

static void zt_reduce_i128(unsigned char *out, const void *const *in, int n, size_t len, int op)
{
    for (size_t i = 0; i < len; i++) {
        zt_u128_t acc;
        memcpy(&acc, (const unsigned char *)in[0] + 16 * i, 16);
        for (int r = 1; r < n; r++) {
            zt_u128_t v;
            memcpy(&v, (const unsigned char *)in[r] + 16 * i, 16);
            if (op == HCCL_REDUCE_SUM) {
                uint64_t lo = acc.lo + v.lo;
                acc.hi = acc.hi + v.hi + (lo < acc.lo);
                acc.lo = lo;
            } else if (op == HCCL_REDUCE_PROD) {
                acc = zt_u128_mul(acc, v);
            } else if (op == HCCL_REDUCE_MAX) {
                acc = zt_u128_less(acc, v) ? v : acc;
            } else {
                acc = zt_u128_less(v, acc) ? v : acc;
            }
        }
        memcpy(out + 16 * i, &acc, 16);
    }
}

/* Hosts of the reference (zt_ref_set_hosts): rank r is on host zt_ref_host[r]; 0 ranks: one
 * flat rank order. */
static int zt_ref_nranks;
static int zt_ref_host[ZT_MAX_RANKS];

void zt_ref_set_hosts(int nranks, const int *host_of)
{
    int hosts = 0;
    for (int r = 0; r < nranks && r < ZT_MAX_RANKS; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++) {
            seen |= host_of[q] == host_of[r];
        }
        hosts += !seen;
        zt_ref_host[r] = host_of[r];
    }
    zt_ref_nranks = hosts > 1 && nranks <= ZT_MAX_RANKS ? nranks : 0;
}

int zt_ref_host_ranks(int rank, int nranks)
{
    if (zt_ref_nranks == 0 || nranks != zt_ref_nranks || rank < 0 || rank >= nranks) {
        return nranks;
    }
    int k = 0;
    for (int q = 0; q < nranks; q++) {
        k += zt_ref_host[q] == zt_ref_host[rank];
    }
    return k;
}

int zt_ref_same_host(int a, int b, int nranks)
{
    if (zt_ref_nranks == 0 || nranks != zt_ref_nranks || a < 0 || b < 0 || a >= nranks ||
        b >= nranks) {
        return 1;
    }
    return zt_ref_host[a] == zt_ref_host[b];
}

static int zt_ref_reduce_flat(void *out, const void *const *in, int n, size_t count, int dtype,
                              int op);

/* Each host's ranks in rank order, the partial stored in the dtype; then the partials in host
 * order (hosts in the order of their first rank). -1 unless the hosts cover exactly n ranks. */
static int zt_ref_reduce_hosts(void *out, const void *const *in, int n, size_t count, int dtype,
                               int op)
{
    size_t es = zt_dtype_size(dtype);
    unsigned char *part = n == zt_ref_nranks ? malloc((size_t)n * count * es + 1) : NULL;
    if (part == NULL) {
        return -1;
    }
    const void *hin[ZT_MAX_RANKS];
    const void *src[ZT_MAX_RANKS];
    int nh = 0;
    int rc = 0;
    for (int r = 0; r < n && rc == 0; r++) {
        int first = 1;
        for (int q = 0; q < r; q++) {
            first &= zt_ref_host[q] != zt_ref_host[r];
        }
        if (!first) {
            continue;
        }
        int k = 0;
        for (int q = r; q < n; q++) {
            if (zt_ref_host[q] == zt_ref_host[r]) {
                hin[k++] = in[q];
            }
        }
        src[nh] = part + (size_t)nh * count * es;
        rc = zt_ref_reduce_flat(part + (size_t)nh * count * es, hin, k, count, dtype, op);
        nh++;
    }
    if (rc == 0) {
        rc = zt_ref_reduce_flat(out, src, nh, count, dtype, op);
    }
    free(part);
    return rc;
}

int zt_ref_reduce(void *out, const void *const *in, int n, size_t count, int dtype, int op)
{
    if (zt_ref_nranks > 0) {
        return zt_ref_reduce_hosts(out, in, n, count, dtype, op);
    }
    return zt_ref_reduce_flat(out, in, n, count, dtype, op);
}

static int zt_ref_reduce_flat(void *out, const void *const *in, int n, size_t count, int dtype,
                              int op)
{
    size_t es = zt_dtype_size(dtype);
    if (es == 0 || n <= 0 || n > ZT_MAX_RANKS || op < HCCL_REDUCE_SUM || op > HCCL_REDUCE_MIN) {
        return -1;
    }
    if (es == 1 && dtype != HCCL_DATA_TYPE_INT8 && dtype != HCCL_DATA_TYPE_UINT8) {
        return -1; /* fp8 formats: no reference */
    }
    const void *src[ZT_MAX_RANKS];
    for (size_t first = 0; first < count; first += ZT_CHUNK) {
        size_t len = count - first < ZT_CHUNK ? count - first : ZT_CHUNK;
        for (int r = 0; r < n; r++) {
            src[r] = (const unsigned char *)in[r] + first * es;
        }
        unsigned char *dst = (unsigned char *)out + first * es;
        switch (dtype) {
        case HCCL_DATA_TYPE_INT8:
            zt_reduce_i8(dst, src, n, len, op);
            break;
        case HCCL_DATA_TYPE_UINT8:
            zt_reduce_u8(dst, src, n, len, op);
            break;
        case HCCL_DATA_TYPE_INT16:
            zt_reduce_i16(dst, src, n, len, op);
            break;
        case HCCL_DATA_TYPE_UINT16:
            zt_reduce_u16(dst, src, n, len, op);
            break;
        case HCCL_DATA_TYPE_INT32:
            zt_reduce_i32(dst, src, n, len, op);
            break;
        case HCCL_DATA_TYPE_UINT32:
            zt_reduce_u32(dst, src, n, len, op);
            break;
        case HCCL_DATA_TYPE_INT64:
            zt_reduce_i64(dst, src, n, len, op);
            break;
        case HCCL_DATA_TYPE_UINT64:
            zt_reduce_u64(dst, src, n, len, op);
            break;
        case HCCL_DATA_TYPE_FP16:
            zt_reduce_half(dst, src, n, len, op, 0);
            break;
        case HCCL_DATA_TYPE_BFP16:
            zt_reduce_half(dst, src, n, len, op, 1);
            break;
        case HCCL_DATA_TYPE_FP32:
            zt_reduce_f32(dst, src, n, len, op);
            break;
        case HCCL_DATA_TYPE_FP64:
            zt_reduce_f64(dst, src, n, len, op);
            break;
        case HCCL_DATA_TYPE_INT128:
            zt_reduce_i128(dst, src, n, len, op);
            break;
        default:
            return -1;
        }
    }
    return 0;
}

int zt_ref_allreduce(void *out, size_t count, const zt_pat_t *p)
{
    int n = p->nranks;
    size_t es = zt_dtype_size(p->dtype);
    if (n <= 0 || n > ZT_MAX_RANKS || es == 0) {
        return -1;
    }
    unsigned char *tmp = malloc((size_t)n * ZT_CHUNK * es);
    if (tmp == NULL) {
        return -1;
    }
    const void *src[ZT_MAX_RANKS];
    int rc = 0;
    for (size_t first = 0; first < count && rc == 0; first += ZT_CHUNK) {
        size_t len = count - first < ZT_CHUNK ? count - first : ZT_CHUNK;
        for (int r = 0; r < n; r++) {
            unsigned char *b = tmp + (size_t)r * ZT_CHUNK * es;
            zt_fill(b, first, len, p, r);
            src[r] = b;
        }
        rc = zt_ref_reduce((unsigned char *)out + first * es, src, n, len, p->dtype, p->op);
    }
    free(tmp);
    return rc;
}

void zt_ref_allgather(void *out, size_t count, const zt_pat_t *p)
{
    size_t es = zt_dtype_size(p->dtype);
    for (int r = 0; r < p->nranks; r++) {
        zt_fill((unsigned char *)out + (size_t)r * count * es, 0, count, p, r);
    }
}

/* ---- comparison -------------------------------------------------------------- */

static void zt_format(char *b, size_t len, const unsigned char *e, int dtype)
{
    uint64_t u = 0;
    size_t es = zt_dtype_size(dtype);
    memcpy(&u, e, es < 8 ? es : 8);
    switch (dtype) {
    case HCCL_DATA_TYPE_INT8:
        snprintf(b, len, "%d", (int)(int8_t)u);
        break;
    case HCCL_DATA_TYPE_INT16:
        snprintf(b, len, "%d", (int)(int16_t)u);
        break;
    case HCCL_DATA_TYPE_INT32:
        snprintf(b, len, "%" PRId32, (int32_t)u);
        break;
    case HCCL_DATA_TYPE_INT64:
        snprintf(b, len, "%" PRId64, (int64_t)u);
        break;
    case HCCL_DATA_TYPE_UINT8:
    case HCCL_DATA_TYPE_UINT16:
    case HCCL_DATA_TYPE_UINT32:
    case HCCL_DATA_TYPE_UINT64:
        snprintf(b, len, "%" PRIu64, u);
        break;
    case HCCL_DATA_TYPE_FP16:
        snprintf(b, len, "%.6g (0x%04x)", (double)zt_fp16_to_float((uint16_t)u), (unsigned)u);
        break;
    case HCCL_DATA_TYPE_BFP16:
        snprintf(b, len, "%.6g (0x%04x)", (double)zt_bf16_to_float((uint16_t)u), (unsigned)u);
        break;
    case HCCL_DATA_TYPE_FP32: {
        float f;
        memcpy(&f, e, 4);
        snprintf(b, len, "%.9g (0x%08x)", (double)f, (unsigned)u);
        break;
    }
    case HCCL_DATA_TYPE_FP64: {
        double d;
        memcpy(&d, e, 8);
        snprintf(b, len, "%.17g (0x%016" PRIx64 ")", d, u);
        break;
    }
    case HCCL_DATA_TYPE_INT128: {
        uint64_t hi;
        memcpy(&hi, e + 8, 8);
        snprintf(b, len, "0x%016" PRIx64 "%016" PRIx64, hi, u);
        break;
    }
    default:
        snprintf(b, len, "0x%02x", (unsigned)(u & 0xffu));
        break;
    }
}

size_t zt_compare(const char *what, const void *got, const void *want, size_t count, int dtype)
{
    size_t es = zt_dtype_size(dtype);
    const unsigned char *g = got;
    const unsigned char *w = want;
    if (count == 0 || memcmp(g, w, count * es) == 0) {
        return 0;
    }
    size_t bad = 0;
    size_t first = 0;
    for (size_t i = 0; i < count; i++) {
        if (memcmp(g + i * es, w + i * es, es) != 0) {
            if (bad == 0) {
                first = i;
            }
            bad++;
        }
    }
    char gs[64];
    char ws[64];
    zt_format(gs, sizeof(gs), g + first * es, dtype);
    zt_format(ws, sizeof(ws), w + first * es, dtype);
    fprintf(stderr, "%s: %zu of %zu elements differ; first at [%zu]: got %s want %s\n", what, bad,
            count, first, gs, ws);
    return bad;
}

/* ---- cases ------------------------------------------------------------------- */

#define ZT_GUARD_ROOM 4096 /* bytes left free before each buffer in an arena half */
#define ZT_GUARD 64        /* bytes either side of the output that must not change */
#define ZT_SENTINEL 0xa5
#define ZT_SEND_SENTINEL 0x5a
#define ZT_REPORT_MAX 50

static atomic_int zt_reports;

void zt_report(const zt_env_t *env, const char *fmt, ...)
{
    int k = atomic_fetch_add_explicit(&zt_reports, 1, memory_order_relaxed);
    if (k > ZT_REPORT_MAX) {
        return;
    }
    if (k == ZT_REPORT_MAX) {
        fprintf(stderr, "[rank %d/%d] further failures not shown\n", env->rank, env->nranks);
        return;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d/%d] FAIL %s\n", env->rank, env->nranks, msg);
}

void zt_expect_fail(const zt_env_t *env, int line, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    zt_report(env, "line %d: %s", line, msg);
}

void zt_case_str(const zt_case_t *c, char *buf, size_t len)
{
    int ag = c->coll == ZT_ALLGATHER;
    snprintf(buf, len, "%s %s%s%s count=%zu %s %s %s%s seed=%" PRIx64,
             ag ? "allgather" : "allreduce", zt_dtype_name(c->dtype), ag ? "" : " ",
             ag ? "" : zt_op_name(c->op), c->count,
             !c->zero_copy        ? "buffered"
             : c->expect_buffered ? "inactive-zc-memory"
                                  : "zero-copy",
             c->in_place ? "in-place" : "out-of-place", c->misalign ? "odd" : "aligned",
             c->mode == ZT_FILL_ROUNDING ? " rounding" : "", c->seed);
}

size_t zt_case_bytes(int coll, int dtype, size_t count, int nranks)
{
    size_t es = zt_dtype_size(dtype);
    size_t out = count * es * (size_t)(coll == ZT_ALLGATHER ? nranks : 1);
    return 2 * ZT_GUARD_ROOM + 2 * es + out;
}

static zt_pat_t zt_case_pat(const zt_case_t *c, int nranks)
{
    zt_pat_t p = {c->dtype, c->coll == ZT_ALLGATHER ? ZT_OP_NONE : c->op, c->mode, nranks, c->seed};
    return p;
}

#define ZT_CASE_FAIL(pd, ...)                                                                      \
    do {                                                                                           \
        char cs_[192];                                                                             \
        char m_[320];                                                                              \
        zt_case_str(&(pd)->c, cs_, sizeof(cs_));                                                   \
        snprintf(m_, sizeof(m_), __VA_ARGS__);                                                     \
        zt_report((pd)->env, "%s: %s", cs_, m_);                                                   \
    } while (0)

int zt_case_start(zt_env_t *env, const zt_case_t *c, zt_pending_t *pd)
{
    memset(pd, 0, sizeof(*pd));
    pd->c = *c;
    pd->env = env;
    int ag = c->coll == ZT_ALLGATHER;
    size_t es = zt_dtype_size(c->dtype);
    if (es == 0) {
        ZT_CASE_FAIL(pd, "test bug: unknown dtype");
        return 2;
    }
    pd->sbytes = c->count * es;
    pd->rbytes = pd->sbytes * (size_t)(ag ? env->nranks : 1);
    unsigned char *arena = c->zero_copy ? env->zc.va : env->plain;
    if (arena == NULL || zt_case_bytes(c->coll, c->dtype, c->count, env->nranks) > env->half) {
        ZT_CASE_FAIL(pd, "test bug: arena half of %zu bytes missing or too small", env->half);
        return 2;
    }
    size_t mis = !c->misalign ? 0 : es == 1 ? 3 : es;
    pd->recv = arena + env->half + ZT_GUARD_ROOM + mis;
    memset(pd->recv - ZT_GUARD, ZT_SENTINEL, pd->rbytes + 2 * ZT_GUARD);
    if (c->in_place) {
        pd->send = ag ? pd->recv + (size_t)env->rank * pd->sbytes : pd->recv;
    } else {
        pd->send = arena + ZT_GUARD_ROOM + mis;
        memset(pd->send - ZT_GUARD, ZT_SEND_SENTINEL, ZT_GUARD);
        memset(pd->send + pd->sbytes, ZT_SEND_SENTINEL, ZT_GUARD);
    }
    zt_pat_t p = zt_case_pat(c, env->nranks);
    zt_fill(pd->send, 0, c->count, &p, c->same_data ? 0 : env->rank);
    pd->staged0 = zccl_comm_staged_bytes(env->comm);
    pd->zc_ops0 = zccl_comm_zero_copy_ops(env->comm);
    pd->buf_ops0 = zccl_comm_buffered_ops(env->comm);
    HcclResult r = ag ? HcclAllGather(pd->send, pd->recv, c->count, (HcclDataType)c->dtype,
                                      env->comm, env->stream)
                      : HcclAllReduce(pd->send, pd->recv, c->count, (HcclDataType)c->dtype,
                                      (HcclReduceOp)c->op, env->comm, env->stream);
    if (c->expect_unsupported) {
        if (r != HCCL_E_NOT_SUPPORT) {
            ZT_CASE_FAIL(pd, "call returned %d (%s), want HCCL_E_NOT_SUPPORT", (int)r,
                         HcclGetErrorString(r));
            return 2;
        }
        pd->unsupported = 1;
        return 0;
    }
    if (r == HCCL_E_PARA && c->expect_para) {
        pd->call_para = 1;
        return 0;
    }
    if (r != HCCL_SUCCESS) {
        ZT_CASE_FAIL(pd, "call returned %d (%s)", (int)r, HcclGetErrorString(r));
        return 2;
    }
    return 0;
}

/* Every byte of [p, p + len) equals v; else prints where it does not. */
static int zt_bytes_are(zt_pending_t *pd, const unsigned char *p, size_t len, int v,
                        const char *what)
{
    for (size_t i = 0; i < len; i++) {
        if (p[i] != (unsigned char)v) {
            ZT_CASE_FAIL(pd, "%s: byte %zu is 0x%02x, want 0x%02x", what, i, p[i], v);
            return 1;
        }
    }
    return 0;
}

static int zt_case_expect(zt_pending_t *pd, unsigned char *want)
{
    const zt_case_t *c = &pd->c;
    zt_pat_t p = zt_case_pat(c, pd->env->nranks);
    if (c->coll == ZT_ALLGATHER) {
        zt_ref_allgather(want, c->count, &p);
        return 0;
    }
    if (c->same_data) { /* MAX / MIN of n equal inputs is that input, in any format */
        zt_fill(want, 0, c->count, &p, 0);
        return 0;
    }
    return zt_ref_allreduce(want, c->count, &p);
}

static int zt_case_counters(zt_pending_t *pd)
{
    const zt_case_t *c = &pd->c;
    zt_env_t *env = pd->env;
    uint64_t st = zccl_comm_staged_bytes(env->comm);
    uint64_t zc = zccl_comm_zero_copy_ops(env->comm);
    uint64_t bo = zccl_comm_buffered_ops(env->comm);
    int zc_path = c->zero_copy && !c->expect_buffered;
    int counted = c->count > 0 && env->nranks > 1;
    if ((zc_path || c->count == 0) && st != pd->staged0) {
        ZT_CASE_FAIL(pd, "staged bytes went %" PRIu64 " -> %" PRIu64 ", want no staging",
                     pd->staged0, st);
        return 1;
    }
    if (!counted) {
        return 0;
    }
    if (!zc_path && st <= pd->staged0) {
        ZT_CASE_FAIL(pd, "staged bytes stayed %" PRIu64 " on the buffered path", st);
        return 1;
    }
    if (zc != pd->zc_ops0 + (zc_path ? 1 : 0) || bo != pd->buf_ops0 + (zc_path ? 0 : 1)) {
        ZT_CASE_FAIL(pd,
                     "op counters zero-copy %" PRIu64 " -> %" PRIu64 ", buffered %" PRIu64
                     " -> %" PRIu64 ", want one %s op",
                     pd->zc_ops0, zc, pd->buf_ops0, bo, zc_path ? "zero-copy" : "buffered");
        return 1;
    }
    return 0;
}

/* A case that had to fail with HCCL_E_PARA: check the code and that no byte
 * of the output (or around it) changed. */
static int zt_case_refused(zt_pending_t *pd, aclError sync_rc)
{
    if (!pd->call_para && sync_rc != (aclError)HCCL_E_PARA) {
        ZT_CASE_FAIL(pd, "want HCCL_E_PARA from the call or the sync; call said %s, sync %d",
                     pd->call_para ? "HCCL_E_PARA" : "HCCL_SUCCESS", (int)sync_rc);
        return 2;
    }
    if (pd->call_para && sync_rc != ACL_SUCCESS) {
        ZT_CASE_FAIL(pd, "call refused with HCCL_E_PARA but the stream then failed: %d",
                     (int)sync_rc);
        return 2;
    }
    return zt_bytes_are(pd, pd->recv - ZT_GUARD, pd->rbytes + 2 * ZT_GUARD, ZT_SENTINEL,
                        "output after a refused op");
}

int zt_case_finish(zt_pending_t *pd, aclError sync_rc)
{
    const zt_case_t *c = &pd->c;
    zt_env_t *env = pd->env;
    if (pd->unsupported) {
        /* Refused by the call: nothing was enqueued, nothing written. */
        if (c->in_place) {
            ZT_CASE_FAIL(pd, "test bug: an unsupported case must be out of place");
            return 1;
        }
        if (sync_rc != ACL_SUCCESS) {
            ZT_CASE_FAIL(pd, "call refused with HCCL_E_NOT_SUPPORT but the stream then failed: %d",
                         (int)sync_rc);
            return 2;
        }
        return zt_bytes_are(pd, pd->recv - ZT_GUARD, pd->rbytes + 2 * ZT_GUARD, ZT_SENTINEL,
                            "output after an unsupported op");
    }
    if (c->expect_para) {
        return zt_case_refused(pd, sync_rc);
    }
    if (sync_rc != ACL_SUCCESS) {
        ZT_CASE_FAIL(pd, "aclrtSynchronizeStream returned %d", (int)sync_rc);
        return 2;
    }
    int bad = 0;
    int ag = c->coll == ZT_ALLGATHER;
    size_t nout = c->count * (size_t)(ag ? env->nranks : 1);
    unsigned char *want = malloc(pd->rbytes > pd->sbytes ? pd->rbytes + 1 : pd->sbytes + 1);
    if (want == NULL) {
        ZT_CASE_FAIL(pd, "test bug: out of memory");
        return 1;
    }
    if (zt_case_expect(pd, want) != 0) {
        ZT_CASE_FAIL(pd, "test bug: no reference for this dtype and op");
        bad = 1;
    } else {
        char what[256];
        char cs[192];
        zt_case_str(c, cs, sizeof(cs));
        snprintf(what, sizeof(what), "[rank %d/%d] FAIL %s: output", env->rank, env->nranks, cs);
        bad |= zt_compare(what, pd->recv, want, nout, c->dtype) != 0;
    }
    bad |= zt_bytes_are(pd, pd->recv - ZT_GUARD, ZT_GUARD, ZT_SENTINEL, "bytes before output");
    bad |= zt_bytes_are(pd, pd->recv + pd->rbytes, ZT_GUARD, ZT_SENTINEL, "bytes after output");
    /* HCCL lets a zero-copy AllReduce use its input as scratch; nothing else may. */
    if (!c->in_place && (ag || !c->zero_copy || c->expect_buffered)) {
        zt_pat_t p = zt_case_pat(c, env->nranks);
        zt_fill(want, 0, c->count, &p, c->same_data ? 0 : env->rank);
        if (memcmp(pd->send, want, pd->sbytes) != 0) {
            char what[256];
            char cs[192];
            zt_case_str(c, cs, sizeof(cs));
            snprintf(what, sizeof(what), "[rank %d/%d] FAIL %s: input changed", env->rank,
                     env->nranks, cs);
            zt_compare(what, pd->send, want, c->count, c->dtype);
            bad = 1;
        }
        bad |=
            zt_bytes_are(pd, pd->send - ZT_GUARD, ZT_GUARD, ZT_SEND_SENTINEL, "bytes before input");
        bad |= zt_bytes_are(pd, pd->send + pd->sbytes, ZT_GUARD, ZT_SEND_SENTINEL,
                            "bytes after input");
    }
    free(want);
    if (!c->skip_counters) {
        bad |= zt_case_counters(pd);
    }
    return bad ? 1 : 0;
}

int zt_case_run(zt_env_t *env, const zt_case_t *c)
{
    zt_pending_t pd;
    int rc = zt_case_start(env, c, &pd);
    if (rc != 0) {
        return rc;
    }
    aclError e = aclrtSynchronizeStream(env->stream);
    return zt_case_finish(&pd, e);
}

int zt_allreduce_path(zt_env_t *env, HcclComm comm, void *send, void *recv, size_t count,
                      int want_zc, int line)
{
    int fails = 0;
    zt_pat_t p = {HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, ZT_FILL_EXACT, env->nranks,
                  (uint64_t)line};
    zt_fill(send, 0, count, &p, env->rank);
    uint64_t zc0 = zccl_comm_zero_copy_ops(comm);
    uint64_t st0 = zccl_comm_staged_bytes(comm);
    HcclResult r =
        HcclAllReduce(send, recv, count, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, env->stream);
    aclError e = aclrtSynchronizeStream(env->stream);
    if (!ZT_EXPECT(env, r == HCCL_SUCCESS && e == ACL_SUCCESS, "line %d: op %d / %d", line, (int)r,
                   (int)e)) {
        return fails;
    }
    int32_t *want = malloc(count * sizeof(int32_t));
    zt_ref_allreduce(want, count, &p);
    char what[64];
    snprintf(what, sizeof(what), "[rank %d] line %d: output", env->rank, line);
    fails += zt_compare(what, recv, want, count, HCCL_DATA_TYPE_INT32) != 0;
    free(want);
    uint64_t zc = zccl_comm_zero_copy_ops(comm) - zc0;
    uint64_t st = zccl_comm_staged_bytes(comm) - st0;
    if (want_zc == 1) {
        ZT_EXPECT(env, zc == 1 && st == 0, "line %d: want zero-copy, got %llu zc ops, %llu staged",
                  line, (unsigned long long)zc, (unsigned long long)st);
    } else if (want_zc == 0) {
        ZT_EXPECT(env, zc == 0 && (st > 0 || env->nranks == 1),
                  "line %d: want buffered, got %llu zc ops, %llu staged", line,
                  (unsigned long long)zc, (unsigned long long)st);
    }
    return fails;
}
