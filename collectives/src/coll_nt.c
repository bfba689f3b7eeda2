/*
 * Cached or streaming stores for the large direct AllReduce and AllGather:
 * chosen from where the op's output probably is.
 *
 * A cached store first reads its line for ownership. When the output is in
 * the cache that read is free, and the written result stays there for
 * whoever reads it next: cached stores win. When it is not, every line is
 * read from DRAM before it is overwritten, and streaming stores, which
 * skip that read, win. So the question is whether the output is still
 * cached, and the size alone does not say: a program that reuses its
 * buffers finds a 1 MiB op's data cached, one that cycles through many
 * buffers does not.
 *
 * The model: the last-level cache keeps about the last W = 2 x
 * tune->nt_min bytes of op data (inputs + outputs of every rank, all on
 * this host's caches). W is the whole last-level cache: unless ZCCL_NT_MIN
 * sets it, nt_min is half the cache the kernel reports
 * (coll_nt_min_for_llc). A smaller W would stream ops whose data still
 * fits the cache. Each communicator keeps the ranges of its recent large
 * direct ops (coll_reuse_t) on a clock counting those bytes, and an op of
 * D bytes of data streams when
 *  - D >= W: it cannot stay cached whatever came before (the size rule,
 *    coll_use_nt_op), or
 *  - its output range (this rank's) was last touched by an op that ended
 *    more than W - D bytes of op data ago, or by no op within the last W
 *    bytes of a history that reaches that far back: in either case other
 *    data has pushed it out since.
 * An output the history cannot place (the first ops of a communicator)
 * follows the size rule: cached below W. Every rank sees the same sequence
 * of ops, so all ranks choose alike (they need not: each rank fences its own
 * streaming stores before the next barrier, and the bits are the same).
 * Where the model says cached but D is at least W/2, and where the size rule
 * streams but D is under 2 W, a timed trial of both kinds decides instead
 * (see "The trial" below).
 *
 * The model decides, not a timing of both kinds at every size: single
 * timings mislead, as the first op after a switch pays for the cache state
 * the other kind left, and one op slowed by foreign traffic (another
 * program, the benchmark's reference between batches) would flip the
 * choice for a thousand ops. The trial keeps to the band where the model
 * cannot know, times through the exit barrier (alike on every rank), drops
 * the first op of each run and the first ops of a shape, and keeps the
 * fastest of each kind's settled ops. The model sees no foreign traffic:
 * memory a program touches between ops is not counted, so an output it
 * evicted looks cached until the history says otherwise.
 */
#include "coll_internal.h"

#include "zc/sync.h"

#include <string.h>

/* Ops whose data over all ranks is below this are always cached: it fits any
 * cache, and streaming would push it out. */
#define COLL_NT_MIN_DATA ((size_t)256 << 10)

static int coll_reuse_overlaps(uintptr_t lo, uintptr_t hi, uintptr_t elo, uintptr_t ehi)
{
    return elo < ehi && lo < ehi && elo < hi;
}

/* Bytes of op data since [lo, hi) was last touched; UINT64_MAX when no op in
 * the last `window` bytes touched it and the history reaches back that far;
 * 0 when the history is too short to say (as if just touched: the size rule
 * decides). */
static uint64_t coll_reuse_age(const coll_reuse_t *r, uintptr_t lo, uintptr_t hi, uint64_t window)
{
    for (uint32_t k = 1; k <= COLL_REUSE_SLOTS; k++) {
        const coll_reuse_ent_t *e = &r->ent[(r->next - k) % COLL_REUSE_SLOTS];
        if (e->stamp == 0) {
            return 0; /* the history starts here */
        }
        uint64_t age = r->clock - e->stamp;
        if (age >= window) {
            return UINT64_MAX;
        }
        if (coll_reuse_overlaps(lo, hi, e->lo[0], e->hi[0]) ||
            coll_reuse_overlaps(lo, hi, e->lo[1], e->hi[1])) {
            return age;
        }
    }
    return 0; /* every entry is younger than the window */
}

static void coll_reuse_note(coll_reuse_t *r, const void *in, size_t in_bytes, const void *out,
                            size_t out_bytes, uint64_t data)
{
    coll_reuse_ent_t *e = &r->ent[r->next % COLL_REUSE_SLOTS];
    e->lo[0] = (uintptr_t)in;
    e->hi[0] = (uintptr_t)in + in_bytes;
    e->lo[1] = (uintptr_t)out;
    e->hi[1] = (uintptr_t)out + out_bytes;
    r->clock += data;
    e->stamp = r->clock;
    r->next++;
}

/* nt_min from the last-level cache: the smallest, and the one used when the
 * cache's size is unknown (it suits a 32 MiB cache). */
#define COLL_NT_MIN_FLOOR ((size_t)1 << 20)
#define COLL_NT_MIN_UNKNOWN ((size_t)16 << 20)

size_t coll_nt_min_for_llc(uint64_t llc_bytes)
{
    if (llc_bytes == 0) {
        return COLL_NT_MIN_UNKNOWN;
    }
    uint64_t half = llc_bytes / 2;
    if (half < COLL_NT_MIN_FLOOR) {
        return COLL_NT_MIN_FLOOR;
    }
    return half > SIZE_MAX ? SIZE_MAX : (size_t)half;
}

/*
 * The trial. From W/2 to just under W of data the model keeps an op
 * cached, and it is right only while the rest of the host leaves this
 * program most of the cache: the share left to it varies with the host's
 * other tenants, and a cyclic access just past the free capacity misses on
 * every line. So an op shape in that band, which the model keeps cached,
 * runs three runs after its first COLL_TRIAL_SETTLE ops (the model's way:
 * a program's first ops pay page faults and a cold cache, which a trial
 * there would time instead of the kinds): the prior (coll_trial_t.prior,
 * the model's kind, here cached), the other kind, the prior again. Each
 * run times its last COLL_TRIAL_RUN - 1 ops, never its first (which pays
 * for the state the other kind left), and the fastest of each kind's timed
 * ops counts (one op slowed by foreign traffic does not decide). The prior
 * at both ends: a slow stretch of the host that covers one end cannot make
 * the prior look slow alone, a drift over the trial weighs on both kinds,
 * and the other kind runs only one run, the trial's cost where the prior
 * is right. The other kind wins only by its margin (streaming over cached
 * by 1/COLL_TRIAL_MARGIN); a tie of the ranks' votes keeps the prior. From
 * W to just under 2 W the prior is streaming: the size rule streams there
 * because on a host whose other tenants hold part of the cache an op of W
 * cannot stay cached; on a quieter one it can, and the trial finds which.
 * There the cached run is longer (coll_trial_other: that much data needs
 * several cached passes to settle after streaming ones) and cached wins by
 * 1/COLL_TRIAL_MARGIN_LONG, as its settled figures are no longer
 * pessimistic. The first trial's verdict holds for COLL_TRIAL_FIRST ops
 * only: a program's early ops still run slower cached than its later ones,
 * so the first trial can favour streaming wrongly. So does a verdict that
 * left the prior: the model's kind is right most of the time, and a stretch
 * of the host that covers a whole trial (cached ops slowed more than
 * streaming ones) should cost tens of ops, not a thousand. Where the other
 * kind keeps winning, each trial that finds it again doubles the hold
 * (coll_trial_hold), up to COLL_TRIAL_HOLD_MAX: at a hold of
 * COLL_TRIAL_FIRST the trials' ops of the prior (its two runs) cost 5 % of
 * the time where the prior is 1.5x slower, a cost a long run of one shape
 * would pay for good; at the most, under 2 %. A stretch of the host that
 * fooled one trial still costs tens of ops, and trials fooled in a row hold
 * the wrong kind for at most COLL_TRIAL_HOLD_MAX ops (a verdict that keeps
 * the prior, 1,024).
 *
 * A sample runs from the moment the last rank posted the op (a->start_ns,
 * from the posts' stamps), the same on every rank, to the end of this
 * rank's exit barrier (coll_nt_done), so the ranks' figures agree. Not
 * from the rank's own choice (the start only when the posts carry no
 * stamp): a rank the scheduler ran late would time little more than its
 * own kernel, and the ranks' figures, and so their votes, would spread.
 * The margin is wider than the ranks' spread: a trial's figures are a few
 * ops early in a stretch, slower than the same kind's in a long batch.
 *
 * Every rank publishes its verdict (verdict_out) and, at the first op after
 * the trial, takes the ranks' majority (verdict_in; a tie is cached), so
 * the ranks do not choose apart (allowed, as each fences its own streaming
 * stores, but slower than either kind on every rank). That op's posts come
 * after every rank's coll_nt_done of the trial's last op, so the verdicts
 * are there to read, and none changes before every rank has read it (the
 * next is a trial later): every rank counts the same votes. A verdict for
 * another shape or trial (slots that went apart, a rank whose samples were
 * dropped) is not counted; with none counted a rank keeps its own.
 */
#define COLL_TRIAL_SETTLE 16u
#define COLL_TRIAL_RUN 4u        /* each run of the prior, and a streaming run */
#define COLL_TRIAL_OTHER_LONG 8u /* the cached run where streaming is the prior */
#define COLL_TRIAL_EVERY 1024u
#define COLL_TRIAL_FIRST 64u
#define COLL_TRIAL_HOLD_MAX 256u   /* the hold of verdicts that left the prior, doubled */
#define COLL_TRIAL_MARGIN 10u      /* streaming over a cached prior: 10 % faster */
#define COLL_TRIAL_MARGIN_LONG 20u /* cached over a streaming prior: 5 % faster */

/* Ops in the other kind's run of a shape's trial, the middle one. A cached
 * run starts from a cache the streaming stores left cold. Where streaming
 * is the prior (W to 2 W of data) that much data takes several passes to
 * settle in it: two ops timed cached at 1.7x the streaming ones, where
 * eight timed them 8 % faster (perf log 2026-12-06). Once the prior ran
 * at both ends, only this run costs where the prior is right: 8 cached ops
 * a trial, where cached at both ends cost 16 (perf log 2026-12-07,
 * night). */
static uint32_t coll_trial_other(const coll_trial_t *t)
{
    return t->prior ? COLL_TRIAL_OTHER_LONG : COLL_TRIAL_RUN;
}

/* Ops of the shape a verdict holds before the next trial: COLL_TRIAL_EVERY
 * for a later verdict that kept the prior; COLL_TRIAL_FIRST for the first
 * and for one that left the prior, doubled for each trial before it in a
 * row that left the prior alike, up to COLL_TRIAL_HOLD_MAX. */
static uint32_t coll_trial_hold(const coll_trial_t *t)
{
    if (t->number > 1 && t->nt == t->prior) {
        return COLL_TRIAL_EVERY;
    }
    uint32_t hold = COLL_TRIAL_FIRST;
    for (uint32_t k = 0; k < t->again && hold < COLL_TRIAL_HOLD_MAX; k++) {
        hold *= 2;
    }
    return hold;
}

/* The ops of a shape's trial: the prior, the other kind, the prior. */
static uint32_t coll_trial_ops(const coll_trial_t *t)
{
    return 2u * COLL_TRIAL_RUN + coll_trial_other(t);
}

/* The kind of a trial's step: COLL_TRIAL_RUN ops of the prior, then
 * coll_trial_other of the other kind, then COLL_TRIAL_RUN of the prior. */
static int coll_trial_kind(const coll_trial_t *t, uint32_t step)
{
    int other = step >= COLL_TRIAL_RUN && step < COLL_TRIAL_RUN + coll_trial_other(t);
    return other ? !t->prior : t->prior;
}

/* Is a trial's step timed? Only the last COLL_TRIAL_RUN - 1 ops of its run,
 * so never the first (every run is at least COLL_TRIAL_RUN ops), and no run
 * times more ops than another: the fastest of more ops is faster by the
 * spread alone, and long cached runs timing 7 ops each against streaming's
 * 3 won where streaming was faster (perf log 2026-12-07, evening). The long
 * run's last ops are the settled ones it was made long for. */
static int coll_trial_timed(const coll_trial_t *t, uint32_t step)
{
    uint32_t mid = COLL_TRIAL_RUN + coll_trial_other(t);
    uint32_t end = step < COLL_TRIAL_RUN ? COLL_TRIAL_RUN : step < mid ? mid : coll_trial_ops(t);
    return end - step < COLL_TRIAL_RUN;
}

static coll_trial_t *coll_trial_slot(coll_reuse_t *r, size_t in_bytes, size_t out_bytes, int prior)
{
    coll_trial_t *lru = &r->trial[0];
    for (int k = 0; k < COLL_TRIAL_SLOTS; k++) {
        coll_trial_t *t = &r->trial[k];
        if (t->in_bytes == in_bytes && t->out_bytes == out_bytes) {
            return t;
        }
        lru = t->used < lru->used ? t : lru;
    }
    memset(lru, 0, sizeof(*lru));
    lru->in_bytes = in_bytes;
    lru->out_bytes = out_bytes;
    lru->prior = prior;
    lru->nt = prior;
    return lru;
}

/* A trial's verdict as published: the shape (a hash), the trial's number
 * and the kind. */
static uint64_t coll_trial_verdict(const coll_trial_t *t, int nt)
{
    uint64_t shape = t->in_bytes * 0x9e3779b97f4a7c15ull + t->out_bytes * 0xc2b2ae3d27d4eb4full;
    return (shape >> 32 << 32) | (uint64_t)(t->number & 0x7fffffffu) << 1 | (uint64_t)(nt != 0);
}

/* The first op after a trial: take the ranks' majority verdict for this
 * shape and trial. */
static void coll_trial_adopt(const coll_reuse_t *r, coll_trial_t *t)
{
    uint64_t want = coll_trial_verdict(t, 0) >> 1;
    int votes = 0;
    int streaming = 0;
    for (int q = 0; q < r->verdict_ranks; q++) {
        uint64_t v = atomic_load_explicit(&r->verdict_in[q][t - r->trial], memory_order_acquire);
        if (v >> 1 == want) {
            votes++;
            streaming += (int)(v & 1u);
        }
    }
    int nt = 2 * streaming > votes || (2 * streaming == votes && t->prior); /* a tie: the model's */
    if (votes == 0 || nt == t->nt) {
        return;
    }
    t->nt = nt;
    ZC_DEBUG(ZC_SUB_COLL, "store-kind trial %llu/%llu bytes: %s, as %d of %d ranks found",
             (unsigned long long)t->in_bytes, (unsigned long long)t->out_bytes,
             t->nt ? "streaming" : "cached", t->nt ? streaming : votes - streaming, votes);
}

/* The kind a shape's op runs at step k of its schedule (settling ops
 * included): the prior while it settles, a trial's own kind, then the
 * verdict. Read before the op, at the first op after a trial this is the
 * rank's own verdict, not yet the ranks' majority (coll_trial_pick adopts
 * it there). */
static int coll_trial_kind_at(const coll_trial_t *t, uint32_t k)
{
    if (k < COLL_TRIAL_SETTLE) {
        return t->prior;
    }
    uint32_t step = k - COLL_TRIAL_SETTLE; /* within the trial and what follows it */
    return step < coll_trial_ops(t) ? coll_trial_kind(t, step) : t->nt;
}

/* What a trial does at its step (k - COLL_TRIAL_SETTLE): adopt the ranks'
 * verdict after its last op, start afresh at its first, time the ops
 * coll_trial_timed names. */
static void coll_trial_step(coll_reuse_t *r, coll_trial_t *t, uint32_t step, uint64_t start_ns)
{
    if (step == coll_trial_ops(t)) {
        coll_trial_adopt(r, t);
        int alike = t->number > 1 && t->nt != t->prior && t->nt == t->before;
        t->again = alike ? t->again + 1 : 0;
    }
    if (step == 0) {
        t->best_ns[0] = t->best_ns[1] = UINT64_MAX;
        t->before = t->nt;
        t->number++;
    }
    if (step < coll_trial_ops(t) && coll_trial_timed(t, step)) {
        r->pend_slot = (int)(t - r->trial) + 1;
        r->pend_step = step;
        r->pend_t0 = start_ns != 0 ? start_ns : zc_time_ns();
    }
}

static int coll_trial_pick(coll_reuse_t *r, size_t in_bytes, size_t out_bytes, uint64_t start_ns,
                           int prior)
{
    coll_trial_t *t = coll_trial_slot(r, in_bytes, out_bytes, prior);
    t->used = ++r->trials;
    uint32_t k = t->step; /* ops of the shape so far, settling ones included */
    uint32_t end = COLL_TRIAL_SETTLE + coll_trial_ops(t) + coll_trial_hold(t);
    t->step = k + 1 == end ? COLL_TRIAL_SETTLE : k + 1;
    if (k >= COLL_TRIAL_SETTLE) {
        coll_trial_step(r, t, k - COLL_TRIAL_SETTLE, start_ns);
    }
    return coll_trial_kind_at(t, k);
}

void coll_nt_learn(coll_reuse_t *r, uint64_t ns)
{
    if (r->pend_slot <= 0 || r->pend_slot > COLL_TRIAL_SLOTS) {
        return;
    }
    coll_trial_t *t = &r->trial[r->pend_slot - 1];
    r->pend_slot = 0;
    uint64_t *best = &t->best_ns[coll_trial_kind(t, r->pend_step)];
    *best = ns < *best ? ns : *best;
    if (r->pend_step + 1 == coll_trial_ops(t)) {
        uint64_t c = t->best_ns[0];
        uint64_t s = t->best_ns[1];
        uint64_t keep = t->best_ns[t->prior];
        uint64_t margin = t->prior ? COLL_TRIAL_MARGIN_LONG : COLL_TRIAL_MARGIN;
        int other_wins = keep != UINT64_MAX && t->best_ns[!t->prior] < keep - keep / margin;
        t->nt = other_wins ? !t->prior : t->prior;
        if (r->verdict_out != NULL) {
            atomic_store_explicit(&r->verdict_out[t - r->trial], coll_trial_verdict(t, t->nt),
                                  memory_order_release);
        }
        ZC_DEBUG(ZC_SUB_COLL,
                 "store-kind trial %llu/%llu bytes: cached %llu ns, streaming %llu ns: %s",
                 (unsigned long long)t->in_bytes, (unsigned long long)t->out_bytes,
                 (unsigned long long)c, (unsigned long long)s, t->nt ? "streaming" : "cached");
    }
}

void coll_nt_done(coll_reuse_t *r)
{
    coll_form_done(r);
    if (r->pend_slot != 0) {
        uint64_t now = zc_time_ns();
        if (now > r->pend_t0) {
            coll_nt_learn(r, now - r->pend_t0);
        } else {
            r->pend_slot = 0;
        }
    }
}

/* The model's answer for an op whose every rank reads in_bytes and writes
 * out_bytes, this rank's output at out: -1 when the history does not apply
 * (no history, the size rule alone: *nt says it), else 0 / 1 in *nt, with
 * *trial set when a trial decides instead: from W/2 to just under W where
 * the model says cached, from W to just under 2 W where the size rule
 * streams an output used within the last W bytes.
 * Changes nothing. */
static int coll_nt_model(const coll_args_t *a, size_t in_bytes, size_t out_bytes, const void *out,
                         int *nt, int *trial)
{
    *nt = coll_use_nt_op(a, in_bytes, out_bytes);
    *trial = 0;
    size_t nt_min = a->tune != NULL ? a->tune->nt_min : COLL_DEFAULT_NT_MIN;
    size_t per_rank = in_bytes + out_bytes;
    size_t data = per_rank * (size_t)a->nranks;
    if (a->reuse == NULL || nt_min == 0 || per_rank < in_bytes ||
        data / (size_t)a->nranks != per_rank) {
        return -1;
    }
    if (data < COLL_NT_MIN_DATA) {
        *nt = 0;
        return 0;
    }
    uint64_t window = 2 * (uint64_t)nt_min;
    uint64_t age = coll_reuse_age(a->reuse, (uintptr_t)out, (uintptr_t)out + out_bytes, window);
    if (*nt) {
        /* the size rule's answer, tried up to 2 W on an output that was
         * touched within the last W bytes (a rotation streams untried) */
        *trial = data / 2 < window && age < window;
        return 1;
    }
    *nt = age > window - data;
    *trial = !*nt && data >= window / 2;
    return 1;
}

/* Count an op of kind nt (one writer: no locked instruction). */
static int coll_nt_count(coll_reuse_t *r, int nt)
{
    if (r != NULL) {
        _Atomic uint64_t *n = &r->kind_ops[nt != 0];
        atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    }
    return nt;
}

int coll_nt_choose(const coll_args_t *a, size_t in_bytes, size_t out_bytes)
{
    int nt, trial;
    int model = coll_nt_model(a, in_bytes, out_bytes, a->out[a->rank], &nt, &trial);
    if (model <= 0) {
        return coll_nt_count(a->reuse, nt);
    }
    coll_reuse_t *r = a->reuse;
    size_t data = (in_bytes + out_bytes) * (size_t)a->nranks;
    r->pend_slot = 0; /* a sample nobody reported done is dropped */
    if (trial) {
        nt = coll_trial_pick(r, in_bytes, out_bytes, a->start_ns, nt);
    }
    coll_reuse_note(r, a->in[a->rank], in_bytes, a->out[a->rank], out_bytes, data);
    return coll_nt_count(r, nt);
}

/* The shape's trial slot, NULL when it has none. */
static const coll_trial_t *coll_trial_find(const coll_reuse_t *r, size_t in_bytes, size_t out_bytes)
{
    for (int k = 0; k < COLL_TRIAL_SLOTS; k++) {
        const coll_trial_t *t = &r->trial[k];
        if (t->in_bytes == in_bytes && t->out_bytes == out_bytes) {
            return t;
        }
    }
    return NULL;
}

uint32_t coll_nt_trial_number(const coll_reuse_t *r, size_t in_bytes, size_t out_bytes)
{
    const coll_trial_t *t = coll_trial_find(r, in_bytes, out_bytes);
    return t != NULL ? t->number : 0;
}

int coll_nt_settled_cached(const coll_reuse_t *r, const coll_tuning_t *tune, int nranks,
                           size_t in_bytes, size_t out_bytes, const void *out)
{
    coll_args_t a = {.nranks = nranks, .tune = tune, .reuse = (coll_reuse_t *)(uintptr_t)r};
    int nt, trial;
    if (coll_nt_model(&a, in_bytes, out_bytes, out, &nt, &trial) <= 0) {
        return 0;
    }
    if (!trial) {
        return !nt;
    }
    /* Inside the trial's band: the shape's trial holds a cached verdict,
     * past the op that adopted the ranks' majority (the kind is the same on
     * every rank and stays until the next trial). */
    const coll_trial_t *t = coll_trial_find(r, in_bytes, out_bytes);
    return t != NULL && t->step > COLL_TRIAL_SETTLE + coll_trial_ops(t) && !t->nt;
}

int coll_nt_expect(const coll_reuse_t *r, const coll_tuning_t *tune, int nranks, size_t in_bytes,
                   size_t out_bytes, const void *out)
{
    /* the model reads a->reuse, a->tune and a->nranks only */
    coll_args_t a = {.nranks = nranks, .tune = tune, .reuse = (coll_reuse_t *)(uintptr_t)r};
    int nt, trial;
    coll_nt_model(&a, in_bytes, out_bytes, out, &nt, &trial);
    const coll_trial_t *t = trial ? coll_trial_find(r, in_bytes, out_bytes) : NULL;
    return t != NULL ? coll_trial_kind_at(t, t->step) : nt; /* what the next op runs */
}
