/*
 * AllGather's form where its output is probably cached: push or pull, as a
 * timed trial on this host finds (docs/decisions/0009).
 *
 * From 512 KiB of output per rank the direct AllGather pushes: each rank
 * copies its block into every output, reading it from memory once
 * (coll_allgather.c). With the outputs still cached that saving is small,
 * and pulling, where every rank writes only its own output, can win
 * instead: on one host pulling ran 5-10 % faster at 1-4 MiB reused, on
 * another 20 % slower. No size rule fits both, so the ranks time both forms
 * on the op shapes where the question arises.
 *
 * The band: AllGather ops from 512 KiB of output per rank whose stores
 * are cached and settled (coll_nt_settled_cached): the store-kind model
 * expects the output cached outside its own trial's band (the op's data
 * under W/2, the history reaching back to the output), or inside that
 * trial's bands (W/2 to 2 W) the shape's store-kind trial holds a cached
 * verdict. There the stores are cached whatever the form, and an op of a
 * store-kind trial is out of the band (unsampled: see below), so the two
 * trials never time each other's choices. Elsewhere the op pushes, but
 * for those cached ops (below). Inside the store-kind band too the better
 * form moves with the host (decision 0009).
 *
 * The schedule of a shape: COLL_FORM_SETTLE ops push (a program's first
 * ops pay page faults and a cold cache), then the trial: COLL_FORM_HALF
 * ops push, COLL_FORM_RUN pull, COLL_FORM_HALF push, the first op of each
 * run untimed (it pays for the state the other form left) and the fastest
 * of the others counting for each form. Each rank then votes pull when it
 * found pull at least 1/COLL_FORM_MARGIN faster, else push, and the ranks'
 * majority is the verdict: pull is kept for COLL_FORM_HOLD_PULL ops, push
 * for COLL_FORM_HOLD_PUSH; then a new trial. A trial none of whose pull
 * run's ops pulled (they left the band, or a rank asked to push) starts
 * again at once and keeps the verdict before it: out of the band the op
 * pushes whatever the trial says. A sample runs from the op's common start
 * (the last rank's post) to the end of this rank's exit barrier, as the
 * store kind's do, so the ranks' figures agree.
 *
 * Agreement: every rank steps the schedule at each AllGather's post, band
 * or not, so all ranks are at the same step of the same shape (every rank
 * posts the same sequence of ops). A rank's post asks to pull or not, and
 * vetoes pulling when its stores are not cached (COLL_FORM_*); the op pulls
 * only when no post vetoed and more than half asked (coll_form_pulls),
 * which every rank reads alike, so a pulling rank never meets a pushing
 * one. The first op after a trial carries each rank's vote, and every rank
 * takes the posts' majority as the verdict (coll_form_agree): the holds,
 * and so the next trials, stay in step. Before, each rank kept its own verdict:
 * at np 4 on two cores ranks split 3 to 1 in two runs of four, the ops
 * then pushed where most ranks found pull, and a rank whose hold ran out
 * early tried again at every op, its pull ops turned to push by its peers
 * (perf log 2026-12-07, night).
 *
 * The store-kind trial's cached ops (its own, and the settling and adopting
 * ops of a shape in its band, where the stores are not yet settled) run the
 * form the shape holds, unsampled: that trial then weighs what each of its
 * verdicts would run, cached stores with the form found for them against
 * streaming pushes. Pushing there instead, it weighed cached pushes, and
 * where pulling was what made cached stores win (np 2, 8 MiB of output,
 * reused) a later trial went back to streaming, which no form trial could
 * leave (perf log 2026-12-07, night). Before a form trial has found a
 * verdict (none runs until a store-kind trial keeps cached stores), those
 * cached ops pull in the shape's odd store-kind trials (the first) and push
 * in its even ones (coll_form_held): where cached stores won only by
 * pulling, a first trial that weighed cached pushes found streaming ahead,
 * and every later one weighed them again (np 2, 8 MiB of output, a run
 * streaming 95 % of its ops at 65.8 % of the reference's cached pull; perf
 * log 2026-12-07, late). Streaming ops veto: the form trial times only
 * cached stores.
 */
#include "coll_internal.h"

#include "zc/sync.h"

#include <string.h>

#define COLL_FORM_SETTLE 16u
#define COLL_FORM_HALF 3u /* each pushing half of a trial */
#define COLL_FORM_RUN 4u  /* its pulling run */
#define COLL_FORM_OPS (2u * COLL_FORM_HALF + COLL_FORM_RUN)
#define COLL_FORM_HOLD_PULL 256u
#define COLL_FORM_HOLD_PUSH 1024u
#define COLL_FORM_MARGIN 50u /* pull over push: 2 % faster */

/* What the AllGather a rank posted last settles (coll_reuse_t.form_op_role) */
#define COLL_FORM_ROLE_VERDICT 1  /* the first op after a trial: its form is the verdict */
#define COLL_FORM_ROLE_PULL_RUN 2 /* an op of a trial's pull run */

static coll_form_t *coll_form_slot(coll_reuse_t *r, size_t in_bytes, size_t out_bytes)
{
    coll_form_t *lru = &r->form[0];
    for (int k = 0; k < COLL_FORM_SLOTS; k++) {
        coll_form_t *f = &r->form[k];
        if (f->in_bytes == in_bytes && f->out_bytes == out_bytes) {
            return f;
        }
        lru = f->used < lru->used ? f : lru;
    }
    memset(lru, 0, sizeof(*lru));
    lru->in_bytes = in_bytes;
    lru->out_bytes = out_bytes;
    return lru;
}

/* The form of a trial's step: push, pull, push. */
static int coll_form_kind(uint32_t step)
{
    return step >= COLL_FORM_HALF && step < COLL_FORM_HALF + COLL_FORM_RUN;
}

/* Did a finished trial time both forms? */
static int coll_form_timed(const coll_form_t *f)
{
    return f->best_ns[0] != UINT64_MAX && f->best_ns[1] != UINT64_MAX;
}

/* The verdict of a trial that timed both forms: pull only when it won by
 * the margin. */
static int coll_form_verdict(const coll_form_t *f)
{
    uint64_t push = f->best_ns[0];
    uint64_t pull = f->best_ns[1];
    int win = pull < push - push / COLL_FORM_MARGIN;
    ZC_DEBUG(ZC_SUB_COLL, "AllGather form trial %llu/%llu bytes: push %llu ns, pull %llu ns: %s",
             (unsigned long long)f->in_bytes, (unsigned long long)f->out_bytes,
             (unsigned long long)push, (unsigned long long)pull, win ? "pull" : "push");
    return win;
}

/* Step the shape's schedule; the form its op k asks for. */
static int coll_form_step(coll_reuse_t *r, coll_form_t *f, uint32_t *trial_step)
{
    uint32_t k = f->step;
    uint32_t hold = f->pull ? COLL_FORM_HOLD_PULL : COLL_FORM_HOLD_PUSH;
    f->step = k + 1 == COLL_FORM_SETTLE + COLL_FORM_OPS + hold ? COLL_FORM_SETTLE : k + 1;
    f->used = ++r->forms;
    *trial_step = UINT32_MAX;
    if (k < COLL_FORM_SETTLE) {
        return 0;
    }
    uint32_t step = k - COLL_FORM_SETTLE;
    if (step == COLL_FORM_OPS && f->pulled == 0) {
        /* no op pulled (out of the band, or a rank pushed): again, alike on
           every rank (the ops' forms are) */
        step = 0;
        f->step = COLL_FORM_SETTLE + 1;
    }
    if (step == 0) {
        f->best_ns[0] = f->best_ns[1] = UINT64_MAX;
        f->pulled = 0;
    }
    if (step == COLL_FORM_OPS) {
        /* this rank's vote (push when it lacks a form's samples); the op
           makes the ranks' majority the verdict (coll_form_agree) */
        f->pull = coll_form_timed(f) && coll_form_verdict(f);
        r->form_op_role = COLL_FORM_ROLE_VERDICT;
    }
    if (step >= COLL_FORM_OPS) {
        return f->pull;
    }
    *trial_step = step;
    r->form_op_role = coll_form_kind(step) ? COLL_FORM_ROLE_PULL_RUN : 0;
    return coll_form_kind(step);
}

/* The form a store-kind trial's cached ops (and a shape's settling and
 * adopting ops in its band) run: the verdict once a form trial has found
 * one; before that pull in the shape's odd store-kind trials (the first:
 * cached stores suit pulling, where each rank writes only its own output)
 * and push in its even ones, so the kind trial weighs both forms of cached
 * stores against streaming in turn; the settling ops push. */
static int coll_form_held(const coll_reuse_t *r, const coll_form_t *f)
{
    if (f->found) {
        return f->pull;
    }
    return coll_nt_trial_number(r, f->in_bytes, f->out_bytes) % 2 == 1;
}

int coll_allgather_pull_want(coll_reuse_t *r, const coll_tuning_t *tune, int nranks,
                             size_t in_bytes, size_t out_bytes, const void *out)
{
    if (r != NULL) {
        r->form_pend_slot = 0; /* a sample nobody reported done is dropped */
        r->form_ran = 0;
        r->form_op_slot = 0;
        r->form_op_role = 0;
    }
    size_t min = tune != NULL ? tune->ag_pull_min : 0;
    if (out_bytes < COLL_AG_PUSH_MIN || r == NULL) {
        return COLL_FORM_VETO; /* below, every AllGather pulls */
    }
    if (min > 0) { /* the fixed rule */
        int pull = out_bytes >= min && !coll_nt_expect(r, tune, nranks, in_bytes, out_bytes, out);
        return pull ? COLL_FORM_PULL : COLL_FORM_VETO;
    }
    coll_form_t *f = coll_form_slot(r, in_bytes, out_bytes);
    uint32_t step;
    int pull = coll_form_step(r, f, &step);
    r->form_op_slot = (int)(f - r->form) + 1;
    if (!coll_nt_settled_cached(r, tune, nranks, in_bytes, out_bytes, out)) {
        /* not the form trial's op: unsampled, and its pulling counts for no
           trial; cached (a store-kind trial's), it runs the form held */
        if (r->form_op_role == COLL_FORM_ROLE_PULL_RUN) {
            r->form_op_role = 0;
        }
        int cached = !coll_nt_expect(r, tune, nranks, in_bytes, out_bytes, out);
        return (coll_form_held(r, f) ? COLL_FORM_PULL : 0) | (cached ? 0 : COLL_FORM_VETO);
    }
    /* the first op of each run is untimed */
    if (step != UINT32_MAX && step != 0 && coll_form_kind(step) == coll_form_kind(step - 1)) {
        r->form_pend_slot = (int)(f - r->form) + 1;
    }
    return pull ? COLL_FORM_PULL : 0;
}

int coll_form_pulls(int pulls, int nranks)
{
    return 2 * pulls > nranks;
}

void coll_form_agree(coll_reuse_t *r, int pull, int majority)
{
    if (r == NULL) {
        return;
    }
    int slot = r->form_op_slot;
    int role = r->form_op_role;
    r->form_op_slot = 0;
    r->form_op_role = 0;
    if (slot <= 0 || slot > COLL_FORM_SLOTS) {
        return;
    }
    coll_form_t *f = &r->form[slot - 1];
    if (role == COLL_FORM_ROLE_PULL_RUN && pull) {
        f->pulled++;
    }
    if (role == COLL_FORM_ROLE_VERDICT) {
        f->found = 1;
    }
    if (role == COLL_FORM_ROLE_VERDICT && f->pull != (majority != 0)) {
        f->pull = majority != 0;
        ZC_DEBUG(ZC_SUB_COLL, "AllGather form trial %llu/%llu bytes: %s, as the ranks' majority",
                 (unsigned long long)f->in_bytes, (unsigned long long)f->out_bytes,
                 f->pull ? "pull" : "push");
    }
}

void coll_form_ran(coll_reuse_t *r, int pull, uint64_t start_ns)
{
    if (r != NULL && r->form_pend_slot != 0) {
        r->form_ran = 1 + (pull != 0);
        r->form_t0 = start_ns != 0 ? start_ns : zc_time_ns();
    }
}

void coll_form_learn(coll_reuse_t *r, uint64_t ns)
{
    int slot = r->form_pend_slot;
    int ran = r->form_ran;
    r->form_pend_slot = 0;
    r->form_ran = 0;
    if (slot <= 0 || slot > COLL_FORM_SLOTS || ran == 0) {
        return;
    }
    /* the form the op ran, which a peer's post may have turned to push */
    uint64_t *best = &r->form[slot - 1].best_ns[ran - 1];
    *best = ns < *best ? ns : *best;
}

void coll_form_done(coll_reuse_t *r)
{
    if (r->form_pend_slot == 0 || r->form_ran == 0) {
        return;
    }
    uint64_t now = zc_time_ns();
    if (now > r->form_t0) {
        coll_form_learn(r, now - r->form_t0);
    } else {
        r->form_pend_slot = 0;
        r->form_ran = 0;
    }
}
