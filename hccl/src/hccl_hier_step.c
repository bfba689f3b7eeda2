/*
 * What the algorithms across hosts (hccl_hier_coll.c) share: the scratch
 * buffer, bounded waits on the network that give up when the comm broke or
 * a rank of my host failed, and the step on my host's local comm. Below both
 * the algorithms and the tier's set-up and stream tasks (hccl_hier.c), which
 * run them.
 */
#include "hccl_hier.h"

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
