/*
 * AllGather's form trial (coll_form.c), fed made-up timings: the schedule of
 * settling ops, a trial of push / pull / push and the verdict's hold; the
 * margin pull must win by; the band it runs in; a trial op a peer turned
 * to push; and the fixed rule of ZCCL_AG_PULL_MIN. Rank 0 of two is
 * driven as libhccl drives it: ask at the post, run, note the op in the
 * store-kind history, time it.
 */
#include "test_coll_harness.h"

#define MIB ((size_t)1 << 20)

/* Fake buffers: the choice looks at addresses only, never at the bytes. */
#define FORM_BUF(i) ((char *)(uintptr_t)(((uintptr_t)(i) + 1) << 32))

#define FORM_SETTLE 16
#define FORM_HALF 3 /* push ops before and after a trial's pull run */
#define FORM_RUN 4
#define FORM_OPS (2 * FORM_HALF + FORM_RUN)
#define FORM_HOLD_PULL 256
#define FORM_HOLD_PUSH 1024
/* The store-kind trial's ops below W: 4 cached, 4 streaming, 4 cached. */
#define KIND_TRIAL_OPS 12

/* nt_min 8 MiB: the store-kind window W is 16 MiB of op data, and ops of
 * up to 8 MiB of data (W / 2) keep cached stores with no trial of theirs. */
static const coll_tuning_t form_tune = {16384, 8u << 20, 0};

/* The time each form takes ([0] push, [1] pull). */
typedef struct {
    uint64_t ns[2];
} form_times_t;

/* Whether the last op's post made it a timed sample. */
static int form_sampled;

/* What rank 0's last post said (COLL_FORM_* bits). */
static int form_said;

/* The store kind rank 0 of np chooses for an AllGather on ins / outs (the
 * op noted in the history). */
static int form_kind(coll_reuse_t *r, const coll_tuning_t *tune, int np, const void **ins,
                     void **outs, size_t in_bytes, size_t out_bytes)
{
    coll_args_t a = {.nranks = np, .in = ins, .out = outs, .tune = tune, .reuse = r};
    return coll_nt_choose(&a, in_bytes, out_bytes);
}

/* One AllGather of out_bytes per rank on buffer set i, on rank 0 of np, as
 * libhccl runs it: what the rank said at its post, and the op then ran what
 * the ranks' posts say, the peers' being `peers` (COLL_FORM_* bits, or -1:
 * as rank 0's). Returns whether rank 0 asked to pull. */
static int form_op_peers(coll_reuse_t *r, const coll_tuning_t *tune, int np, int i,
                         size_t out_bytes, const form_times_t *t, int peers)
{
    size_t in_bytes = out_bytes / (size_t)np;
    const void *ins[TC_MAXR] = {FORM_BUF(2 * i)};
    void *outs[TC_MAXR] = {FORM_BUF(2 * i + 1)};
    int want = coll_allgather_pull_want(r, tune, np, in_bytes, out_bytes, outs[0]);
    form_said = want;
    form_sampled = r != NULL && r->form_pend_slot != 0;
    int peer = peers < 0 ? want : peers;
    int veto = (want | peer) & COLL_FORM_VETO;
    int majority =
        coll_form_pulls((want & COLL_FORM_PULL) + (np - 1) * (peer & COLL_FORM_PULL), np);
    int pull = !veto && majority;
    coll_form_agree(r, pull, majority);
    coll_form_ran(r, pull, 1);
    (void)form_kind(r, tune, np, ins, outs, in_bytes, out_bytes); /* noted */
    coll_form_learn(r, t->ns[pull]);
    return want == COLL_FORM_PULL;
}

/* The same with one peer, which asks to push when peer_pushes, else says
 * what rank 0 says. */
static int form_op_peer(coll_reuse_t *r, const coll_tuning_t *tune, int np, int i, size_t out_bytes,
                        const form_times_t *t, int peer_pushes)
{
    return form_op_peers(r, tune, np, i, out_bytes, t, peer_pushes ? 0 : -1);
}

static int form_op(coll_reuse_t *r, int i, size_t out_bytes, const form_times_t *t)
{
    return form_op_peer(r, &form_tune, 2, i, out_bytes, t, 0);
}

/* One trial of the 2 MiB shape (6 MiB of data at np 2) and the verdict the
 * next op asks for; the settling ops first on a new shape. Each run's first
 * op is no sample. */
static int form_trial(coll_reuse_t *r, const form_times_t *t)
{
    if (r->forms == 0) {
        for (int k = 0; k < FORM_SETTLE; k++) {
            assert_int_equal(form_op(r, 0, 2 * MIB, t), 0);
        }
    }
    for (int k = 0; k < FORM_OPS; k++) {
        int kind = k >= FORM_HALF && k < FORM_HALF + FORM_RUN;
        int first = k == 0 || k == FORM_HALF || k == FORM_HALF + FORM_RUN;
        assert_int_equal(form_op(r, 0, 2 * MIB, t), kind);
        assert_int_equal(form_sampled, !first);
    }
    return form_op(r, 0, 2 * MIB, t);
}

/* Pull 20 % faster: after 16 settling ops and a trial, pull for 256 ops,
 * then a new trial; when push wins that one, push for 1,024. */
static void test_form_pull_wins(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    const form_times_t pull_wins = {{1000, 800}};
    const form_times_t push_wins = {{800, 1000}};
    for (int trial = 0; trial < 3; trial++) {
        assert_int_equal(form_trial(&r, &pull_wins), 1);
        for (int k = 1; k < FORM_HOLD_PULL; k++) {
            assert_int_equal(form_op(&r, 0, 2 * MIB, &pull_wins), 1);
            assert_false(form_sampled);
        }
    }
    assert_int_equal(form_trial(&r, &push_wins), 0);
    for (int k = 1; k < FORM_HOLD_PUSH; k++) {
        assert_int_equal(form_op(&r, 0, 2 * MIB, &push_wins), 0);
    }
    assert_int_equal(form_trial(&r, &pull_wins), 1);
}

/* Pull only 1 % faster: not enough, push (the margin is 2 %); 3 % is. */
static void test_form_margin(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    const form_times_t close = {{1000, 990}};
    const form_times_t enough = {{1000, 970}};
    assert_int_equal(form_trial(&r, &close), 0);
    memset(&r, 0, sizeof(r));
    assert_int_equal(form_trial(&r, &enough), 1);
}

/* A trial whose ops nobody ran (none pulled, none timed) starts again at
 * once, and its ops keep the verdict before it; run, it decides. */
static void test_form_untimed(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    const form_times_t pull_wins = {{1000, 800}};
    assert_int_equal(form_trial(&r, &pull_wins), 1);
    for (int k = 1; k < FORM_HOLD_PULL; k++) {
        (void)form_op(&r, 0, 2 * MIB, &pull_wins);
    }
    for (int trial = 0; trial < 3; trial++) {
        for (int k = 0; k < FORM_OPS; k++) {
            int kind = k >= FORM_HALF && k < FORM_HALF + FORM_RUN;
            assert_int_equal(coll_allgather_pull_want(&r, &form_tune, 2, MIB, 2 * MIB, FORM_BUF(1)),
                             kind ? COLL_FORM_PULL : 0);
        }
    }
    const form_times_t push_wins = {{800, 1000}};
    assert_int_equal(form_trial(&r, &push_wins), 0);
}

/* Outside the band the op pushes, untimed, however fast pulling would be:
 * under 512 KiB of output (every AllGather pulls there anyway), data the
 * store-kind trial holds streaming (6 MiB: 18 MiB of data, streaming its
 * prior, and no timings to overturn it; only that trial's cached run
 * pulls, before any form verdict) or that streams by size, and outputs the
 * history says were evicted. */
static void test_form_band(void **state)
{
    (void)state;
    const form_times_t pull_wins = {{1000, 500}};
    const size_t sizes[] = {MIB / 2 - 64, 6 * MIB, 16 * MIB};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        coll_reuse_t r;
        memset(&r, 0, sizeof(r));
        for (int k = 0; k < 2 * (FORM_SETTLE + FORM_OPS); k++) {
            int cached = !coll_nt_expect(&r, &form_tune, 2, sizes[s] / 2, sizes[s], FORM_BUF(1));
            int kind_trial_pulls = s == 1 && cached && r.trial[0].number % 2 == 1;
            assert_int_equal(form_op(&r, 0, sizes[s], &pull_wins), kind_trial_pulls);
            assert_false(form_sampled);
        }
    }
    /* a rotation over 8 buffer sets of 6 MiB of data each: evicted */
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    for (int k = 0; k < 8 * (FORM_SETTLE + FORM_OPS); k++) {
        int want = form_op(&r, k % 8, 2 * MIB, &pull_wins);
        assert_int_equal(want, 0);
    }
    /* no history: a NULL reuse never asks */
    assert_int_equal(coll_allgather_pull_want(NULL, &form_tune, 2, MIB, 2 * MIB, FORM_BUF(1)),
                     COLL_FORM_VETO);
}

/* Inside the store-kind trial's band (3 MiB: 9 MiB of data, W / 2 to W)
 * the form trial runs only while that trial holds a cached verdict: its
 * own ops (and the ops before its verdict is adopted) are unsampled, so
 * neither trial times the other's choices; they run the form the shape
 * holds where their stores are cached and push where they stream. Pull
 * wins, and from then on the store-kind trials' cached ops pull too. */
static void test_form_in_kind_band(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    const form_times_t pull_wins = {{1000, 500}};
    int first_pull = -1;
    int pulls = 0;
    int unsettled_pulls = 0;
    int first_settled_pull = -1;
    for (int k = 0; k < 400; k++) {
        int settled = coll_nt_settled_cached(&r, &form_tune, 2, 3 * MIB / 2, 3 * MIB, FORM_BUF(1));
        int streams = coll_nt_expect(&r, &form_tune, 2, 3 * MIB / 2, 3 * MIB, FORM_BUF(1));
        int held = r.form[0].found ? r.form[0].pull : r.trial[0].number % 2 == 1;
        /* the store-kind trial's step for this op: its trial and the op
           adopting its verdict are 16 to 28 (4 ops cached, 4 streaming, 4
           cached) */
        uint32_t kind_step = r.trial[0].step;
        int want = form_op(&r, 0, 3 * MIB, &pull_wins);
        if (kind_step >= FORM_SETTLE && kind_step <= FORM_SETTLE + KIND_TRIAL_OPS) {
            assert_false(settled);
        }
        if (!settled) {
            assert_int_equal(want, held && !streams);
            assert_int_equal(form_said & COLL_FORM_VETO, streams ? COLL_FORM_VETO : 0);
            assert_false(form_sampled);
            unsettled_pulls += want;
        }
        first_pull = want && first_pull < 0 ? k : first_pull;
        first_settled_pull = want && settled && first_settled_pull < 0 ? k : first_settled_pull;
        pulls += want;
    }
    /* the store-kind trial settles (16 ops), tries (12) and adopts (1); its
       cached ops pull from its second (op 17: the first still reads trial
       number 0). The form trial under way meanwhile (16 settling ops, then
       10 out of the band) had no sample and started again at op 26: at op
       29, the first in the band, it is at its pull run's first op. The
       first pull in the band comes within one form trial of the store-kind
       verdict. */
    const int held = FORM_SETTLE + KIND_TRIAL_OPS + 1;
    assert_int_equal(first_pull, FORM_SETTLE + 1);
    assert_int_equal(first_settled_pull, FORM_SETTLE + FORM_OPS + FORM_HALF);
    assert_true(first_settled_pull >= held);
    assert_true(first_settled_pull <= held + FORM_OPS + FORM_HALF);
    assert_true(pulls > 400 / 2);
    /* unsettled pulls: the first trial's cached ops but its first (7) and
       the op adopting its verdict, before any form verdict; the second
       store-kind trial (ops 92-103: 64 ops after the first's verdict), its
       8 cached ops and its adopting op with the pull held. Its verdict, the
       prior again, holds past op 400 */
    assert_int_equal(unsettled_pulls, 7 + 1 + 9);
}

/* The same band (3 MiB of output, 9 MiB of data at np 2: W/2..W), where
 * cached stores win only when they push: cached pulls take 1,000 ns,
 * streaming ones 800, cached pushes 500. With no form verdict yet the first
 * store-kind trial's cached ops pull and streaming wins it; the second's
 * push, from its second op on (op 93: 16 settling ops, 12 of the trial, a
 * hold of 64, then the trial's first op, which still reads the first
 * trial's number), and cached wins; the form trial then finds push. Every
 * kind trial weighing one form only would stream for good. */
static void test_form_kind_tries_both(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    size_t out_bytes = 3 * MIB;
    size_t in_bytes = out_bytes / 2;
    const void *ins[TC_MAXR] = {FORM_BUF(0)};
    void *outs[TC_MAXR] = {FORM_BUF(1)};
    int first_cached_push = -1; /* after the settling ops */
    int cached_pulls = 0;
    int nt = 0;
    int pull = 0;
    for (int k = 0; k < 400; k++) {
        int want = coll_allgather_pull_want(&r, &form_tune, 2, in_bytes, out_bytes, outs[0]);
        int majority = coll_form_pulls(2 * (want & COLL_FORM_PULL), 2); /* both ranks alike */
        pull = !(want & COLL_FORM_VETO) && majority;
        coll_form_agree(&r, pull, majority);
        coll_form_ran(&r, pull, 1);
        nt = form_kind(&r, &form_tune, 2, ins, outs, in_bytes, out_bytes);
        uint64_t ns = nt ? 800 : pull ? 1000 : 500;
        coll_nt_learn(&r, ns);
        coll_form_learn(&r, ns);
        if (k > FORM_SETTLE && !nt && !pull && first_cached_push < 0) {
            first_cached_push = k;
        }
        cached_pulls += !nt && pull;
    }
    assert_int_equal(first_cached_push, FORM_SETTLE + KIND_TRIAL_OPS + 64 + 1);
    /* the first kind trial's but its first (7; its adopting op streams),
       the second's first; then the form trial's pull run (4) */
    assert_int_equal(cached_pulls, 7 + 1 + FORM_RUN);
    assert_int_equal(nt, 0);
    assert_int_equal(pull, 0);
    assert_int_equal(r.form[0].found, 1);
}

/* np 4, 1 MiB of output (5 MiB of data): the settling ops and a trial in
 * which every rank says what rank 0 says, then the first op after it, where
 * the peers vote `peers`; returns the verdict rank 0 then holds. */
static int form_vote(coll_reuse_t *r, const form_times_t *t, int peers)
{
    for (int k = 0; k < FORM_SETTLE + FORM_OPS; k++) {
        (void)form_op_peers(r, &form_tune, 4, 0, MIB, t, -1);
    }
    (void)form_op_peers(r, &form_tune, 4, 0, MIB, t, peers);
    return r->form[0].pull;
}

/* The ranks' majority is the verdict, whatever rank 0 found: the first op
 * after the trial runs it, and rank 0 then asks for it through the hold that
 * goes with it, so the next trial comes at the same op on every rank. The
 * posts decide: pull when no rank is out of the band and more than half ask
 * to pull. */
static void test_form_majority(void **state)
{
    (void)state;
    const form_times_t pull_wins = {{1000, 800}};
    const form_times_t push_wins = {{800, 1000}};
    coll_reuse_t r;
    /* rank 0 found push, the other three pull: pull, held 256 ops */
    memset(&r, 0, sizeof(r));
    assert_int_equal(form_vote(&r, &push_wins, COLL_FORM_PULL), 1);
    assert_int_equal(form_said, 0);
    for (int k = 1; k < FORM_HOLD_PULL; k++) {
        assert_int_equal(form_op_peers(&r, &form_tune, 4, 0, MIB, &push_wins, -1), 1);
    }
    assert_int_equal(form_op_peers(&r, &form_tune, 4, 0, MIB, &push_wins, -1), 0);
    assert_int_equal(r.form[0].step, FORM_SETTLE + 1); /* the next trial's second op */
    /* rank 0 found pull, the other three push: push, held 1,024 ops */
    memset(&r, 0, sizeof(r));
    assert_int_equal(form_vote(&r, &pull_wins, 0), 0);
    assert_int_equal(form_said, COLL_FORM_PULL);
    for (int k = 1; k < FORM_HOLD_PUSH; k++) {
        assert_int_equal(form_op_peers(&r, &form_tune, 4, 0, MIB, &pull_wins, -1), 0);
        assert_int_equal(form_said, 0);
    }
    assert_int_equal(r.form[0].step, FORM_SETTLE);
    /* three peers out of the band, voting pull: the op pushes, but the
       majority is the verdict all the same */
    memset(&r, 0, sizeof(r));
    assert_int_equal(form_vote(&r, &push_wins, COLL_FORM_PULL | COLL_FORM_VETO), 1);
    /* two of four ask to pull: a tie is no majority */
    assert_int_equal(coll_form_pulls(2, 4), 0);
    assert_int_equal(coll_form_pulls(3, 4), 1);
    assert_int_equal(coll_form_pulls(2, 2), 1);
    assert_int_equal(coll_form_pulls(1, 2), 0);
}

/* A peer that asked to push turns the trial's pull ops to push: they are
 * timed as what they ran, so pull has no sample, and the trial starts
 * again (its first op pushes). */
static void test_form_peer_pushed(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    const form_times_t pull_wins = {{1000, 500}};
    for (int k = 0; k < FORM_SETTLE + FORM_OPS; k++) {
        (void)form_op_peer(&r, &form_tune, 2, 0, 2 * MIB, &pull_wins, 1);
    }
    assert_int_equal(r.form[0].best_ns[1], UINT64_MAX);
    assert_int_equal(r.form[0].best_ns[0], 1000); /* the pull ops, run as push, among them */
    assert_int_equal(form_op(&r, 0, 2 * MIB, &pull_wins), 0);
    assert_int_equal(form_op(&r, 0, 2 * MIB, &pull_wins), 0);
    assert_int_equal(form_op(&r, 0, 2 * MIB, &pull_wins), 0);
    assert_int_equal(form_op(&r, 0, 2 * MIB, &pull_wins), 1);
}

/* Shapes have trials of their own, in slots; a sample nobody reported done
 * is dropped at the next op's post. */
static void test_form_shapes(void **state)
{
    (void)state;
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    const form_times_t pull_wins = {{1000, 800}};
    for (int k = 0; k < FORM_SETTLE + 1; k++) {
        (void)form_op(&r, 0, 2 * MIB, &pull_wins);
        (void)form_op(&r, 1, MIB, &pull_wins);
    }
    (void)coll_allgather_pull_want(&r, &form_tune, 2, MIB, 2 * MIB, FORM_BUF(1));
    int slot = r.form_pend_slot;
    assert_int_not_equal(slot, 0);
    (void)coll_allgather_pull_want(&r, &form_tune, 2, MIB / 2, MIB, FORM_BUF(3));
    assert_int_not_equal(r.form_pend_slot, 0);
    assert_int_not_equal(r.form_pend_slot, slot);
    coll_form_ran(&r, 0, 1);
    (void)coll_allgather_pull_want(&r, &form_tune, 2, MIB / 4, MIB / 2, FORM_BUF(5));
    assert_int_equal(r.form_pend_slot, 0);
    assert_int_equal(r.form_ran, 0);
}

/* ZCCL_AG_PULL_MIN set: from that size, every op whose output is probably
 * cached asks to pull at once, with no trial; below it, or streaming, push. */
static void test_form_fixed_rule(void **state)
{
    (void)state;
    coll_tuning_t tune = form_tune;
    tune.ag_pull_min = MIB;
    const form_times_t push_wins = {{500, 1000}};
    coll_reuse_t r;
    memset(&r, 0, sizeof(r));
    for (int k = 0; k < 20; k++) {
        assert_int_equal(form_op_peer(&r, &tune, 2, 0, 2 * MIB, &push_wins, 0), 1);
        assert_int_equal(form_op_peer(&r, &tune, 2, 1, MIB - 64, &push_wins, 0), 0);
        assert_false(form_sampled);
    }
    memset(&r, 0, sizeof(r));
    assert_int_equal(form_op_peer(&r, &tune, 2, 0, 64 * MIB, &push_wins, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_form_pull_wins), cmocka_unit_test(test_form_margin),
        cmocka_unit_test(test_form_band),      cmocka_unit_test(test_form_peer_pushed),
        cmocka_unit_test(test_form_shapes),    cmocka_unit_test(test_form_fixed_rule),
        cmocka_unit_test(test_form_untimed),   cmocka_unit_test(test_form_in_kind_band),
        cmocka_unit_test(test_form_majority),  cmocka_unit_test(test_form_kind_tries_both),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
