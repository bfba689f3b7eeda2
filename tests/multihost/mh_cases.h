/*
 * The cases of mh_coll.c (included once there): each builds its inputs from
 * mh_val, runs the call, synchronises and checks every element it expects.
 */
#define MH_BIG ((1u << 20) + 3u)

typedef struct {
    int op;
    int n;
    int dtype;
    uint64_t salt;
    int rank;
    uint64_t count;
    int root;
} mh_ref_t;

static double mh_want_reduce(void *arg, uint64_t i)
{
    mh_ref_t *r = arg;
    return mh_reduce(r->op, r->n, i, r->salt, r->dtype);
}

/* ReduceScatter: my block of the reduction. */
static double mh_want_rs(void *arg, uint64_t i)
{
    mh_ref_t *r = arg;
    return mh_reduce(r->op, r->n, (uint64_t)r->rank * r->count + i, r->salt, r->dtype);
}

/* AllGather: block q is rank q's input. */
static double mh_want_ag(void *arg, uint64_t i)
{
    mh_ref_t *r = arg;
    return mh_val((int)(i / r->count), i % r->count, HCCL_REDUCE_SUM, r->salt);
}

/* Broadcast: the root's input. */
static double mh_want_root(void *arg, uint64_t i)
{
    mh_ref_t *r = arg;
    return mh_val(r->root, i, HCCL_REDUCE_SUM, r->salt);
}

/* Scatter: my block of the root's input. */
static double mh_want_scatter(void *arg, uint64_t i)
{
    mh_ref_t *r = arg;
    return mh_val(r->root, (uint64_t)r->rank * r->count + i, HCCL_REDUCE_SUM, r->salt);
}

/* AlltoAll: block q is what q sent me: its elements [me * count, +count). */
static double mh_want_a2a(void *arg, uint64_t i)
{
    mh_ref_t *r = arg;
    uint64_t q = i / r->count;
    return mh_val((int)q, (uint64_t)r->rank * r->count + i % r->count, HCCL_REDUCE_SUM, r->salt);
}

static void mh_fill(void *buf, int rank, uint64_t n, int dtype, int op, uint64_t salt)
{
    for (uint64_t i = 0; i < n; i++) {
        mh_put(buf, i, dtype, mh_val(rank, i, op, salt));
    }
}

static void mh_allreduce(mh_t *m, int dtype, int op, uint64_t count, int zc, int inplace)
{
    char *s;
    char *d;
    mh_bufs(m, zc, &s, &d);
    uint64_t salt = count + (uint64_t)op;
    mh_fill(s, m->env.rank, count, dtype, op, salt);
    if (inplace) {
        d = s;
    }
    HcclResult r = HcclAllReduce(s, d, count, dtype, op, m->env.comm, m->env.stream);
    mh_ref_t ref = {op, m->env.nranks, dtype, salt, m->env.rank, count, 0};
    if (mh_sync(m, r, "AllReduce") == 0) {
        mh_check(m, "AllReduce", d, dtype, op, count, zc, mh_want_reduce, &ref);
    }
}

static void mh_reducescatter(mh_t *m, int dtype, int op, uint64_t count, int zc)
{
    char *s;
    char *d;
    mh_bufs(m, zc, &s, &d);
    uint64_t salt = count * 5 + (uint64_t)op;
    mh_fill(s, m->env.rank, count * (uint64_t)m->env.nranks, dtype, op, salt);
    HcclResult r = HcclReduceScatter(s, d, count, dtype, op, m->env.comm, m->env.stream);
    mh_ref_t ref = {op, m->env.nranks, dtype, salt, m->env.rank, count, 0};
    if (mh_sync(m, r, "ReduceScatter") == 0) {
        mh_check(m, "ReduceScatter", d, dtype, op, count, zc, mh_want_rs, &ref);
    }
}

static void mh_reduce_case(mh_t *m, int dtype, int op, uint64_t count, int zc, int root)
{
    char *s;
    char *d;
    mh_bufs(m, zc, &s, &d);
    uint64_t salt = count * 3 + (uint64_t)root;
    mh_fill(s, m->env.rank, count, dtype, op, salt);
    HcclResult r = HcclReduce(s, d, count, dtype, op, (uint32_t)root, m->env.comm, m->env.stream);
    mh_ref_t ref = {op, m->env.nranks, dtype, salt, m->env.rank, count, root};
    if (mh_sync(m, r, "Reduce") == 0 && m->env.rank == root) {
        mh_check(m, "Reduce", d, dtype, op, count, zc, mh_want_reduce, &ref);
    }
}

static void mh_copies(mh_t *m, int dtype, uint64_t count, int zc)
{
    int n = m->env.nranks;
    int me = m->env.rank;
    char *s;
    char *d;
    mh_bufs(m, zc, &s, &d);
    mh_ref_t ref = {HCCL_REDUCE_SUM, n, dtype, count + 11, me, count, 0};
    mh_fill(s, me, count, dtype, HCCL_REDUCE_SUM, ref.salt);
    if (mh_sync(m, HcclAllGather(s, d, count, dtype, m->env.comm, m->env.stream), "AllGather") ==
        0) {
        mh_check(m, "AllGather", d, dtype, 0, count * (uint64_t)n, zc, mh_want_ag, &ref);
    }
    uint64_t vc[MH_MAXR];
    uint64_t vd[MH_MAXR];
    for (int q = 0; q < n; q++) {
        vc[q] = count;
        vd[q] = (uint64_t)(n - 1 - q) * count; /* blocks in reverse order */
    }
    if (mh_sync(m, HcclAllGatherV(s, count, d, vc, vd, dtype, m->env.comm, m->env.stream),
                "AllGatherV") == 0) {
        for (int q = 0; q < n; q++) {
            mh_ref_t rq = ref;
            rq.root = q;
            mh_check(m, "AllGatherV", d + vd[q] * zt_dtype_size(dtype), dtype, 0, count, zc,
                     mh_want_root, &rq);
        }
    }
    for (int root = 0; root < n; root++) {
        ref.root = root;
        mh_fill(d, me, count, dtype, HCCL_REDUCE_SUM, me == root ? ref.salt : ref.salt + 1);
        if (mh_sync(m, HcclBroadcast(d, count, dtype, (uint32_t)root, m->env.comm, m->env.stream),
                    "Broadcast") == 0) {
            mh_check(m, "Broadcast", d, dtype, 0, count, zc, mh_want_root, &ref);
        }
        mh_fill(s, me, count * (uint64_t)n, dtype, HCCL_REDUCE_SUM, ref.salt);
        if (mh_sync(m, HcclScatter(s, d, count, dtype, (uint32_t)root, m->env.comm, m->env.stream),
                    "Scatter") == 0) {
            mh_check(m, "Scatter", d, dtype, 0, count, zc, mh_want_scatter, &ref);
        }
    }
    mh_fill(s, me, count * (uint64_t)n, dtype, HCCL_REDUCE_SUM, ref.salt);
    if (mh_sync(m, HcclAlltoAll(s, count, dtype, d, count, dtype, m->env.comm, m->env.stream),
                "AlltoAll") == 0) {
        mh_check(m, "AlltoAll", d, dtype, 0, count * (uint64_t)n, zc, mh_want_a2a, &ref);
    }
    uint64_t c[MH_MAXR];
    uint64_t o[MH_MAXR];
    for (int q = 0; q < n; q++) {
        c[q] = count;
        o[q] = (uint64_t)q * count;
    }
    if (mh_sync(m, HcclAlltoAllV(s, c, o, dtype, d, c, o, dtype, m->env.comm, m->env.stream),
                "AlltoAllV") == 0) {
        mh_check(m, "AlltoAllV", d, dtype, 0, count * (uint64_t)n, zc, mh_want_a2a, &ref);
    }
    uint64_t *mat = calloc((size_t)n * (size_t)n, sizeof(uint64_t));
    for (int i = 0; mat != NULL && i < n * n; i++) {
        mat[i] = count;
    }
    if (mat != NULL &&
        mh_sync(m, HcclAlltoAllVC(s, mat, dtype, d, dtype, m->env.comm, m->env.stream),
                "AlltoAllVC") == 0) {
        mh_check(m, "AlltoAllVC", d, dtype, 0, count * (uint64_t)n, zc, mh_want_a2a, &ref);
    }
    free(mat);
}

/* Send to the next rank, receive from the previous one (a ring), as single
 * calls in a group and as one BatchSendRecv. */
static void mh_p2p(mh_t *m, int dtype, uint64_t count, int zc)
{
    int n = m->env.nranks;
    int me = m->env.rank;
    if (n < 2) {
        return;
    }
    char *s;
    char *d;
    mh_bufs(m, zc, &s, &d);
    int next = (me + 1) % n;
    int prev = (me + n - 1) % n;
    mh_ref_t ref = {HCCL_REDUCE_SUM, n, dtype, count + 17, me, count, prev};
    mh_fill(s, me, count, dtype, HCCL_REDUCE_SUM, ref.salt);
    HcclGroupStart();
    HcclResult r = HcclSend(s, count, dtype, (uint32_t)next, m->env.comm, m->env.stream);
    HcclResult r2 = HcclRecv(d, count, dtype, (uint32_t)prev, m->env.comm, m->env.stream);
    HcclResult r3 = HcclGroupEnd();
    if (mh_sync(m, r != HCCL_SUCCESS ? r : r2 != HCCL_SUCCESS ? r2 : r3, "Send/Recv") == 0) {
        mh_check(m, "Send/Recv", d, dtype, 0, count, zc, mh_want_root, &ref);
    }
    memset(d, 0, count * zt_dtype_size(dtype));
    HcclSendRecvItem it[2] = {{HCCL_RECV, d, count, dtype, (uint32_t)prev},
                              {HCCL_SEND, s, count, dtype, (uint32_t)next}};
    if (mh_sync(m, HcclBatchSendRecv(it, 2, m->env.comm, m->env.stream), "BatchSendRecv") == 0) {
        mh_check(m, "BatchSendRecv", d, dtype, 0, count, zc, mh_want_root, &ref);
    }
}

/* Random floats, where the reduction order shows: every rank must hold the
 * same bits (compared through an AllGather of each rank's checksum). */
static void mh_bitwise(mh_t *m, int zc)
{
    char *s;
    char *d;
    mh_bufs(m, zc, &s, &d);
    float *f = (float *)(void *)s;
    uint64_t count = MH_BIG;
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(m->env.rank + 1);
    for (uint64_t i = 0; i < count; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f[i] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5) * 1e3f;
    }
    if (mh_sync(m,
                HcclAllReduce(s, d, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, m->env.comm,
                              m->env.stream),
                "AllReduce (random fp32)") != 0) {
        return;
    }
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < count * 4; i++) {
        h = (h ^ (unsigned char)d[i]) * 1099511628211ull;
    }
    uint64_t all[MH_MAXR];
    memcpy(s, &h, sizeof(h));
    if (mh_sync(m, HcclAllGather(s, d, 1, HCCL_DATA_TYPE_UINT64, m->env.comm, m->env.stream),
                "AllGather (checksums)") != 0) {
        return;
    }
    memcpy(all, d, sizeof(uint64_t) * (size_t)m->env.nranks);
    for (int q = 0; q < m->env.nranks; q++) {
        if (all[q] != all[0]) {
            mh_fail(m, "AllReduce bitwise", HCCL_DATA_TYPE_FP32, 0, count, zc, (uint64_t)q,
                    "ranks differ in the bits of the result");
            return;
        }
    }
}

static void mh_run_all(mh_t *m)
{
    static const uint64_t counts[] = {0, 1, 7, 1000, 4099, MH_BIG};
    int nd = m->quick ? 3 : (int)(sizeof(mh_dtypes) / sizeof(mh_dtypes[0]));
    int nc = (int)(sizeof(counts) / sizeof(counts[0]));
    for (int zc = 1; zc >= 0; zc--) {
        if (mh_sync(m, HcclBarrier(m->env.comm, m->env.stream), "Barrier") != 0) {
            return;
        }
        for (int t = 0; t < nd; t++) {
            for (int o = 0; o < 4; o++) {
                for (int k = 0; k < nc; k++) {
                    if (o > 0 && counts[k] == MH_BIG && t > 0) {
                        continue; /* the big count: every op for the first type, SUM after */
                    }
                    mh_allreduce(m, mh_dtypes[t], mh_ops[o], counts[k], zc, k % 2);
                }
                mh_reducescatter(m, mh_dtypes[t], mh_ops[o], 1000, zc);
                mh_reduce_case(m, mh_dtypes[t], mh_ops[o], 4099, zc, m->env.nranks - 1);
                mh_reduce_case(m, mh_dtypes[t], mh_ops[o], 7, zc, 0);
            }
            mh_copies(m, mh_dtypes[t], t == 0 ? 4099 : 7, zc);
            mh_p2p(m, mh_dtypes[t], t == 0 ? MH_BIG : 1000, zc);
            if (m->fails > 0) {
                return; /* out of step with peers, maybe: stop here */
            }
        }
        mh_bitwise(m, zc);
    }
}
