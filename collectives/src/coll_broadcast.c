/*
 * Broadcast: root's buffer is copied into every other rank's buffer.
 *
 * HCCL's Broadcast has one buffer per rank. Direct path: in[r] and out[r]
 * both name it (root reads in[root], or out[root] when in[] holds NULL
 * there); every non-root pulls the whole message from the root. The root
 * writes nothing and non-roots write only their own buffer: no barrier.
 *
 * Staged path: the root reads send (recv when send is NULL), the others
 * write recv. Per round of one CCL buffer: the root copies chunk k into
 * ccl[root]; barrier; non-roots copy it out; barrier before the next round
 * overwrites ccl[root]. The root writes nothing on either path.
 */
#include "coll_internal.h"

static const void *coll_bcast_src(const void *in, const void *out)
{
    return in != NULL ? in : out;
}

int coll_broadcast_direct(const coll_args_t *a)
{
    static const char what[] = "broadcast_direct";
    size_t es, bytes;
    ZC_CHECK(coll_begin(a, COLL_F_ROOT | COLL_F_DIRECT, what, &es, &bytes, NULL));
    if (bytes == 0) {
        return ZC_OK;
    }
    const void *src = coll_bcast_src(a->in[a->root], a->out[a->root]);
    ZC_CHECK(coll_check_buf(src, bytes, what, "root buffer", a->root));
    for (int q = 0; q < a->nranks; q++) {
        if (q != a->root) {
            ZC_CHECK(coll_check_buf(a->out[q], bytes, what, "out[q]", q));
        }
    }
    if (a->rank != a->root) {
        coll_put_fenced(a, a->out[a->rank], src, bytes);
    }
    return ZC_OK;
}

int coll_broadcast_staged(const coll_args_t *a)
{
    static const char what[] = "broadcast_staged";
    size_t es, bytes, per, rounds;
    ZC_CHECK(coll_begin(a, COLL_F_ROOT | COLL_F_STAGED, what, &es, &bytes, NULL));
    if (bytes == 0) {
        return ZC_OK;
    }
    ZC_CHECK(coll_stage_plan(a, 1, a->count, what, &per, &rounds));
    int me = a->rank;
    int is_root = me == a->root;
    const char *src = coll_bcast_src(a->send, a->recv);
    int st = is_root ? coll_check_buf(src, bytes, what, "send", me)
                     : coll_check_buf(a->recv, bytes, what, "recv", me);
    if (st != ZC_OK) {
        return coll_fail_staged(a, 2 * rounds - 1, st);
    }

    int nt = !is_root && coll_use_nt(a, bytes);
    for (size_t k = 0; k < rounds; k++) {
        size_t co = k * per * es;
        size_t cl = ZC_MIN(per, a->count - k * per) * es;
        if (k > 0) {
            ZC_CHECK_GOTO(coll_barrier(a), st, out);
        }
        if (is_root) {
            coll_stage_in(a, a->ccl[me], src + co, cl);
        }
        ZC_CHECK_GOTO(coll_barrier(a), st, out);
        if (!is_root) {
            coll_put((char *)a->recv + co, a->ccl[a->root], cl, nt);
        }
    }
out:
    if (nt) {
        coll_store_fence();
    }
    return st;
}
