/*
 * Unit tests of the fused fp16/bf16 reduction kernels (coll_kernel_half.c):
 * the picker never chooses a kernel the CPU cannot run and reads ZCCL_KERNEL
 * values as documented; every kernel this CPU runs gives bitwise the scalar
 * kernel's result on random bit patterns (denormals, +-0, infinities, NaNs
 * with payloads), on sums that land on and next to rounding ties, for 1..9
 * sources, odd counts, odd addresses and dst equal to each source in turn;
 * every fp16 / bf16 value passes through each kernel as the rules say; and
 * the wide forms (fp32 partials) agree with the kernels and the reference.
 */
#include "test_coll_harness.h"

#include <math.h>

/* What the CPU and the OS allow, asked independently of the library (GCC's
 * checks include the OS saving the vector state). */
static int cpu_can(int kern)
{
    __builtin_cpu_init();
    switch (kern) {
    case COLL_KERN_SCALAR:
        return 1;
    case COLL_KERN_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case COLL_KERN_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    case COLL_KERN_AVX512BF16:
        return cpu_can(COLL_KERN_AVX512) && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512bf16");
    default:
        return 0;
    }
}

static void test_picker(void **state)
{
    (void)state;
    int best = coll_kern_best();
    assert_true(best >= 0 && best < COLL_KERN_COUNT);
    assert_true(cpu_can(best));
    for (int k = best + 1; k < COLL_KERN_COUNT; k++) {
        assert_false(cpu_can(k)); /* best is the best */
    }
    assert_true(cpu_can(coll_kern_active()));
    for (int k = 0; k < COLL_KERN_COUNT; k++) {
        coll_kern_force(k);
        assert_true(cpu_can(coll_kern_active()));
        assert_int_equal(coll_kern_active(), k <= best ? k : best);
    }
    coll_kern_force(-1);
    for (int b = 0; b < COLL_KERN_COUNT; b++) {
        assert_int_equal(coll_kern_pick(NULL, b), b);
        assert_int_equal(coll_kern_pick("", b), b);
        assert_int_equal(coll_kern_pick("auto", b), b);
        assert_int_equal(coll_kern_pick("scalar", b), COLL_KERN_SCALAR);
        assert_int_equal(coll_kern_pick("avx2", b), b >= 1 ? COLL_KERN_AVX2 : b);
        assert_int_equal(coll_kern_pick("avx512", b), b >= 2 ? COLL_KERN_AVX512 : b);
        assert_int_equal(coll_kern_pick("avx512bf16", b), b);
        assert_int_equal(coll_kern_pick("avx1024", b), b);
        assert_int_equal(coll_kern_pick("AVX2", b), b);
    }
    assert_string_equal(coll_kern_name(COLL_KERN_AVX512BF16), "avx512bf16");
}

/* One element of input: raw bits (any class of value), or a value whose sum
 * with its neighbours lands on or next to a rounding tie: a power of two
 * times 1 + small, and a fraction of that power at the last bits kept. */
static uint16_t half_value(int dt, uint64_t *seed, int tie_mode)
{
    uint64_t r = tc_rand(seed);
    if (!tie_mode) {
        return (uint16_t)r;
    }
    int mant = dt == COLL_BF16 ? 7 : 10;
    int e = (int)((r >> 20) % 5) - 2; /* near 1.0: 0.25 .. 4 */
    float big = ldexpf(1.0f + (float)((r >> 8) & 7u) * ldexpf(1.0f, -mant), e);
    float small = ldexpf((float)((r >> 12) % 5), e - mant - 1 - (int)((r >> 16) % 3));
    float v = (r & 1u) ? big : small;
    if (r & 2u) {
        v = -v;
    }
    return dt == COLL_BF16 ? coll_bf16_from_float(v) : coll_fp16_from_float(v);
}

static void check_same_bits(int dt, int tie_mode)
{
    static const size_t counts[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 100, 4099};
    enum { MAXN = 9, MAXC = 4099 };
    uint16_t *raw[MAXN], *want = malloc(MAXC * 2 + 8), *dst = malloc(MAXC * 2 + 8);
    assert_non_null(want);
    assert_non_null(dst);
    for (int k = 0; k < MAXN; k++) {
        raw[k] = malloc(MAXC * 2 + 16);
        assert_non_null(raw[k]);
    }
    uint64_t seed = 1234 + (uint64_t)tie_mode;
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        size_t count = counts[ci];
        size_t bytes = count * 2;
        for (int n = 1; n <= MAXN; n++) {
            const void *src[MAXN];
            unsigned char *orig[MAXN];
            for (int k = 0; k < n; k++) {
                /* source k at byte offset k: odd addresses and every alignment */
                orig[k] = (unsigned char *)raw[k] + k;
                for (size_t i = 0; i < count; i++) {
                    uint16_t v = half_value(dt, &seed, tie_mode);
                    memcpy(orig[k] + i * 2, &v, 2);
                }
            }
            for (int op = COLL_SUM; op <= COLL_MIN; op++) {
                coll_kern_force(COLL_KERN_SCALAR);
                for (int k = 0; k < n; k++) {
                    src[k] = orig[k];
                }
                coll_reduce_half((char *)want + 1, src, 0, n, count, dt, op);
                for (int kern = COLL_KERN_SCALAR; kern <= coll_kern_best(); kern++) {
                    coll_kern_force(kern);
                    /* alias -1: a separate dst; else dst is src[alias] */
                    for (int alias = -1; alias < n; alias++) {
                        unsigned char save[MAXC * 2];
                        if (alias >= 0) {
                            memcpy(save, orig[alias], bytes);
                        }
                        void *d = alias < 0 ? (char *)dst + 3 : (void *)orig[alias];
                        coll_reduce_half(d, src, 0, n, count, dt, op);
                        if (memcmp(d, (char *)want + 1, bytes) != 0) {
                            fail_msg("dtype %d op %d n %d count %zu alias %d kernel %s differs", dt,
                                     op, n, count, alias, coll_kern_name(kern));
                        }
                        if (alias >= 0) {
                            memcpy(orig[alias], save, bytes);
                        }
                    }
                }
            }
        }
    }
    coll_kern_force(-1);
    for (int k = 0; k < MAXN; k++) {
        free(raw[k]);
    }
    free(want);
    free(dst);
}

static void test_same_bits_fp16(void **state)
{
    (void)state;
    check_same_bits(COLL_FP16, 0);
    check_same_bits(COLL_FP16, 1);
}

static void test_same_bits_bf16(void **state)
{
    (void)state;
    check_same_bits(COLL_BF16, 0);
    check_same_bits(COLL_BF16, 1);
}

/* Every value plus -0 through each kernel: itself (denormals kept), NaNs
 * quietened with their payload; and next to an offset source (src_off). */
static void test_every_value(void **state)
{
    (void)state;
    static uint16_t x[65536 + 1], z[65536 + 1], out[65536];
    for (int dti = 0; dti < 2; dti++) {
        int dt = dti ? COLL_BF16 : COLL_FP16;
        uint16_t quiet = dt == COLL_BF16 ? 0x40 : 0x200;
        uint16_t expo = dt == COLL_BF16 ? 0x7f80 : 0x7c00;
        for (uint32_t i = 0; i < 65536; i++) {
            x[i + 1] = (uint16_t)i;
            z[i + 1] = 0x8000;
        }
        for (int kern = COLL_KERN_SCALAR; kern <= coll_kern_best(); kern++) {
            coll_kern_force(kern);
            const void *src[2] = {x, z};
            coll_reduce_half(out, src, 2, 2, 65536, dt, COLL_SUM);
            for (uint32_t i = 0; i < 65536; i++) {
                int nan = (i & expo) == expo && (i & (uint32_t) ~(expo | 0x8000u)) != 0;
                if (out[i] != (nan ? (i | quiet) : i)) {
                    fail_msg("dtype %d kernel %s: %04x -> %04x", dt, coll_kern_name(kern), i,
                             out[i]);
                }
            }
        }
    }
    coll_kern_force(-1);
}

/* The rules on their own: one rounding of the fp32 sum, ties to even. */
static void test_ties(void **state)
{
    (void)state;
    for (int kern = COLL_KERN_SCALAR; kern <= coll_kern_best(); kern++) {
        coll_kern_force(kern);
        uint16_t a = coll_bf16_from_float(1.0f), b = coll_bf16_from_float(0x1p-8f);
        uint16_t c = coll_bf16_from_float(0x1p-9f), d[1];
        const void *s2[2] = {&a, &b}, *s3[3] = {&a, &c, &c};
        coll_reduce_half(d, s2, 0, 2, 1, COLL_BF16, COLL_SUM);
        assert_int_equal(d[0], 0x3f80); /* 1 + 2^-8: a tie, to even (down) */
        coll_reduce_half(d, s3, 0, 3, 1, COLL_BF16, COLL_SUM);
        assert_int_equal(d[0], 0x3f80); /* the same sum in two steps, rounded once */
        a = coll_bf16_from_float(1.0f + 0x1p-7f);
        coll_reduce_half(d, s2, 0, 2, 1, COLL_BF16, COLL_SUM);
        assert_int_equal(d[0], 0x3f82); /* tie, to even (up) */
        uint16_t h = coll_fp16_from_float(1.0f), hb = coll_fp16_from_float(0x1p-11f);
        const void *h2[2] = {&h, &hb};
        coll_reduce_half(d, h2, 0, 2, 1, COLL_FP16, COLL_SUM);
        assert_int_equal(d[0], 0x3c00);
        h = coll_fp16_from_float(1.0f + 0x1p-10f);
        coll_reduce_half(d, h2, 0, 2, 1, COLL_FP16, COLL_SUM);
        assert_int_equal(d[0], 0x3c02);
    }
    coll_kern_force(-1);
}

/* The wide forms (fp32 partials) on the kernel in force, over C elements of
 * N sources: folded into fp32 and that one source rounded, the fused
 * kernel's bits; (in0 op in1) op (in2 op in3 op in4), each partial in
 * fp32, the reference's bits, the partials too. */
enum { WN = 5, WC = 999 };

static void check_wide(uint16_t in[WN][WC], int dt, int op)
{
    static uint16_t want[WC], got[WC];
    static float wide[2][WC];
    const void *src[WN] = {in[0], in[1], in[2], in[3], in[4]};
    const void *w0[1] = {wide[0]}, *w2[2] = {wide[0], wide[1]};
    coll_reduce_wide(wide[0], COLL_FP32, src, dt, WN, WC, op);
    coll_reduce_wide(got, dt, w0, COLL_FP32, 1, WC, op);
    coll_reduce_half(want, src, 0, WN, WC, dt, op);
    assert_memory_equal(got, want, sizeof(got));
    coll_reduce_wide(wide[0], COLL_FP32, src, dt, 2, WC, op);
    coll_reduce_wide(wide[1], COLL_FP32, src + 2, dt, 3, WC, op);
    coll_reduce_wide(got, dt, w2, COLL_FP32, 2, WC, op);
    for (size_t i = 0; i < WC; i++) {
        float p[WN];
        for (int k = 0; k < WN; k++) {
            p[k] = tc_half_get(in[k], i, dt);
        }
        float p0 = tc_wide_op(p[0], p[1], op);
        float r = tc_wide_op(p0, tc_wide_op(tc_wide_op(p[2], p[3], op), p[4], op), op);
        uint16_t h = dt == COLL_BF16 ? coll_bf16_from_float(r) : coll_fp16_from_float(r);
        assert_memory_equal(&wide[0][i], &p0, 4);
        assert_int_equal(got[i], h);
    }
}

/* Random bit patterns and near ties, fp16 and bf16, every op and kernel. */
static void test_wide(void **state)
{
    (void)state;
    static uint16_t in[WN][WC];
    uint64_t seed = 99;
    for (int dti = 0; dti < 4; dti++) {
        int dt = dti & 1 ? COLL_BF16 : COLL_FP16;
        for (int k = 0; k < WN; k++) {
            for (size_t i = 0; i < WC; i++) {
                in[k][i] = half_value(dt, &seed, dti >> 1);
            }
        }
        for (int kern = COLL_KERN_SCALAR; kern <= coll_kern_best(); kern++) {
            coll_kern_force(kern);
            for (int op = COLL_SUM; op <= COLL_MIN; op++) {
                check_wide(in, dt, op);
            }
        }
    }
    coll_kern_force(-1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_picker),         cmocka_unit_test(test_same_bits_fp16),
        cmocka_unit_test(test_same_bits_bf16), cmocka_unit_test(test_every_value),
        cmocka_unit_test(test_ties),           cmocka_unit_test(test_wide),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
