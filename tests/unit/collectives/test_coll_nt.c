/*
 * The choice between cached and streaming stores (coll_nt.c): the size rule,
 * the reuse history that finds an output still cached or long evicted, the
 * trial of both kinds near the cache's size (fed made-up timings), and that
 * AllReduce and AllGather stay exact whichever kind each op takes (threads
 * as ranks, the serial reference, bytewise compare).
 */
#include "test_coll_harness.h"

#include "zc/sync.h"

#define MIB ((size_t)1 << 20)

/* Fake buffers: the choice looks at addresses only, never at the bytes. */
#define NT_BUF(i) ((char *)(uintptr_t)(((uintptr_t)(i) + 1) << 32))

/* Ops a trial's verdict holds: the first trial's, and any later one's. */
#define NT_FIRST 64
#define NT_EVERY 1024
/* A trial runs the prior, the other kind, the prior: 4 ops each where
 * cached is the prior (4 cached, 4 streaming, 4 cached) */
#define NT_TRIAL_OTHER 4
#define NT_TRIAL_OPS (8 + NT_TRIAL_OTHER)
/* Where streaming is the prior (W to 2 W): 4 streaming, 8 cached, 4 streaming. */
#define NT_TRIAL_OTHER_LONG 8
#define NT_TRIAL_OPS_LONG (8 + NT_TRIAL_OTHER_LONG)

/* nt_min 8 MiB: the window is 16 MiB of op data. */
static const coll_tuning_t nt_tune = {16384, 8u << 20, 0};

/* The ops' common start (coll_args_t.start_ns) that nt_pick passes. */
static uint64_t nt_start_ns;

/* The choice of rank 0 of np for an op reading in and writing out (this
 * rank's ranges) of in_bytes and out_bytes. */
static int nt_pick(coll_reuse_t *r, int np, const void *in, size_t in_bytes, void *out,
                   size_t out_bytes)
{
    const void *ins[TC_MAXR] = {in};
    void *outs[TC_MAXR] = {out};
    coll_args_t a;
    memset(&a, 0, sizeof(a));
    a.nranks = np;
    a.in = ins;
    a.out = outs;
    a.tune = &nt_tune;
    a.reuse = r;
    a.start_ns = nt_start_ns;
    return coll_nt_choose(&a, in_bytes, out_bytes);
}

/* An AllReduce-shaped op of `bytes` per rank on buffer set i (in and out apart). */
static int nt_ar(coll_reuse_t *r, int np, int i, size_t bytes)
{
    return nt_pick(r, np, NT_BUF(2 * i), bytes, NT_BUF(2 * i + 1), bytes);
}

static void test_size_rule(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    /* Without a history: the size rule, from 16 MiB of data over all ranks. */
    assert_int_equal(nt_ar(NULL, 2, 0, 4 * MIB - 64), 0);
    assert_int_equal(nt_ar(NULL, 2, 0, 4 * MIB), 1);
    assert_int_equal(nt_ar(NULL, 4, 0, 2 * MIB - 64), 0);
    assert_int_equal(nt_ar(NULL, 4, 0, 2 * MIB), 1);
    /* 3 ranks: the share of 16 MiB rounds up (5,592,406 bytes per rank). */
    assert_int_equal(nt_pick(NULL, 3, NT_BUF(0), 2796202, NT_BUF(1), 2796203), 0);
    assert_int_equal(nt_pick(NULL, 3, NT_BUF(0), 2796203, NT_BUF(1), 2796203), 1);
    /* Below 256 KiB of data: cached, and not even noted. */
    assert_int_equal(nt_ar(&r, 2, 0, 32 << 10), 0);
    assert_int_equal(r.clock, 0);
    /* nt_min 0: never streaming. */
    coll_tuning_t never = {16384, 0, 0};
    const void *ins[TC_MAXR] = {NT_BUF(0)};
    void *outs[TC_MAXR] = {NT_BUF(1)};
    coll_args_t a;
    memset(&a, 0, sizeof(a));
    a.nranks = 2;
    a.in = ins;
    a.out = outs;
    a.tune = &never;
    a.reuse = &r;
    assert_int_equal(coll_nt_choose(&a, 256 * MIB, 256 * MIB), 0);
    assert_int_equal(r.pend_slot, 0);
    /* Too large for the window: streaming whatever the history says. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(nt_ar(&r, 2, 0, 8 * MIB), 1);
    }
}

/* Every choice is counted by its kind (the benchmarks print the share). */
static void test_kind_counts(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    uint64_t want[2] = {0, 0};
    for (int i = 0; i < 40; i++) {
        /* small, reused, rotated past the window and too large, in turn */
        size_t bytes = i % 4 == 0 ? 32 << 10 : i % 4 == 3 ? 8 * MIB : MIB;
        int set = i % 4 == 2 ? i % 7 : 0;
        want[nt_ar(&r, 2, set, bytes)]++;
    }
    assert_true(want[0] > 0 && want[1] > 0);
    assert_int_equal(atomic_load(&r.kind_ops[0]), want[0]);
    assert_int_equal(atomic_load(&r.kind_ops[1]), want[1]);
    /* No history to count in: nothing counted, nothing broken. */
    assert_int_equal(nt_ar(NULL, 2, 0, 8 * MIB), 1);
}

static void test_reused_stays_cached(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    /* The same buffers every op: 6 MiB of data (under half the window, so
       no trial), always cached. */
    for (int i = 0; i < 200; i++) {
        assert_int_equal(nt_ar(&r, 2, 0, 3 * MIB / 2), 0);
        assert_int_equal(r.pend_slot, 0);
    }
    /* A ring of 4 buffer sets of 4 MiB of data (16 MiB in all) still fits;
       of 5 it does not, once the history covers the window. */
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < 100; i++) {
        assert_int_equal(nt_ar(&r, 2, i % 4, MIB), 0);
    }
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < 100; i++) {
        /* ops 0-4 cannot be placed (the history is younger than 16 MiB) */
        assert_int_equal(nt_ar(&r, 2, i % 5, MIB), i >= 5);
    }
}

static void test_rotation_streams(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    /* A different buffer set every op (a cold-cache benchmark): once 16 MiB
       of ops are in the history, none of them touched the next output. */
    for (int i = 0; i < 300; i++) {
        assert_int_equal(nt_ar(&r, 2, i, MIB), i >= 5);
    }
    /* Back to one buffer set: its first op streams (not touched within the
       window), the next ones find it cached. */
    assert_int_equal(nt_ar(&r, 2, 1000, MIB), 1);
    assert_int_equal(nt_ar(&r, 2, 1000, MIB), 0);
    assert_int_equal(nt_ar(&r, 2, 1000, MIB), 0);
    /* An op too large for the window in between evicts everything. */
    assert_int_equal(nt_ar(&r, 2, 7, 8 * MIB), 1);
    assert_int_equal(nt_ar(&r, 2, 1000, MIB), 1);
    assert_int_equal(nt_ar(&r, 2, 1000, MIB), 0);
    /* Ops of under 256 KiB of data are not noted: more of them than the
       history has slots do not push the buffer set out of it. */
    for (int i = 0; i < 2 * COLL_REUSE_SLOTS; i++) {
        assert_int_equal(nt_ar(&r, 2, 2000 + i, 32 << 10), 0);
    }
    assert_int_equal(nt_ar(&r, 2, 1000, MIB), 0);
}

/* Is step i of a trial whose other kind's run is `other` ops timed? Not
 * the first op of a run, and only the last 3 of each: where that run is 4
 * ops, all but steps 0, 4 and 8; where it is 8, steps 1-3, 9-11 and 13-15
 * (no run times more ops than another). */
static int nt_timed(int i, int other)
{
    static const int short_timed[NT_TRIAL_OPS] = {0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1};
    static const int long_timed[NT_TRIAL_OPS_LONG] = {0, 1, 1, 1, 0, 0, 0, 0,
                                                      0, 1, 1, 1, 0, 1, 1, 1};
    return other == NT_TRIAL_OTHER ? short_timed[i] : long_timed[i];
}

/* The ops of one trial of the shape nt_ar(r, 2, 0, size), 4 x size of data:
 * 4 ops of the prior, 4 of the other kind, 4 of the prior (4, 8, 4 where
 * streaming is the prior), timed as nt_timed says; the timed ones get ns[]
 * (cached, streaming), or slow[] in the first half of the trial when it is
 * not NULL (a slow stretch of the host). The shape's settling ops run
 * `prior`. */
static void nt_trial_ops_slow(coll_reuse_t *r, const uint64_t ns[2], const uint64_t *slow,
                              size_t size, int prior)
{
    if (r->trials == 0) {
        /* a new shape first runs 16 ops the model's way, untimed: the first
           ops of a program pay for page faults and a cold cache */
        for (int i = 0; i < 16; i++) {
            assert_int_equal(nt_ar(r, 2, 0, size), prior);
            assert_int_equal(r->pend_slot, 0);
        }
    }
    int other = prior ? NT_TRIAL_OTHER_LONG : NT_TRIAL_OTHER;
    int ops = 8 + other;
    int first_streaming = prior ? 1 : 5; /* its first timed op */
    for (int i = 0; i < ops; i++) {
        int kind = i >= 4 && i < 4 + other ? !prior : prior;
        assert_int_equal(nt_ar(r, 2, 0, size), kind);
        if (!nt_timed(i, other)) {
            assert_int_equal(r->pend_slot, 0);
        } else {
            assert_int_not_equal(r->pend_slot, 0);
            /* the first timed streaming op is slow: the best one counts */
            const uint64_t *t = slow != NULL && i < ops / 2 ? slow : ns;
            coll_nt_learn(r, t[kind] * (i == first_streaming ? 3 : 1));
            assert_int_equal(r->pend_slot, 0);
        }
    }
}

static void nt_trial_ops_from(coll_reuse_t *r, const uint64_t ns[2], size_t size, int prior)
{
    nt_trial_ops_slow(r, ns, NULL, size, prior);
}

static void nt_trial_ops(coll_reuse_t *r, const uint64_t ns[2], size_t size)
{
    nt_trial_ops_from(r, ns, size, 0);
}

/* The next op's kind, the first after a trial. */
static int nt_after_trial(coll_reuse_t *r, size_t size)
{
    int nt = nt_ar(r, 2, 0, size);
    assert_int_equal(r->pend_slot, 0);
    return nt;
}

/* One trial of the 3 MiB shape: the kind it chose, as the next op takes it. */
static int nt_trial(coll_reuse_t *r, const uint64_t ns[2])
{
    nt_trial_ops(r, ns, 3 * MIB);
    return nt_after_trial(r, 3 * MIB);
}

static void test_trial(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    /* Streaming 20 % faster: the verdict leaves the model's kind, so it
       stays for the next 64 ops only, then a new trial; each trial that
       finds streaming again doubles that, up to 256 ops. */
    const uint64_t stream_wins[2] = {1000, 800};
    for (int trial = 0; trial < 5; trial++) {
        assert_int_equal(nt_trial(&r, stream_wins), 1);
        int hold = NT_FIRST << (trial < 2 ? trial : 2);
        for (int i = 1; i < hold; i++) {
            assert_int_equal(nt_ar(&r, 2, 0, 3 * MIB), 1);
        }
    }
    /* A verdict for the prior ends the run of doublings: streaming found
       again after it holds 64 ops. */
    const uint64_t cached_now[2] = {800, 1000};
    assert_int_equal(nt_trial(&r, cached_now), 0);
    for (int i = 1; i < NT_EVERY; i++) {
        assert_int_equal(nt_ar(&r, 2, 0, 3 * MIB), 0);
    }
    assert_int_equal(nt_trial(&r, stream_wins), 1);
    for (int i = 1; i < NT_FIRST; i++) {
        assert_int_equal(nt_ar(&r, 2, 0, 3 * MIB), 1);
    }
    /* Streaming only 5 % faster: not enough, cached, which (a later trial's
       verdict for the model's kind) stays for 1,024 ops. */
    const uint64_t close[2] = {1000, 950};
    assert_int_equal(nt_trial(&r, close), 0);
    for (int i = 1; i < NT_EVERY; i++) {
        assert_int_equal(nt_ar(&r, 2, 0, 3 * MIB), 0);
    }
    /* Cached faster: cached. */
    const uint64_t cached_wins[2] = {500, 1000};
    assert_int_equal(nt_trial(&r, cached_wins), 0);
    /* A slow stretch of the host over the first half of the trial (cached
       3x slower there) does not decide: the last cached op counts. */
    for (int i = 1; i < NT_EVERY; i++) {
        assert_int_equal(nt_ar(&r, 2, 0, 3 * MIB), 0);
    }
    const uint64_t usual[2] = {1000, 1500};
    const uint64_t stretch[2] = {3000, 1500};
    nt_trial_ops_slow(&r, usual, stretch, 3 * MIB, 0);
    assert_int_equal(nt_after_trial(&r, 3 * MIB), 0);
    /* No timings at all (nobody called coll_nt_done): cached. */
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < 16 + NT_TRIAL_OPS; i++) {
        (void)nt_ar(&r, 2, 0, 3 * MIB);
    }
    assert_int_equal(nt_ar(&r, 2, 0, 3 * MIB), 0);
    /* Outputs the history says were evicted stream without a trial (from
       the 4th op, when the history first reaches back 16 MiB). */
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < 20; i++) {
        assert_int_equal(nt_ar(&r, 2, i, 3 * MIB), i >= 3);
        if (i >= 3) {
            assert_int_equal(r.pend_slot, 0);
        }
    }
    /* Each shape has a trial of its own: its 16 settling ops and step 0
       untimed, step 1 timed, in its own slot. */
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < 17; i++) {
        (void)nt_ar(&r, 2, 0, 3 * MIB);
        assert_int_equal(r.pend_slot, 0);
        (void)nt_ar(&r, 2, 0, 5 * MIB / 2);
        assert_int_equal(r.pend_slot, 0);
    }
    (void)nt_ar(&r, 2, 0, 3 * MIB);
    int slot = r.pend_slot;
    assert_int_not_equal(slot, 0);
    (void)nt_ar(&r, 2, 0, 5 * MIB / 2);
    assert_int_not_equal(r.pend_slot, 0);
    assert_int_not_equal(r.pend_slot, slot);
    /* A sample nobody reported done is dropped by the next op. */
    (void)nt_ar(&r, 2, 0, MIB / 4);
    assert_int_equal(r.pend_slot, 0);
}

/* A sample runs from the op's common start (the last rank's post) when the
 * op has one, to coll_nt_done; a start the clock has not reached is no
 * sample. */
static void test_trial_start(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < 16 + 1; i++) { /* settling ops, then the untimed step 0 */
        (void)nt_ar(&r, 2, 0, 3 * MIB);
    }
    nt_start_ns = zc_time_ns() - 5000000; /* posted 5 ms ago */
    (void)nt_ar(&r, 2, 0, 3 * MIB);
    int slot = r.pend_slot;
    assert_int_not_equal(slot, 0);
    coll_nt_done(&r);
    uint64_t best = r.trial[slot - 1].best_ns[0];
    assert_true(best >= 5000000 && best < 5000000000ull);
    for (int step = 2; step < 4; step++) { /* the cached run's last: timed, never done */
        (void)nt_ar(&r, 2, 0, 3 * MIB);
        assert_int_not_equal(r.pend_slot, 0);
    }
    (void)nt_ar(&r, 2, 0, 3 * MIB); /* step 4, the streaming run's first: untimed */
    assert_int_equal(r.pend_slot, 0);
    nt_start_ns = zc_time_ns() + 1000000000; /* not reached: dropped */
    (void)nt_ar(&r, 2, 0, 3 * MIB);
    assert_int_not_equal(r.pend_slot, 0);
    coll_nt_done(&r);
    assert_int_equal(r.pend_slot, 0);
    assert_true(r.trial[slot - 1].best_ns[0] == best);
    assert_true(r.trial[slot - 1].best_ns[1] == UINT64_MAX);
    nt_start_ns = 0;
}

#define NT_VOTERS 4

static coll_reuse_t nt_rank[NT_VOTERS];
static _Atomic uint64_t nt_pub[NT_VOTERS + 1][COLL_TRIAL_SLOTS];
static const _Atomic uint64_t *nt_pubs[NT_VOTERS + 1];

/* n ranks that publish their verdicts and count every rank's (nt_pubs[0 ..
 * n - 1]), plus extra foreign arrays counted after them. */
static void nt_voters(int n, int extra)
{
    memset(nt_rank, 0, sizeof(nt_rank));
    memset(nt_pub, 0, sizeof(nt_pub));
    for (int k = 0; k <= NT_VOTERS; k++) {
        nt_pubs[k] = nt_pub[k];
    }
    for (int k = 0; k < n; k++) {
        nt_rank[k].verdict_out = nt_pub[k];
        nt_rank[k].verdict_in = nt_pubs;
        nt_rank[k].verdict_ranks = n + extra;
    }
}

/* Every rank takes the majority of the ranks' verdicts for the same shape
 * and trial (a tie is cached); others are not counted. */
static void test_shared_verdict(void **state)
{
    (void)state;
    const uint64_t stream_wins[2] = {1000, 800};
    const uint64_t cached_wins[2] = {500, 1000};
    /* 3 of 4 ranks found streaming faster: every rank streams */
    nt_voters(4, 0);
    for (int k = 0; k < 4; k++) {
        nt_trial_ops(&nt_rank[k], k == 2 ? cached_wins : stream_wins, 3 * MIB);
    }
    for (int k = 0; k < 4; k++) {
        assert_int_equal(nt_after_trial(&nt_rank[k], 3 * MIB), 1);
        assert_int_equal(nt_ar(&nt_rank[k], 2, 0, 3 * MIB), 1);
    }
    /* each rank still publishes its own */
    assert_int_equal(atomic_load(&nt_pub[2][0]) & 1u, 0);
    assert_int_equal(atomic_load(&nt_pub[3][0]) & 1u, 1);
    /* 2 of 4: a tie, cached on every rank */
    nt_voters(4, 0);
    for (int k = 0; k < 4; k++) {
        nt_trial_ops(&nt_rank[k], k < 2 ? stream_wins : cached_wins, 3 * MIB);
    }
    for (int k = 0; k < 4; k++) {
        assert_int_equal(nt_after_trial(&nt_rank[k], 3 * MIB), 0);
    }
    /* verdicts for another shape in the slot are not counted: 0 of 1, where
       counting them would make it 2 of 3 */
    nt_voters(1, 2);
    for (int k = 1; k <= 2; k++) {
        coll_reuse_t other;
        memset(&other, 0, sizeof(other));
        other.verdict_out = nt_pub[k];
        nt_trial_ops(&other, stream_wins, 5 * MIB / 2);
        assert_int_equal(atomic_load(&nt_pub[k][0]) & 1u, 1);
    }
    nt_trial_ops(&nt_rank[0], cached_wins, 3 * MIB);
    assert_int_equal(nt_after_trial(&nt_rank[0], 3 * MIB), 0);
    /* nor those of an earlier trial: ranks 1 and 2 of 3 have not had their
       second */
    nt_voters(3, 0);
    for (int k = 0; k < 3; k++) {
        nt_trial_ops(&nt_rank[k], stream_wins, 3 * MIB);
    }
    assert_int_equal(nt_after_trial(&nt_rank[0], 3 * MIB), 1);
    for (int i = 1; i < NT_FIRST; i++) {
        (void)nt_ar(&nt_rank[0], 2, 0, 3 * MIB);
    }
    /* trial 2 on rank 0 finds cached: its vote alone counts */
    nt_trial_ops(&nt_rank[0], cached_wins, 3 * MIB);
    assert_int_equal(nt_after_trial(&nt_rank[0], 3 * MIB), 0);
}

static void test_overlap_counts(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < 10; i++) {
        (void)nt_ar(&r, 2, 100 + i, MIB); /* fill the window with other buffers */
    }
    /* AllGather into an output whose first half an earlier op read as its
       input: cached. One byte past a range is not an overlap. */
    char *buf = NT_BUF(500);
    assert_int_equal(nt_pick(&r, 2, buf, MIB, NT_BUF(501), MIB), 1);
    assert_int_equal(nt_pick(&r, 2, NT_BUF(502), MIB / 2, buf + MIB / 2, MIB), 0);
    assert_int_equal(nt_pick(&r, 2, NT_BUF(503), MIB, NT_BUF(502) - MIB, MIB), 1);
}

/* What a rank's post says of the next op (coll_nt_expect, which picks
 * AllGather's form) is the kind the op then runs, through a verdict's hold
 * and the next trial. Under a streaming verdict that trial's cached ops say
 * cached, so they run the form that goes with cached stores, and the trial
 * weighs what each verdict would run. */
static void test_expect_follows_trial(void **state)
{
    (void)state;
    const size_t size = 3 * MIB;
    const uint64_t stream_wins[2] = {1000, 800};
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    nt_trial_ops(&r, stream_wins, size);
    int ran[2] = {0, 0};
    for (int i = 0; i < NT_FIRST + NT_TRIAL_OPS; i++) {
        int said = coll_nt_expect(&r, &nt_tune, 2, size, size, NT_BUF(1));
        int nt = nt_ar(&r, 2, 0, size);
        assert_int_equal(said, nt);
        ran[nt]++;
    }
    /* the hold streamed; the next trial ran 8 cached ops and 4 streaming */
    assert_int_equal(ran[0], 8);
    assert_int_equal(ran[1], NT_FIRST + 4);
}

/* From W to just under 2 W of data the size rule's streaming is the prior:
 * the settling ops stream, the trial streams at both ends around 8 cached
 * ops, and it turns to cached only when cached won by 5 %. At 2 W,
 * streaming without a trial. */
static void test_trial_above_window(void **state)
{
    (void)state;
    coll_reuse_t r;
    const size_t size = 5 * MIB; /* 20 MiB of data; W is 16 */
    const uint64_t cached_wins[2] = {930, 1000};
    const uint64_t close[2] = {960, 1000};
    const uint64_t stream_wins[2] = {1000, 800};
    memset(&r, 0, sizeof(r));
    nt_trial_ops_from(&r, cached_wins, size, 1);
    assert_int_equal(nt_after_trial(&r, size), 0);
    assert_int_equal(coll_nt_expect(&r, &nt_tune, 2, size, size, NT_BUF(1)), 0);
    memset(&r, 0, sizeof(r));
    nt_trial_ops_from(&r, close, size, 1);
    assert_int_equal(nt_after_trial(&r, size), 1);
    assert_int_equal(coll_nt_expect(&r, &nt_tune, 2, size, size, NT_BUF(1)), 1);
    memset(&r, 0, sizeof(r));
    nt_trial_ops_from(&r, stream_wins, size, 1);
    assert_int_equal(nt_after_trial(&r, size), 1);
    /* A slow stretch of the host over the first half of the trial (the
       first streaming run 3x slower) does not make the prior lose: its
       last run counts. */
    const uint64_t usual[2] = {1000, 980};
    const uint64_t stretch[2] = {1000, 3000};
    memset(&r, 0, sizeof(r));
    nt_trial_ops_slow(&r, usual, stretch, size, 1);
    assert_int_equal(nt_after_trial(&r, size), 1);
    /* No timings at all: the prior. */
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < 16 + NT_TRIAL_OPS_LONG; i++) {
        (void)nt_ar(&r, 2, 0, size);
    }
    assert_int_equal(nt_ar(&r, 2, 0, size), 1);
    /* Two ranks of four found cached faster: a tie keeps the prior. */
    nt_voters(4, 0);
    for (int k = 0; k < 4; k++) {
        nt_trial_ops_from(&nt_rank[k], k < 2 ? cached_wins : stream_wins, size, 1);
    }
    for (int k = 0; k < 4; k++) {
        assert_int_equal(nt_after_trial(&nt_rank[k], size), 1);
    }
    /* A rotation of outputs (a cold-cache benchmark) streams untried once
       the history reaches back W. */
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < 40; i++) {
        assert_int_equal(nt_ar(&r, 2, i, size), 1);
        assert_int_equal(r.pend_slot, 0);
    }
    assert_int_equal(r.trials, 2); /* ops 0 and 1: the history could not place them */
    /* 2 W and more: no trial. */
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < 40; i++) {
        assert_int_equal(nt_ar(&r, 2, 0, 8 * MIB), 1);
        assert_int_equal(r.pend_slot, 0);
    }
    assert_int_equal(r.trials, 0);
}

/* 256 Ki fp32 per rank (2 MiB of data at np 2), run cached and streaming in
 * turn (nt_min flips the size rule; the history is kept across cases and
 * sometimes evicts): every result exact. */
static void test_exact_either_kind(void **state)
{
    (void)state;
    for (int np = 2; np <= TC_MAXR; np++) {
        coll_reuse_t reuse[TC_MAXR];
        memset(reuse, 0, sizeof(reuse));
        for (int kind = TC_ALLREDUCE; kind <= TC_ALLGATHER; kind += TC_ALLGATHER - TC_ALLREDUCE) {
            for (int rep = 0; rep < 6; rep++) {
                tc_case_t c = tc_case((tc_kind_t)kind, np, COLL_FP32, COLL_SUM, 1u << 18);
                c.inplace = rep % 3 == 2 ? TC_INPLACE : TC_OOP;
                c.tune.nt_min = rep % 2 ? 64u << 10 : 64u << 20;
                c.reuse = reuse;
                tc_run_case(&c);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_rule),          cmocka_unit_test(test_reused_stays_cached),
        cmocka_unit_test(test_rotation_streams),   cmocka_unit_test(test_overlap_counts),
        cmocka_unit_test(test_exact_either_kind),  cmocka_unit_test(test_trial),
        cmocka_unit_test(test_trial_start),        cmocka_unit_test(test_shared_verdict),
        cmocka_unit_test(test_trial_above_window), cmocka_unit_test(test_expect_follows_trial),
        cmocka_unit_test(test_kind_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
