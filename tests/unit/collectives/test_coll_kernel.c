/*
 * Unit tests of the reduction and copy kernels: dtype table, every dtype x op
 * against the serial reference for 1..5 inputs with dst aliasing each input,
 * fp16/bf16 with every kernel, scalar conversion (rounding cases; the fused
 * kernels' own tests are in test_coll_kernel_half.c), round-once
 * accumulation, NaN rules, integer wrap, and coll_copy's streaming path at
 * odd sizes and alignments.
 */
#include "test_coll_harness.h"

#include <math.h>

static void test_dtype_size(void **state)
{
    (void)state;
    static const struct {
        int dtype;
        size_t size;
    } want[] = {{COLL_INT8, 1},    {COLL_INT16, 2},  {COLL_INT32, 4},   {COLL_FP16, 2},
                {COLL_FP32, 4},    {COLL_INT64, 8},  {COLL_UINT64, 8},  {COLL_UINT8, 1},
                {COLL_UINT16, 2},  {COLL_UINT32, 4}, {COLL_FP64, 8},    {COLL_BF16, 2},
                {COLL_INT128, 16}, {COLL_HIF8, 1},   {COLL_FP8E4M3, 1}, {COLL_FP8E5M2, 1},
                {COLL_FP8E8M0, 1}, {13, 0},          {-1, 0},           {18, 0},
                {255, 0}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_int_equal(coll_dtype_size(want[i].dtype), want[i].size);
    }
}

static void test_reducible(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(tc_reduce_types) / sizeof(tc_reduce_types[0]); i++) {
        for (int op = COLL_SUM; op <= COLL_MIN; op++) {
            assert_int_equal(coll_reducible(tc_reduce_types[i], op), 1);
        }
        assert_int_equal(coll_reducible(tc_reduce_types[i], 4), 0);
        assert_int_equal(coll_reducible(tc_reduce_types[i], -1), 0);
        assert_int_equal(coll_reducible(tc_reduce_types[i], 255), 0);
    }
    static const int copy_only[] = {COLL_INT128,  COLL_HIF8, COLL_FP8E4M3, COLL_FP8E5M2,
                                    COLL_FP8E8M0, 13,        -1,           18};
    for (size_t i = 0; i < sizeof(copy_only) / sizeof(copy_only[0]); i++) {
        for (int op = COLL_SUM; op <= COLL_MIN; op++) {
            assert_int_equal(coll_reducible(copy_only[i], op), 0);
        }
    }
}

/* Every dtype x op, n = 1..5 inputs, dst separate or equal to each input,
 * at odd addresses, over counts that cross the internal block size. */
static void reduce_all(int only_half)
{
    static const size_t counts[] = {0, 1, 7, 100, 3000, 20011};
    uint64_t seed = 42;
    for (size_t t = 0; t < sizeof(tc_reduce_types) / sizeof(tc_reduce_types[0]); t++) {
        int dt = tc_reduce_types[t];
        size_t es = coll_dtype_size(dt);
        if (only_half && dt != COLL_FP16 && dt != COLL_BF16) {
            continue;
        }
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
            size_t count = counts[ci];
            size_t bytes = count * es;
            unsigned char *raw[5], *ref = malloc(bytes + 1), *dst = malloc(bytes + 3);
            const void *src[5];
            assert_non_null(ref);
            assert_non_null(dst);
            for (int k = 0; k < 5; k++) {
                raw[k] = malloc(bytes + 8);
                assert_non_null(raw[k]);
            }
            for (int op = COLL_SUM; op <= COLL_MIN; op++) {
                for (int n = 1; n <= 5; n++) {
                    /* alias = -1: separate dst; else dst is src[alias] */
                    for (int alias = -1; alias < n; alias++) {
                        for (int k = 0; k < n; k++) {
                            unsigned char *p = raw[k] + 1 + (size_t)k;
                            for (size_t i = 0; i < count; i++) {
                                tc_value(p + i * es, dt, &seed);
                            }
                            src[k] = p;
                        }
                        tc_ref_reduce(ref, src, n, count, dt, op);
                        void *d = alias < 0 ? dst + 3 : (void *)src[alias];
                        coll_reduce_n(d, src, n, count, dt, op);
                        if (count > 0 && memcmp(d, ref, bytes) != 0) {
                            fail_msg("dtype %d op %d n %d count %zu alias %d differs", dt, op, n,
                                     count, alias);
                        }
                    }
                }
            }
            for (int k = 0; k < 5; k++) {
                free(raw[k]);
            }
            free(ref);
            free(dst);
        }
    }
}

static void test_reduce_all(void **state)
{
    (void)state;
    reduce_all(0);
}

/* fp16/bf16 with every kernel this CPU runs, against the serial reference. */
static void test_reduce_all_half_kernels(void **state)
{
    (void)state;
    for (int k = COLL_KERN_SCALAR; k <= coll_kern_best(); k++) {
        coll_kern_force(k);
        reduce_all(1);
    }
    coll_kern_force(-1);
}

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_fp16_to_float(void **state)
{
    (void)state;
    assert_int_equal(f2u(coll_fp16_to_float(0x3c00)), f2u(1.0f));
    assert_int_equal(f2u(coll_fp16_to_float(0xc000)), f2u(-2.0f));
    assert_int_equal(f2u(coll_fp16_to_float(0x7bff)), f2u(65504.0f));
    assert_int_equal(f2u(coll_fp16_to_float(0x0001)), f2u(0x1p-24f));
    assert_int_equal(f2u(coll_fp16_to_float(0x03ff)), f2u(1023 * 0x1p-24f));
    assert_int_equal(f2u(coll_fp16_to_float(0x0400)), f2u(0x1p-14f));
    assert_int_equal(f2u(coll_fp16_to_float(0x8000)), 0x80000000u);
    assert_int_equal(f2u(coll_fp16_to_float(0x7c00)), 0x7f800000u);
    assert_int_equal(f2u(coll_fp16_to_float(0xfc00)), 0xff800000u);
    assert_int_equal(f2u(coll_fp16_to_float(0x7c01)), 0x7fc02000u); /* quietened */
    assert_int_equal(f2u(coll_fp16_to_float(0xfe00)), 0xffc00000u);
}

static void test_fp16_from_float(void **state)
{
    (void)state;
    static const struct {
        float f;
        uint16_t h;
    } cases[] = {
        {1.0f, 0x3c00},
        {1.0f + 0x1p-11f, 0x3c00},     /* tie: to even (down) */
        {1.0f + 3 * 0x1p-11f, 0x3c02}, /* tie: to even (up) */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01},
        {65504.0f, 0x7bff},
        {65519.0f, 0x7bff},
        {65520.0f, 0x7c00}, /* rounds to infinity */
        {1e9f, 0x7c00},
        {-1e9f, 0xfc00},
        {0x1p-14f, 0x0400},
        {0x1p-24f, 0x0001},
        {0x1p-25f, 0x0000}, /* tie between 0 and 2^-24: even */
        {0x1p-25f + 0x1p-40f, 0x0001},
        {3 * 0x1p-25f, 0x0002},        /* 1.5 subnormal ulps: to even */
        {5 * 0x1p-25f, 0x0002},        /* 2.5: to even */
        {0x1p-14f - 0x1p-25f, 0x0400}, /* rounds up into the normals */
        {1e-30f, 0x0000},
        {-0.0f, 0x8000},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(coll_fp16_from_float(cases[i].f), cases[i].h);
    }
    assert_int_equal(coll_fp16_from_float(u2f(0x7f800000u)), 0x7c00);
    assert_int_equal(coll_fp16_from_float(u2f(0x7fc00000u)), 0x7e00);
    assert_int_equal(coll_fp16_from_float(u2f(0xff802000u)), 0xfe01); /* sNaN: quiet, payload */
}

static void test_bf16_convert(void **state)
{
    (void)state;
    assert_int_equal(coll_bf16_from_float(1.0f), 0x3f80);
    assert_int_equal(coll_bf16_from_float(1.0f + 0x1p-8f), 0x3f80);     /* tie: even */
    assert_int_equal(coll_bf16_from_float(1.0f + 3 * 0x1p-8f), 0x3f82); /* tie: even */
    assert_int_equal(coll_bf16_from_float(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    assert_int_equal(coll_bf16_from_float(u2f(0x7f7fffffu)), 0x7f80); /* max -> inf */
    assert_int_equal(coll_bf16_from_float(u2f(0x7f800000u)), 0x7f80);
    assert_int_equal(coll_bf16_from_float(u2f(0xff800001u)), 0xffc0); /* sNaN: quiet */
    assert_int_equal(coll_bf16_from_float(u2f(0x7fffffffu)), 0x7fff);
    assert_int_equal(coll_bf16_from_float(u2f(0x00000001u)), 0x0000);
    assert_int_equal(f2u(coll_bf16_to_float(0x3f80)), f2u(1.0f));
    assert_int_equal(f2u(coll_bf16_to_float(0x8001)), 0x80010000u);
}

/* fp16/bf16 accumulate in fp32 and round once: 2048 + 1 + 1 is 2050 (each
 * step rounded in fp16 would give 2048). */
static void test_half_rounds_once(void **state)
{
    (void)state;
    for (int k = COLL_KERN_SCALAR; k <= coll_kern_best(); k++) {
        coll_kern_force(k);
        uint16_t a = coll_fp16_from_float(2048.0f);
        uint16_t b = coll_fp16_from_float(1.0f);
        const void *src[3] = {&a, &b, &b};
        uint16_t d;
        coll_reduce_n(&d, src, 3, 1, COLL_FP16, COLL_SUM);
        assert_int_equal(d, coll_fp16_from_float(2050.0f));
        assert_int_equal(d, 0x6801);

        uint16_t x = coll_bf16_from_float(256.0f);
        uint16_t y = coll_bf16_from_float(1.0f);
        const void *bs[3] = {&x, &y, &y};
        coll_reduce_n(&d, bs, 3, 1, COLL_BF16, COLL_SUM);
        assert_int_equal(d, coll_bf16_from_float(258.0f));
    }
    coll_kern_force(-1);
}

/* fp MAX/MIN: a NaN anywhere gives NaN; otherwise the usual order. */
static void test_nan_rules(void **state)
{
    (void)state;
    float nan = u2f(0x7fc00001u);
    for (int pos = 0; pos < 4; pos++) {
        float v[4][9];
        const void *src[4];
        float d[9];
        for (int k = 0; k < 4; k++) {
            for (int i = 0; i < 9; i++) {
                v[k][i] = (float)(k * 3 - i);
            }
            src[k] = v[k];
        }
        v[pos][5] = nan;
        for (int op = COLL_MAX; op <= COLL_MIN; op++) {
            coll_reduce_n(d, src, 4, 9, COLL_FP32, op);
            for (int i = 0; i < 9; i++) {
                if (i == 5) {
                    assert_true(isnan(d[i]));
                } else {
                    assert_true(d[i] == (float)(op == COLL_MAX ? 9 - i : -i));
                }
            }
        }
        double dv[4] = {1, 2, 3, 4};
        double dd;
        const void *ds[4] = {&dv[0], &dv[1], &dv[2], &dv[3]};
        dv[pos] = (double)NAN;
        coll_reduce_n(&dd, ds, 4, 1, COLL_FP64, COLL_MAX);
        assert_true(isnan(dd));
        coll_reduce_n(&dd, ds, 4, 1, COLL_FP64, COLL_MIN);
        assert_true(isnan(dd));

        uint16_t h[4];
        uint16_t hd;
        const void *hs[4] = {&h[0], &h[1], &h[2], &h[3]};
        for (int half = 0; half < 2; half++) {
            int dt = half ? COLL_BF16 : COLL_FP16;
            for (int k = 0; k < 4; k++) {
                h[k] = half ? coll_bf16_from_float((float)k) : coll_fp16_from_float((float)k);
            }
            h[pos] = half ? 0x7fc0 : 0x7e00;
            coll_reduce_n(&hd, hs, 4, 1, dt, COLL_MAX);
            assert_true(isnan(half ? coll_bf16_to_float(hd) : coll_fp16_to_float(hd)));
            coll_reduce_n(&hd, hs, 4, 1, dt, COLL_MIN);
            assert_true(isnan(half ? coll_bf16_to_float(hd) : coll_fp16_to_float(hd)));
        }
    }
}

static void test_int_wrap(void **state)
{
    (void)state;
    int32_t a = INT32_MAX, b = 1, d;
    const void *s2[2] = {&a, &b};
    coll_reduce_n(&d, s2, 2, 1, COLL_INT32, COLL_SUM);
    assert_int_equal(d, INT32_MIN);
    uint16_t ua = 65535, ub = 65535, ud;
    const void *u2[2] = {&ua, &ub};
    coll_reduce_n(&ud, u2, 2, 1, COLL_UINT16, COLL_PROD);
    assert_int_equal(ud, 1);
    int8_t ia = -1, ib = 1, id;
    const void *i2[2] = {&ia, &ib};
    coll_reduce_n(&id, i2, 2, 1, COLL_INT8, COLL_MAX);
    assert_int_equal(id, 1);
    coll_reduce_n(&id, i2, 2, 1, COLL_INT8, COLL_MIN);
    assert_int_equal(id, -1);
    uint8_t xa = 255, xb = 1, xd;
    const void *x2[2] = {&xa, &xb};
    coll_reduce_n(&xd, x2, 2, 1, COLL_UINT8, COLL_MAX);
    assert_int_equal(xd, 255);
    int64_t la = INT64_MIN, lb = -1, ld;
    const void *l2[2] = {&la, &lb};
    coll_reduce_n(&ld, l2, 2, 1, COLL_INT64, COLL_PROD);
    assert_true(ld == INT64_MIN);
    coll_reduce_n(&ld, l2, 2, 1, COLL_INT64, COLL_SUM);
    assert_true(ld == INT64_MAX);
}

/* coll_copy at every head alignment, odd sizes, streaming on and off;
 * guard bytes around the destination must stay untouched. */
static void test_copy(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 15, 63, 64, 65, 127, 4095, 4097, 100003};
    static const size_t nts[] = {0, 1, 64, 100000, 1u << 30};
    size_t cap = 100003 + 256;
    unsigned char *src = malloc(cap), *dst = malloc(cap), *want = malloc(cap);
    assert_non_null(src);
    assert_non_null(dst);
    assert_non_null(want);
    uint64_t seed = 3;
    for (size_t i = 0; i < cap; i++) {
        src[i] = (unsigned char)tc_rand(&seed);
    }
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        for (size_t doff = 0; doff < 70; doff += 3) {
            for (size_t soff = 0; soff < 5; soff++) {
                for (size_t ni = 0; ni < sizeof(nts) / sizeof(nts[0]); ni++) {
                    size_t n = sizes[si];
                    memset(dst, 0x5a, cap);
                    memset(want, 0x5a, cap);
                    memcpy(want + doff, src + soff, n);
                    coll_copy(dst + doff, src + soff, n, nts[ni]);
                    if (memcmp(dst, want, n + doff + 100) != 0) {
                        fail_msg("copy size %zu doff %zu soff %zu nt_min %zu", n, doff, soff,
                                 nts[ni]);
                    }
                }
            }
        }
    }
    /* the streaming body on its own, then fenced */
    memset(dst, 0, cap);
    coll_copy_stream(dst + 1, src, 100003);
    coll_store_fence();
    assert_memory_equal(dst + 1, src, 100003);
    /* dst == src is a no-op */
    memcpy(want, src, cap);
    coll_copy(src + 5, src + 5, 1000, 1);
    assert_memory_equal(src, want, cap);
    free(src);
    free(dst);
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_size),    cmocka_unit_test(test_reducible),
        cmocka_unit_test(test_reduce_all),    cmocka_unit_test(test_reduce_all_half_kernels),
        cmocka_unit_test(test_fp16_to_float), cmocka_unit_test(test_fp16_from_float),
        cmocka_unit_test(test_bf16_convert),  cmocka_unit_test(test_half_rounds_once),
        cmocka_unit_test(test_nan_rules),     cmocka_unit_test(test_int_wrap),
        cmocka_unit_test(test_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
