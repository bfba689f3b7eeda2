/*
 * The tier across hosts: set-up from the bootstrap table, the local comm,
 * the UCX transport's life, and the stream tasks ops run as (design in
 * hccl_hier.h; the algorithms are hccl_hier_coll.c).
 *
 * Set-up (zh_comm_init, after the bootstrap table and the comm's levels):
 * on one host (one group at the host level) nothing here happens. Otherwise the
 * control segment made before bootstrap moves to a new local comm (rank =
 * my index on my host, nranks = my host's ranks), which attaches its peers
 * exactly as a one-host comm does; then the UCX worker is made and its
 * address goes to the root with the ready report. After the go, endpoints
 * to every rank on another host are made.
 */
#include "hier/hccl_hier.h"

#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zc/config.h"
#include "zc/log.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"

/* The local comm: c's settings, my host's ranks, c's control segment. */
static int zh_hier_local_make(zh_comm_t *c, zh_hier_t *h, const zh_boot_entry_t *table)
{
    const zh_level_t *lv = &h->level[ZH_LEVEL_HOST];
    int nl = zh_host_size(h, lv->group);
    zh_comm_t *l = calloc(1, sizeof(*l));
    zh_boot_entry_t *lt = calloc((size_t)nl, sizeof(*lt));
    if (l == NULL || lt == NULL) {
        free(l);
        free(lt);
        return ZC_ERR_NOMEM;
    }
    l->rank = lv->index_of[c->rank];
    l->nranks = nl;
    l->device = c->device;
    l->buffsize = c->buffsize;
    l->exec_timeout_ns = c->exec_timeout_ns;
    l->spin_iters = c->spin_iters;
    l->oversub = c->oversub;
    l->fast_post = c->fast_post;
    l->spread = c->spread;
    l->cpu = -1;
    l->caller_max = c->caller_max;
    l->hier_on = c->hier_on;
    l->tune = c->tune;
    l->symwin_max = c->symwin_max;
    l->ccl_fd = -1;
    l->p2p_fd = -1;
    pthread_mutex_init(&l->lock, NULL);
    l->lay = c->lay; /* the segment was laid out for c's ranks */
    l->ctrl = c->ctrl;
    l->ctrl_fd = c->ctrl_fd;
    l->ctrl_token = c->ctrl_token;
    c->ctrl = NULL;
    c->ctrl_fd = -1;
    c->ctrl_token = 0;
    /* The segments keep the global rank they were made with (peers may map
     * them before their owner gets here); the check at attach expects it. */
    l->ctrl_ranks = &lv->members[lv->first[lv->group]];
    h->local = l;
    c->host_comm = l;
    for (int i = 0; i < nl; i++) {
        lt[i] = table[zh_host_member(h, lv->group, i)];
    }
    int st = zh_levels_build(lt, nl, l->rank, &l->levels);
    st = st == ZC_OK ? zh_comm_tables(l) : st;
    st = st == ZC_OK ? zh_ctrl_attach_peers(l, lt) : st;
    free(lt);
    return st;
}

int zh_hier_setup(zh_comm_t *c, const zh_boot_entry_t *table, const void **addr, size_t *len)
{
    *addr = NULL;
    *len = 0;
    if (c->levels->level[ZH_LEVEL_HOST].ngroups == 1) {
        return ZC_OK; /* one host: the comm is an ordinary one */
    }
    zh_hier_t *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return ZC_ERR_NOMEM;
    }
    h->level = c->levels->level;
    pthread_mutex_init(&h->run, NULL);
    c->hier = h;
    const zh_level_t *lv = &h->level[ZH_LEVEL_HOST];
    for (int g = 0; g < lv->ngroups; g++) {
        ZC_CHECK(zh_ctrl_check_local(c, zh_host_size(h, g)));
    }
    h->remote = calloc((size_t)c->nranks, 1);
    h->send_seq = calloc((size_t)c->nranks, sizeof(uint32_t));
    h->recv_seq = calloc((size_t)c->nranks, sizeof(uint32_t));
    if (h->remote == NULL || h->send_seq == NULL || h->recv_seq == NULL) {
        return ZC_ERR_NOMEM;
    }
    for (int r = 0; r < c->nranks; r++) {
        h->remote[r] = lv->group_of[r] != lv->group;
    }
    h->chunk = (size_t)zc_config()->net_chunk;
    ZC_CHECK(zh_hier_local_make(c, h, table));
    ZC_CHECK(zh_net_create(c->rank, c->nranks, &h->net, addr, len));
    ZC_INFO(ZC_SUB_INIT, "rank %d: communicator spans %d hosts; host %d, local rank %d of %d",
            c->rank, lv->ngroups, lv->group, h->local->rank, h->local->nranks);
    return ZC_OK;
}

int zh_hier_connect(zh_comm_t *c, const uint8_t key[16], const uint8_t *all, size_t all_len)
{
    zh_hier_t *h = c->hier;
    if (all == NULL) {
        ZC_WARN(ZC_SUB_INIT, "rank %d: the root sent no transport addresses", c->rank);
        return ZC_ERR_INTERNAL;
    }
    ZC_CHECK(zh_net_connect(h->net, key, h->remote, all, all_len));
    snprintf(h->local->name, sizeof(h->local->name), "%.100s.host%d", c->name,
             h->level[ZH_LEVEL_HOST].group);
    return zh_mem_attach(h->local);
}

void zh_hier_destroy(zh_comm_t *c)
{
    zh_hier_t *h = c->hier;
    if (h == NULL) {
        return;
    }
    int broken = atomic_load_explicit(&c->async_error, memory_order_acquire) != HCCL_SUCCESS;
    zh_net_destroy(h->net, broken);
    if (h->local != NULL) {
        zh_levels_t *levels = h->local->levels;
        zh_comm_release(h->local);
        zh_levels_free(levels);
    }
    c->host_comm = NULL;
    free(h->remote);
    free(h->send_seq);
    free(h->recv_seq);
    free(h->scratch);
    pthread_mutex_destroy(&h->run);
    free(h);
    c->hier = NULL;
}

const void *zh_hier_net_address(zh_comm_t *c, size_t *len)
{
    return zh_net_address(c->hier->net, len);
}

uint64_t zh_hier_net_dropped(zh_comm_t *c)
{
    return zh_net_dropped(c->hier->net);
}

uint64_t zh_hier_net_bytes(zh_comm_t *c)
{
    return (uint64_t)atomic_load_explicit(&c->hier->net_bytes, memory_order_relaxed);
}

int zh_hier_hosts(zh_comm_t *c)
{
    return c->hier->level[ZH_LEVEL_HOST].ngroups;
}

/* ---- ops as stream tasks --------------------------------------------------------------- */

typedef struct {
    zh_comm_t *c;
    zh_op_t op;
    uint32_t seq;
    int ran;
    HcclSendRecvItem *items; /* point-to-point batch (op unused), or NULL */
    uint32_t nitems;
    uint32_t *seqs;
    uint64_t *arrays; /* copies of op.v, 4 x nranks */
} zh_hjob_t;

/* Wait until every collective issued before seq finished here. */
static int zh_hier_turn(zh_comm_t *c, uint32_t seq)
{
    zh_hier_t *h = c->hier;
    uint64_t start = zc_time_ns();
    while ((int32_t)(atomic_load_explicit(&h->done, memory_order_acquire) - (seq - 1u)) < 0) {
        if (atomic_load_explicit(&c->async_error, memory_order_acquire) != HCCL_SUCCESS) {
            return ZC_ERR_REMOTE;
        }
        if (c->exec_timeout_ns != 0 && zc_time_ns() - start > c->exec_timeout_ns) {
            ZC_WARN(ZC_SUB_COLL, "rank %d: op %u gave up waiting for op %u", c->rank, seq,
                    seq - 1u);
            return ZC_ERR_TIMEOUT;
        }
        usleep(20);
    }
    return ZC_OK;
}

/* The counters an op moves, before it runs. */
typedef struct {
    uint64_t zc;
    uint64_t buf;
    uint64_t staged;
    uint64_t net;
} zh_hier_snap_t;

static void zh_hier_snap(zh_comm_t *c, zh_hier_snap_t *s)
{
    zh_comm_t *l = c->hier->local;
    s->zc = atomic_load_explicit(&l->zc_ops, memory_order_relaxed);
    s->buf = atomic_load_explicit(&l->buf_ops, memory_order_relaxed);
    s->staged = atomic_load_explicit(&l->staged_bytes, memory_order_relaxed);
    s->net = atomic_load_explicit(&c->hier->net_bytes, memory_order_relaxed);
}

/* One op, one count on the comm, as on one host: zero-copy when my buffers
 * are activated and no local step went buffered; staged bytes are the local
 * steps' plus, on the buffered path, what went to other hosts from buffers
 * UCX could not take as they are registered once (it copies them). */
static void zh_hier_count(zh_comm_t *c, const zh_op_t *op, const zh_hier_snap_t *s)
{
    zh_comm_t *l = c->hier->local;
    if (op->kind == ZH_OP_BARRIER) {
        return;
    }
    zh_hier_snap_t e;
    zh_hier_snap(c, &e);
    int zc = e.buf == s->buf &&
             zh_mem_local_covers(l, (uint64_t)(uintptr_t)op->send, op->send_bytes) &&
             zh_mem_local_covers(l, (uint64_t)(uintptr_t)op->recv, op->recv_bytes);
    atomic_fetch_add_explicit(zc ? &c->zc_ops : &c->buf_ops, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->staged_bytes, (e.staged - s->staged) + (zc ? 0 : e.net - s->net),
                              memory_order_relaxed);
}

/* Break c with result r; its local comm breaks with the internal status st. */
static void zh_hier_broke(zh_comm_t *c, HcclResult r, int st)
{
    int expect = HCCL_SUCCESS;
    atomic_compare_exchange_strong(&c->async_error, &expect, (int)r);
    zh_comm_fail(c->hier->local, st); /* my host's ranks fail at once */
}

static int zh_hier_task(void *arg)
{
    zh_hjob_t *j = arg;
    zh_comm_t *c = j->c;
    zh_hier_t *h = c->hier;
    int prev = zc_log_rank_enter(c->rank);
    j->ran = 1;
    int st = j->items == NULL ? zh_hier_turn(c, j->seq) : ZC_OK;
    int disagree = 0;
    int err = atomic_load_explicit(&c->async_error, memory_order_acquire);
    HcclResult r = (HcclResult)err;
    if (err == HCCL_SUCCESS) {
        pthread_mutex_lock(&h->run);
        if (st == ZC_OK && j->items != NULL) {
            st = zh_hier_p2p(c, j->items, j->nitems, j->seqs);
        } else if (st == ZC_OK) {
            zh_hop_t x = {c, h, &j->op, j->seq, coll_dtype_size(j->op.dtype), 0};
            st = zh_hier_agree(&x);
            disagree = st == ZC_ERR_INVAL; /* every rank knows: the comm stays usable */
            if (st == ZC_OK) {
                zh_hier_snap_t snap; /* after the agreement: its local step is not the op's */
                zh_hier_snap(c, &snap);
                st = zh_hier_run(&x);
                zh_hier_count(c, &j->op, &snap);
            }
        }
        pthread_mutex_unlock(&h->run);
        err = atomic_load_explicit(&c->async_error, memory_order_acquire);
        r = err != HCCL_SUCCESS ? (HcclResult)err : zh_result(st);
        if (st != ZC_OK && err == HCCL_SUCCESS && !disagree) {
            zh_hier_broke(c, r, st);
        }
    }
    if (j->items == NULL) {
        atomic_store_explicit(&h->done, j->seq, memory_order_release);
    }
    zc_log_rank_leave(prev, c->rank);
    return (int)r;
}

static void zh_hier_job_free(void *arg)
{
    zh_hjob_t *j = arg;
    zh_comm_t *c = j->c;
    if (!j->ran) {
        ZC_WARN(ZC_SUB_COLL,
                "rank %d: an op was dropped by its stream; the communicator is "
                "now unusable",
                c->rank);
        zh_hier_broke(c, HCCL_E_INTERNAL, ZC_ERR_INTERNAL);
        if (j->items == NULL) {
            atomic_store_explicit(&c->hier->done, j->seq, memory_order_release);
        }
    }
    free(j->arrays);
    free(j->items);
    free(j->seqs);
    free(j);
    atomic_fetch_sub_explicit(&c->inflight, 1, memory_order_release);
}

static HcclResult zh_hier_enqueue(zh_comm_t *c, zh_hjob_t *j, aclrtStream stream)
{
    atomic_fetch_add_explicit(&c->inflight, 1, memory_order_relaxed);
    aclError e = zccl_stream_enqueue(stream, zh_hier_task, j, zh_hier_job_free);
    if (e != ACL_SUCCESS) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: cannot enqueue on stream %p (aclError %d)", c->rank, stream,
                (int)e);
        j->ran = 1; /* never queued: nothing was dropped */
        if (j->items == NULL) {
            /* its number is taken: peers would mismatch */
            zh_hier_broke(c, HCCL_E_RUNTIME, ZC_ERR_INTERNAL);
            atomic_store_explicit(&c->hier->done, j->seq, memory_order_release);
        }
        zh_hier_job_free(j);
        return e == ACL_ERROR_RT_INVALID_HANDLE ? HCCL_E_PARA : HCCL_E_RUNTIME;
    }
    return HCCL_SUCCESS;
}

HcclResult zh_hier_submit(zh_comm_t *c, const zh_op_t *op, aclrtStream stream)
{
    if (zccl_stream_capturing(stream)) {
        ZC_WARN(ZC_SUB_COLL,
                "%s: rank %d: capturing ops of a communicator that spans hosts is "
                "not supported",
                zh_op_name(op->kind), c->rank);
        return HCCL_E_NOT_SUPPORT;
    }
    bool has_v = false;
    for (int i = 0; i < ZH_V_ARRAYS; i++) {
        has_v = has_v || op->v[i] != NULL;
    }
    zh_hjob_t *j = calloc(1, sizeof(*j));
    if (j == NULL || (has_v && (j->arrays = malloc(ZH_V_ARRAYS * sizeof(uint64_t) *
                                                   (size_t)c->nranks)) == NULL)) {
        free(j);
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory queueing an op", c->rank);
        return HCCL_E_MEMORY;
    }
    j->c = c;
    j->op = *op;
    for (int i = 0; i < ZH_V_ARRAYS && j->arrays != NULL; i++) {
        if (op->v[i] == NULL) {
            continue;
        }
        memcpy(j->arrays + (size_t)i * (size_t)c->nranks, op->v[i],
               sizeof(uint64_t) * (size_t)c->nranks);
        j->op.v[i] = j->arrays + (size_t)i * (size_t)c->nranks;
    }
    HcclResult e = zh_issue_enter(c, zh_op_name(op->kind));
    if (e != HCCL_SUCCESS) {
        free(j->arrays);
        free(j);
        return e;
    }
    j->seq = atomic_fetch_add_explicit(&c->hier->issue_seq, 1, memory_order_relaxed) + 1u;
    HcclResult r = zh_hier_enqueue(c, j, stream);
    zh_issue_leave(c);
    return r;
}

HcclResult zh_hier_p2p_submit(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n,
                              aclrtStream stream)
{
    zh_hier_t *h = c->hier;
    zh_hjob_t *j = calloc(1, sizeof(*j));
    if (j != NULL) {
        j->items = malloc(sizeof(*items) * n);
        j->seqs = malloc(sizeof(uint32_t) * n);
    }
    if (j == NULL || j->items == NULL || j->seqs == NULL) {
        if (j != NULL) {
            free(j->items);
            free(j->seqs);
        }
        free(j);
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory for %u send/recv items", c->rank, n);
        return HCCL_E_MEMORY;
    }
    j->c = c;
    j->nitems = n;
    memcpy(j->items, items, sizeof(*items) * n);
    HcclResult e = zh_issue_enter(c, "HcclSend/HcclRecv");
    if (e != HCCL_SUCCESS) {
        free(j->items);
        free(j->seqs);
        free(j);
        return e;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t q = items[i].remoteRank;
        j->seqs[i] = items[i].sendRecvType == HCCL_SEND ? ++h->send_seq[q] : ++h->recv_seq[q];
    }
    HcclResult r = zh_hier_enqueue(c, j, stream);
    zh_issue_leave(c);
    return r;
}
