/*
 * fp16 and bf16 <-> fp32 conversion, scalar and portable: the scalar
 * reduction kernel's steps, and the rules the vector kernels
 * (coll_kernel_half.c) reproduce bit for bit. fp16: subnormals exact,
 * overflow to infinity, NaN quietened with its payload kept (top bits), as
 * vcvtph2ps / vcvtps2ph do. bf16: widening is a 16-bit shift; narrowing
 * rounds to nearest even, keeps denormals and quietens NaN.
 */
#include "coll_kernel.h"

#include <string.h>

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
