/* The cases and checks declared in zt_coll_scen.h, compiled once into the test library. */
#include "zt_coll_scen.h"

static void zt_cc_add(zt_cclist_t *l, zt_cc_t c)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        zt_cc_t *v = realloc(l->v, sizeof(*v) * (size_t)cap);
        if (v == NULL) {
            return; /* the case count printed shows it */
        }
        l->v = v;
        l->cap = cap;
    }
    c.seed = zt_pattern(l->base, 0, l->seq++);
    l->v[l->n++] = c;
}

static const int zt_cc_dtypes[12] = {
    HCCL_DATA_TYPE_INT8,  HCCL_DATA_TYPE_UINT8,  HCCL_DATA_TYPE_INT16, HCCL_DATA_TYPE_UINT16,
    HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_UINT32, HCCL_DATA_TYPE_INT64, HCCL_DATA_TYPE_UINT64,
    HCCL_DATA_TYPE_FP16,  HCCL_DATA_TYPE_BFP16,  HCCL_DATA_TYPE_FP32,  HCCL_DATA_TYPE_FP64};

static const int zt_cc_ops[4] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD, HCCL_REDUCE_MAX,
                                 HCCL_REDUCE_MIN};

static const int zt_cc_copy_dtypes[4] = {HCCL_DATA_TYPE_UINT8, HCCL_DATA_TYPE_BFP16,
                                         HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_FP64};

/* The reduce-type and copy collectives the builders loop over. */
static const int zt_cc_reds[3] = {ZT_CC_REDUCESCATTER, ZT_CC_REDUCESCATTERV, ZT_CC_REDUCE};
static const int zt_cc_copies[6] = {ZT_CC_BROADCAST, ZT_CC_SCATTER,   ZT_CC_ALLGATHERV,
                                    ZT_CC_ALLTOALL,  ZT_CC_ALLTOALLV, ZT_CC_ALLTOALLVC};

/* Reductions: every dtype x op at two counts, the other counts, overlaps and
 * V shapes, every Reduce root. */
static void zt_cc_build_reductions(zt_cclist_t *l, int n, const zt_cc_t z, const zt_ccmatrix_t *m)
{
    static const uint64_t rcounts[2] = {7, 1000};
    /* Reductions: every dtype x op at two counts, roots rotating. */
    for (int ci = 0; ci < 3; ci++) {
        for (int d = 0; d < 12; d++) {
            for (int o = 0; o < 4; o++) {
                for (int k = 0; k < 2; k++) {
                    for (int ip = 0; ip < 2; ip++) {
                        if (!m->full_cross && ip != ((d + o + k) & 1)) {
                            continue;
                        }
                        zt_cc_t c = z;
                        c.coll = zt_cc_reds[ci];
                        c.dtype = zt_cc_dtypes[d];
                        c.op = zt_cc_ops[o];
                        c.count = rcounts[k];
                        c.root = (d + o + k) % n;
                        c.in_place = ip;
                        zt_cc_add(l, c);
                    }
                }
            }
        }
        /* Counts 0 and 1, the other overlap, the other V shapes. */
        static const int few[3] = {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_UINT64};
        for (int d = 0; d < 3; d++) {
            for (int k = 0; k < 2; k++) {
                for (int ip = 0; ip < 2; ip++) {
                    zt_cc_t c = z;
                    c.coll = zt_cc_reds[ci];
                    c.dtype = few[d];
                    c.op = HCCL_REDUCE_SUM;
                    c.count = (uint64_t)k;
                    c.root = (d + k) % n;
                    c.in_place = ip;
                    zt_cc_add(l, c);
                }
            }
        }
        for (int s = 0; s < 3; s++) {
            zt_cc_t c = z;
            c.coll = zt_cc_reds[ci];
            c.dtype = s == 1 ? HCCL_DATA_TYPE_BFP16 : HCCL_DATA_TYPE_INT32;
            c.op = s == 1 ? HCCL_REDUCE_PROD : HCCL_REDUCE_SUM;
            c.count = 1000;
            c.vshape = s == 2 ? ZT_V_SPARSE : ZT_V_EVEN;
            c.in_place = s == 0 ? 2 : s - 1;
            c.root = n - 1;
            c.misalign = s != 1;
            zt_cc_add(l, c);
        }
    }
    /* Reduce: every root, past the one-shot size too, NULL recv on non-roots. */
    for (int root = 0; root < n; root++) {
        for (int j = 0; j < 2; j++) {
            zt_cc_t c = z;
            c.coll = ZT_CC_REDUCE;
            c.dtype = j ? HCCL_DATA_TYPE_INT16 : HCCL_DATA_TYPE_FP32;
            c.op = j ? HCCL_REDUCE_MIN : HCCL_REDUCE_SUM;
            c.count = j ? 9001 : 1000;
            c.root = root;
            c.in_place = (root + j) & 1;
            c.null_ignored = !j;
            zt_cc_add(l, c);
        }
    }
}

/* Copies: every type size at counts 0, 1, 7, 1000, every root, the other
 * overlaps and V shapes. */
static void zt_cc_build_copies(zt_cclist_t *l, int n, const zt_cc_t z)
{
    static const uint64_t ccounts[4] = {0, 1, 7, 1000};
    /* Copies: 1-, 2-, 4- and 8-byte types at counts 0, 1, 7, 1000. */
    for (int ci = 0; ci < 6; ci++) {
        for (int d = 0; d < 4; d++) {
            for (int k = 0; k < 4; k++) {
                for (int ip = 0; ip < 2; ip++) {
                    if (zt_cc_copies[ci] == ZT_CC_BROADCAST && ip) {
                        continue;
                    }
                    zt_cc_t c = z;
                    c.coll = zt_cc_copies[ci];
                    c.dtype = zt_cc_copy_dtypes[d];
                    c.count = ccounts[k];
                    c.root = (d + k) % n;
                    c.in_place = ip;
                    c.null_ignored = (d + k) & 1;
                    zt_cc_add(l, c);
                }
            }
        }
        zt_cc_t c = z; /* aligned buffers, a count past 4096 */
        c.coll = zt_cc_copies[ci];
        c.dtype = HCCL_DATA_TYPE_FP32;
        c.count = 4099;
        c.root = 1 % n;
        c.misalign = 0;
        zt_cc_add(l, c);
    }
    /* Broadcast and Scatter from every root. */
    for (int root = 0; root < n; root++) {
        for (int j = 0; j < 3; j++) {
            zt_cc_t c = z;
            c.coll = j == 0 ? ZT_CC_BROADCAST : ZT_CC_SCATTER;
            c.dtype = HCCL_DATA_TYPE_INT8;
            c.count = 1000;
            c.root = root;
            c.in_place = j == 2;
            c.null_ignored = root & 1;
            zt_cc_add(l, c);
        }
    }
    /* The other overlaps and V shapes of the copies. */
    for (int j = 0; j < 2; j++) {
        zt_cc_t c = z;
        c.coll = j ? ZT_CC_ALLGATHERV : ZT_CC_SCATTER;
        c.dtype = j ? HCCL_DATA_TYPE_INT32 : HCCL_DATA_TYPE_FP16;
        c.count = 1000;
        c.root = n - 1;
        c.in_place = 2;
        zt_cc_add(l, c);
    }
    static const int vcolls[3] = {ZT_CC_ALLGATHERV, ZT_CC_ALLTOALLV, ZT_CC_ALLTOALLVC};
    for (int ci = 0; ci < 3; ci++) {
        for (int s = 0; s < 2; s++) {
            for (int ip = 0; ip < 2; ip++) {
                zt_cc_t c = z;
                c.coll = vcolls[ci];
                c.dtype = HCCL_DATA_TYPE_UINT16;
                c.count = 1000;
                c.vshape = s ? ZT_V_SPARSE : ZT_V_EVEN;
                c.in_place = ip;
                zt_cc_add(l, c);
            }
        }
    }
}

/* Values that need rounding, and the copy-only types. */
static void zt_cc_build_special(zt_cclist_t *l, int n, const zt_cc_t z)
{
    /* Values that need rounding: the rank order and fp32 accumulation of fp16 / bf16 show. */
    static const int fps[4] = {HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_BFP16, HCCL_DATA_TYPE_FP32,
                               HCCL_DATA_TYPE_FP64};
    for (int ci = 0; ci < 3; ci++) {
        for (int d = 0; d < 4; d++) {
            for (int o = 0; o < 2; o++) {
                for (int k = 0; k < 2; k++) {
                    zt_cc_t c = z;
                    c.coll = zt_cc_reds[ci];
                    c.dtype = fps[d];
                    c.op = zt_cc_ops[o];
                    c.count = k ? 4099 : 1000;
                    c.root = (d + o) % n;
                    c.in_place = (d + k) & 1;
                    c.mode = ZT_FILL_ROUNDING;
                    zt_cc_add(l, c);
                }
            }
        }
    }
    /* Copies take every type with a size: int128 and the 8-bit float types too. */
    static const int exotic[3] = {HCCL_DATA_TYPE_INT128, HCCL_DATA_TYPE_HIF8,
                                  HCCL_DATA_TYPE_FP8E5M2};
    for (int ci = 0; ci < 6; ci++) {
        for (int d = 0; d < 3; d++) {
            zt_cc_t c = z;
            c.coll = zt_cc_copies[ci];
            c.dtype = exotic[d];
            c.count = d ? 1000 : 7;
            c.root = (ci + d) % n;
            c.in_place = (ci + d) & 1;
            zt_cc_add(l, c);
        }
    }
}

/* The large cases, count elements and fractions of it. */
static void zt_cc_build_big(zt_cclist_t *l, int n, const zt_cc_t z, uint64_t count)
{
    /* Large: the buffered path chunks them (HCCL_BUFFSIZE=1), Reduce slices. */
    static const struct {
        int coll;
        int dtype;
        int op;
        int div; /* count = big / div */
        int vshape;
        int in_place;
    } bigs[] = {
        {ZT_CC_REDUCESCATTER, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 2, ZT_V_EVEN, 0},
        {ZT_CC_REDUCESCATTER, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_MAX, 2, ZT_V_EVEN, 1},
        {ZT_CC_REDUCESCATTERV, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 4, ZT_V_UNEVEN, 1},
        {ZT_CC_REDUCE, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 1, ZT_V_EVEN, 0},
        {ZT_CC_REDUCE, HCCL_DATA_TYPE_BFP16, HCCL_REDUCE_SUM, 1, ZT_V_EVEN, 1},
        {ZT_CC_BROADCAST, HCCL_DATA_TYPE_FP32, 0, 1, ZT_V_EVEN, 1},
        {ZT_CC_SCATTER, HCCL_DATA_TYPE_FP32, 0, 2, ZT_V_EVEN, 1},
        {ZT_CC_ALLGATHERV, HCCL_DATA_TYPE_FP32, 0, 4, ZT_V_UNEVEN, 0},
        {ZT_CC_ALLTOALL, HCCL_DATA_TYPE_FP32, 0, 2, ZT_V_EVEN, 0},
        {ZT_CC_ALLTOALLV, HCCL_DATA_TYPE_FP32, 0, 4, ZT_V_UNEVEN, 1},
        {ZT_CC_ALLTOALLVC, HCCL_DATA_TYPE_FP32, 0, 4, ZT_V_UNEVEN, 0},
    };
    for (size_t i = 0; i < sizeof(bigs) / sizeof(bigs[0]); i++) {
        zt_cc_t c = z;
        c.coll = bigs[i].coll;
        c.dtype = bigs[i].dtype;
        c.op = bigs[i].op;
        c.count = count / (uint64_t)bigs[i].div;
        c.vshape = bigs[i].vshape;
        c.in_place = bigs[i].in_place;
        c.root = (int)i % n;
        zt_cc_add(l, c);
    }
}

/* The cases of one memory kind (zero-copy or plain), in a fixed order (the
 * seeds are drawn in it). */
static void zt_cc_build_mem(zt_cclist_t *l, int n, int mem, const zt_ccmatrix_t *m)
{
    const zt_cc_t z = {.mem = mem, .misalign = 1, .vshape = ZT_V_UNEVEN};
    zt_cc_build_reductions(l, n, z, m);
    zt_cc_build_copies(l, n, z);
    zt_cc_build_special(l, n, z);
    if (m->big != 0) {
        zt_cc_build_big(l, n, z, m->big);
    }
}

/* The zero-copy and buffered totals and CCL buffer state after a phase. */
static int zt_cc_phase(zt_env_t *env, int zero_copy_only)
{
    uint64_t st = zccl_comm_staged_bytes(env->comm);
    int ccl = zccl_comm_ccl_allocated(env->comm);
    if (zero_copy_only && (st != 0 || ccl != 0)) {
        zt_report(env,
                  "after zero-copy collectives only: staged bytes %" PRIu64 " (want 0), CCL "
                  "buffer allocated %d (want 0)",
                  st, ccl);
        return 1;
    }
    if (!zero_copy_only && env->nranks > 1 && (st == 0 || ccl != 1)) {
        zt_report(env,
                  "after buffered collectives: staged bytes %" PRIu64 " (want > 0), CCL buffer "
                  "allocated %d (want 1)",
                  st, ccl);
        return 1;
    }
    return 0;
}

/* Runs the list [from, to): counts cases and failures; returns 1 to stop. */
static int zt_cc_run_list(zt_env_t *env, const zt_cclist_t *l, int from, int to, int *cases,
                          int *fails)
{
    for (int i = from; i < to; i++) {
        (*cases)++;
        int rc = zt_cc_run(env, &l->v[i]);
        if (rc != 0) {
            (*fails)++;
        }
        if (rc == 2) {
            return 1; /* the communicator may be out of step */
        }
    }
    return 0;
}

/* An arena that holds every case of the list (every rank computes the same size). */
static int zt_cc_arena_for(zt_env_t *env, const zt_cclist_t *l)
{
    size_t need = 1 << 16;
    for (int i = 0; i < l->n; i++) {
        size_t b = zt_cc_need(&l->v[i], env->nranks);
        need = b > need ? b : need;
    }
    if (env->half >= need) {
        return 0;
    }
    if (env->half != 0) {
        zt_report(env, "test bug: arena of %zu bytes already set, %zu needed", env->half, need);
        return -1;
    }
    return zt_env_arena(env, need);
}

int zt_cc_matrix_run(zt_env_t *env, const zt_ccmatrix_t *m)
{
    int n = env->nranks;
    zt_cclist_t l = {NULL, 0, 0, 0, m->seed};
    int mark[3];
    for (int mem = 0; mem < 3; mem++) {
        static const int order[3] = {ZT_MEM_ZC, ZT_MEM_PLAIN, ZT_MEM_MIXED};
        if (order[mem] == ZT_MEM_MIXED) {
            /* Every collective with rank 0's buffers in plain memory. */
            for (int coll = 0; coll < ZT_CC_NCOLLS; coll++) {
                for (int ip = 0; ip < 2; ip++) {
                    zt_cc_t c = {.coll = coll,
                                 .dtype = HCCL_DATA_TYPE_INT32,
                                 .op = HCCL_REDUCE_SUM,
                                 .count = 1000,
                                 .root = (coll + ip) % n,
                                 .vshape = ZT_V_UNEVEN,
                                 .mem = ZT_MEM_MIXED,
                                 .in_place = ip,
                                 .misalign = 1};
                    zt_cc_add(&l, c);
                }
            }
        } else {
            zt_cc_build_mem(&l, n, order[mem], m);
        }
        mark[mem] = l.n;
    }
    /* Pairs queued on the stream before one sync: one in each arena. */
    int mark_q = l.n;
    for (int coll = 0; coll < ZT_CC_NCOLLS; coll++) {
        for (int j = 0; j < 2; j++) {
            zt_cc_t c = {.coll = j ? (coll + 4) % ZT_CC_NCOLLS : coll,
                         .dtype = j ? HCCL_DATA_TYPE_FP16 : HCCL_DATA_TYPE_INT64,
                         .op = j ? HCCL_REDUCE_MAX : HCCL_REDUCE_SUM,
                         .count = j ? 4099 : 1000,
                         .root = (coll + j) % n,
                         .vshape = ZT_V_UNEVEN,
                         .mem = j ? ZT_MEM_PLAIN : ZT_MEM_ZC,
                         .in_place = (coll + j) & 1,
                         .misalign = 1};
            zt_cc_add(&l, c);
        }
    }
    int cases = 0;
    int fails = 0;
    if (l.v == NULL || zt_cc_arena_for(env, &l) != 0) {
        free(l.v);
        return 1;
    }
    /* Across hosts some zero-copy cases are buffered on some hosts (a
     * Reduce's partial on a host without the root): then this rank's
     * phase checks what a buffered phase leaves. */
    int zc_only = 1;
    for (int i = 0; i < mark[0]; i++) {
        zc_only &= !zt_cc_expect_buffered(&l.v[i], n, env->rank);
    }
    int stop = zt_cc_run_list(env, &l, 0, mark[0], &cases, &fails);
    if (!stop) {
        fails += zt_cc_phase(env, zc_only);
        stop = zt_cc_run_list(env, &l, mark[0], mark[1], &cases, &fails);
    }
    if (!stop) {
        fails += zt_cc_phase(env, 0);
        stop = zt_cc_run_list(env, &l, mark[1], mark[2], &cases, &fails);
    }
    for (int i = mark_q; !stop && i + 1 < l.n; i += 2) {
        zt_ccrun_t r[2];
        stop = zt_cc_start(env, &l.v[i], &r[0]) != 0;
        if (stop) {
            fails++;
            break;
        }
        stop = zt_cc_start(env, &l.v[i + 1], &r[1]) != 0;
        aclError e = aclrtSynchronizeStream(env->stream);
        for (int j = 0; j < (stop ? 1 : 2); j++) {
            r[j].skip_counters = 1;
            cases++;
            int rc = zt_cc_finish(&r[j], e);
            fails += rc != 0;
            stop |= rc == 2;
        }
        fails += stop;
    }
    if (env->rank == 0) {
        printf("collectives matrix np=%d: %d of %d cases run, %d failed on rank 0\n", n, cases, l.n,
               fails);
        fflush(stdout);
    }
    free(l.v);
    return fails;
}

int zt_cc_mismatch_run(zt_env_t *env, const zt_ccmismatch_t *mm)
{
    int n = env->nranks;
    if (n < 2) {
        return 0;
    }
    static const struct {
        int coll;
        int devs[4];
    } kinds[] = {
        {ZT_CC_REDUCESCATTER, {ZT_DEV_COUNT, ZT_DEV_DTYPE, ZT_DEV_DSIZE, ZT_DEV_OP}},
        {ZT_CC_REDUCESCATTERV, {ZT_DEV_DTYPE, ZT_DEV_OP, 0, 0}},
        {ZT_CC_REDUCE, {ZT_DEV_COUNT, ZT_DEV_DTYPE, ZT_DEV_OP, ZT_DEV_ROOT}},
        {ZT_CC_BROADCAST, {ZT_DEV_COUNT, ZT_DEV_DSIZE, ZT_DEV_ROOT, 0}},
        {ZT_CC_SCATTER, {ZT_DEV_COUNT, ZT_DEV_DSIZE, ZT_DEV_ROOT, 0}},
        {ZT_CC_ALLGATHERV, {ZT_DEV_DTYPE, ZT_DEV_DSIZE, 0, 0}},
        {ZT_CC_ALLTOALL, {ZT_DEV_COUNT, ZT_DEV_DSIZE, ZT_DEV_DTYPE, 0}},
        {ZT_CC_ALLTOALLV, {ZT_DEV_DTYPE, 0, 0, 0}},
        {ZT_CC_ALLTOALLVC, {ZT_DEV_DSIZE, 0, 0, 0}},
    };
    zt_cclist_t l = {NULL, 0, 0, 0, mm->seed};
    for (int mem = 1; mem >= 0; mem--) {
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
            for (int j = 0; j < 4; j++) {
                int dev = mm->vcoll < 0 ? kinds[k].devs[j] : ZT_DEV_VARRAY;
                if (dev == 0 ||
                    (mm->vcoll >= 0 && (kinds[k].coll != mm->vcoll || mem != mm->mem || j > 0))) {
                    continue;
                }
                zt_cc_t c = {.coll = kinds[k].coll,
                             .dtype = HCCL_DATA_TYPE_INT32,
                             .op = HCCL_REDUCE_SUM,
                             .count = 1000,
                             .root = (int)(k + (size_t)j) % n,
                             .vshape = ZT_V_UNEVEN,
                             .mem = mem,
                             .in_place = j & 1,
                             .misalign = 1,
                             .deviate = dev};
                zt_cc_add(&l, c);
                c.deviate = ZT_DEV_NONE; /* the next agreeing op must work */
                zt_cc_add(&l, c);
            }
        }
    }
    int cases = 0;
    int fails = 0;
    if (l.v != NULL && zt_cc_arena_for(env, &l) == 0) {
        (void)zt_cc_run_list(env, &l, 0, l.n, &cases, &fails);
    } else {
        fails++;
    }
    if (env->rank == 0) {
        char what[64] = "";
        if (mm->vcoll >= 0) {
            snprintf(what, sizeof(what), " %s counts (%s)", zt_cc_name(mm->vcoll),
                     mm->mem ? "zero-copy" : "buffered");
        }
        printf("collectives mismatch%s np=%d: %d of %d cases run, %d failed on rank 0\n", what, n,
               cases, l.n, fails);
        fflush(stdout);
    }
    free(l.v);
    return fails;
}

/* What the argument checks pass: plain buffers, count and displacement
 * arrays that fit them, and arrays whose entries run past any buffer. */
typedef struct {
    zt_bad_t b;
    unsigned char *s;
    unsigned char *r;
    HcclComm cm;
    aclrtStream st;
    uint32_t me;
    uint32_t un;
    uint64_t cnt[ZT_CC_MAXR];
    uint64_t dsp[ZT_CC_MAXR];
    uint64_t huge[ZT_CC_MAXR];
    uint64_t mat[ZT_CC_MAXR * ZT_CC_MAXR];
    uint64_t zero[ZT_CC_MAXR];
} zt_badargs_t;

/* NULL communicators, buffers and arrays: HCCL_E_PTR. */
static void zt_badargs_null(zt_badargs_t *a)
{
    unsigned char *s = a->s;
    unsigned char *r = a->r;
    HcclComm cm = a->cm;
    aclrtStream st = a->st;
    uint32_t me = a->me;
    const HcclDataType i32 = HCCL_DATA_TYPE_INT32;
    const HcclReduceOp sum = HCCL_REDUCE_SUM;
    uint64_t *cnt = a->cnt;
    uint64_t *dsp = a->dsp;
    uint64_t *mat = a->mat;
    zt_bad_t *b = &a->b;
    /* A NULL communicator. */
    ZT_BAD(b, HcclReduceScatter(s, r, 4, i32, sum, NULL, st), HCCL_E_PTR);
    ZT_BAD(b, HcclReduceScatterV(s, cnt, dsp, r, 4, i32, sum, NULL, st), HCCL_E_PTR);
    ZT_BAD(b, HcclReduce(s, r, 4, i32, sum, 0, NULL, st), HCCL_E_PTR);
    ZT_BAD(b, HcclBroadcast(s, 4, i32, 0, NULL, st), HCCL_E_PTR);
    ZT_BAD(b, HcclScatter(s, r, 4, i32, 0, NULL, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAllGatherV(s, 4, r, cnt, dsp, i32, NULL, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAll(s, 4, i32, r, 4, i32, NULL, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAllV(s, cnt, dsp, i32, r, cnt, dsp, i32, NULL, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAllVC(s, mat, i32, r, i32, NULL, st), HCCL_E_PTR);
    /* NULL buffers with elements to move, NULL count arrays. */
    ZT_BAD(b, HcclReduceScatter(NULL, r, 4, i32, sum, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclReduceScatter(s, NULL, 4, i32, sum, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclReduceScatterV(NULL, cnt, dsp, r, 4, i32, sum, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclReduceScatterV(s, cnt, dsp, NULL, 4, i32, sum, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclReduceScatterV(s, NULL, dsp, r, 4, i32, sum, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclReduceScatterV(s, cnt, NULL, r, 4, i32, sum, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclReduce(NULL, r, 4, i32, sum, 0, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclReduce(s, NULL, 4, i32, sum, me, cm, st), HCCL_E_PTR); /* NULL at the root */
    ZT_BAD(b, HcclBroadcast(NULL, 4, i32, 0, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclScatter(NULL, r, 4, i32, me, cm, st), HCCL_E_PTR); /* NULL at the root */
    ZT_BAD(b, HcclScatter(s, NULL, 4, i32, 0, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAllGatherV(NULL, 4, r, cnt, dsp, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAllGatherV(s, 4, NULL, cnt, dsp, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAllGatherV(s, 4, r, NULL, dsp, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAllGatherV(s, 4, r, cnt, NULL, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAll(NULL, 4, i32, r, 4, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAll(s, 4, i32, NULL, 4, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAllV(NULL, cnt, dsp, i32, r, cnt, dsp, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAllV(s, cnt, dsp, i32, NULL, cnt, dsp, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAllV(s, NULL, dsp, i32, r, cnt, dsp, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAllV(s, cnt, NULL, i32, r, cnt, dsp, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAllV(s, cnt, dsp, i32, r, NULL, dsp, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAllV(s, cnt, dsp, i32, r, cnt, NULL, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAllVC(s, NULL, i32, r, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAllVC(NULL, mat, i32, r, i32, cm, st), HCCL_E_PTR);
    ZT_BAD(b, HcclAlltoAllVC(s, mat, i32, NULL, i32, cm, st), HCCL_E_PTR);
}

/* Roots, own counts and extents out of range: HCCL_E_PARA. */
static void zt_badargs_range(zt_badargs_t *a)
{
    unsigned char *s = a->s;
    unsigned char *r = a->r;
    HcclComm cm = a->cm;
    aclrtStream st = a->st;
    uint32_t me = a->me;
    uint32_t un = a->un;
    const HcclDataType i32 = HCCL_DATA_TYPE_INT32;
    const HcclDataType f32 = HCCL_DATA_TYPE_FP32;
    const HcclReduceOp sum = HCCL_REDUCE_SUM;
    uint64_t *cnt = a->cnt;
    uint64_t *dsp = a->dsp;
    uint64_t *huge = a->huge;
    uint64_t *mat = a->mat;
    zt_bad_t *b = &a->b;
    /* Roots outside the communicator. */
    uint32_t roots[2] = {un, UINT32_MAX};
    for (int k = 0; k < 2; k++) {
        ZT_BAD(b, HcclReduce(s, r, 4, i32, sum, roots[k], cm, st), HCCL_E_PARA);
        ZT_BAD(b, HcclBroadcast(s, 4, i32, roots[k], cm, st), HCCL_E_PARA);
        ZT_BAD(b, HcclScatter(s, r, 4, i32, roots[k], cm, st), HCCL_E_PARA);
    }
    /* This rank's own entry must match its count; AlltoAll sides must match. */
    ZT_BAD(b, HcclAllGatherV(s, 5, r, cnt, dsp, i32, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclReduceScatterV(s, cnt, dsp, r, 3, i32, sum, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclAlltoAll(s, 4, i32, r, 3, i32, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclAlltoAll(s, 4, i32, r, 4, f32, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclAlltoAllV(s, cnt, dsp, i32, r, cnt, dsp, f32, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclAlltoAllVC(s, mat, i32, r, f32, cm, st), HCCL_E_PARA);
    /* Counts and displacements past any buffer. */
    ZT_BAD(b, HcclReduceScatter(s, r, UINT64_MAX / 3, i32, sum, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclBroadcast(s, UINT64_MAX / 2, i32, 0, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclScatter(s, r, UINT64_MAX / 3, i32, 0, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclReduce(s, r, UINT64_MAX / 2, i32, sum, 0, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclAlltoAll(s, UINT64_MAX / 3, i32, r, UINT64_MAX / 3, i32, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclAllGatherV(s, 4, r, cnt, huge, i32, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclReduceScatterV(s, cnt, huge, r, 4, i32, sum, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclAlltoAllV(s, huge, dsp, i32, r, cnt, dsp, i32, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclAlltoAllV(s, cnt, dsp, i32, r, cnt, huge, i32, cm, st), HCCL_E_PARA);
    mat[me] = UINT64_MAX / 2; /* row 0 column me: what this rank receives from rank 0 */
    ZT_BAD(b, HcclAlltoAllVC(s, mat, i32, r, i32, cm, st), HCCL_E_PARA);
    mat[me] = 4;
}

/* Unknown types and reductions (HCCL_E_PARA); reductions a type cannot do
 * (HCCL_E_NOT_SUPPORT). */
static void zt_badargs_types(zt_badargs_t *a)
{
    unsigned char *s = a->s;
    unsigned char *r = a->r;
    HcclComm cm = a->cm;
    aclrtStream st = a->st;
    const HcclDataType i32 = HCCL_DATA_TYPE_INT32;
    const HcclReduceOp sum = HCCL_REDUCE_SUM;
    uint64_t *cnt = a->cnt;
    uint64_t *dsp = a->dsp;
    zt_bad_t *b = &a->b;
    /* Unknown types and reductions; reductions a type cannot do. */
    ZT_BAD(b, HcclReduceScatter(s, r, 4, (HcclDataType)99, sum, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclReduceScatter(s, r, 4, i32, (HcclReduceOp)7, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclReduceScatterV(s, cnt, dsp, r, 4, i32, (HcclReduceOp)4, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclReduce(s, r, 4, (HcclDataType)99, sum, 0, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclBroadcast(s, 4, (HcclDataType)99, 0, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclScatter(s, r, 4, (HcclDataType)99, 0, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclAllGatherV(s, 4, r, cnt, dsp, (HcclDataType)99, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclAlltoAll(s, 4, (HcclDataType)99, r, 4, (HcclDataType)99, cm, st), HCCL_E_PARA);
    ZT_BAD(b, HcclAlltoAllV(s, cnt, dsp, (HcclDataType)99, r, cnt, dsp, (HcclDataType)99, cm, st),
           HCCL_E_PARA);
    ZT_BAD(b, HcclReduceScatter(s, r, 4, HCCL_DATA_TYPE_INT128, sum, cm, st), HCCL_E_NOT_SUPPORT);
    ZT_BAD(b, HcclReduce(s, r, 4, HCCL_DATA_TYPE_FP8E4M3, HCCL_REDUCE_PROD, 0, cm, st),
           HCCL_E_NOT_SUPPORT);
    ZT_BAD(b, HcclReduceScatterV(s, cnt, dsp, r, 4, HCCL_DATA_TYPE_HIF8, sum, cm, st),
           HCCL_E_NOT_SUPPORT);
}

/* Nothing written by the refused calls; then the legal calls with nothing to
 * move and NULL buffers: real ops, on every rank. */
static void zt_badargs_after(zt_badargs_t *a)
{
    zt_bad_t *b = &a->b;
    unsigned char *r = a->r;
    HcclComm cm = a->cm;
    aclrtStream st = a->st;
    const HcclDataType i32 = HCCL_DATA_TYPE_INT32;
    const HcclReduceOp sum = HCCL_REDUCE_SUM;
    uint64_t *dsp = a->dsp;
    uint64_t *zero = a->zero;
    /* Nothing was written by any refused call. */
    const unsigned char *g = r - ZT_CC_GUARD;
    for (size_t i = 0; i < 4096 + 2 * ZT_CC_GUARD; i++) {
        if (g[i] != ZT_CC_SENT) {
            zt_report(b->env, "a refused call wrote byte %ld of its output", (long)i - ZT_CC_GUARD);
            b->fails++;
            break;
        }
    }
    /* Legal calls with nothing to move and NULL buffers: real ops, every rank. */
    ZT_BAD(b, HcclBroadcast(NULL, 0, i32, 0, cm, st), HCCL_SUCCESS);
    ZT_BAD(b, HcclAllGatherV(NULL, 0, NULL, zero, dsp, i32, cm, st), HCCL_SUCCESS);
    ZT_BAD(b, HcclAlltoAllV(NULL, zero, dsp, i32, NULL, zero, dsp, i32, cm, st), HCCL_SUCCESS);
    ZT_BAD(b, HcclReduceScatterV(NULL, zero, dsp, NULL, 0, i32, sum, cm, st), HCCL_SUCCESS);
    ZT_BAD(b, aclrtSynchronizeStream(st), ACL_SUCCESS);
}

int zt_cc_badargs_run(zt_env_t *env)
{
    zt_badargs_t a = {.b = {env, 0, 0}, .cm = env->comm, .st = env->stream};
    int n = env->nranks;
    a.me = (uint32_t)env->rank;
    a.un = (uint32_t)n;
    if (env->half == 0 && zt_env_arena(env, 1 << 16) != 0) {
        return 1;
    }
    a.s = env->plain + ZT_CC_ROOM;
    a.r = env->plain + env->half + ZT_CC_ROOM;
    memset(a.r - ZT_CC_GUARD, ZT_CC_SENT, 4096 + 2 * ZT_CC_GUARD);
    for (int q = 0; q < n; q++) {
        a.cnt[q] = 4;
        a.dsp[q] = 4 * (uint64_t)q;
        a.huge[q] = UINT64_MAX / 2;
        for (int j = 0; j < n; j++) {
            a.mat[q * n + j] = 4;
        }
    }
    zt_badargs_null(&a);
    zt_badargs_range(&a);
    zt_badargs_types(&a);
    zt_badargs_after(&a);
    /* The communicator is still in step: a checked op works. */
    zt_cc_t ok = {.coll = ZT_CC_ALLTOALLV,
                  .dtype = HCCL_DATA_TYPE_INT32,
                  .count = 100,
                  .vshape = ZT_V_UNEVEN,
                  .mem = ZT_MEM_PLAIN,
                  .misalign = 1,
                  .seed = 0xbadc0de};
    a.b.cases++;
    a.b.fails += zt_cc_run(env, &ok) != 0;
    if (env->rank == 0) {
        printf("collective argument checks np=%d: %d cases, %d failed on rank 0\n", n, a.b.cases,
               a.b.fails);
        fflush(stdout);
    }
    return a.b.fails;
}
