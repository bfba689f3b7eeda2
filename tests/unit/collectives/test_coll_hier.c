/*
 * Hierarchical direct collectives (coll/coll_hier.h) on thread ranks:
 * results against the serial reference in the documented order (group
 * partials in member order, then groups in order) for every dtype x op,
 * odd counts at odd addresses, in-place and overlapping forms, on groupings
 * 2x2, 2x4, 3+5, 4x4 round-robin, 8 one-rank groups and 2x33; barrier
 * counts; the cross-group byte counter against hand-computed values; the
 * choice against the flat path; bad groups and short scratch.
 */
#include "test_coll_harness.h"

#include <math.h>

/* Ranks a grouping may hold: thread worlds up to TC_MAXW, counting up to 256. */
#define TG_MAXR 256

typedef struct {
    int np;
    int group_of[TG_MAXR], index_of[TG_MAXR], first[TG_MAXR + 1], members[TG_MAXR];
    coll_groups_t g;
} tg_t;

/* Groups from each rank's label (labels numbered by lowest rank). */
static void tg_build(tg_t *t, int np, const int *label)
{
    int ng = 0;
    memset(t, 0, sizeof(*t));
    t->np = np;
    for (int r = 0; r < np; r++) {
        ng = label[r] + 1 > ng ? label[r] + 1 : ng;
    }
    int at = 0;
    for (int h = 0; h < ng; h++) {
        t->first[h] = at;
        for (int r = 0; r < np; r++) {
            if (label[r] == h) {
                t->group_of[r] = h;
                t->index_of[r] = at - t->first[h];
                t->members[at++] = r;
            }
        }
    }
    t->first[ng] = at;
    t->g = (coll_groups_t){ng, t->group_of, t->index_of, t->first, t->members};
}

enum { TG_2X2, TG_2X4, TG_3P5, TG_4X4RR, TG_8X1, TG_COUNT };

static void tg_make(tg_t *t, int which)
{
    int label[TG_MAXR];
    static const int np[TG_COUNT] = {4, 8, 8, 16, 8};
    for (int r = 0; r < np[which]; r++) {
        switch (which) {
        case TG_2X2:
            label[r] = r / 2;
            break;
        case TG_2X4:
            label[r] = r / 4;
            break;
        case TG_3P5:
            label[r] = r < 3 ? 0 : 1;
            break;
        case TG_4X4RR:
            label[r] = r % 4;
            break;
        default:
            label[r] = r;
            break;
        }
    }
    tg_build(t, np[which], label);
}

static const int tg_base_bar[COLL_HIER_KINDS] = {2, 0, 1, 1, 1};

/* Does the in-place form make some rank's in and out conflict? */
static int tg_conflict(tc_kind_t k, int inplace, int np)
{
    if (k == TC_REDUCESCATTER) {
        return (inplace == TC_ALIAS && np > 1) || inplace == TC_PARTIAL || inplace == TC_MIXED;
    }
    if (k == TC_ALLGATHER) {
        return inplace == TC_PARTIAL || inplace == TC_MIXED;
    }
    return 0;
}

static void tg_run(const tg_t *t, tc_kind_t k, int dtype, int op, size_t count, int inplace,
                   int root)
{
    tc_case_t c = tc_case(k, t->np, dtype, op, count);
    c.groups = &t->g;
    c.inplace = inplace;
    c.root = root;
    c.check_bar = 1;
    c.bar = count == 0 ? 0 : tg_base_bar[tc_hier_kind(k)] + tg_conflict(k, inplace, t->np);
    tc_run_case(&c);
}

static const size_t tg_counts[] = {0, 1, 7, 1001};

static void test_hier_reductions(void **state)
{
    (void)state;
    static const tc_kind_t kinds[] = {TC_ALLREDUCE, TC_REDUCESCATTER, TC_REDUCE};
    for (int which = 0; which < TG_COUNT; which++) {
        tg_t t;
        tg_make(&t, which);
        for (size_t ki = 0; ki < sizeof(kinds) / sizeof(kinds[0]); ki++) {
            for (size_t di = 0; di < sizeof(tc_reduce_types) / sizeof(int); di++) {
                for (int op = COLL_SUM; op <= COLL_MIN; op++) {
                    for (size_t ci = 0; ci < sizeof(tg_counts) / sizeof(size_t); ci++) {
                        tg_run(&t, kinds[ki], tc_reduce_types[di], op, tg_counts[ci], TC_OOP,
                               (int)ci % t.np);
                    }
                }
            }
        }
    }
}

static void test_hier_copies(void **state)
{
    (void)state;
    static const tc_kind_t kinds[] = {TC_ALLGATHER, TC_BROADCAST};
    for (int which = 0; which < TG_COUNT; which++) {
        tg_t t;
        tg_make(&t, which);
        for (size_t ki = 0; ki < 2; ki++) {
            for (size_t di = 0; di < sizeof(tc_copy_types) / sizeof(int); di++) {
                for (size_t ci = 0; ci < sizeof(tg_counts) / sizeof(size_t); ci++) {
                    for (int root = 0; root < t.np; root += 3) {
                        tg_run(&t, kinds[ki], tc_copy_types[di], COLL_SUM, tg_counts[ci], TC_OOP,
                               root);
                    }
                }
            }
        }
    }
}

/* Larger counts: pieces split into several sub-pieces and scratch slots. */
static void test_hier_large(void **state)
{
    (void)state;
    static const tc_kind_t kinds[] = {TC_ALLREDUCE, TC_REDUCESCATTER, TC_REDUCE, TC_ALLGATHER,
                                      TC_BROADCAST};
    static const int types[] = {COLL_FP32, COLL_BF16, COLL_FP16, COLL_INT8, COLL_FP64};
    for (int which = 0; which < TG_COUNT; which++) {
        tg_t t;
        tg_make(&t, which);
        for (size_t ki = 0; ki < 5; ki++) {
            for (size_t di = 0; di < 5; di++) {
                tg_run(&t, kinds[ki], types[di], COLL_SUM, 40009, TC_OOP, t.np - 1);
            }
        }
    }
}

static void test_hier_inplace(void **state)
{
    (void)state;
    static const tc_kind_t kinds[] = {TC_ALLREDUCE, TC_REDUCESCATTER, TC_REDUCE, TC_ALLGATHER};
    static const int forms[] = {TC_INPLACE, TC_ALIAS, TC_PARTIAL, TC_MIXED};
    for (int which = 0; which < TG_COUNT; which++) {
        tg_t t;
        tg_make(&t, which);
        for (size_t ki = 0; ki < 4; ki++) {
            for (size_t fi = 0; fi < 4; fi++) {
                for (size_t ci = 1; ci < sizeof(tg_counts) / sizeof(size_t); ci++) {
                    tg_run(&t, kinds[ki], COLL_FP32, COLL_SUM, tg_counts[ci], forms[fi], 1);
                    tg_run(&t, kinds[ki], COLL_BF16, COLL_MAX, tg_counts[ci], forms[fi], 2);
                }
            }
        }
    }
}

/* More ranks than the stack's pointer arrays hold (COLL_PTRS_INLINE). */
static void test_hier_many_ranks(void **state)
{
    (void)state;
    int label[TG_MAXR];
    tg_t t;
    for (int r = 0; r < 66; r++) {
        label[r] = r % 2;
    }
    tg_build(&t, 66, label);
    /* twice: a second run gives the same bits (both against one reference) */
    tg_run(&t, TC_ALLREDUCE, COLL_FP32, COLL_SUM, 3001, TC_INPLACE, 0);
    tg_run(&t, TC_ALLREDUCE, COLL_FP32, COLL_SUM, 3001, TC_INPLACE, 0);
    tg_run(&t, TC_REDUCESCATTER, COLL_BF16, COLL_SUM, 77, TC_INPLACE, 0);
    tg_run(&t, TC_ALLGATHER, COLL_INT32, COLL_SUM, 77, TC_OOP, 0);
    tg_run(&t, TC_REDUCE, COLL_FP16, COLL_SUM, 3001, TC_OOP, 65);
    tg_run(&t, TC_BROADCAST, COLL_FP64, COLL_SUM, 3001, TC_OOP, 64);
}

/* 2 groups x 4 ranks, 1024 fp32 (4 KiB): every piece 512 B, sub-pieces 256 B. */
static void test_hier_cost(void **state)
{
    (void)state;
    tg_t t;
    tg_make(&t, TG_2X4);
    /* hier read, hier written, flat read, flat written */
    static const uint64_t want[COLL_HIER_KINDS][4] = {
        /* AllReduce: 2 (G-1) S; flat: 4 remote slices in and out per rank */
        {2 * 4096, 0, 8 * 4 * 512, 8 * 4 * 512},
        /* AllGather: (G-1) n B; flat pull: 4 remote blocks per rank */
        {8 * 4096, 0, 8 * 4 * 4096, 0},
        /* ReduceScatter: (G-1) n B; flat: 4 remote blocks per rank */
        {8 * 4096, 0, 8 * 4 * 4096, 0},
        /* Broadcast from 0: (G-1) S; flat: 4 remote ranks pull S */
        {4096, 0, 4 * 4096, 0},
        /* Reduce to 0: (G-1) S; flat: 4 remote slices read per rank, group 1's
         * slices written into out[0] */
        {4096, 0, 8 * 4 * 512, 4 * 512},
    };
    for (int k = 0; k < COLL_HIER_KINDS; k++) {
        coll_hier_cost_t c;
        assert_int_equal(coll_hier_cost(k, &t.g, NULL, 0, 1024, COLL_FP32, &c), ZC_OK);
        assert_int_equal(c.hier.read, want[k][0]);
        assert_int_equal(c.hier.written, want[k][1]);
        assert_int_equal(c.flat.read, want[k][2]);
        assert_int_equal(c.flat.written, want[k][3]);
        assert_int_equal(c.hier_barriers, tg_base_bar[k]);
    }
}

/* fp16 / bf16: partials cross as fp32, AllReduce's results as dtype. 2 groups
 * x 4 ranks, 2048 elements (4 KiB). */
static void test_hier_cost_half(void **state)
{
    (void)state;
    tg_t t;
    tg_make(&t, TG_2X4);
    /* hier read: AllReduce 2 (G-1) S + (G-1) S; Reduce 2 (G-1) S; ReduceScatter 2 (G-1) n B */
    static const uint64_t want[COLL_HIER_KINDS] = {3 * 4096, 8 * 4096, 2 * 8 * 4096, 4096,
                                                   2 * 4096};
    for (int k = 0; k < COLL_HIER_KINDS; k++) {
        coll_hier_cost_t c, f;
        assert_int_equal(coll_hier_cost(k, &t.g, NULL, 0, 2048, COLL_BF16, &c), ZC_OK);
        assert_int_equal(coll_hier_cost(k, &t.g, NULL, 0, 1024, COLL_FP32, &f), ZC_OK);
        assert_int_equal(c.hier.read, want[k]);
        assert_int_equal(c.hier.written, 0);
        assert_memory_equal(&c.flat, &f.flat, sizeof(c.flat));
    }
}

/* Bytes crossing group boundaries (read + written) for 8, 64 and 256 ranks
 * on 2 and 4 contiguous groups, 16 MiB of fp32 per op (AllGather and
 * ReduceScatter: the whole gathered / scattered buffer): hierarchical must
 * cross less than flat in every case (benchmarks/topo_cost prints the
 * figures, docs/perf-log.md). */
static void test_hier_cost_table(void **state)
{
    (void)state;
    static const int nps[] = {8, 64, 256};
    size_t total = (size_t)4 << 20; /* elements */
    int label[TG_MAXR];
    for (int k = 0; k < COLL_HIER_KINDS; k++) {
        for (size_t ni = 0; ni < 3; ni++) {
            for (int ng = 2; ng <= 4; ng += 2) {
                int np = nps[ni];
                for (int r = 0; r < np; r++) {
                    label[r] = r / (np / ng);
                }
                tg_t t;
                tg_build(&t, np, label);
                size_t count = k == COLL_HIER_ALLGATHER || k == COLL_HIER_REDUCESCATTER
                                   ? total / (size_t)np
                                   : total;
                coll_hier_cost_t c;
                assert_int_equal(coll_hier_cost(k, &t.g, NULL, 0, count, COLL_FP32, &c), ZC_OK);
                assert_true(c.hier.read + c.hier.written < c.flat.read + c.flat.written);
            }
        }
    }
}

/* Counted across another grouping than the algorithm's: the algorithm over
 * 4 groups of 2, counted across its own groups (NULL or the same groups),
 * across 2 groups of 4 (a coarser level), and across one-rank groups (every
 * byte moved between ranks); a grouping of other ranks is refused. */
static void test_hier_cost_across(void **state)
{
    (void)state;
    tg_t fine, coarse, single, other;
    int label[8];
    for (int r = 0; r < 8; r++) {
        label[r] = r;
    }
    tg_build(&fine, 8, (const int[]){0, 0, 1, 1, 2, 2, 3, 3});
    tg_make(&coarse, TG_2X4);
    tg_build(&single, 8, label);
    tg_make(&other, TG_2X2); /* 4 ranks */
    coll_hier_cost_t own, same, c, all;
    const size_t s = 8192; /* uint8 elements: S bytes */
    assert_int_equal(coll_hier_cost(COLL_HIER_ALLREDUCE, &fine.g, NULL, 0, s, COLL_UINT8, &own),
                     ZC_OK);
    assert_int_equal(coll_hier_cost(COLL_HIER_ALLREDUCE, &fine.g, &fine.g, 0, s, COLL_UINT8, &same),
                     ZC_OK);
    assert_memory_equal(&own, &same, sizeof(own));
    assert_int_equal(own.hier.read + own.hier.written, 6 * s); /* 2 (G - 1) S */
    assert_int_equal(own.flat.read + own.flat.written, 12 * s);
    assert_int_equal(coll_hier_cost(COLL_HIER_ALLREDUCE, &fine.g, &coarse.g, 0, s, COLL_UINT8, &c),
                     ZC_OK);
    assert_int_equal(c.hier.read + c.hier.written, 4 * s);
    assert_int_equal(c.flat.read + c.flat.written, 8 * s);
    assert_int_equal(c.hier_barriers, own.hier_barriers);
    assert_int_equal(
        coll_hier_cost(COLL_HIER_ALLREDUCE, &fine.g, &single.g, 0, s, COLL_UINT8, &all), ZC_OK);
    assert_int_equal(all.flat.read + all.flat.written, 14 * s); /* 2 S (n - 1) */
    assert_true(all.hier.read + all.hier.written >= 6 * s);
    assert_int_equal(coll_hier_cost(COLL_HIER_ALLREDUCE, &fine.g, &other.g, 0, s, COLL_UINT8, &c),
                     ZC_ERR_INVAL);
}

/* Chosen only with several groups, some of two ranks or more, from
 * COLL_HIER_MIN_BYTES; where chosen it crosses less than flat. */
static void test_hier_worth(void **state)
{
    (void)state;
    int one[8] = {0};
    tg_t t;
    tg_build(&t, 8, one);
    assert_int_equal(coll_hier_worth(&t.g, COLL_HIER_ALLREDUCE, (size_t)64 << 20), 0);
    tg_make(&t, TG_8X1);
    assert_int_equal(coll_hier_worth(&t.g, COLL_HIER_ALLREDUCE, (size_t)64 << 20), 0);
    tg_make(&t, TG_2X4);
    assert_int_equal(coll_hier_worth(&t.g, COLL_HIER_ALLREDUCE, COLL_HIER_MIN_BYTES - 1), 0);
    assert_int_equal(coll_hier_worth(&t.g, COLL_HIER_ALLREDUCE, COLL_HIER_MIN_BYTES), 1);
    assert_int_equal(coll_hier_worth(&t.g, COLL_HIER_ALLGATHER, COLL_HIER_MIN_BYTES / 8), 1);
    assert_int_equal(coll_hier_worth(&t.g, COLL_HIER_ALLGATHER, COLL_HIER_MIN_BYTES / 8 - 1), 0);
    assert_int_equal(coll_hier_worth(&t.g, COLL_HIER_KINDS, COLL_HIER_MIN_BYTES), 0);
    for (int which = 0; which < TG_COUNT; which++) {
        tg_make(&t, which);
        for (int k = 0; k < COLL_HIER_KINDS; k++) {
            coll_hier_cost_t c;
            assert_int_equal(coll_hier_cost(k, &t.g, NULL, t.np - 1, 1 << 16, COLL_FP32, &c),
                             ZC_OK);
            uint64_t h = c.hier.read + c.hier.written;
            uint64_t f = c.flat.read + c.flat.written;
            if (coll_hier_worth(&t.g, k, (size_t)4 << 20)) {
                assert_true(h < f);
            }
        }
    }
}

static const int tg_halfs[2] = {COLL_FP16, COLL_BF16};

/* fp16 / bf16 inputs of every class: mostly values whose sums land on or
 * next to rounding ties (powers of two near 1 and small multiples of their
 * last bits), and some denormals, infinities, NaNs with random payloads
 * (quiet and signalling) and raw bit patterns. */
static void tg_special(void *p, int dtype, int r, size_t elem, uint64_t *seed)
{
    (void)r;
    (void)elem;
    uint64_t x = tc_rand(seed);
    int bf = dtype == COLL_BF16;
    int m = bf ? 7 : 10;
    uint16_t expo = bf ? 0x7f80 : 0x7c00;
    uint16_t bits = (uint16_t)(x >> 16) & (uint16_t)((1u << m) - 1u);
    uint16_t sign = (uint16_t)(((x >> 40) & 1u) << 15);
    uint16_t h;
    int e = (int)((x >> 20) % 5) - 2;
    float v = (x & 32u) ? ldexpf((float)((x >> 12) % 5), e - m - 1 - (int)((x >> 44) % 3))
                        : ldexpf(1.0f + (float)((x >> 8) & 7u) * ldexpf(1.0f, -m), e);
    switch (x % 32) {
    case 0:
        h = (uint16_t)(x >> 48);
        break;
    case 1:
        h = sign | bits; /* denormal */
        break;
    case 2:
        h = sign | expo;
        break;
    case 3:
        h = sign | expo | bits | 1u; /* NaN */
        break;
    default:
        h = sign | (bf ? coll_bf16_from_float(v) : coll_fp16_from_float(v));
        break;
    }
    memcpy(p, &h, 2);
}

/* fp16 / bf16 SUM and PROD on uneven groups (3 + 5, 1 + 2 + 5) against the
 * reference with fp32 partials, bit for bit, on every kernel the CPU runs. */
static void test_hier_half_special(void **state)
{
    (void)state;
    static const tc_kind_t kinds[] = {TC_ALLREDUCE, TC_REDUCESCATTER, TC_REDUCE};
    static const int label[8] = {0, 1, 1, 2, 2, 2, 2, 2};
    tg_t ts[2];
    tg_make(&ts[0], TG_3P5);
    tg_build(&ts[1], 8, label);
    for (int kern = COLL_KERN_SCALAR; kern <= coll_kern_best(); kern++) {
        coll_kern_force(kern);
        for (int ti = 0; ti < 2; ti++) {
            for (size_t ki = 0; ki < 3; ki++) {
                for (int di = 0; di < 2; di++) {
                    for (int op = COLL_SUM; op <= COLL_PROD; op++) {
                        tc_case_t c = tc_case(kinds[ki], 8, tg_halfs[di], op, 1001);
                        c.groups = &ts[ti].g;
                        c.root = 3;
                        c.value = tg_special;
                        tc_run_case(&c);
                    }
                }
            }
        }
    }
    coll_kern_force(-1);
}

/* Rank r's input on 2 x 2 ranks: 1, t, t, 0 with t half an ulp of 1. */
static void tg_tie(void *p, int dtype, int r, size_t elem, uint64_t *seed)
{
    (void)elem;
    (void)seed;
    float t = dtype == COLL_BF16 ? 0x1p-8f : 0x1p-11f;
    float v = r == 0 ? 1.0f : r == 3 ? 0.0f : t;
    uint16_t h = dtype == COLL_BF16 ? coll_bf16_from_float(v) : coll_fp16_from_float(v);
    memcpy(p, &h, 2);
}

/* One rounding: (1 + t) + (t + 0) is 1 + 2t, representable; rounding the
 * partial 1 + t (a tie, to even: 1) first would give 1 + t, a tie again: 1. */
static void test_hier_single_rounding(void **state)
{
    (void)state;
    static const tc_kind_t kinds[] = {TC_ALLREDUCE, TC_REDUCESCATTER, TC_REDUCE};
    static const uint16_t one[2] = {0x3c00, 0x3f80}, once[2] = {0x3c01, 0x3f81};
    tg_t t;
    tg_make(&t, TG_2X2);
    for (int di = 0; di < 2; di++) {
        int dt = tg_halfs[di];
        uint16_t in[4], got;
        const void *src[4] = {&in[0], &in[1], &in[2], &in[3]};
        for (int r = 0; r < 4; r++) {
            tg_tie(&in[r], dt, r, 0, NULL);
        }
        tc_case_t c = tc_case(TC_ALLREDUCE, 4, dt, COLL_SUM, 1);
        c.groups = &t.g;
        tc_ref_order(&c, &got, src, 1);
        assert_int_equal(got, once[di]);
        const void *pair[2] = {&got, &in[2]};
        tc_ref_reduce(&got, src, 2, 1, dt, COLL_SUM);
        tc_ref_reduce(&got, pair, 2, 1, dt, COLL_SUM);
        assert_int_equal(got, one[di]); /* rounded twice */
        for (size_t ki = 0; ki < 3; ki++) {
            c = tc_case(kinds[ki], 4, dt, COLL_SUM, 77);
            c.groups = &t.g;
            c.root = 1;
            c.value = tg_tie;
            tc_run_case(&c);
        }
    }
}

/* Bad groups and short scratch: every rank fails alike, no barrier. */
static void test_hier_errors(void **state)
{
    (void)state;
    tg_t t;
    tg_make(&t, TG_2X4);
    t.index_of[5] = 0;
    tc_case_t c = tc_case(TC_ALLREDUCE, 8, COLL_FP32, COLL_SUM, 100);
    c.groups = &t.g;
    c.expect_status = ZC_ERR_INVAL;
    c.check_bar = 1;
    c.bar = 0;
    tc_run_case(&c);
    tg_make(&t, TG_2X4);
    t.first[2] = 7;
    tc_run_case(&c);
    tg_make(&t, TG_2X4);
    c.scr_short = 1;
    tc_run_case(&c);
    c.kind = TC_REDUCESCATTER;
    tc_run_case(&c);
    size_t need;
    assert_int_equal(coll_hier_scratch_bytes(COLL_HIER_KINDS, &t.g, 1, COLL_FP32, &need),
                     ZC_ERR_INVAL);
    assert_int_equal(coll_hier_scratch_bytes(COLL_HIER_ALLREDUCE, &t.g, 1, 13, &need),
                     ZC_ERR_INVAL);
    assert_int_equal(coll_hier_check_groups(NULL, 8), ZC_ERR_PTR);
    t.g.ngroups = 0;
    assert_int_equal(coll_hier_check_groups(&t.g, 8), ZC_ERR_INVAL);
}

/* The scratch formulas of coll/coll_hier.h, on 3+5 ranks, 1001 elements:
 * AllReduce / Reduce pieces of 126 -> 128 elements (whole lines of fp32;
 * 4 lines of fp16), ceil(8 / 3) slots; ReduceScatter: group of 3 deals 5
 * blocks (2 slots), group of 5 deals 3 (1 slot), and one more slot for the
 * rank's own group's partial; fp16 / bf16 partials are fp32. */
static void test_hier_scratch(void **state)
{
    (void)state;
    static const struct {
        int kind, dtype;
        size_t want;
    } cases[] = {
        {COLL_HIER_ALLREDUCE, COLL_FP32, 3 * 128 * 4},
        {COLL_HIER_REDUCE, COLL_FP32, 3 * 128 * 4},
        {COLL_HIER_REDUCESCATTER, COLL_FP32, 3 * 1001 * 4},
        {COLL_HIER_ALLGATHER, COLL_FP32, 1001 * 4},
        {COLL_HIER_BROADCAST, COLL_FP32, 0},
        {COLL_HIER_ALLREDUCE, COLL_FP16, 3 * 128 * 4},
        {COLL_HIER_REDUCESCATTER, COLL_BF16, 3 * 1001 * 4},
        {COLL_HIER_ALLGATHER, COLL_BF16, 1001 * 2},
        {COLL_HIER_ALLREDUCE, COLL_INT8, 3 * 128},
    };
    tg_t t;
    tg_make(&t, TG_3P5);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t b;
        assert_int_equal(coll_hier_scratch_bytes(cases[i].kind, &t.g, 1001, cases[i].dtype, &b), 0);
        assert_int_equal(b, cases[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hier_cost),         cmocka_unit_test(test_hier_cost_table),
        cmocka_unit_test(test_hier_cost_across),  cmocka_unit_test(test_hier_worth),
        cmocka_unit_test(test_hier_scratch),      cmocka_unit_test(test_hier_errors),
        cmocka_unit_test(test_hier_copies),       cmocka_unit_test(test_hier_inplace),
        cmocka_unit_test(test_hier_large),        cmocka_unit_test(test_hier_many_ranks),
        cmocka_unit_test(test_hier_reductions),   cmocka_unit_test(test_hier_cost_half),
        cmocka_unit_test(test_hier_half_special), cmocka_unit_test(test_hier_single_rounding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
