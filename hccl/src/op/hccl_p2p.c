/*
 * Point-to-point: HcclSend, HcclRecv, HcclBatchSendRecv, HcclGroupStart/End.
 *
 * Channel (per ordered pair S -> R, in the control segments, hccl_internal.h):
 *   S: writes sdesc {seq k, dtype, count, va, bytes, zc}, posts S.post = k.
 *   R: writes rdesc {seq k, dtype, count, zc},            posts R.ready = k.
 *   Each side then reads the other's descriptor; a count or dtype mismatch
 *   fails both sides with HCCL_E_PARA (each sees it).
 *   zero-copy (both buffers in activated memory, or S and R in one process):
 *     R translates S's buffer, copies it into its own, posts R.done = k.
 *   buffered: S stages chunks of its buffer in its staging buffer's part for
 *     R and posts S.chunk; R copies each out and posts R.ack; a part holds one
 *     chunk, so S stages chunk j+1 only after ack j. R posts R.done = k last.
 *   S completes when R.done reaches k.
 * Messages of one pair and direction complete in the order issued. A batch
 * (HcclBatchSendRecv, or a group's sends and receives) runs as one task that
 * advances every item without blocking on any one of them, so any order of
 * items on any rank is deadlock-free. The staging buffer (min(HCCL_BUFFSIZE,
 * 64 MiB), split evenly among peers) is created by a sender the first time it
 * stages, and mapped by a receiver after the first chunk flag says it exists;
 * no collective step is needed.
 */
#include "core/hccl_internal.h"
#include "core/hccl_prof.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zc/log.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"

#define ZH_P2P_MAX_STAGE (64ull << 20)

typedef enum { ZH_IT_START, ZH_IT_MATCH, ZH_IT_DATA, ZH_IT_FINISH, ZH_IT_DONE } zh_item_state_t;

typedef struct {
    HcclSendRecvItem it;
    size_t bytes;
    zh_item_state_t state;
    uint32_t seq;
    int zc;
    size_t moved; /* bytes staged (send) or consumed (recv) */
    int status;
} zh_item_t;

typedef struct {
    zh_comm_t *comm;
    uint32_t n;
    zh_prof_mark_t prof;
    zh_item_t items[];
} zh_batch_t;

static uint32_t zh_load(zh_flag_t *f)
{
    return atomic_load_explicit(&f->value, memory_order_acquire);
}

/* My staging buffer for buffered sends (created on first use). */
static int zh_p2p_local(zh_comm_t *c)
{
    if (c->p2p_local != NULL) {
        return ZC_OK;
    }
    size_t total = ZC_MIN((size_t)c->buffsize, (size_t)ZH_P2P_MAX_STAGE);
    size_t part = total / (size_t)c->nranks / 64 * 64;
    if (part < 4096) {
        part = 4096;
    }
    total = part * (size_t)c->nranks;
    zh_offered_t o;
    ZC_CHECK(zh_offer_buffer(c, "zccl-p2p", total, &o));
    c->p2p_fd = o.fd;
    c->p2p_local = o.map;
    c->p2p_bytes = total;
    c->p2p_offer = o.token;
    /* Peers read these only after a chunk flag, posted with release order. */
    c->ctrl->p2p_part = part;
    c->ctrl->p2p_token = o.token;
    return ZC_OK;
}

/* Peer q's staging buffer, mapped here (after its first chunk flag). */
static int zh_p2p_peer(zh_comm_t *c, int q, char **base, size_t *part)
{
    zh_peer_t *p = &c->peers[q];
    /* One read of a field the peer writes, checked against the mapping
     * before it offsets into it (ARCHITECTURE §9). */
    size_t want = (size_t) * (volatile uint64_t *)&p->ctrl->p2p_part;
    if (p->p2p_buf == NULL) {
        int fd = -1;
        size_t sz = 0;
        ZC_CHECK(zccl_broker_fetch(p->ctrl->p2p_token, &fd, &sz));
        void *m = mmap(NULL, sz, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED) {
            ZC_WARN(ZC_SUB_COLL, "rank %d: cannot map rank %d's staging buffer (%zu bytes)",
                    c->rank, q, sz);
            return ZC_ERR_NOMEM;
        }
        p->p2p_buf = m;
        p->p2p_buf_bytes = sz;
    }
    if (want == 0 || want > p->p2p_buf_bytes / (size_t)c->nranks) {
        ZC_WARN(ZC_SUB_COLL,
                "rank %d: rank %d's staging part of %zu bytes does not fit its %zu-byte buffer "
                "for %d ranks",
                c->rank, q, want, p->p2p_buf_bytes, c->nranks);
        return ZC_ERR_REMOTE;
    }
    *part = want;
    *base = (char *)p->p2p_buf + want * (size_t)c->rank;
    return ZC_OK;
}

void zh_p2p_release(zh_comm_t *c)
{
    for (int q = 0; q < c->nranks; q++) {
        zh_peer_t *p = &c->peers[q];
        if (p->p2p_buf != NULL) {
            munmap(p->p2p_buf, p->p2p_buf_bytes);
            p->p2p_buf = NULL;
        }
    }
    if (c->p2p_local != NULL) {
        (void)zccl_broker_withdraw(c->p2p_offer);
        c->p2p_offer = 0;
        munmap(c->p2p_local, c->p2p_bytes);
        close(c->p2p_fd);
        c->p2p_local = NULL;
    }
}

/* What I publish about item x: the sender's and the receiver's side look alike. */
static zh_p2p_desc_t zh_item_desc(zh_comm_t *c, const zh_item_t *x)
{
    uint64_t va = (uint64_t)(uintptr_t)x->it.buf;
    return (zh_p2p_desc_t){x->seq,  x->it.dataType, (uint32_t)zh_mem_local_covers(c, va, x->bytes),
                           0,       x->it.count,    va,
                           x->bytes};
}

/* Advance one send; returns 1 when it moved, 0 when blocked, <0 on error. */
static int zh_send_step(zh_comm_t *c, zh_item_t *x)
{
    int q = (int)x->it.remoteRank;
    zh_p2p_t *mine = zh_ctrl_p2p(c, c->ctrl, q);
    zh_p2p_t *theirs = zh_ctrl_p2p(c, c->peers[q].ctrl, c->rank);
    switch (x->state) {
    case ZH_IT_START:
        if (atomic_load_explicit(&c->peers[q].send_fin, memory_order_acquire) != x->seq - 1u) {
            return 0; /* an earlier send to q (maybe on another stream) comes first */
        }
        mine->sdesc = zh_item_desc(c, x);
        zh_flag_post(&mine->post, x->seq);
        x->state = ZH_IT_MATCH;
        return 1;
    case ZH_IT_MATCH: {
        if (!zh_reached(zh_load(&theirs->ready), x->seq)) {
            return 0;
        }
        zh_p2p_desc_t r = theirs->rdesc[x->seq & 1u];
        if (r.seq != x->seq) {
            /* The receiver finished this message (zero-copy or mismatch)
             * and moved on: its verdict is in the ring. */
            x->state = ZH_IT_FINISH;
            return 1;
        }
        if (r.count != x->it.count || r.dtype != (int32_t)x->it.dataType) {
            ZC_WARN(ZC_SUB_COLL,
                    "rank %d: send #%u to rank %d of %llu x type %d, but it "
                    "receives %llu x type %d",
                    c->rank, x->seq, q, (unsigned long long)x->it.count, x->it.dataType,
                    (unsigned long long)r.count, r.dtype);
            x->status = ZC_ERR_INVAL;
            x->state = ZH_IT_FINISH;
            return 1;
        }
        x->zc = (mine->sdesc.zc && r.zc) || c->peers[q].same_proc;
        x->state = x->zc || x->bytes == 0 ? ZH_IT_FINISH : ZH_IT_DATA;
        return 1;
    }
    case ZH_IT_DATA: {
        /* The part is free once the receiver acked every chunk so far. */
        zh_peer_t *p = &c->peers[q];
        if (!zh_reached(zh_load(&theirs->ack), p->send_chunks)) {
            return 0;
        }
        int st = zh_p2p_local(c);
        if (st != ZC_OK) {
            return st;
        }
        size_t part = (size_t)c->ctrl->p2p_part;
        size_t n = ZC_MIN(part, x->bytes - x->moved);
        coll_copy((char *)c->p2p_local + part * (size_t)q, (const char *)x->it.buf + x->moved, n,
                  c->tune.nt_min);
        atomic_fetch_add_explicit(&c->staged_bytes, n, memory_order_relaxed);
        x->moved += n;
        zh_flag_post(&mine->chunk, ++p->send_chunks);
        if (x->moved == x->bytes) {
            x->state = ZH_IT_FINISH;
        }
        return 1;
    }
    case ZH_IT_FINISH:
        if (!zh_reached(zh_load(&theirs->done), x->seq)) {
            return 0;
        }
        if (x->status == ZC_OK && theirs->verdict[x->seq & 3u] != HCCL_SUCCESS) {
            x->status = ZC_ERR_INVAL;
        }
        x->state = ZH_IT_DONE;
        return 1;
    case ZH_IT_DONE:
        return 0;
    }
    return 0;
}

static int zh_recv_step(zh_comm_t *c, zh_item_t *x)
{
    int q = (int)x->it.remoteRank;
    zh_p2p_t *mine = zh_ctrl_p2p(c, c->ctrl, q);
    zh_p2p_t *theirs = zh_ctrl_p2p(c, c->peers[q].ctrl, c->rank);
    zh_peer_t *p = &c->peers[q];
    switch (x->state) {
    case ZH_IT_START:
        if (atomic_load_explicit(&p->recv_fin, memory_order_acquire) != x->seq - 1u) {
            return 0; /* an earlier receive from q comes first */
        }
        mine->rdesc[x->seq & 1u] = zh_item_desc(c, x);
        zh_flag_post(&mine->ready, x->seq);
        x->state = ZH_IT_MATCH;
        return 1;
    case ZH_IT_MATCH: {
        if (!zh_reached(zh_load(&theirs->post), x->seq)) {
            return 0;
        }
        zh_p2p_desc_t s = theirs->sdesc;
        if (s.count != x->it.count || s.dtype != (int32_t)x->it.dataType) {
            ZC_WARN(ZC_SUB_COLL,
                    "rank %d: receive #%u from rank %d of %llu x type %d, but it "
                    "sends %llu x type %d",
                    c->rank, x->seq, q, (unsigned long long)x->it.count, x->it.dataType,
                    (unsigned long long)s.count, s.dtype);
            mine->verdict[x->seq & 3u] = HCCL_E_PARA;
            x->status = ZC_ERR_INVAL;
            zh_flag_post(&mine->done, x->seq);
            x->state = ZH_IT_DONE;
            return 1;
        }
        mine->verdict[x->seq & 3u] = HCCL_SUCCESS;
        x->zc = (s.zc && mine->rdesc[x->seq & 1u].zc) || p->same_proc;
        if (x->zc && x->bytes > 0) {
            void *src = NULL;
            int st = zh_mem_translate(c, q, s.va, s.bytes, &src);
            if (st != ZC_OK) {
                return st;
            }
            coll_copy(x->it.buf, src, x->bytes, c->tune.nt_min);
        }
        if (x->zc || x->bytes == 0) {
            zh_flag_post(&mine->done, x->seq);
            x->state = ZH_IT_DONE;
        } else {
            x->state = ZH_IT_DATA;
        }
        return 1;
    }
    case ZH_IT_DATA: {
        if (!zh_reached(zh_load(&theirs->chunk), p->recv_chunks + 1)) {
            return 0;
        }
        char *src = NULL;
        size_t part = 0;
        int st = zh_p2p_peer(c, q, &src, &part);
        if (st != ZC_OK) {
            return st;
        }
        size_t n = ZC_MIN(part, x->bytes - x->moved);
        coll_copy((char *)x->it.buf + x->moved, src, n, c->tune.nt_min);
        x->moved += n;
        zh_flag_post(&mine->ack, ++p->recv_chunks);
        if (x->moved == x->bytes) {
            zh_flag_post(&mine->done, x->seq);
            x->state = ZH_IT_DONE;
        }
        return 1;
    }
    case ZH_IT_FINISH:
    case ZH_IT_DONE:
        return 0;
    }
    return 0;
}

/* Item x reached ZH_IT_DONE: the next message of its pair and direction may start. */
static void zh_item_retire(zh_comm_t *c, const zh_item_t *x)
{
    zh_peer_t *p = &c->peers[x->it.remoteRank];
    atomic_store_explicit(x->it.sendRecvType == HCCL_SEND ? &p->send_fin : &p->recv_fin, x->seq,
                          memory_order_release);
}

/* Nothing moved for a while: the peer waited on is dead, late or mismatched? */
static int zh_p2p_stalled(zh_comm_t *c, const zh_item_t *w, uint64_t start)
{
    int q = w != NULL ? (int)w->it.remoteRank : -1;
    int st = zh_wait_check(c, q, start);
    if (st == ZC_OK && w != NULL && w->state != ZH_IT_START) {
        st = zh_mix_check(c, q, start, w->it.sendRecvType == HCCL_SEND, w->seq);
    }
    return st;
}

static int zh_p2p_run(zh_comm_t *c, zh_batch_t *b)
{
    uint64_t start = zc_time_ns();
    uint32_t idle = 0;
    int result = ZC_OK;
    int last_look = 0; /* one more sweep after the peer waited for was seen gone */
    for (;;) {
        int moved = 0;
        uint32_t left = 0;
        const zh_item_t *waiting = NULL;
        for (uint32_t i = 0; i < b->n; i++) {
            zh_item_t *x = &b->items[i];
            if (x->state == ZH_IT_DONE) {
                continue;
            }
            left++;
            int r = x->it.sendRecvType == HCCL_SEND ? zh_send_step(c, x) : zh_recv_step(c, x);
            if (r < 0) {
                return r; /* local failure: the caller raises the error flag */
            }
            if (r > 0) {
                moved = 1;
            } else if (waiting == NULL || waiting->state == ZH_IT_START) {
                waiting = x;
            }
            if (x->state == ZH_IT_DONE) {
                zh_item_retire(c, x);
                if (x->status != ZC_OK && result == ZC_OK) {
                    result = x->status;
                } else if (x->status == ZC_OK) {
                    atomic_fetch_add_explicit(x->zc || x->bytes == 0 ? &c->zc_ops : &c->buf_ops, 1,
                                              memory_order_relaxed);
                }
            }
        }
        if (left == 0) {
            return result;
        }
        if (moved) {
            idle = 0;
            last_look = 0;
            start = zc_time_ns(); /* the exec timeout bounds a stall, not a transfer */
            continue;
        }
        idle++;
        if (idle < c->spin_iters) {
            zc_cpu_relax();
        } else if (idle < c->spin_iters + 256) {
            sched_yield();
        } else {
            int st = zh_p2p_stalled(c, waiting, start);
            if (st == ZC_OK && waiting != NULL && zh_peer_gone(c, (int)waiting->it.remoteRank)) {
                if (!last_look) {
                    last_look = 1; /* what it posted before it left is visible: sweep again */
                    continue;
                }
                st = zh_peer_left(c, (int)waiting->it.remoteRank);
            }
            if (st != ZC_OK) {
                return st;
            }
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

/* A batch's task, in its stream slot: one item fits there, more are allocated. */
typedef struct {
    zh_batch_t *b;
    int ran;
    _Alignas(16) unsigned char room[ZCCL_TASK_PAYLOAD - 32];
} zh_p2p_task_t;
_Static_assert(sizeof(zh_p2p_task_t) <= ZCCL_TASK_PAYLOAD, "a p2p task fits a stream slot");

static int zh_p2p_task(void *arg)
{
    zh_p2p_task_t *t = arg;
    zh_batch_t *b = t->b;
    zh_comm_t *c = b->comm;
    int prev = zc_log_rank_enter(c->rank);
    t->ran = 1;
    int err = atomic_load_explicit(&c->async_error, memory_order_acquire);
    HcclResult r;
    if (err != HCCL_SUCCESS) {
        r = (HcclResult)err;
    } else {
        zh_prof_snap_t snap;
        zh_prof_begin(c, &snap);
        int st = zh_p2p_run(c, b);
        r = zh_result(st);
        err = atomic_load_explicit(&c->async_error, memory_order_acquire);
        if (err != HCCL_SUCCESS) {
            r = (HcclResult)err; /* broken meanwhile: that is why (see zh_op_result) */
        } else if (st != ZC_OK && st != ZC_ERR_INVAL) {
            zh_comm_fail(c, st); /* pair state is unknown now: the comm is broken */
        }
        if (snap.t0 != 0) {
            zh_prof_p2p(c, &b->items[0].it, sizeof(b->items[0]), b->n, &b->prof, &snap, r);
        }
    }
    zc_log_rank_leave(prev, c->rank);
    return (int)r;
}

static void zh_p2p_free(void *arg)
{
    zh_p2p_task_t *t = arg;
    zh_comm_t *c = t->b->comm;
    if (!t->ran) {
        ZC_WARN(ZC_SUB_COLL,
                "rank %d: a send/recv batch was dropped by its stream; the "
                "communicator is now unusable",
                c->rank);
        zh_comm_fail(c, ZC_ERR_INTERNAL);
    }
    if ((void *)t->b != (void *)t->room) {
        free(t->b);
    }
    atomic_fetch_sub_explicit(&c->inflight, 1, memory_order_release);
}

HcclResult zh_p2p_check(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const HcclSendRecvItem *it = &items[i];
        size_t sz = coll_dtype_size(it->dataType);
        if (it->sendRecvType != HCCL_SEND && it->sendRecvType != HCCL_RECV) {
            ZC_WARN(ZC_SUB_COLL, "rank %d: item %u has sendRecvType %d (HCCL_SEND or HCCL_RECV)",
                    c->rank, i, (int)it->sendRecvType);
            return HCCL_E_PARA;
        }
        if (sz == 0) {
            ZC_WARN(ZC_SUB_COLL, "rank %d: item %u has dataType %d", c->rank, i, it->dataType);
            return HCCL_E_PARA;
        }
        if (it->remoteRank >= (uint32_t)c->nranks || it->remoteRank == (uint32_t)c->rank) {
            ZC_WARN(ZC_SUB_COLL, "rank %d: item %u names peer rank %u (nranks %d, not myself)",
                    c->rank, i, it->remoteRank, c->nranks);
            return HCCL_E_PARA;
        }
        if (it->count > (UINT64_MAX / 4) / sz) {
            ZC_WARN(ZC_SUB_COLL, "rank %d: item %u count %llu is absurd", c->rank, i,
                    (unsigned long long)it->count);
            return HCCL_E_PARA;
        }
        if (it->buf == NULL && it->count != 0) {
            ZC_WARN(ZC_SUB_COLL, "rank %d: item %u buf is NULL with count %llu", c->rank, i,
                    (unsigned long long)it->count);
            return HCCL_E_PTR;
        }
        ZH_CHECK_RESULT(zh_check_extent(c, "HcclSend/HcclRecv", "buf", it->buf, it->count * sz));
    }
    return HCCL_SUCCESS;
}

/* Number the items in issue order (per pair and direction) and publish the
 * counts, which peers read to see a send/recv against a collective. */
static void zh_p2p_number(zh_comm_t *c, zh_batch_t *b)
{
    for (uint32_t i = 0; i < b->n; i++) {
        zh_item_t *x = &b->items[i];
        int q = (int)x->it.remoteRank;
        zh_peer_t *p = &c->peers[q];
        int send = x->it.sendRecvType == HCCL_SEND;
        x->seq = send ? ++p->send_seq : ++p->recv_seq;
        zh_p2p_t *ch = zh_ctrl_p2p(c, c->ctrl, q);
        atomic_store_explicit(send ? &ch->issued_send : &ch->issued_recv, x->seq,
                              memory_order_release);
    }
}

static HcclResult zh_p2p_issue(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n,
                               aclrtStream stream)
{
    size_t need = sizeof(zh_batch_t) + sizeof(zh_item_t) * n;
    zccl_task_t rt;
    aclError e = zccl_task_reserve(stream, 0, &rt);
    if (e != ACL_SUCCESS) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: cannot enqueue send/recv on stream %p (aclError %d)",
                c->rank, stream, (int)e);
        return e == ACL_ERROR_RT_INVALID_HANDLE ? HCCL_E_PARA : HCCL_E_RUNTIME;
    }
    zh_p2p_task_t *t = rt.payload;
    t->ran = 0;
    t->b = need <= sizeof(t->room) ? (zh_batch_t *)(void *)t->room : calloc(1, need);
    if (t->b == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory for %u send/recv items", c->rank, n);
        zccl_task_commit(&rt, NULL, NULL); /* an empty slot */
        return HCCL_E_MEMORY;
    }
    memset(t->b, 0, need);
    t->b->comm = c;
    t->b->n = n;
    zh_prof_issue(&t->b->prof, stream);
    for (uint32_t i = 0; i < n; i++) {
        t->b->items[i].it = items[i];
        t->b->items[i].bytes = items[i].count * coll_dtype_size(items[i].dataType);
    }
    zh_p2p_number(c, t->b);
    atomic_fetch_add_explicit(&c->inflight, 1, memory_order_relaxed);
    zccl_task_commit(&rt, zh_p2p_task, zh_p2p_free);
    return HCCL_SUCCESS;
}

HcclResult zh_p2p_start(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n, aclrtStream stream)
{
    ZH_CHECK_RESULT(zh_issue_enter(c, "HcclSend/HcclRecv"));
    HcclResult r = zh_p2p_issue(c, items, n, stream);
    zh_issue_leave(c);
    return r;
}

/* The hierarchical tier's local send/recv items, run now on this thread. */
HcclResult zh_p2p_run_now(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n)
{
    size_t need = sizeof(zh_batch_t) + sizeof(zh_item_t) * n;
    zh_p2p_task_t t = {.b = calloc(1, need), .ran = 0};
    if (t.b == NULL) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory for %u send/recv items", c->rank, n);
        return HCCL_E_MEMORY;
    }
    t.b->comm = c;
    t.b->n = n;
    zh_prof_issue(&t.b->prof, NULL);
    for (uint32_t i = 0; i < n; i++) {
        t.b->items[i].it = items[i];
        t.b->items[i].bytes = items[i].count * coll_dtype_size(items[i].dataType);
    }
    zh_p2p_number(c, t.b);
    HcclResult r = (HcclResult)zh_p2p_task(&t);
    free(t.b);
    return r;
}
