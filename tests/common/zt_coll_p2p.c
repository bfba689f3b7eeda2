/* The cases and checks declared in zt_coll_p2p.h, compiled once into the test library. */
#include "zt_coll_p2p.h"

void zt_pc_str(const zt_pc_t *c, char *buf, size_t len)
{
    static const char *const pats[] = {"ring", "bidir", "all-to-all", "pair"};
    static const char *const iss[] = {"group", "nested-group", "batch", "ungrouped"};
    snprintf(buf, len, "p2p %s %s %s count=%" PRIu64 " x%d send %s recv %s %s%s%s seed=%" PRIx64,
             pats[c->pattern & 3], iss[c->issue & 3], zt_dtype_name(c->dtype), c->count, c->nmsg,
             c->send_zc ? "zero-copy" : "plain", c->recv_zc ? "zero-copy" : "plain",
             c->misalign ? "odd" : "aligned",
             c->deviate == 1   ? " dev=count"
             : c->deviate == 2 ? " dev=dtype"
                               : "",
             c->with_coll ? " +broadcast" : "", c->seed);
}

/** Does src send to dst in case c? */
static int zt_pc_pair(const zt_pc_t *c, int n, int src, int dst)
{
    if (src == dst || n < 2) {
        return 0;
    }
    switch (c->pattern) {
    case ZT_P2P_RING:
        return dst == (src + 1) % n;
    case ZT_P2P_BIDIR:
        return dst == (src + 1) % n || dst == (src + n - 1) % n;
    case ZT_P2P_A2A:
        return 1;
    default:
        return src == 0 && dst == 1;
    }
}

/** Elements of message k from src to dst. */
static uint64_t zt_pc_count(const zt_pc_t *c, int src, int dst, int k)
{
    if (c->pattern == ZT_P2P_A2A) {
        if ((src + 2 * dst + k) % 5 == 2) {
            return 0;
        }
        return c->count +
               zt_pattern(c->seed ^ 0x9292ull, src * 64 + dst, (size_t)k) % (c->count + 1);
    }
    if (c->pattern == ZT_P2P_PAIR) {
        return c->count;
    }
    static const uint64_t mul[4] = {1, 0, 2, 0};
    static const uint64_t add[4] = {0, 0, 1, 1};
    return c->count * mul[k % 4] + add[k % 4];
}

static zt_pat_t zt_pc_pat(const zt_pc_t *c, int dtype, int dst, int k)
{
    zt_pat_t p = {dtype, ZT_OP_NONE, ZT_FILL_EXACT, 1, zt_pattern(c->seed, dst, (size_t)k)};
    return p;
}

static size_t zt_pc_slot(uint64_t count, size_t es)
{
    return ((size_t)count * es + 2 * ZT_CC_GUARD + 63) / 64 * 64;
}

/*
 * Rank me's messages in canonical order (sends by peer, then receives by
 * peer; k ascending) with their offsets; returns how many (or -1). used[0]
 * and used[1] get the bytes of the send and receive halves used.
 */
static int zt_pc_msgs(const zt_pc_t *c, int n, int me, zt_pmsg_t *m, size_t used[2])
{
    int cnt = 0;
    size_t es = zt_dtype_size(c->dtype);
    size_t mis = !c->misalign ? 0 : es == 1 ? 3 : es;
    used[0] = used[1] = ZT_CC_ROOM + mis;
    for (int dir = 0; dir < 2; dir++) {
        for (int p = 0; p < n; p++) {
            int src = dir == 0 ? me : p;
            int dst = dir == 0 ? p : me;
            if (!zt_pc_pair(c, n, src, dst)) {
                continue;
            }
            for (int k = 0; k < c->nmsg; k++) {
                if (cnt == ZT_PC_MAXMSG) {
                    return -1;
                }
                zt_pmsg_t *x = &m[cnt++];
                x->dir = dir == 0 ? HCCL_SEND : HCCL_RECV;
                x->peer = p;
                x->k = k;
                x->count = zt_pc_count(c, src, dst, k);
                x->dtype = c->dtype;
                if (dir == 1 && me == 1 && c->deviate == 1) {
                    x->count++;
                } else if (dir == 1 && me == 1 && c->deviate == 2) {
                    x->dtype = zt_cc_alt_dtype(c->dtype, 0);
                }
                x->off = used[dir] + ZT_CC_GUARD;
                used[dir] += zt_pc_slot(x->count, es);
            }
        }
    }
    return cnt;
}

/* Issue order of rank me's messages: indexes into m (see the top of this file). */
static void zt_pc_order(const zt_pc_t *c, int me, const zt_pmsg_t *m, int cnt, int *ord)
{
    int k = 0;
    if (c->issue == ZT_IS_SINGLE) { /* ungrouped: even ranks send first, odd ranks receive */
        for (int pass = 0; pass < 2; pass++) {
            int want = (pass == 0) == ((me & 1) == 0) ? HCCL_SEND : HCCL_RECV;
            for (int i = 0; i < cnt; i++) {
                if (m[i].dir == want) {
                    ord[k++] = i;
                }
            }
        }
        return;
    }
    int v = (int)((c->seed + (uint64_t)me) % 3);
    if (v == 0) { /* sends then receives, peers ascending */
        for (int i = 0; i < cnt; i++) {
            ord[k++] = i;
        }
        return;
    }
    if (v == 1) { /* receives first, peers descending; then sends the same way */
        for (int dir = 1; dir >= 0; dir--) {
            int want = dir ? HCCL_RECV : HCCL_SEND;
            for (int p = ZT_CC_MAXR - 1; p >= 0; p--) {
                for (int i = 0; i < cnt; i++) {
                    if (m[i].dir == want && m[i].peer == p) {
                        ord[k++] = i;
                    }
                }
            }
        }
        return;
    }
    /* Shuffle the (direction, peer) slots, then hand each slot the next message of its kind. */
    int slot[ZT_PC_MAXMSG];
    int taken[ZT_PC_MAXMSG] = {0};
    for (int i = 0; i < cnt; i++) {
        slot[i] = i;
    }
    for (int i = cnt - 1; i > 0; i--) {
        int j = (int)(zt_pattern(c->seed ^ 0x5707ull, me, (size_t)i) % (uint64_t)(i + 1));
        int t = slot[i];
        slot[i] = slot[j];
        slot[j] = t;
    }
    for (int s = 0; s < cnt; s++) {
        const zt_pmsg_t *want = &m[slot[s]];
        for (int i = 0; i < cnt; i++) {
            if (!taken[i] && m[i].dir == want->dir && m[i].peer == want->peer) {
                taken[i] = 1;
                ord[k++] = i;
                break;
            }
        }
    }
}

/** Bytes an arena half must hold for case c on any rank of n. */
static size_t zt_pc_need(const zt_pc_t *c, int n)
{
    size_t need = 0;
    zt_pmsg_t m[ZT_PC_MAXMSG];
    for (int q = 0; q < n; q++) {
        size_t used[2];
        if (zt_pc_msgs(c, n, q, m, used) < 0) {
            return SIZE_MAX;
        }
        for (int h = 0; h < 2; h++) {
            need = used[h] + ZT_CC_ROOM > need ? used[h] + ZT_CC_ROOM : need;
        }
    }
    return need;
}

/* Issue rank me's messages in order ord; returns the first failing HcclResult. */
static HcclResult zt_pc_issue(zt_env_t *env, const zt_pc_t *c, const zt_pmsg_t *m, const int *ord,
                              int cnt, unsigned char *sbase, unsigned char *rbase, int32_t *bc)
{
    HcclResult r = HCCL_SUCCESS;
    HcclResult e;
    if (c->issue == ZT_IS_BATCH) {
        HcclSendRecvItem items[ZT_PC_MAXMSG];
        for (int i = 0; i < cnt; i++) {
            const zt_pmsg_t *x = &m[ord[i]];
            items[i].sendRecvType = (HcclSendRecvType)x->dir;
            items[i].buf = (x->dir == HCCL_SEND ? sbase : rbase) + x->off;
            items[i].count = x->count;
            items[i].dataType = (HcclDataType)x->dtype;
            items[i].remoteRank = (uint32_t)x->peer;
        }
        r = HcclBatchSendRecv(items, (uint32_t)cnt, env->comm, env->stream);
        memset(items, 0xee, sizeof(items)); /* the caller's array is free once it returns */
        return r;
    }
    int grouped = c->issue != ZT_IS_SINGLE;
    int depth = c->issue == ZT_IS_NESTED ? 2 : grouped;
    for (int d = 0; d < depth; d++) {
        if ((e = HcclGroupStart()) != HCCL_SUCCESS && r == HCCL_SUCCESS) {
            r = e;
        }
    }
    for (int i = 0; i < cnt; i++) {
        const zt_pmsg_t *x = &m[ord[i]];
        if (i == cnt / 2 && c->issue == ZT_IS_NESTED) {
            /* An inner group closing issues nothing: the outer one is still open. */
            if ((e = HcclGroupStart()) != HCCL_SUCCESS || (e = HcclGroupEnd()) != HCCL_SUCCESS) {
                r = r == HCCL_SUCCESS ? e : r;
            }
        }
        if (i == cnt / 2 && c->with_coll) {
            e = HcclBroadcast(bc, ZT_PC_BCAST, HCCL_DATA_TYPE_INT32, 0, env->comm, env->stream);
            r = r == HCCL_SUCCESS ? e : r;
        }
        if (x->dir == HCCL_SEND) {
            e = HcclSend(sbase + x->off, x->count, (HcclDataType)x->dtype, (uint32_t)x->peer,
                         env->comm, env->stream);
        } else {
            e = HcclRecv(rbase + x->off, x->count, (HcclDataType)x->dtype, (uint32_t)x->peer,
                         env->comm, env->stream);
        }
        r = r == HCCL_SUCCESS ? e : r;
    }
    for (int d = 0; d < depth; d++) {
        if ((e = HcclGroupEnd()) != HCCL_SUCCESS && r == HCCL_SUCCESS) {
            r = e;
        }
    }
    return r;
}

/* The received messages, the gaps and guards around them, the Broadcast. */
static int zt_pc_check_recv(zt_env_t *env, const zt_pc_t *c, const zt_pmsg_t *m, int cnt,
                            unsigned char *rbase, size_t rused, const int32_t *bc)
{
    int bad = 0;
    unsigned char *want = malloc(rused);
    if (want == NULL) {
        ZT_PC_FAIL(env, c, "test bug: out of memory");
        return 1;
    }
    memset(want, ZT_CC_SENT, rused);
    for (int i = 0; i < cnt; i++) {
        const zt_pmsg_t *x = &m[i];
        if (x->dir != HCCL_RECV) {
            continue;
        }
        zt_pat_t pat = zt_pc_pat(c, x->dtype, env->rank, x->k);
        zt_fill(want + x->off, 0, (size_t)x->count, &pat, x->peer);
        char what[320];
        char cs[256];
        zt_pc_str(c, cs, sizeof(cs));
        snprintf(what, sizeof(what), "[rank %d/%d] FAIL %s: message %d from rank %d", env->rank,
                 env->nranks, cs, x->k, x->peer);
        bad |= zt_compare(what, rbase + x->off, want + x->off, (size_t)x->count, x->dtype) != 0;
    }
    if (!bad && memcmp(rbase, want, rused) != 0) {
        size_t i = 0;
        while (rbase[i] == want[i]) {
            i++;
        }
        ZT_PC_FAIL(env, c, "receive region byte %zu is 0x%02x, want 0x%02x (outside messages)", i,
                   rbase[i], want[i]);
        bad = 1;
    }
    free(want);
    if (c->with_coll) {
        for (int i = 0; i < ZT_PC_BCAST; i++) {
            if (bc[i] != i * 7 + 1) {
                ZT_PC_FAIL(env, c, "broadcast in the group: element %d is %d, want %d", i, bc[i],
                           i * 7 + 1);
                return 1;
            }
        }
    }
    return bad;
}

/**
 * Run one case. same_proc: every peer is a thread of this process (messages
 * always go zero-copy). bc: ZT_PC_BCAST int32 of activated memory for
 * with_coll, outside the message buffers.
 * Returns 0, 1 (checked, failed) or 2 (stop: the communicator may be out of step).
 */
static int zt_pc_run(zt_env_t *env, const zt_pc_t *c, int same_proc, int32_t *bc)
{
    int n = env->nranks;
    int me = env->rank;
    zt_pmsg_t m[ZT_PC_MAXMSG];
    int ord[ZT_PC_MAXMSG];
    size_t used[2];
    int cnt = zt_pc_msgs(c, n, me, m, used);
    if (cnt < 0 || zt_pc_need(c, n) > env->half) {
        ZT_PC_FAIL(env, c, "test bug: too many messages or arena half of %zu too small", env->half);
        return 2;
    }
    zt_pc_order(c, me, m, cnt, ord);
    unsigned char *sbase = (c->send_zc ? (unsigned char *)env->zc.va : env->plain);
    unsigned char *rbase = (c->recv_zc ? (unsigned char *)env->zc.va : env->plain) + env->half;
    memset(sbase, ZT_CC_SEND_SENT, used[0]);
    memset(rbase, ZT_CC_SENT, used[1]);
    uint64_t staged_want = 0;
    int zc_path = same_proc || (c->send_zc && c->recv_zc);
    for (int i = 0; i < cnt; i++) {
        if (m[i].dir == HCCL_SEND) {
            zt_pat_t pat = zt_pc_pat(c, m[i].dtype, m[i].peer, m[i].k);
            zt_fill(sbase + m[i].off, 0, (size_t)m[i].count, &pat, me);
            /* A send to another host cannot know the receiver's memory: it
             * stages exactly when its own buffer is plain (UCX copies it). */
            int staged = zt_ref_same_host(me, m[i].peer, n) ? !zc_path : !c->send_zc;
            staged_want += staged ? m[i].count * zt_dtype_size(m[i].dtype) : 0;
        }
    }
    for (int i = 0; c->with_coll && i < ZT_PC_BCAST; i++) {
        bc[i] = me == 0 ? i * 7 + 1 : -1;
    }
    unsigned char *sbefore = malloc(used[0]);
    if (sbefore == NULL) {
        ZT_PC_FAIL(env, c, "test bug: out of memory");
        return 2;
    }
    memcpy(sbefore, sbase, used[0]);
    uint64_t st0 = zccl_comm_staged_bytes(env->comm);
    HcclResult h = zt_pc_issue(env, c, m, ord, cnt, sbase, rbase, bc);
    if (h != HCCL_SUCCESS) {
        ZT_PC_FAIL(env, c, "issuing returned %d (%s)", (int)h, HcclGetErrorString(h));
        free(sbefore);
        return 2;
    }
    aclError e = aclrtSynchronizeStream(env->stream);
    int bad = 0;
    int party = c->deviate != 0 && me < 2;
    if (party) {
        if (e != (aclError)HCCL_E_PARA) {
            ZT_PC_FAIL(env, c,
                       "a send/recv mismatch: want HCCL_E_PARA from the sync on both "
                       "sides, got %d",
                       (int)e);
            free(sbefore);
            return 2;
        }
        staged_want = 0;
        for (size_t i = 0; i < used[1]; i++) {
            if (rbase[i] != ZT_CC_SENT) {
                ZT_PC_FAIL(env, c, "refused receive wrote byte %zu", i);
                bad = 1;
                break;
            }
        }
    } else if (e != ACL_SUCCESS) {
        ZT_PC_FAIL(env, c, "aclrtSynchronizeStream returned %d", (int)e);
        free(sbefore);
        return 2;
    } else {
        bad |= zt_pc_check_recv(env, c, m, cnt, rbase, used[1], bc);
    }
    if (memcmp(sbefore, sbase, used[0]) != 0) {
        ZT_PC_FAIL(env, c, "send region changed");
        bad = 1;
    }
    free(sbefore);
    uint64_t st = zccl_comm_staged_bytes(env->comm);
    if (st - st0 != staged_want) {
        ZT_PC_FAIL(env, c, "staged %" PRIu64 " bytes, want %" PRIu64 " (%s path)", st - st0,
                   staged_want, zc_path ? "zero-copy" : "buffered");
        bad = 1;
    }
    return bad;
}

static void zt_pc_add(zt_pclist_t *l, zt_pc_t c)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        zt_pc_t *v = realloc(l->v, sizeof(*v) * (size_t)cap);
        if (v == NULL) {
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    c.seed = zt_pattern(l->base, 1, l->seq++);
    l->v[l->n++] = c;
}

/* Run a list on env (arena sized for it); prints the totals under name. */
static int zt_pc_run_list(zt_env_t *env, const zt_pclist_t *l, int same_proc, const char *name)
{
    size_t need = 1 << 16;
    for (int i = 0; i < l->n; i++) {
        size_t b = zt_pc_need(&l->v[i], env->nranks);
        need = b > need ? b : need;
    }
    int cases = 0;
    int fails = 0;
    need += 8192; /* the Broadcast's buffer at the end of the send half */
    if (env->half < need && (env->half != 0 || zt_env_arena(env, need) != 0)) {
        zt_report(env, "test bug: no arena of %zu bytes", need);
        return 1;
    }
    /* Activated memory, so the Broadcast runs zero-copy and stages nothing. */
    int32_t *bc = (int32_t *)(void *)((char *)env->zc.va + env->half - 8192);
    for (int i = 0; i < l->n; i++) {
        cases++;
        int rc = zt_pc_run(env, &l->v[i], same_proc, bc);
        fails += rc != 0;
        if (rc == 2) {
            break;
        }
    }
    if (env->rank == 0) {
        printf("%s np=%d: %d of %d cases run, %d failed on rank 0\n", name, env->nranks, cases,
               l->n, fails);
        fflush(stdout);
    }
    return fails;
}

static const int zt_pc_mems[4][2] = {{1, 1}, {0, 0}, {1, 0}, {0, 1}};

int zt_p2p_ring_run(zt_env_t *env, int same_proc, uint64_t big, uint64_t seed)
{
    if (env->nranks < 2) {
        return 0;
    }
    static const struct {
        int dtype;
        uint64_t count;
    } sizes[] = {{HCCL_DATA_TYPE_INT8, 0},
                 {HCCL_DATA_TYPE_UINT8, 1},
                 {HCCL_DATA_TYPE_FP16, 7},
                 {HCCL_DATA_TYPE_INT32, 1000},
                 {HCCL_DATA_TYPE_FP64, 4099}};
    zt_pclist_t l = {NULL, 0, 0, 0, seed};
    for (int mi = 0; mi < 4; mi++) {
        const zt_pc_t z = {.pattern = ZT_P2P_RING,
                           .nmsg = 1,
                           .send_zc = zt_pc_mems[mi][0],
                           .recv_zc = zt_pc_mems[mi][1],
                           .misalign = 1};
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            zt_pc_t c = z;
            c.dtype = sizes[s].dtype;
            c.count = sizes[s].count;
            c.misalign = (int)(s & 1);
            zt_pc_add(&l, c);
        }
        zt_pc_t c = z;
        c.dtype = HCCL_DATA_TYPE_INT16; /* four messages per pair, matched in order */
        c.count = 1000;
        c.nmsg = 4;
        zt_pc_add(&l, c);
        c.issue = ZT_IS_SINGLE; /* ungrouped: even ranks send first */
        c.dtype = HCCL_DATA_TYPE_INT32;
        c.nmsg = 1;
        zt_pc_add(&l, c);
        c.dtype = HCCL_DATA_TYPE_UINT8;
        c.count = 333;
        c.nmsg = 3;
        zt_pc_add(&l, c);
        c.issue = ZT_IS_NESTED;
        c.dtype = HCCL_DATA_TYPE_FP32;
        c.count = 100;
        c.nmsg = 2;
        zt_pc_add(&l, c);
        c.pattern = ZT_P2P_BIDIR;
        c.issue = ZT_IS_GROUP;
        c.dtype = HCCL_DATA_TYPE_INT64;
        c.count = 500;
        zt_pc_add(&l, c);
        c.issue = ZT_IS_BATCH;
        c.dtype = HCCL_DATA_TYPE_BFP16;
        c.count = 77;
        c.nmsg = 1;
        zt_pc_add(&l, c);
        c.pattern = ZT_P2P_RING;
        c.issue = ZT_IS_GROUP;
        c.dtype = HCCL_DATA_TYPE_INT32;
        c.count = 500;
        c.with_coll = 1;
        zt_pc_add(&l, c);
        if (mi < 2 && big > 0) {
            c = z;
            c.dtype = HCCL_DATA_TYPE_FP32;
            c.count = big;
            zt_pc_add(&l, c);
            c.issue = ZT_IS_SINGLE;
            c.count = big / 3;
            c.nmsg = 3;
            zt_pc_add(&l, c);
        }
    }
    int fails = zt_pc_run_list(env, &l, same_proc, "send/recv rings");
    free(l.v);
    return fails;
}

int zt_p2p_a2a_run(zt_env_t *env, int same_proc, uint64_t big, uint64_t seed)
{
    if (env->nranks < 2) {
        return 0;
    }
    static const struct {
        int dtype;
        uint64_t count;
        int nmsg;
        int issue;
    } kinds[] = {
        {HCCL_DATA_TYPE_INT8, 1, 1, ZT_IS_BATCH},      {HCCL_DATA_TYPE_BFP16, 1000, 1, ZT_IS_BATCH},
        {HCCL_DATA_TYPE_FP64, 7, 2, ZT_IS_BATCH},      {HCCL_DATA_TYPE_INT32, 0, 1, ZT_IS_BATCH},
        {HCCL_DATA_TYPE_UINT32, 1000, 3, ZT_IS_BATCH}, {HCCL_DATA_TYPE_INT32, 100, 2, ZT_IS_GROUP},
        {HCCL_DATA_TYPE_UINT16, 50, 1, ZT_IS_NESTED}};
    zt_pclist_t l = {NULL, 0, 0, 0, seed};
    for (int mi = 0; mi < 3; mi++) {
        for (int rep = 0; rep < 2; rep++) { /* two seeds: other item orders per rank */
            for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
                zt_pc_t c = {.pattern = ZT_P2P_A2A,
                             .issue = kinds[k].issue,
                             .dtype = kinds[k].dtype,
                             .count = kinds[k].count,
                             .nmsg = kinds[k].nmsg,
                             .send_zc = zt_pc_mems[mi][0],
                             .recv_zc = zt_pc_mems[mi][1],
                             .misalign = (int)((k + (size_t)rep) & 1)};
                zt_pc_add(&l, c);
            }
        }
        if (mi < 2 && big > 0) {
            zt_pc_t c = {.pattern = ZT_P2P_A2A,
                         .issue = ZT_IS_BATCH,
                         .dtype = HCCL_DATA_TYPE_FP32,
                         .count = big / 4,
                         .nmsg = 1,
                         .send_zc = zt_pc_mems[mi][0],
                         .recv_zc = zt_pc_mems[mi][1],
                         .misalign = 1};
            zt_pc_add(&l, c);
        }
    }
    int fails = zt_pc_run_list(env, &l, same_proc, "send/recv all-to-all");
    free(l.v);
    return fails;
}

int zt_p2p_mismatch_run(zt_env_t *env, int same_proc, uint64_t seed)
{
    if (env->nranks < 2) {
        return 0;
    }
    zt_pclist_t l = {NULL, 0, 0, 0, seed};
    for (int mi = 0; mi < 2; mi++) {
        for (int dev = 1; dev <= 2; dev++) {
            for (int issue = 0; issue < 2; issue++) {
                zt_pc_t c = {.pattern = ZT_P2P_PAIR,
                             .issue = issue ? ZT_IS_BATCH : ZT_IS_SINGLE,
                             .dtype = HCCL_DATA_TYPE_FP32,
                             .count = 1000,
                             .nmsg = 1,
                             .send_zc = zt_pc_mems[mi][0],
                             .recv_zc = zt_pc_mems[mi][1],
                             .misalign = 1,
                             .deviate = dev};
                zt_pc_add(&l, c);
                c.deviate = 0; /* the pair still works */
                zt_pc_add(&l, c);
            }
        }
    }
    int fails = zt_pc_run_list(env, &l, same_proc, "send/recv mismatch");
    free(l.v);
    return fails;
}

int zt_p2p_badargs_run(zt_env_t *env, int same_proc)
{
    zt_bad_t b = {env, 0, 0};
    int n = env->nranks;
    uint32_t me = (uint32_t)env->rank;
    uint32_t peer = (uint32_t)((env->rank + 1) % n);
    if (env->half == 0 && zt_env_arena(env, 1 << 20) != 0) {
        return 1;
    }
    unsigned char *buf = env->plain + ZT_CC_ROOM;
    HcclComm cm = env->comm;
    aclrtStream st = env->stream;
    const HcclDataType i32 = HCCL_DATA_TYPE_INT32;
    uint32_t badpeers[3] = {(uint32_t)n, UINT32_MAX, me};
    for (int k = 0; k < 3; k++) {
        ZT_BAD(&b, HcclSend(buf, 4, i32, badpeers[k], cm, st), HCCL_E_PARA);
        ZT_BAD(&b, HcclRecv(buf, 4, i32, badpeers[k], cm, st), HCCL_E_PARA);
        HcclSendRecvItem it = {HCCL_SEND, buf, 4, i32, badpeers[k]};
        ZT_BAD(&b, HcclBatchSendRecv(&it, 1, cm, st), HCCL_E_PARA);
    }
    ZT_BAD(&b, HcclSend(buf, 4, i32, peer, NULL, st), HCCL_E_PTR);
    ZT_BAD(&b, HcclRecv(buf, 4, i32, peer, NULL, st), HCCL_E_PTR);
    ZT_BAD(&b, HcclBatchSendRecv(NULL, 2, cm, st), HCCL_E_PTR);
    ZT_BAD(&b, HcclBatchSendRecv(NULL, 0, cm, st), HCCL_SUCCESS);
    ZT_BAD(&b, HcclGroupEnd(), HCCL_E_PARA);
    if (n >= 2) {
        HcclSendRecvItem ok = {HCCL_SEND, buf, 4, i32, peer};
        ZT_BAD(&b, HcclBatchSendRecv(&ok, 0, cm, st), HCCL_SUCCESS);
        ZT_BAD(&b, HcclBatchSendRecv(&ok, 1, NULL, st), HCCL_E_PTR);
        ZT_BAD(&b, HcclSend(NULL, 4, i32, peer, cm, st), HCCL_E_PTR);
        ZT_BAD(&b, HcclRecv(NULL, 4, i32, peer, cm, st), HCCL_E_PTR);
        ZT_BAD(&b, HcclSend(buf, 4, (HcclDataType)99, peer, cm, st), HCCL_E_PARA);
        ZT_BAD(&b, HcclRecv(buf, 4, (HcclDataType)99, peer, cm, st), HCCL_E_PARA);
        ZT_BAD(&b, HcclSend(buf, UINT64_MAX / 2, i32, peer, cm, st), HCCL_E_PARA);
        /* A bad item anywhere in a batch refuses the whole batch. */
        HcclSendRecvItem items[3] = {{HCCL_RECV, buf, 4, i32, peer},
                                     {HCCL_SEND, buf, 4, i32, peer},
                                     {HCCL_SEND, buf, 4, i32, peer}};
        items[2].sendRecvType = HCCL_SEND_RECV_RESERVED;
        ZT_BAD(&b, HcclBatchSendRecv(items, 3, cm, st), HCCL_E_PARA);
        items[2] = (HcclSendRecvItem){HCCL_SEND, NULL, 4, i32, peer};
        ZT_BAD(&b, HcclBatchSendRecv(items, 3, cm, st), HCCL_E_PTR);
        items[2] = (HcclSendRecvItem){HCCL_SEND, buf, 4, (HcclDataType)99, peer};
        ZT_BAD(&b, HcclBatchSendRecv(items, 3, cm, st), HCCL_E_PARA);
        items[2] = (HcclSendRecvItem){HCCL_RECV, buf, UINT64_MAX / 2, i32, peer};
        ZT_BAD(&b, HcclBatchSendRecv(items, 3, cm, st), HCCL_E_PARA);
        /* Inside a group a bad call fails at once; the group then issues nothing. */
        ZT_BAD(&b, HcclGroupStart(), HCCL_SUCCESS);
        ZT_BAD(&b, HcclSend(buf, 4, i32, (uint32_t)n, cm, st), HCCL_E_PARA);
        ZT_BAD(&b, HcclRecv(buf, 4, i32, me, cm, st), HCCL_E_PARA);
        ZT_BAD(&b, HcclSend(NULL, 4, i32, peer, cm, st), HCCL_E_PTR);
        ZT_BAD(&b, HcclRecv(buf, 4, (HcclDataType)99, peer, cm, st), HCCL_E_PARA);
        ZT_BAD(&b, HcclGroupEnd(), HCCL_SUCCESS);
    }
    ZT_BAD(&b, aclrtSynchronizeStream(st), ACL_SUCCESS);
    if (env->rank == 0) {
        printf("send/recv argument checks np=%d: %d cases, %d failed on rank 0\n", n, b.cases,
               b.fails);
        fflush(stdout);
    }
    /* Nothing was enqueued: a ring still matches message for message. */
    return b.fails + zt_p2p_ring_run(env, same_proc, 0, 0xbad5eedull);
}
