/*
 * AllGather and AllGatherV: every rank's send block lands at its slot of
 * every rank's recv buffer.
 *
 * Direct path:
 *  - pull, below 512 KiB of output per rank: rank r copies in[q] into its
 *    own out[r] slot q for every q, starting at q = r so the ranks spread
 *    their first reads over different sources. Only rank r writes out[r],
 *    and the writes stay in the cache hierarchy of the rank that will use
 *    the result.
 *  - push, from 512 KiB: rank r copies in[r] into slot r of every out[q],
 *    32 KiB to every output before the next, so in[r] is read from memory
 *    once: (n + 1) x S bytes of traffic per rank against pull's 2n x S,
 *    which counts with buffers out of the cache (docs/decisions/0009). Only rank
 *    r writes slot r of any output; the caller's exit barrier orders the
 *    writes before any rank returns.
 *  - pull again when the ranks' posts say so (a->pull: no rank out of the
 *    band, more than half asking; coll_form_pulls): each rank asks when its
 *    output is probably cached and a timed trial of both forms on this host
 *    found pulling faster, or, with tune->ag_pull_min (ZCCL_AG_PULL_MIN) set,
 *    from that size (coll_allgather_pull_want in coll_form.c, called by
 *    hccl_op_post.c). With the outputs cached, the traffic push saves costs
 *    little, and pull keeps every rank's writes in its own cache; whether
 *    that wins depends on the host (docs/decisions/0009).
 * Every rank makes the same choice: it depends on the size and the posts,
 * which every rank reads alike (a pulling rank beside a pushing one would
 * leave slots unwritten).
 * Each picks cached or streaming stores by where the output probably is (coll_nt.c).
 * In place (in[r] == slot r of out[r]) the own copy is a no-op and peers read in[r] while
 * nobody writes it: safe with no barrier. An in[r] that overlaps out[r] any other way would be
 * overwritten while peers read it: then every rank pulls, those ranks into a private buffer that
 * they commit after one barrier (coll_run_owned).
 *
 * Staged path, per round of up to one CCL buffer per rank:
 *   copy my chunk of send into ccl[me]; barrier;
 *   copy chunk q from every ccl[q] into recv slot q (my own from send);
 *   barrier before the next round overwrites ccl[me].
 * Round k reads send chunk k only, and writes only chunk k of each slot, so
 * the in-place form (send == recv slot me) is safe; other overlaps use a
 * private copy of send.
 *
 * AllGatherV: recv_counts[r][q] / recv_displs[r][q] are rank r's arguments
 * (elements). Every rank must pass the same recv_counts (checked); rank q
 * sends recv_counts[0][q] elements (count, the send count, is not used:
 * the arrays are the version all ranks can check alike).
 */
#include "coll_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- AllGather ---- */

/* Bytes of my block pushed to every output before the next: read from
 * memory once, it stays in L1 for the other n - 1 copies. */
#define COLL_AG_PUSH_CHUNK ((size_t)32 << 10)

/* Pull into base (out[me] or a private buffer). */
static int coll_ag_work(const coll_args_t *a, char *base, void *ctx)
{
    size_t bytes = *(const size_t *)ctx;
    size_t total = bytes * (size_t)a->nranks;
    coll_pull_blocks(a, base, bytes, 0, coll_nt_choose(a, bytes, total));
    return ZC_OK;
}

/* Push: in[me] into slot me of every out[q]. */
static void coll_ag_push(const coll_args_t *a, size_t bytes)
{
    int me = a->rank;
    size_t total = bytes * (size_t)a->nranks;
    const char *src = a->in[me];
    size_t slot = (size_t)me * bytes;
    int nt = coll_nt_choose(a, bytes, total);
    for (size_t o = 0; o < bytes; o += COLL_AG_PUSH_CHUNK) {
        size_t len = ZC_MIN(COLL_AG_PUSH_CHUNK, bytes - o);
        for (int k = 0; k < a->nranks; k++) {
            int q = (me + k) % a->nranks;
            coll_put((char *)a->out[q] + slot + o, src + o, len, nt);
        }
    }
    if (nt) {
        coll_store_fence();
    }
}

int coll_allgather_direct(const coll_args_t *a)
{
    static const char what[] = "allgather_direct";
    size_t es, bytes, total;
    ZC_CHECK(coll_begin(a, COLL_F_DIRECT, what, &es, &bytes, &total));
    if (bytes == 0) {
        return ZC_OK;
    }
    int any, me;
    ZC_CHECK(coll_blocks_conflicts(a, bytes, total, COLL_INPLACE_IN_SLOT, what, bytes, &any, &me));
    if (!any && total >= COLL_AG_PUSH_MIN) {
        coll_form_ran(a->reuse, a->pull, a->start_ns);
        if (!a->pull) {
            coll_ag_push(a, bytes);
            return ZC_OK;
        }
    }
    return coll_run_owned(a, any, me, total, coll_ag_work, NULL, &bytes);
}

int coll_allgather_staged(const coll_args_t *a)
{
    static const char what[] = "allgather_staged";
    size_t es, bytes, total, per, rounds;
    ZC_CHECK(coll_begin(a, COLL_F_STAGED, what, &es, &bytes, &total));
    if (bytes == 0) {
        return ZC_OK;
    }
    ZC_CHECK(coll_stage_plan(a, 1, a->count, what, &per, &rounds));
    int me = a->rank;
    char *recv = a->recv;
    /* in place: send is my slot of recv */
    int safe = (uintptr_t)a->send == (uintptr_t)recv + (size_t)me * bytes;
    const char *send;
    void *snap;
    ZC_CHECK(coll_stage_io(a, bytes, total, safe, what, 2 * rounds - 1, &send, &snap));

    int nt = coll_use_nt(a, total);
    int st = ZC_OK;
    for (size_t k = 0; k < rounds; k++) {
        size_t co = k * per * es;
        size_t cl = ZC_MIN(per, a->count - k * per) * es;
        if (k > 0) {
            ZC_CHECK_GOTO(coll_barrier(a), st, out);
        }
        coll_stage_in(a, a->ccl[me], send + co, cl);
        ZC_CHECK_GOTO(coll_barrier(a), st, out);
        for (int i = 0; i < a->nranks; i++) {
            int q = (me + i) % a->nranks;
            const char *src = q == me ? send + co : (const char *)a->ccl[q];
            coll_put(recv + (size_t)q * bytes + co, src, cl, nt);
        }
    }
out:
    if (nt) {
        coll_store_fence();
    }
    free(snap);
    return st;
}

/* ---- AllGatherV ---- */

typedef struct {
    size_t es;
    size_t extent; /* bytes of recv covered by the largest displ + count */
    const uint64_t *cnt;
    const uint64_t *const *displs;
} coll_agv_t;

/* Every rank passed the same recv_counts, and every displ + count fits. */
static int coll_agv_check(const coll_args_t *a, coll_agv_t *v, const char *what)
{
    ZC_CHECK(coll_check_vec(a, a->recv_counts, a->recv_displs, "recv_counts / recv_displs", what));
    v->es = coll_dtype_size(a->dtype);
    v->cnt = a->recv_counts[0];
    v->displs = a->recv_displs;
    for (int r = 0; r < a->nranks; r++) {
        for (int q = 0; q < a->nranks; q++) {
            uint64_t c = a->recv_counts[r][q];
            if (c != v->cnt[q]) {
                ZC_WARN(ZC_SUB_COLL,
                        "rank %d %s: rank %d's recv_counts[%d] = %llu but rank 0's is %llu",
                        a->rank, what, r, q, (unsigned long long)c, (unsigned long long)v->cnt[q]);
                return ZC_ERR_INVAL;
            }
            ZC_CHECK(coll_check_span(a, r, c, a->recv_displs[r][q], v->es, what));
        }
    }
    v->extent = coll_extent(v->cnt, v->displs[a->rank], a->nranks, v->es);
    return ZC_OK;
}

static int coll_agv_work(const coll_args_t *a, char *base, void *ctx)
{
    const coll_agv_t *v = ctx;
    int nt = coll_use_nt(a, v->extent);
    for (int k = 0; k < a->nranks; k++) {
        int q = (a->rank + k) % a->nranks;
        coll_put(base + v->displs[a->rank][q] * v->es, a->in[q], v->cnt[q] * v->es, nt);
    }
    if (nt) {
        coll_store_fence();
    }
    return ZC_OK;
}

static void coll_agv_commit(const coll_args_t *a, const char *tmp, void *ctx)
{
    const coll_agv_t *v = ctx;
    for (int q = 0; q < a->nranks; q++) {
        size_t o = v->displs[a->rank][q] * v->es;
        memcpy((char *)a->out[a->rank] + o, tmp + o, v->cnt[q] * v->es);
    }
}

int coll_allgatherv_direct(const coll_args_t *a)
{
    static const char what[] = "allgatherv_direct";
    coll_agv_t v;
    ZC_CHECK(coll_check(a, COLL_F_DIRECT, what));
    ZC_CHECK(coll_agv_check(a, &v, what));
    int any = 0;
    int me_conflict = 0;
    for (int q = 0; q < a->nranks; q++) {
        size_t ext = coll_extent(v.cnt, v.displs[q], a->nranks, v.es);
        size_t sb = v.cnt[q] * v.es;
        ZC_CHECK(coll_check_buf(a->in[q], sb, what, "in[q]", q));
        ZC_CHECK(coll_check_buf(a->out[q], ext, what, "out[q]", q));
        const char *slot = (const char *)a->out[q] + a->recv_displs[q][q] * v.es;
        if (a->in[q] != slot && coll_overlap(a->in[q], sb, a->out[q], ext)) {
            any = 1;
            me_conflict |= q == a->rank;
        }
    }
    if (v.extent == 0) {
        return ZC_OK;
    }
    return coll_run_owned(a, any, me_conflict, v.extent, coll_agv_work, coll_agv_commit, &v);
}

int coll_allgatherv_staged(const coll_args_t *a)
{
    static const char what[] = "allgatherv_staged";
    coll_agv_t v;
    ZC_CHECK(coll_check(a, COLL_F_STAGED, what));
    ZC_CHECK(coll_agv_check(a, &v, what));
    size_t per, rounds;
    uint64_t maxc = coll_max_u64(v.cnt, a->nranks);
    ZC_CHECK(coll_stage_plan(a, 1, maxc, what, &per, &rounds));
    if (maxc == 0) {
        return ZC_OK;
    }
    int me = a->rank;
    size_t es = v.es;
    const uint64_t *rd = a->recv_displs[me];
    char *recv = a->recv;
    int safe = (uintptr_t)a->send == (uintptr_t)recv + rd[me] * es;
    const char *send;
    void *snap;
    ZC_CHECK(coll_stage_io(a, v.cnt[me] * es, v.extent, safe, what, 2 * rounds - 1, &send, &snap));

    int nt = coll_use_nt(a, v.extent);
    int st = ZC_OK;
    for (size_t k = 0; k < rounds; k++) {
        size_t lo = k * per;
        if (k > 0) {
            ZC_CHECK_GOTO(coll_barrier(a), st, out);
        }
        if (v.cnt[me] > lo) {
            coll_stage_in(a, a->ccl[me], send + lo * es, ZC_MIN(per, v.cnt[me] - lo) * es);
        }
        ZC_CHECK_GOTO(coll_barrier(a), st, out);
        for (int i = 0; i < a->nranks; i++) {
            int q = (me + i) % a->nranks;
            if (v.cnt[q] <= lo) {
                continue;
            }
            const char *src = q == me ? send + lo * es : (const char *)a->ccl[q];
            coll_put(recv + (rd[q] + lo) * es, src, ZC_MIN(per, v.cnt[q] - lo) * es, nt);
        }
    }
out:
    if (nt) {
        coll_store_fence();
    }
    free(snap);
    return st;
}
