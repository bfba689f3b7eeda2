/* The cases and checks declared in zt_coll_run.h, compiled once into the test library. */
#include "zt_coll_run.h"

static void zt_cc_release(zt_ccrun_t *r)
{
    free(r->rbefore);
    free(r->sbefore);
    r->rbefore = NULL;
    r->sbefore = NULL;
}

int zt_cc_start(zt_env_t *env, const zt_cc_t *c, zt_ccrun_t *r)
{
    memset(r, 0, sizeof(*r));
    r->c = *c;
    r->env = env;
    zt_cplan_t *p = &r->p;
    if (zt_cc_plan(c, env->nranks, env->rank, 1, p) != 0) {
        ZT_CC_FAIL(r, "test bug: no plan");
        return 2;
    }
    unsigned char *arena = p->zc ? env->zc.va : env->plain;
    size_t mis = !c->misalign ? 0 : p->es == 1 ? 3 : p->es;
    if (arena == NULL || zt_cc_need(c, env->nranks) > env->half) {
        ZT_CC_FAIL(r, "test bug: arena half of %zu bytes missing or too small", env->half);
        return 2;
    }
    r->rbase = arena + env->half + ZT_CC_ROOM + mis;
    if (p->in_place) {
        r->rlen = p->outer;
        r->send = r->rbase + p->soff;
        r->recv = r->rbase + p->roff;
    } else {
        r->rlen = p->rreg;
        r->slen = p->sreg;
        r->sbase = arena + ZT_CC_ROOM + mis;
        r->send = r->sbase;
        r->recv = r->rbase;
        memset(r->sbase - ZT_CC_GUARD, ZT_CC_SEND_SENT, r->slen + 2 * ZT_CC_GUARD);
    }
    memset(r->rbase - ZT_CC_GUARD, ZT_CC_SENT, r->rlen + 2 * ZT_CC_GUARD);
    zt_cc_fill_send(c, p, c->coll == ZT_CC_BROADCAST ? r->recv : r->send);
    r->rbefore = malloc(r->rlen + 2 * ZT_CC_GUARD);
    r->sbefore = malloc(r->slen + 2 * ZT_CC_GUARD);
    if (r->rbefore == NULL || r->sbefore == NULL) {
        ZT_CC_FAIL(r, "test bug: out of memory");
        zt_cc_release(r);
        return 2;
    }
    memcpy(r->rbefore, r->rbase - ZT_CC_GUARD, r->rlen + 2 * ZT_CC_GUARD);
    if (r->sbase != NULL) {
        memcpy(r->sbefore, r->sbase - ZT_CC_GUARD, r->slen + 2 * ZT_CC_GUARD);
    }
    r->st0 = zccl_comm_staged_bytes(env->comm);
    r->zc0 = zccl_comm_zero_copy_ops(env->comm);
    r->bo0 = zccl_comm_buffered_ops(env->comm);
    r->args = *p;
    HcclResult h = zt_cc_call(c->coll, &r->args, p->send_null ? NULL : r->send,
                              p->recv_null ? NULL : r->recv, env->comm, env->stream);
    /* The call copied the arrays it needs: the caller may reuse them at once. */
    memset(r->args.scnt, 0xee, sizeof(r->args.scnt));
    memset(r->args.sdsp, 0xee, sizeof(r->args.sdsp));
    memset(r->args.rcnt, 0xee, sizeof(r->args.rcnt));
    memset(r->args.rdsp, 0xee, sizeof(r->args.rdsp));
    memset(r->args.mat, 0xee, sizeof(r->args.mat));
    if (h == HCCL_E_PARA && c->deviate != ZT_DEV_NONE) {
        r->call_para = 1;
        return 0;
    }
    if (h != HCCL_SUCCESS) {
        ZT_CC_FAIL(r, "call returned %d (%s)", (int)h, HcclGetErrorString(h));
        zt_cc_release(r);
        return 2;
    }
    return 0;
}

/* Bytes [0, len) of got equal want; else reports the first difference. */
static int zt_cc_same(zt_ccrun_t *r, const unsigned char *got, const unsigned char *want,
                      size_t len, const char *what)
{
    for (size_t i = 0; i < len; i++) {
        if (got[i] != want[i]) {
            ZT_CC_FAIL(r, "%s: byte %zu is 0x%02x, want 0x%02x", what, i, got[i], want[i]);
            return 1;
        }
    }
    return 0;
}

/* Which path rank me must take: zero-copy unless some rank has bytes to
 * move outside activated memory (a rank with none counts as covered). Across
 * hosts each host decides for its own ranks (its local steps are ops of its
 * own; a Scatter from another host has none here), and a Reduce's partial
 * on a host of several ranks without the root has no buffer of the user's
 * to land in: it goes through the delegate's scratch, so that host's local
 * Reduce is buffered. */
static int zt_cc_expect_zc(const zt_cc_t *c, int n, int me, int *all_empty)
{
    int zc = 1;
    *all_empty = 1;
    /* A Scatter from another host moves nothing within mine: only my own
     * buffers count. */
    int alone = c->coll == ZT_CC_SCATTER && !zt_ref_same_host(c->root, me, n);
    for (int q = 0; q < n; q++) {
        zt_cplan_t p;
        zt_cc_plan(c, n, q, 1, &p);
        int empty = p.slib == 0 && p.rlib == 0;
        *all_empty &= empty;
        zc &= p.zc || empty || !zt_ref_same_host(q, me, n) || (alone && q != me);
    }
    if (c->coll == ZT_CC_REDUCE && !zt_ref_same_host(c->root, me, n) &&
        zt_ref_host_ranks(me, n) > 1) {
        zc = 0;
    }
    return zc;
}

int zt_cc_expect_buffered(const zt_cc_t *c, int n, int me)
{
    int empty = 0;
    int zc = zt_cc_expect_zc(c, n, me, &empty);
    return n > 1 && !empty && !zc;
}

static int zt_cc_counters(zt_ccrun_t *r)
{
    zt_env_t *env = r->env;
    uint64_t st = zccl_comm_staged_bytes(env->comm);
    uint64_t zc = zccl_comm_zero_copy_ops(env->comm);
    uint64_t bo = zccl_comm_buffered_ops(env->comm);
    int empty = 0;
    int zc_path = zt_cc_expect_zc(&r->c, env->nranks, env->rank, &empty);
    if (zc_path && st != r->st0) {
        ZT_CC_FAIL(r, "staged bytes went %" PRIu64 " -> %" PRIu64 " on the zero-copy path", r->st0,
                   st);
        return 1;
    }
    if (env->nranks < 2 || empty) {
        return 0;
    }
    if (st < r->st0 || zc != r->zc0 + (zc_path ? 1 : 0) || bo != r->bo0 + (zc_path ? 0 : 1)) {
        ZT_CC_FAIL(r,
                   "counters: staged %" PRIu64 " -> %" PRIu64 ", zero-copy ops %" PRIu64
                   " -> %" PRIu64 ", buffered ops %" PRIu64 " -> %" PRIu64 "; want one %s op",
                   r->st0, st, r->zc0, zc, r->bo0, bo, zc_path ? "zero-copy" : "buffered");
        return 1;
    }
    return 0;
}

int zt_cc_finish(zt_ccrun_t *r, aclError sync_rc)
{
    const zt_cc_t *c = &r->c;
    zt_env_t *env = r->env;
    size_t glen = r->rlen + 2 * ZT_CC_GUARD;
    int bad = 0;
    if (c->deviate != ZT_DEV_NONE) {
        if (!r->call_para && sync_rc != (aclError)HCCL_E_PARA) {
            ZT_CC_FAIL(r,
                       "want HCCL_E_PARA from the call or the sync on every rank; the call "
                       "succeeded and the sync returned %d",
                       (int)sync_rc);
            zt_cc_release(r);
            return 2;
        }
        if (r->call_para && sync_rc != ACL_SUCCESS) {
            ZT_CC_FAIL(r, "call refused with HCCL_E_PARA but the sync then returned %d",
                       (int)sync_rc);
            zt_cc_release(r);
            return 2;
        }
        bad |= zt_cc_same(r, r->rbase - ZT_CC_GUARD, r->rbefore, glen, "output after a refused op");
    } else if (sync_rc != ACL_SUCCESS) {
        ZT_CC_FAIL(r, "aclrtSynchronizeStream returned %d", (int)sync_rc);
        zt_cc_release(r);
        return 2;
    } else {
        unsigned char *want = malloc(glen);
        if (want == NULL) {
            ZT_CC_FAIL(r, "test bug: out of memory");
            zt_cc_release(r);
            return 2;
        }
        memcpy(want, r->rbefore, glen);
        size_t roff = (size_t)(r->recv - r->rbase);
        if (zt_cc_expect(c, &r->p, want + ZT_CC_GUARD + roff) != 0) {
            ZT_CC_FAIL(r, "test bug: no reference for this dtype and op");
            bad = 1;
        } else {
            char what[320];
            char cs[256];
            zt_cc_str(c, cs, sizeof(cs));
            snprintf(what, sizeof(what),
                     "[rank %d/%d] FAIL %s: output region (recv at element %zu)", env->rank,
                     env->nranks, cs, roff / r->p.es);
            bad |=
                zt_compare(what, r->rbase, want + ZT_CC_GUARD, r->rlen / r->p.es, r->p.dtype) != 0;
            bad |= zt_cc_same(r, r->rbase - ZT_CC_GUARD, want, ZT_CC_GUARD, "bytes before output");
            bad |= zt_cc_same(r, r->rbase + r->rlen, want + ZT_CC_GUARD + r->rlen, ZT_CC_GUARD,
                              "bytes after output");
        }
        free(want);
    }
    if (r->sbase != NULL) {
        bad |= zt_cc_same(r, r->sbase - ZT_CC_GUARD, r->sbefore, r->slen + 2 * ZT_CC_GUARD,
                          "input region (with guards) changed");
    }
    if (c->deviate == ZT_DEV_NONE && !r->skip_counters) {
        bad |= zt_cc_counters(r);
    }
    zt_cc_release(r);
    return bad ? 1 : 0;
}

int zt_cc_run(zt_env_t *env, const zt_cc_t *c)
{
    zt_ccrun_t r;
    int rc = zt_cc_start(env, c, &r);
    if (rc != 0) {
        return rc;
    }
    return zt_cc_finish(&r, aclrtSynchronizeStream(env->stream));
}

void zt_bad_check(zt_bad_t *b, const char *what, int line, int got, int want)
{
    b->cases++;
    if (got != want) {
        b->fails++;
        zt_report(b->env, "line %d: %s returned %d, want %d", line, what, got, want);
    }
}

int zt_cc_rank_job(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    const zt_cc_job_t *job = arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int fails = job->body(&env, job->arg);
    if (zt_env_close(&env) != 0) {
        fails++;
    }
    return fails;
}
