/* The cases and checks declared in zt_coll.h, compiled once into the test library. */
#include "zt_coll.h"

const char *zt_cc_name(int coll)
{
    static const char *const names[ZT_CC_NCOLLS] = {
        "reducescatter", "reducescatterv", "reduce",    "broadcast",  "scatter",
        "allgatherv",    "alltoall",       "alltoallv", "alltoallvc",
    };
    return coll >= 0 && coll < ZT_CC_NCOLLS ? names[coll] : "?";
}

static int zt_cc_reduces(int coll)
{
    return coll == ZT_CC_REDUCESCATTER || coll == ZT_CC_REDUCESCATTERV || coll == ZT_CC_REDUCE;
}

void zt_cc_str(const zt_cc_t *c, char *buf, size_t len)
{
    static const char *const shapes[] = {"even", "uneven", "sparse"};
    static const char *const mems[] = {"buffered", "zero-copy", "mixed(rank0 plain)"};
    static const char *const devs[] = {"",        " dev=count", " dev=dtype", " dev=dtype-size",
                                       " dev=op", " dev=root",  " dev=varray"};
    static const char *const places[] = {"out-of-place", "in-place", "in-place(alt)"};
    int v = c->coll == ZT_CC_REDUCESCATTERV || c->coll == ZT_CC_ALLGATHERV ||
            c->coll == ZT_CC_ALLTOALLV || c->coll == ZT_CC_ALLTOALLVC;
    snprintf(buf, len, "%s %s%s%s count=%" PRIu64 "%s%s root=%d %s %s %s%s%s%s seed=%" PRIx64,
             zt_cc_name(c->coll), zt_dtype_name(c->dtype), zt_cc_reduces(c->coll) ? " " : "",
             zt_cc_reduces(c->coll) ? zt_op_name(c->op) : "", c->count, v ? " " : "",
             v ? shapes[c->vshape % 3] : "", c->root, mems[c->mem % 3], places[c->in_place % 3],
             c->misalign ? "odd" : "aligned", c->null_ignored ? " null-ignored" : "",
             devs[c->deviate % 7], c->mode == ZT_FILL_ROUNDING ? " rounding" : "", c->seed);
}

/** V count of rank q (AllGatherV contribution, ReduceScatterV block). */
static uint64_t zt_cc_cnt1(const zt_cc_t *c, int n, int q)
{
    switch (c->vshape) {
    case ZT_V_EVEN:
        return c->count;
    case ZT_V_SPARSE:
        return q == n - 1 ? c->count : 0;
    default:
        if (q % 3 == 1) {
            return 0;
        }
        return c->count + zt_pattern(c->seed ^ 0xc0c0ull, q, 0) % (c->count + 1);
    }
}

/** Elements rank i sends to rank j (AlltoAll(V, VC)). */
static uint64_t zt_cc_cnt2(const zt_cc_t *c, int n, int i, int j)
{
    if (c->coll == ZT_CC_ALLTOALL) {
        return c->count;
    }
    switch (c->vshape) {
    case ZT_V_EVEN:
        return c->count;
    case ZT_V_SPARSE:
        return j == (i + 1) % n ? c->count : 0;
    default:
        if ((i + 2 * j) % 4 == 1) {
            return 0;
        }
        return c->count + zt_pattern(c->seed ^ 0xa2a2ull, i, (size_t)j) % (c->count + 1);
    }
}

/** Logical index of rank i's block for rank j: the counts before it. */
static uint64_t zt_cc_first2(const zt_cc_t *c, int n, int i, int j)
{
    uint64_t s = 0;
    for (int k = 0; k < j; k++) {
        s += zt_cc_cnt2(c, n, i, k);
    }
    return s;
}

static uint64_t zt_cc_first1(const zt_cc_t *c, int n, int q)
{
    uint64_t s = 0;
    for (int k = 0; k < q; k++) {
        s += zt_cc_cnt1(c, n, k);
    }
    return s;
}

/**
 * Rank r's displacements for blocks of cnt[0..n): packed in rank order, or
 * spread: blocks in the order q = r-1, r-2, ... (mod n), each after a gap
 * of (q + r + salt) % 3 elements. Returns the extent the library computes:
 * the end of the furthest non-empty block.
 */
static uint64_t zt_cc_layout(const uint64_t *cnt, int n, int r, int salt, int packed, uint64_t *dsp)
{
    uint64_t pos = 0;
    uint64_t end = 0;
    for (int k = 0; k < n; k++) {
        int q = packed ? k : (r + 2 * n - 1 - k) % n;
        if (!packed) {
            pos += (uint64_t)((q + r + salt) % 3);
        }
        dsp[q] = pos;
        pos += cnt[q];
        if (cnt[q] != 0 && pos > end) {
            end = pos;
        }
    }
    return end;
}

int zt_cc_alt_dtype(int dtype, int other_size)
{
    if (other_size) {
        return zt_dtype_size(dtype) == 2 ? HCCL_DATA_TYPE_INT32 : HCCL_DATA_TYPE_INT16;
    }
    switch (zt_dtype_size(dtype)) {
    case 1:
        return dtype == HCCL_DATA_TYPE_INT8 ? HCCL_DATA_TYPE_UINT8 : HCCL_DATA_TYPE_INT8;
    case 2:
        return dtype == HCCL_DATA_TYPE_FP16 ? HCCL_DATA_TYPE_BFP16 : HCCL_DATA_TYPE_FP16;
    case 4:
        return dtype == HCCL_DATA_TYPE_FP32 ? HCCL_DATA_TYPE_INT32 : HCCL_DATA_TYPE_FP32;
    default:
        return dtype == HCCL_DATA_TYPE_FP64 ? HCCL_DATA_TYPE_INT64 : HCCL_DATA_TYPE_FP64;
    }
}

static uint64_t zt_cc_max(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* The in-place offsets (elements) and outer size of plan p. */
static void zt_cc_plan_in_place(const zt_cc_t *c, zt_cplan_t *p, uint64_t ns, uint64_t nr)
{
    int alt = p->in_place == 2;
    uint64_t so = 0;
    uint64_t ro = 0;
    switch (c->coll) {
    case ZT_CC_REDUCESCATTER:
        ro = alt ? 0 : (uint64_t)p->rank * p->count;
        break;
    case ZT_CC_REDUCESCATTERV:
        ro = alt ? 0 : p->sdsp[p->rank];
        break;
    case ZT_CC_SCATTER:
        ro = alt || p->rank != p->root ? 0 : (uint64_t)p->root * p->count;
        if (p->rank != p->root) {
            ns = 0; /* the ignored send is recv itself */
        }
        break;
    case ZT_CC_ALLGATHERV:
        so = alt ? 0 : p->rdsp[p->rank];
        break;
    default: /* Reduce, Broadcast, AlltoAll(V, VC): one buffer for both */
        break;
    }
    p->soff = so * p->es;
    p->roff = ro * p->es;
    p->outer = zt_cc_max(so + ns, ro + nr) * p->es;
}

/* The one field the deviating rank of a mismatch case changes. */
static void zt_cc_deviate(zt_cc_t *c, int n)
{
    switch (c->deviate) {
    case ZT_DEV_COUNT:
        c->count++;
        break;
    case ZT_DEV_DTYPE:
        c->dtype = zt_cc_alt_dtype(c->dtype, 0);
        break;
    case ZT_DEV_DSIZE:
        c->dtype = zt_cc_alt_dtype(c->dtype, 1);
        break;
    case ZT_DEV_OP:
        c->op = (c->op + 1) % 4;
        break;
    case ZT_DEV_ROOT:
        c->root = (c->root + 1) % n;
        break;
    default:
        break;
    }
}

/* This rank's counts and displacements (p), and the elements of its input and
 * output regions (*ns, *nr) and of what the library reads and writes there
 * (*ls, *lr). vdev: this rank deviates in a V array. Returns 0 or -1. */
static int zt_cc_plan_counts(const zt_cc_t *c, int n, int rank, int vdev, zt_cplan_t *p,
                             uint64_t *ns_out, uint64_t *nr_out, uint64_t *ls_out, uint64_t *lr_out)
{
    int is_root = rank == c->root;
    uint64_t un = (uint64_t)n;
    uint64_t ns = 0; /* elements of the input region */
    uint64_t nr = 0; /* elements of the output region */
    uint64_t ls = 0; /* elements the library reads / writes on this rank */
    uint64_t lr = 0;
    switch (c->coll) {
    case ZT_CC_REDUCESCATTER:
        ns = ls = un * c->count;
        nr = lr = c->count;
        break;
    case ZT_CC_REDUCESCATTERV:
        for (int q = 0; q < n; q++) {
            p->scnt[q] = zt_cc_cnt1(c, n, q);
        }
        p->scnt[0] += (uint64_t)vdev; /* the deviant is never rank 0 */
        ns = ls = zt_cc_layout(p->scnt, n, rank, 0, 0, p->sdsp);
        p->count = nr = lr = p->scnt[rank];
        break;
    case ZT_CC_REDUCE:
        ns = ls = nr = c->count;
        lr = is_root ? c->count : 0;
        p->recv_null = !is_root && c->null_ignored;
        break;
    case ZT_CC_BROADCAST:
        ns = ls = nr = lr = c->count;
        break;
    case ZT_CC_SCATTER:
        ns = un * c->count;
        ls = is_root ? ns : 0;
        nr = lr = c->count;
        p->send_null = !is_root && c->null_ignored;
        break;
    case ZT_CC_ALLGATHERV:
        for (int q = 0; q < n; q++) {
            p->rcnt[q] = zt_cc_cnt1(c, n, q);
        }
        p->rcnt[0] += (uint64_t)vdev;
        nr = lr = zt_cc_layout(p->rcnt, n, rank, 1, 0, p->rdsp);
        p->count = ns = ls = p->rcnt[rank];
        break;
    case ZT_CC_ALLTOALL:
        ns = ls = nr = lr = un * c->count;
        break;
    case ZT_CC_ALLTOALLV:
    case ZT_CC_ALLTOALLVC: {
        int packed = c->coll == ZT_CC_ALLTOALLVC;
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) {
                p->mat[i * n + j] = zt_cc_cnt2(c, n, i, j);
            }
        }
        p->mat[rank] += (uint64_t)vdev; /* entry [0][deviant]: what rank 0 sends it */
        for (int q = 0; q < n; q++) {
            p->scnt[q] = p->mat[rank * n + q];
            p->rcnt[q] = p->mat[q * n + rank];
        }
        ns = ls = zt_cc_layout(p->scnt, n, rank, 2, packed, p->sdsp);
        nr = lr = zt_cc_layout(p->rcnt, n, rank, 3, packed, p->rdsp);
        break;
    }
    default:
        return -1;
    }
    *ns_out = ns;
    *nr_out = nr;
    *ls_out = ls;
    *lr_out = lr;
    return 0;
}

int zt_cc_plan(const zt_cc_t *c0, int n, int rank, int dev, zt_cplan_t *p)
{
    zt_cc_t c = *c0;
    memset(p, 0, sizeof(*p));
    if (n < 1 || n > ZT_CC_MAXR || zt_dtype_size(c.dtype) == 0) {
        return -1;
    }
    int deviant = dev && c.deviate != ZT_DEV_NONE && n > 1 && rank == n - 1;
    if (deviant) {
        zt_cc_deviate(&c, n);
    }
    int vdev = deviant && c.deviate == ZT_DEV_VARRAY;
    p->n = n;
    p->rank = rank;
    p->dtype = c.dtype;
    p->op = c.op;
    p->root = c.root;
    p->es = zt_dtype_size(c.dtype);
    p->zc = c.mem == ZT_MEM_ZC || (c.mem == ZT_MEM_MIXED && rank != 0);
    p->count = c.count;
    uint64_t ns = 0; /* elements of the input region */
    uint64_t nr = 0; /* elements of the output region */
    uint64_t ls = 0; /* elements the library reads / writes on this rank */
    uint64_t lr = 0;
    if (zt_cc_plan_counts(&c, n, rank, vdev, p, &ns, &nr, &ls, &lr) != 0) {
        return -1;
    }
    p->in_place = c.coll == ZT_CC_BROADCAST ? 1 : c.in_place;
    if (p->in_place == 2 && (c.coll == ZT_CC_REDUCE || c.coll == ZT_CC_ALLTOALL ||
                             c.coll == ZT_CC_ALLTOALLV || c.coll == ZT_CC_ALLTOALLVC)) {
        p->in_place = 1; /* one buffer: no other overlap to try */
    }
    if (p->in_place) {
        zt_cc_plan_in_place(&c, p, ns, nr);
    }
    p->sreg = (size_t)ns * p->es;
    p->rreg = (size_t)nr * p->es;
    p->slib = (size_t)ls * p->es;
    p->rlib = (size_t)lr * p->es;
    return 0;
}

size_t zt_cc_need(const zt_cc_t *c, int n)
{
    size_t need = 0;
    for (int q = 0; q < n; q++) {
        for (int dev = 0; dev < 2; dev++) {
            zt_cplan_t p;
            if (zt_cc_plan(c, n, q, dev, &p) != 0) {
                return SIZE_MAX;
            }
            size_t b = p.in_place ? p.outer : (p.sreg > p.rreg ? p.sreg : p.rreg);
            b += 2 * ZT_CC_ROOM + 16;
            need = b > need ? b : need;
        }
    }
    return need;
}

static zt_pat_t zt_cc_pat(const zt_cc_t *c, int n)
{
    zt_pat_t p = {c->dtype, zt_cc_reduces(c->coll) ? c->op : ZT_OP_NONE,
                  zt_cc_reduces(c->coll) ? c->mode : ZT_FILL_EXACT, n, c->seed};
    return p;
}

/** out = reduction over the n ranks of their elements [first, first + count), rank order. */
static int zt_cc_ref_reduce(unsigned char *out, uint64_t first, uint64_t count, const zt_pat_t *pat,
                            int n)
{
    enum { CHUNK = 1024 };
    size_t es = zt_dtype_size(pat->dtype);
    unsigned char *tmp = malloc((size_t)n * CHUNK * es);
    if (tmp == NULL) {
        return -1;
    }
    const void *src[ZT_CC_MAXR];
    int rc = 0;
    for (uint64_t off = 0; off < count && rc == 0; off += CHUNK) {
        size_t len = count - off < CHUNK ? (size_t)(count - off) : CHUNK;
        for (int r = 0; r < n; r++) {
            unsigned char *b = tmp + (size_t)r * CHUNK * es;
            zt_fill(b, (size_t)(first + off), len, pat, r);
            src[r] = b;
        }
        rc = zt_ref_reduce(out + off * es, src, n, len, pat->dtype, pat->op);
    }
    free(tmp);
    return rc;
}

void zt_cc_fill_send(const zt_cc_t *c, const zt_cplan_t *p, unsigned char *send)
{
    zt_pat_t pat = zt_cc_pat(c, p->n);
    pat.dtype = p->dtype; /* a deviant's own type */
    size_t es = p->es;
    int n = p->n;
    int r = p->rank;
    switch (c->coll) {
    case ZT_CC_REDUCESCATTER:
    case ZT_CC_ALLTOALL:
        zt_fill(send, 0, (size_t)n * p->count, &pat, r);
        break;
    case ZT_CC_REDUCESCATTERV:
        for (int q = 0; q < n; q++) {
            zt_fill(send + p->sdsp[q] * es, zt_cc_first1(c, n, q), p->scnt[q], &pat, r);
        }
        break;
    case ZT_CC_REDUCE:
    case ZT_CC_ALLGATHERV:
        zt_fill(send, 0, p->count, &pat, r);
        break;
    case ZT_CC_BROADCAST:
        if (r == p->root) {
            zt_fill(send, 0, p->count, &pat, r);
        }
        break;
    case ZT_CC_SCATTER:
        if (r == p->root) {
            zt_fill(send, 0, (size_t)n * p->count, &pat, r);
        }
        break;
    default: /* AlltoAllV, AlltoAllVC */
        for (int j = 0; j < n; j++) {
            zt_fill(send + p->sdsp[j] * es, zt_cc_first2(c, n, r, j), p->scnt[j], &pat, r);
        }
        break;
    }
}

int zt_cc_expect(const zt_cc_t *c, const zt_cplan_t *p, unsigned char *out)
{
    zt_pat_t pat = zt_cc_pat(c, p->n);
    size_t es = p->es;
    int n = p->n;
    int r = p->rank;
    switch (c->coll) {
    case ZT_CC_REDUCESCATTER:
        return zt_cc_ref_reduce(out, (uint64_t)r * p->count, p->count, &pat, n);
    case ZT_CC_REDUCESCATTERV:
        return zt_cc_ref_reduce(out, zt_cc_first1(c, n, r), p->count, &pat, n);
    case ZT_CC_REDUCE:
        return r == p->root ? zt_cc_ref_reduce(out, 0, p->count, &pat, n) : 0;
    case ZT_CC_BROADCAST:
        zt_fill(out, 0, p->count, &pat, p->root);
        return 0;
    case ZT_CC_SCATTER:
        zt_fill(out, (size_t)r * p->count, p->count, &pat, p->root);
        return 0;
    case ZT_CC_ALLGATHERV:
        for (int q = 0; q < n; q++) {
            zt_fill(out + p->rdsp[q] * es, 0, p->rcnt[q], &pat, q);
        }
        return 0;
    case ZT_CC_ALLTOALL:
        for (int i = 0; i < n; i++) {
            zt_fill(out + (size_t)i * p->count * es, (size_t)r * p->count, p->count, &pat, i);
        }
        return 0;
    default:
        for (int i = 0; i < n; i++) {
            zt_fill(out + p->rdsp[i] * es, zt_cc_first2(c, n, i, r), p->rcnt[i], &pat, i);
        }
        return 0;
    }
}

HcclResult zt_cc_call(int coll, const zt_cplan_t *a, void *send, void *recv, HcclComm comm,
                      aclrtStream stream)
{
    HcclDataType dt = (HcclDataType)a->dtype;
    HcclReduceOp op = (HcclReduceOp)a->op;
    switch (coll) {
    case ZT_CC_REDUCESCATTER:
        return HcclReduceScatter(send, recv, a->count, dt, op, comm, stream);
    case ZT_CC_REDUCESCATTERV:
        return HcclReduceScatterV(send, a->scnt, a->sdsp, recv, a->count, dt, op, comm, stream);
    case ZT_CC_REDUCE:
        return HcclReduce(send, recv, a->count, dt, op, (uint32_t)a->root, comm, stream);
    case ZT_CC_BROADCAST:
        return HcclBroadcast(recv, a->count, dt, (uint32_t)a->root, comm, stream);
    case ZT_CC_SCATTER:
        return HcclScatter(send, recv, a->count, dt, (uint32_t)a->root, comm, stream);
    case ZT_CC_ALLGATHERV:
        return HcclAllGatherV(send, a->count, recv, a->rcnt, a->rdsp, dt, comm, stream);
    case ZT_CC_ALLTOALL:
        return HcclAlltoAll(send, a->count, dt, recv, a->count, dt, comm, stream);
    case ZT_CC_ALLTOALLV:
        return HcclAlltoAllV(send, a->scnt, a->sdsp, dt, recv, a->rcnt, a->rdsp, dt, comm, stream);
    case ZT_CC_ALLTOALLVC:
        return HcclAlltoAllVC(send, a->mat, dt, recv, dt, comm, stream);
    default:
        return HCCL_E_PARA;
    }
}
