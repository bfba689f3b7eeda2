/*
 * What the algorithms across hosts (hccl_hier_coll.c, hccl_hier_copy.c)
 * share: the scratch buffer, bounded waits on the network that give up when
 * the comm broke or a rank of my host failed, the step on my host's local
 * comm, and lists of transfer requests. Below the algorithms and the tier's
 * set-up and stream tasks (hccl_hier.c), which run them.
 */
#include "hier/hccl_hier.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "zc/log.h"

void *zh_hier_scratch(zh_hier_t *h, size_t bytes)
{
    if (bytes > h->scratch_bytes) {
        free(h->scratch);
        h->scratch = malloc(bytes);
        h->scratch_bytes = h->scratch != NULL ? bytes : 0;
    }
    return h->scratch;
}

/* The comm broke meanwhile, or a rank of my host failed (its error flag). */
static int zh_hier_aborted(void *arg)
{
    zh_comm_t *c = arg;
    zh_comm_t *l = c->hier->local;
    if (atomic_load_explicit(&c->async_error, memory_order_acquire) != HCCL_SUCCESS) {
        return 1;
    }
    for (int r = 0; r < l->nranks; r++) {
        zh_ctrl_t *p = l->peers[r].ctrl;
        if (r != l->rank && (atomic_load_explicit(&p->error.value, memory_order_relaxed) != 0 ||
                             atomic_load_explicit(&p->closed.value, memory_order_relaxed) != 0)) {
            ZC_WARN(ZC_SUB_COLL, "rank %d: local rank %d failed or left", c->rank, r);
            return 1;
        }
    }
    return 0;
}

int zh_hier_cause(zh_comm_t *l, int st)
{
    for (int q = 0; q < l->nranks && st == ZC_ERR_REMOTE; q++) {
        unsigned e = atomic_load_explicit(&l->peers[q].ctrl->error.value, memory_order_relaxed);
        st = q != l->rank && e == HCCL_E_TIMEOUT ? ZC_ERR_TIMEOUT : st;
    }
    return st;
}

int zh_hier_wait(zh_hop_t *x, zh_net_req_t *r, int n)
{
    int st = zh_net_wait(x->h->net, r, n, x->c->exec_timeout_ns, zh_hier_aborted, x->c);
    return zh_hier_cause(x->h->local, st);
}

int zh_hier_local(zh_hop_t *x, const zh_op_t *op)
{
    HcclResult r = zh_op_run_now(x->h->local, op);
    if (r == HCCL_SUCCESS) {
        return ZC_OK;
    }
    int st = r == HCCL_E_PARA ? ZC_ERR_INVAL : r == HCCL_E_TIMEOUT ? ZC_ERR_TIMEOUT : ZC_ERR_REMOTE;
    return zh_hier_cause(x->h->local, st);
}

/* ---- transfer requests ---- */

zh_net_req_t *zh_hier_reqs_add(zh_hier_reqs_t *q)
{
    if (q->n == q->cap) {
        int cap = q->cap == 0 ? 16 : 2 * q->cap;
        zh_net_req_t *nr = realloc(q->r, sizeof(*nr) * (size_t)cap);
        if (nr == NULL) {
            return NULL;
        }
        q->r = nr;
        q->cap = cap;
    }
    return &q->r[q->n++];
}

int zh_hier_post(zh_hop_t *x, zh_hier_reqs_t *q, int send, int peer, uint32_t step, void *buf,
                 size_t bytes)
{
    zh_net_req_t *r = zh_hier_reqs_add(q);
    if (r == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory for transfer requests", x->c->rank);
        return ZC_ERR_NOMEM;
    }
    if (send) {
        atomic_fetch_add_explicit(&x->h->net_bytes, bytes, memory_order_relaxed);
        return zh_net_isend(x->h->net, peer, ZH_TAG_COLL(x->seq, x->c->rank, step), buf, bytes, r);
    }
    return zh_net_irecv(x->h->net, peer, ZH_TAG_COLL(x->seq, peer, step), buf, bytes, r);
}

int zh_hier_reqs_finish(zh_hop_t *x, zh_hier_reqs_t *q, int st)
{
    if (st == ZC_OK) {
        st = zh_hier_wait(x, q->r, q->n);
    } else {
        zh_net_cancel(x->h->net, q->r, q->n);
    }
    free(q->r);
    q->r = NULL;
    q->n = q->cap = 0;
    return st;
}

/* ---- who serves whom across hosts ---- */

int zh_hier_pos(zh_hop_t *x, int g, int s)
{
    const zh_level_t *lv = ZH_LV(x);
    int hs = lv->group_of[s];
    return lv->first[hs] - (g < hs ? zh_host_size(x->h, g) : 0) + lv->index_of[s];
}

int zh_hier_list(zh_hop_t *x, int *list)
{
    const zh_level_t *lv = ZH_LV(x);
    int n = 0;
    for (int h = 0; h < lv->ngroups; h++) {
        for (int j = 0; h != lv->group && j < zh_host_size(x->h, h); j++) {
            list[n++] = zh_host_member(x->h, h, j);
        }
    }
    return n;
}
