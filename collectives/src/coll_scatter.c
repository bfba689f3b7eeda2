/*
 * Scatter: rank r receives block r (count elements) of the root's send
 * buffer.
 *
 * Direct path: every rank pulls its block from in[root] into its own out[r].
 * Only the root's input is read, so the only possible conflict is a root
 * output that overlaps the root's input other than exactly at block root
 * (the in-place form, where the root's copy is a no-op): then the root
 * copies into a private buffer and commits after one barrier that all ranks
 * join (coll_run_owned). Only in[root] is used; other ranks' in[] may be NULL.
 *
 * Staged path: the CCL buffer is cut into n parts of P elements. Per round
 * the root copies chunk k of every other rank's block into part q of
 * ccl[root]; barrier; each rank copies its part out (the root copies its own
 * block straight from send); barrier before the next round overwrites
 * ccl[root].
 */
#include "coll_internal.h"

#include <stdlib.h>

static int coll_scatter_work(const coll_args_t *a, char *base, void *ctx)
{
    size_t bytes = *(const size_t *)ctx;
    coll_put_fenced(a, base, (const char *)a->in[a->root] + (size_t)a->rank * bytes, bytes);
    return ZC_OK;
}

int coll_scatter_direct(const coll_args_t *a)
{
    static const char what[] = "scatter_direct";
    size_t es, bytes, total;
    ZC_CHECK(coll_begin(a, COLL_F_ROOT | COLL_F_DIRECT, what, &es, &bytes, &total));
    if (bytes == 0) {
        return ZC_OK;
    }
    const char *rin = a->in[a->root];
    ZC_CHECK(coll_check_buf(rin, total, what, "in[root]", a->root));
    for (int q = 0; q < a->nranks; q++) {
        ZC_CHECK(coll_check_buf(a->out[q], bytes, what, "out[q]", q));
    }
    const void *rout = a->out[a->root];
    int conflict = rout != (const void *)(rin + (size_t)a->root * bytes) &&
                   coll_overlap(rout, bytes, rin, total);
    return coll_run_owned(a, conflict, conflict && a->rank == a->root, bytes, coll_scatter_work,
                          NULL, &bytes);
}

int coll_scatter_staged(const coll_args_t *a)
{
    static const char what[] = "scatter_staged";
    size_t es, bytes, total, per, rounds;
    ZC_CHECK(coll_begin(a, COLL_F_ROOT | COLL_F_STAGED, what, &es, &bytes, &total));
    if (bytes == 0) {
        return ZC_OK;
    }
    ZC_CHECK(coll_stage_plan(a, (size_t)a->nranks, a->count, what, &per, &rounds));
    int me = a->rank;
    int is_root = me == a->root;
    const char *send = NULL;
    void *snap = NULL;
    int st = coll_check_buf(a->recv, bytes, what, "recv", me);
    if (st == ZC_OK && is_root) {
        st = coll_check_buf(a->send, total, what, "send", me);
        if (st == ZC_OK) {
            int safe = a->recv == (const void *)((const char *)a->send + (size_t)me * bytes);
            st = coll_stage_send(a, total, bytes, safe, &send, &snap);
        }
    }
    if (st != ZC_OK) {
        return coll_fail_staged(a, 2 * rounds - 1, st);
    }

    size_t pb = per * es;
    int nt = coll_use_nt(a, bytes);
    const char *part = (const char *)a->ccl[a->root] + (size_t)me * pb;
    for (size_t k = 0; k < rounds; k++) {
        size_t co = k * pb;
        size_t cl = ZC_MIN(per, a->count - k * per) * es;
        if (k > 0) {
            ZC_CHECK_GOTO(coll_barrier(a), st, out);
        }
        if (is_root) {
            for (int q = 0; q < a->nranks; q++) {
                if (q != me) {
                    coll_stage_in(a, (char *)a->ccl[me] + (size_t)q * pb, send + q * bytes + co,
                                  cl);
                }
            }
        }
        ZC_CHECK_GOTO(coll_barrier(a), st, out);
        const char *src = is_root ? send + (size_t)me * bytes + co : part;
        coll_put((char *)a->recv + co, src, cl, nt);
    }
out:
    if (nt) {
        coll_store_fence();
    }
    free(snap);
    return st;
}
