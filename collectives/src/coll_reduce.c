/*
 * Reduce: the root receives in[0] op in[1] op ... op in[n-1].
 *
 * Direct path:
 *  - up to tune->oneshot_max bytes the root reduces everything alone (the
 *    peers have nothing to do; sharing a few cache lines would cost more
 *    than the arithmetic);
 *  - larger messages are split like AllReduce's reduce-scatter-write: rank r
 *    reduces slice r of all inputs straight into slice r of the root's
 *    output. Only rank r touches slice r of any buffer, so the root's
 *    in-place form (out[root] == in[root]) is safe with no barrier;
 *  - a root output that partially overlaps the root's input is computed by
 *    the root alone into a private buffer and then copied, again with no
 *    barrier (the peers write nothing).
 * Only out[root] is used; other ranks' out[] may be NULL.
 *
 * Staged path: AllReduce's staged loop (coll_allreduce.c) with only the
 * root copying the reduced slices out of the CCL buffers.
 */
#include "coll_internal.h"

#include <stdlib.h>
#include <string.h>

/* The root reduces every input on its own (into tmp first if dst
 * partially overlaps the root's input). */
static int coll_reduce_by_root(const coll_args_t *a, void *dst, size_t bytes, int partial)
{
    if (!partial) {
        coll_reduce_at(dst, a->in, 0, a->nranks, a->count, a->dtype, a->op);
        return ZC_OK;
    }
    void *tmp = malloc(bytes);
    if (tmp == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: cannot allocate %zu bytes for an overlapping reduce",
                a->rank, bytes);
        return ZC_ERR_NOMEM;
    }
    coll_reduce_at(tmp, a->in, 0, a->nranks, a->count, a->dtype, a->op);
    memcpy(dst, tmp, bytes);
    free(tmp);
    return ZC_OK;
}

int coll_reduce_direct(const coll_args_t *a)
{
    static const char what[] = "reduce_direct";
    size_t es, bytes;
    ZC_CHECK(coll_begin(a, COLL_F_REDUCE | COLL_F_ROOT | COLL_F_DIRECT, what, &es, &bytes, NULL));
    if (bytes == 0) {
        return ZC_OK;
    }
    for (int q = 0; q < a->nranks; q++) {
        ZC_CHECK(coll_check_buf(a->in[q], bytes, what, "in[q]", q));
    }
    char *dst = a->out[a->root];
    ZC_CHECK(coll_check_buf(dst, bytes, what, "out[root]", a->root));

    const void *rin = a->in[a->root];
    int partial = rin != (const void *)dst && coll_overlap(rin, bytes, dst, bytes);
    if (partial || bytes <= coll_oneshot_max(a)) {
        return a->rank == a->root ? coll_reduce_by_root(a, dst, bytes, partial) : ZC_OK;
    }
    size_t off, len;
    coll_slice(a->count, a->nranks, a->rank, es, &off, &len);
    coll_reduce_at(dst + off * es, a->in, off * es, a->nranks, len, a->dtype, a->op);
    return ZC_OK;
}

int coll_reduce_staged(const coll_args_t *a)
{
    static const char what[] = "reduce_staged";
    ZC_CHECK(coll_check(a, COLL_F_REDUCE | COLL_F_ROOT | COLL_F_STAGED, what));
    return coll_reduce_staged_run(a, a->root, what);
}
