/*
 * Agreement across hosts: before any byte of a collective moves, every rank
 * checks that the fields ranks must pass alike (zh_op_key: kind, dtype,
 * reduce op, root, count, as on one host; here also a hash of the V count
 * array ranks pass alike, and AlltoAllV's pair counts, zh_agree_a2av) agree
 * on every host, so that a
 * mismatch fails the op with HCCL_E_PARA on every rank, before data moves,
 * and leaves the communicator usable (the next agreeing op works), as on
 * one host.
 *
 * Two steps, one local synchronisation:
 *  1. Counterparts. Rank i of host A (na ranks) and rank j of host B (nb
 *     ranks) exchange their keys over UCX when j mod na == i or j == i mod
 *     nb (a symmetric relation): every rank of B is compared with at least
 *     one rank of A and the reverse. Each rank sends one small message to
 *     each of its counterparts, about max(nb / na, 1) + 1 per other host.
 *  2. Local verdict. The ranks of a host publish their "a counterpart
 *     differs" flag and their key in their control segment's agree[] words
 *     (unused otherwise on a local comm: symmetric windows are refused
 *     across hosts), meet at a barrier of the local comm, read every local
 *     rank's words, and meet again before the words may be reused. The
 *     barriers are the ones the local ops use, on the thread that runs
 *     them, so they never interleave with a local op. No data buffer, so
 *     no CCL buffer and no staging.
 * Every host then fails: a host whose ranks differ among themselves sees it
 * in step 2; a host whose ranks all agree with each other but not with some
 * rank r of another host has a counterpart of r, which sees the difference
 * in step 1 and tells its host in step 2. All ranks reach the verdict after
 * the same messages, so nothing is left in flight. Flags (a last key word,
 * not compared) travel the same way, so every rank learns their OR: the
 * algorithm choices that depend on one rank's arguments.
 */
#include "hier/hccl_hier.h"

#include <stdlib.h>
#include <string.h>

#include "zc/log.h"

#define ZH_STEP_AGREE 0xfffffffu /* the tag step of the agreement message */
#define ZH_STEP_PAIRS 0xffffffeu /* AlltoAllV: the pair counts to each rank of another host */
#define ZH_KEY_WORDS (ZH_OP_KEY_WORDS + 1) /* the one-host key, then the V arrays' hash */
#define ZH_KEY_ALL (ZH_KEY_WORDS + 1)      /* then flags every rank learns the OR of */

static const char *const zh_key_names[ZH_KEY_WORDS] = {"collective", "dtype", "reduce op",
                                                       "root",       "count", "V arrays (hash)"};

/* Are rank i of a host of na ranks and rank j of a host of nb counterparts? */
static int zh_agree_pair(int i, int na, int j, int nb)
{
    return j % na == i || j == i % nb;
}

/* My counterparts on the other hosts, in rank order; returns how many. */
static int zh_agree_peers(zh_hop_t *x, int *peers)
{
    const zh_level_t *lv = &x->h->level[ZH_LEVEL_HOST];
    int i = lv->index_of[x->c->rank];
    int na = zh_host_size(x->h, lv->group);
    int n = 0;
    for (int g = 0; g < lv->ngroups; g++) {
        int nb = zh_host_size(x->h, g);
        for (int j = 0; g != lv->group && j < nb; j++) {
            if (zh_agree_pair(i, na, j, nb)) {
                peers[n++] = zh_host_member(x->h, g, j);
            }
        }
    }
    return n;
}

/* Step 1: 1 if a counterpart passed another key (logged once, unless
 * `logged`: this rank already said why it fails), 0 if none, or an error of
 * the transport. ORs the counterparts' flags into *flags. */
static int zh_agree_remote(zh_hop_t *x, const uint64_t *key, int logged, uint64_t *flags)
{
    int nr = x->c->nranks;
    int *peers = malloc(sizeof(int) * (size_t)nr);
    uint64_t *theirs = malloc(sizeof(uint64_t) * ZH_KEY_ALL * (size_t)nr);
    zh_net_req_t *r = calloc(2 * (size_t)nr, sizeof(*r));
    if (peers == NULL || theirs == NULL || r == NULL) {
        free(peers);
        free(theirs);
        free(r);
        ZC_WARN(ZC_SUB_COLL, "rank %d: out of memory for the agreement across hosts", x->c->rank);
        return ZC_ERR_NOMEM;
    }
    size_t kb = sizeof(uint64_t) * ZH_KEY_ALL;
    int np = zh_agree_peers(x, peers);
    int nq = 0;
    int st = ZC_OK;
    for (int k = 0; k < np && st == ZC_OK; k++) {
        uint64_t tr = ZH_TAG_COLL(x->seq, peers[k], ZH_STEP_AGREE);
        uint64_t ts = ZH_TAG_COLL(x->seq, x->c->rank, ZH_STEP_AGREE);
        st = zh_net_irecv(x->h->net, peers[k], tr, theirs + k * ZH_KEY_ALL, kb, &r[nq++]);
        st = st == ZC_OK ? zh_net_isend(x->h->net, peers[k], ts, key, kb, &r[nq++]) : st;
    }
    if (st == ZC_OK) {
        st = zh_hier_wait(x, r, nq);
    } else {
        zh_net_cancel(x->h->net, r, nq);
    }
    for (int k = 0; k < np && st == ZC_OK; k++) {
        const uint64_t *t = theirs + k * ZH_KEY_ALL;
        *flags |= t[ZH_KEY_WORDS];
        for (int w = 0; w < ZH_KEY_WORDS && st == ZC_OK; w++) {
            if (t[w] != key[w] && logged) {
                st = 1;
            } else if (t[w] != key[w]) {
                ZC_WARN(ZC_SUB_COLL,
                        "rank %d: op %u (%s): rank %d on another host passed %s %llu but this "
                        "rank passed %llu; failing the op",
                        x->c->rank, x->seq, zh_op_name((int)key[0]), peers[k], zh_key_names[w],
                        (unsigned long long)t[w], (unsigned long long)key[w]);
                st = 1;
            }
        }
    }
    free(peers);
    free(theirs);
    free(r);
    return st;
}

/* Step 2: ZC_OK if every rank of my host agrees and saw no difference. */
static int zh_agree_local(zh_hop_t *x, const uint64_t *key, int differs, uint64_t *flags)
{
    zh_comm_t *l = x->h->local;
    if (l->nranks == 1) {
        return differs ? ZC_ERR_INVAL : ZC_OK;
    }
    uint64_t *mine = l->ctrl->agree; /* kind, dtype and reduce op are small enums */
    mine[0] = (uint64_t)differs | (*flags & 1) << 1 | key[ZH_OP_KEY_WORDS] << 2;
    mine[1] = (key[0] & 0xffffu) | (key[1] & 0xffffu) << 16 | (key[2] & 0xffffu) << 32;
    mine[2] = key[3];
    mine[3] = key[4];
    int st = zh_barrier(l); /* release: agree[] first */
    int bad = differs;
    for (int q = 0; q < l->nranks && st == ZC_OK; q++) {
        const uint64_t *a = l->peers[q].ctrl->agree;
        bad |= (a[0] & 1) != 0 || a[0] >> 2 != mine[0] >> 2 || a[1] != mine[1] || a[2] != mine[2] ||
               a[3] != mine[3];
        *flags |= a[0] >> 1 & 1;
    }
    /* Nobody may overwrite agree[] (next op) before everyone read it. */
    st = st == ZC_OK ? zh_barrier(l) : st;
    if (st != ZC_OK) {
        return zh_hier_cause(l, st);
    }
    if (bad && !differs) {
        ZC_WARN(ZC_SUB_COLL, "rank %d: op %u (%s): ranks disagree across hosts; failing the op",
                x->c->rank, x->seq, zh_op_name((int)key[0]));
    }
    return bad ? ZC_ERR_INVAL : ZC_OK;
}

/* A 64-bit mix (splitmix64's finaliser). */
static uint64_t zh_mix(uint64_t v)
{
    v ^= v >> 30;
    v *= 0xbf58476d1ce4e5b9ull;
    v ^= v >> 27;
    v *= 0x94d049bb133111ebull;
    return v ^ (v >> 31);
}

/* Entry r -> q (cnt elements) of an AlltoAllV's count matrix, hashed. */
static uint64_t zh_pair_hash(int r, int q, uint64_t cnt)
{
    return zh_mix(zh_mix((uint64_t)(uint32_t)r << 32 | (uint32_t)q) ^ cnt);
}

/* The count array ranks pass alike (ReduceScatterV's sendCounts,
 * AllGatherV's recvCounts), hashed into key[ZH_OP_KEY_WORDS] (0 for the
 * others). A rank's own count was checked against it at the call. */
static void zh_agree_vkey(zh_hop_t *x, uint64_t *key)
{
    const zh_op_t *op = x->op;
    const uint64_t *v = op->kind == ZH_OP_REDUCESCATTERV ? op->v[ZH_V_SEND_COUNTS]
                        : op->kind == ZH_OP_ALLGATHERV   ? op->v[ZH_V_RECV_COUNTS]
                                                         : NULL;
    uint64_t h = 0;
    for (int r = 0; v != NULL && r < x->c->nranks; r++) {
        h = zh_mix(h ^ v[r]) + (uint64_t)r;
    }
    key[ZH_OP_KEY_WORDS] = h;
}

/* AlltoAllV within my host: every local rank publishes the hashed entries
 * it sends to my host's ranks minus those it receives from them; the sum
 * is 0 when every pair agrees. *bad = 1 (logged) when not. */
static int zh_agree_host_pairs(zh_hop_t *x, int *bad)
{
    zh_comm_t *l = x->h->local;
    const uint64_t *sc = x->op->v[ZH_V_SEND_COUNTS];
    const uint64_t *rc = x->op->v[ZH_V_RECV_COUNTS];
    int me = x->c->rank;
    uint64_t d = 0;
    for (int i = 0; i < l->nranks; i++) {
        int q = zh_host_member(x->h, ZH_LV(x)->group, i);
        d += zh_pair_hash(me, q, sc[q]) - zh_pair_hash(q, me, rc[q]);
    }
    l->ctrl->agree[0] = d;
    int st = zh_barrier(l); /* release: agree[] first */
    uint64_t sum = 0;
    for (int q = 0; q < l->nranks && st == ZC_OK; q++) {
        sum += l->peers[q].ctrl->agree[0];
    }
    st = st == ZC_OK ? zh_barrier(l) : st; /* before agree[] is reused */
    if (st != ZC_OK) {
        return zh_hier_cause(l, st);
    }
    *bad = sum != 0;
    if (*bad) {
        ZC_WARN(ZC_SUB_COLL,
                "rank %d: op %u (AlltoAllV): send and receive counts of this host's ranks "
                "disagree; failing the op",
                me, x->seq);
    }
    return ZC_OK;
}

/* AlltoAllV across hosts: each rank of another host gets my (send count to
 * it, receive count from it) and sends me its. 1 when a pair disagrees
 * (logged), 0, or a transport error. */
static int zh_agree_pairs(zh_hop_t *x)
{
    int n = x->c->nranks;
    int me = x->c->rank;
    const uint64_t *sc = x->op->v[ZH_V_SEND_COUNTS];
    const uint64_t *rc = x->op->v[ZH_V_RECV_COUNTS];
    uint64_t *w = malloc(4 * sizeof(uint64_t) * (size_t)n); /* mine, then theirs, 2 per rank */
    zh_net_req_t *r = calloc(2 * (size_t)n, sizeof(*r));
    int st = w == NULL || r == NULL ? ZC_ERR_NOMEM : ZC_OK;
    int nq = 0;
    for (int q = 0; q < n && st == ZC_OK; q++) {
        if (x->h->remote[q]) {
            w[2 * q] = sc[q];
            w[2 * q + 1] = rc[q];
            uint64_t *t = w + 2 * n + 2 * q;
            st = zh_net_irecv(x->h->net, q, ZH_TAG_COLL(x->seq, q, ZH_STEP_PAIRS), t,
                              2 * sizeof(uint64_t), &r[nq++]);
            st = st == ZC_OK ? zh_net_isend(x->h->net, q, ZH_TAG_COLL(x->seq, me, ZH_STEP_PAIRS),
                                            w + 2 * q, 2 * sizeof(uint64_t), &r[nq++])
                             : st;
        }
    }
    st = st == ZC_OK ? zh_hier_wait(x, r, nq) : (zh_net_cancel(x->h->net, r, nq), st);
    int bad = 0;
    for (int q = 0; q < n && st == ZC_OK; q++) {
        const uint64_t *t = w + 2 * n + 2 * q;
        if (x->h->remote[q] && !bad && (t[0] != rc[q] || t[1] != sc[q])) {
            ZC_WARN(ZC_SUB_COLL,
                    "rank %d: op %u (AlltoAllV): rank %d on another host sends %llu and receives "
                    "%llu elements, this rank receives %llu and sends %llu; failing the op",
                    me, x->seq, q, (unsigned long long)t[0], (unsigned long long)t[1],
                    (unsigned long long)rc[q], (unsigned long long)sc[q]);
            bad = 1;
        }
    }
    free(w);
    free(r);
    return st == ZC_OK ? bad : st;
}

/* AlltoAllV's counts: within my host, then with every rank of another host.
 * 1 when some pair disagrees (logged), 0, or an error. */
static int zh_agree_a2av(zh_hop_t *x)
{
    int bad = 0;
    int st = x->h->local->nranks > 1 ? zh_agree_host_pairs(x, &bad) : ZC_OK;
    if (st != ZC_OK) {
        return st;
    }
    int pb = zh_agree_pairs(x);
    return pb < 0 ? pb : bad | pb;
}

/* Flags every rank must learn (the OR over ranks): bit 0, a ReduceScatter
 * whose recv overlaps its send other than as its own block (the host
 * partials' rounds would overwrite blocks still to be read). */
static uint64_t zh_agree_flags(zh_hop_t *x)
{
    const zh_op_t *op = x->op;
    const char *mine = zh_hier_at(op->send, (uint64_t)x->c->rank * op->count, x->sz);
    return op->kind == ZH_OP_REDUCESCATTER && (const void *)mine != op->recv &&
           zh_hier_overlap(op->send, op->send_bytes, op->recv, op->recv_bytes);
}

int zh_hier_agree(zh_hop_t *x)
{
    uint64_t key[ZH_KEY_ALL];
    zh_op_key(x->op, key);
    key[ZH_KEY_WORDS] = zh_agree_flags(x);
    uint64_t flags = key[ZH_KEY_WORDS];
    /* AlltoAllV: a rank that finds a pair disagreeing fails (mine) and makes
     * its key differ from its counterparts', which tell their hosts. */
    zh_agree_vkey(x, key);
    int mine = 0;
    if (x->op->kind == ZH_OP_ALLTOALLV && x->op->v[ZH_V_SEND_COUNTS] != NULL) {
        mine = zh_agree_a2av(x);
        if (mine < 0) {
            return mine;
        }
        key[ZH_OP_KEY_WORDS] = (uint64_t)mine;
    }
    int differs = zh_agree_remote(x, key, mine, &flags);
    if (differs < 0) {
        return differs;
    }
    int st = zh_agree_local(x, key, differs | mine, &flags);
    x->rs_raw = (int)(flags & 1);
    return st;
}
