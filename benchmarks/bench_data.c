/*
 * Test data of the benchmark tools: type and reduction names, the input
 * pattern, and the check that counts #wrong.
 *
 * Inputs are small integers (0..15, or 1..2 for products), so the result of
 * any reduction over up to 64 ranks is an integer every type represents
 * exactly (fp16 and bf16 included: their 11 and 8 significand bits hold every
 * integer up to 2048 and 256). Values are stored through a double, and the
 * check compares the stored element, read back as a double, for equality:
 * a result that is off by one bit, or NaN, is wrong.
 */
#include "harness.h"

#include <string.h>
#include <strings.h>

typedef struct {
    int dtype;
    size_t size;
    const char *name; /* nccl-tests' spelling, printed */
    const char *alt1; /* HCCL test tool's spelling */
    const char *alt2; /* another common one */
} bench_dtype_info_t;

static const bench_dtype_info_t bench_dtypes[] = {
    {HCCL_DATA_TYPE_INT8, 1, "int8", "char", "i8"},
    {HCCL_DATA_TYPE_UINT8, 1, "uint8", "u8", NULL},
    {HCCL_DATA_TYPE_INT16, 2, "int16", "short", "i16"},
    {HCCL_DATA_TYPE_UINT16, 2, "uint16", "u16", NULL},
    {HCCL_DATA_TYPE_INT32, 4, "int32", "int", "i32"},
    {HCCL_DATA_TYPE_UINT32, 4, "uint32", "u32", NULL},
    {HCCL_DATA_TYPE_INT64, 8, "int64", "long", "i64"},
    {HCCL_DATA_TYPE_UINT64, 8, "uint64", "u64", NULL},
    {HCCL_DATA_TYPE_FP16, 2, "half", "fp16", "float16"},
    {HCCL_DATA_TYPE_FP32, 4, "float", "fp32", "float32"},
    {HCCL_DATA_TYPE_FP64, 8, "double", "fp64", "float64"},
    {HCCL_DATA_TYPE_BFP16, 2, "bfloat16", "bfp16", "bf16"},
};

#define BENCH_NDTYPES (sizeof(bench_dtypes) / sizeof(bench_dtypes[0]))

static const bench_dtype_info_t *bench_dtype_find(int dtype)
{
    for (size_t i = 0; i < BENCH_NDTYPES; i++) {
        if (bench_dtypes[i].dtype == dtype) {
            return &bench_dtypes[i];
        }
    }
    return NULL;
}

size_t bench_dtype_size(int dtype)
{
    const bench_dtype_info_t *d = bench_dtype_find(dtype);
    return d != NULL ? d->size : 0;
}

const char *bench_dtype_name(int dtype)
{
    const bench_dtype_info_t *d = bench_dtype_find(dtype);
    return d != NULL ? d->name : "?";
}

int bench_dtype_parse(const char *name)
{
    for (size_t i = 0; i < BENCH_NDTYPES; i++) {
        const bench_dtype_info_t *d = &bench_dtypes[i];
        if (strcasecmp(name, d->name) == 0 || strcasecmp(name, d->alt1) == 0 ||
            (d->alt2 != NULL && strcasecmp(name, d->alt2) == 0)) {
            return d->dtype;
        }
    }
    return -1;
}

static const char *const bench_redops[] = {"sum", "prod", "max", "min"};

const char *bench_redop_name(int redop)
{
    return redop >= 0 && redop < 4 ? bench_redops[redop] : "?";
}

int bench_redop_parse(const char *name)
{
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(name, bench_redops[i]) == 0) {
            return i;
        }
    }
    return -1;
}

double bench_value(const bench_op_t *op, int rank, size_t i)
{
    unsigned r = (unsigned)rank;
    switch (op->redop) {
    case HCCL_REDUCE_PROD:
        /* 1 or 2: a product over 64 ranks stays below 2^64 and, over the few
           ranks a host runs, exact in every type. */
        return (double)(1u + (r + (unsigned)(i % 2)) % 2u);
    case HCCL_REDUCE_MAX:
    case HCCL_REDUCE_MIN:
        return (double)((r * 5u + (unsigned)(i % 16) * 3u) % 16u);
    default:
        /* Differs between any two ranks at every index, so a broadcast or a
           gather that copies the wrong rank's data is caught. */
        return (double)((r + (unsigned)(i % 8) * 3u) % 8u);
    }
}

double bench_fold(const bench_op_t *op, size_t i)
{
    double acc = bench_value(op, 0, i);
    for (int r = 1; r < op->nranks; r++) {
        double v = bench_value(op, r, i);
        switch (op->redop) {
        case HCCL_REDUCE_PROD:
            acc *= v;
            break;
        case HCCL_REDUCE_MAX:
            acc = v > acc ? v : acc;
            break;
        case HCCL_REDUCE_MIN:
            acc = v < acc ? v : acc;
            break;
        default:
            acc += v;
            break;
        }
    }
    return acc;
}

/* IEEE binary16 from a float, rounding to nearest even; only values the
   pattern produces (small integers) need be exact. */
static uint16_t bench_half_from_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t fexp = (x >> 23) & 0xffu;
    uint32_t mant = x & 0x7fffffu;
    if (fexp == 0xffu) {
        return (uint16_t)(sign | 0x7c00u | (mant != 0 ? 0x200u : 0));
    }
    int32_t exp = (int32_t)fexp - 127 + 15;
    if (fexp == 0 || exp <= 0) {
        return (uint16_t)sign; /* too small for a normal half: zero */
    }
    if (exp >= 31) {
        return (uint16_t)(sign | 0x7c00u);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0)) {
        h++;
    }
    return (uint16_t)h;
}

static float bench_half_to_float(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t exp = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t mant = (uint32_t)h & 0x3ffu;
    uint32_t x;
    if (exp == 0) {
        float v = (float)mant / 16777216.0f; /* subnormal: mant * 2^-24 */
        return sign != 0 ? -v : v;
    }
    if (exp == 31) {
        x = sign | 0x7f800000u | (mant << 13);
    } else {
        x = sign | ((exp - 15u + 127u) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

static uint16_t bench_bf16_from_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static float bench_bf16_to_float(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

static void bench_store(int dtype, void *base, size_t i, double v)
{
    switch (dtype) {
    case HCCL_DATA_TYPE_INT8:
        ((int8_t *)base)[i] = (int8_t)v;
        break;
    case HCCL_DATA_TYPE_UINT8:
        ((uint8_t *)base)[i] = (uint8_t)v;
        break;
    case HCCL_DATA_TYPE_INT16:
        ((int16_t *)base)[i] = (int16_t)v;
        break;
    case HCCL_DATA_TYPE_UINT16:
        ((uint16_t *)base)[i] = (uint16_t)v;
        break;
    case HCCL_DATA_TYPE_INT32:
        ((int32_t *)base)[i] = (int32_t)v;
        break;
    case HCCL_DATA_TYPE_UINT32:
        ((uint32_t *)base)[i] = (uint32_t)v;
        break;
    case HCCL_DATA_TYPE_INT64:
        ((int64_t *)base)[i] = (int64_t)v;
        break;
    case HCCL_DATA_TYPE_UINT64:
        ((uint64_t *)base)[i] = (uint64_t)v;
        break;
    case HCCL_DATA_TYPE_FP16:
        ((uint16_t *)base)[i] = bench_half_from_float((float)v);
        break;
    case HCCL_DATA_TYPE_FP32:
        ((float *)base)[i] = (float)v;
        break;
    case HCCL_DATA_TYPE_FP64:
        ((double *)base)[i] = v;
        break;
    case HCCL_DATA_TYPE_BFP16:
        ((uint16_t *)base)[i] = bench_bf16_from_float((float)v);
        break;
    default:
        break;
    }
}

static double bench_load(int dtype, const void *base, size_t i)
{
    switch (dtype) {
    case HCCL_DATA_TYPE_INT8:
        return ((const int8_t *)base)[i];
    case HCCL_DATA_TYPE_UINT8:
        return ((const uint8_t *)base)[i];
    case HCCL_DATA_TYPE_INT16:
        return ((const int16_t *)base)[i];
    case HCCL_DATA_TYPE_UINT16:
        return ((const uint16_t *)base)[i];
    case HCCL_DATA_TYPE_INT32:
        return ((const int32_t *)base)[i];
    case HCCL_DATA_TYPE_UINT32:
        return ((const uint32_t *)base)[i];
    case HCCL_DATA_TYPE_INT64:
        return (double)((const int64_t *)base)[i];
    case HCCL_DATA_TYPE_UINT64:
        return (double)((const uint64_t *)base)[i];
    case HCCL_DATA_TYPE_FP16:
        return bench_half_to_float(((const uint16_t *)base)[i]);
    case HCCL_DATA_TYPE_FP32:
        return ((const float *)base)[i];
    case HCCL_DATA_TYPE_FP64:
        return ((const double *)base)[i];
    case HCCL_DATA_TYPE_BFP16:
        return bench_bf16_to_float(((const uint16_t *)base)[i]);
    default:
        return 0.0;
    }
}

void bench_fill_send(const bench_op_t *op)
{
    if (op->dtype == HCCL_DATA_TYPE_FP32) {
        /* The common case, without the per-element type switch. */
        float *p = op->send;
        for (size_t i = 0; i < op->send_elems; i++) {
            p[i] = (float)bench_value(op, op->rank, i);
        }
        return;
    }
    for (size_t i = 0; i < op->send_elems; i++) {
        bench_store(op->dtype, op->send, i, bench_value(op, op->rank, i));
    }
}

void bench_poison_recv(const bench_op_t *op)
{
    /* 0xA5 bytes: negative or above 160 in every integer type, a tiny negative
       number in every float type; never a value the pattern produces. */
    if (op->recv_elems > 0) {
        memset(op->recv, 0xA5, op->recv_elems * op->esize);
    }
}

uint64_t bench_check_recv(const bench_coll_t *coll, const bench_op_t *op)
{
    uint64_t wrong = 0;
    for (size_t i = 0; i < op->recv_elems; i++) {
        double want;
        if (!coll->expect(op, i, &want)) {
            continue;
        }
        double got = bench_load(op->dtype, op->recv, i);
        if (!(got == want)) {
            wrong++;
        }
    }
    return wrong;
}
