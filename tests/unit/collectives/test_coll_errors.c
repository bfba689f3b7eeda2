/*
 * Argument errors of every collective, direct and staged: each bad argument
 * gives its code (ZC_ERR_INVAL / ZC_ERR_PTR) without calling barrier() and
 * without touching the output; a local failure on the staged path (NULL
 * send) still calls barrier() as often as a good call does.
 *
 * One rank of a one-rank world, so a good call completes on its own; the
 * sync object counts calls and never blocks.
 */
#include "test_coll_harness.h"

typedef struct {
    const char *name;
    tc_fn fn;
    int staged;
    int reduces;
    int rooted;
    int v; /* 0: none, 1 AllGatherV, 2 ReduceScatterV, 3 AlltoAllV */
} fn_info_t;

static const fn_info_t fns[] = {
    {"allreduce_direct", coll_allreduce_direct, 0, 1, 0, 0},
    {"allreduce_staged", coll_allreduce_staged, 1, 1, 0, 0},
    {"allgather_direct", coll_allgather_direct, 0, 0, 0, 0},
    {"allgather_staged", coll_allgather_staged, 1, 0, 0, 0},
    {"allgatherv_direct", coll_allgatherv_direct, 0, 0, 0, 1},
    {"allgatherv_staged", coll_allgatherv_staged, 1, 0, 0, 1},
    {"reducescatter_direct", coll_reducescatter_direct, 0, 1, 0, 0},
    {"reducescatter_staged", coll_reducescatter_staged, 1, 1, 0, 0},
    {"reducescatterv_direct", coll_reducescatterv_direct, 0, 1, 0, 2},
    {"reducescatterv_staged", coll_reducescatterv_staged, 1, 1, 0, 2},
    {"broadcast_direct", coll_broadcast_direct, 0, 0, 1, 0},
    {"broadcast_staged", coll_broadcast_staged, 1, 0, 1, 0},
    {"reduce_direct", coll_reduce_direct, 0, 1, 1, 0},
    {"reduce_staged", coll_reduce_staged, 1, 1, 1, 0},
    {"scatter_direct", coll_scatter_direct, 0, 0, 1, 0},
    {"scatter_staged", coll_scatter_staged, 1, 0, 1, 0},
    {"alltoall_direct", coll_alltoall_direct, 0, 0, 0, 0},
    {"alltoall_staged", coll_alltoall_staged, 1, 0, 0, 0},
    {"alltoallv_direct", coll_alltoallv_direct, 0, 0, 0, 3},
    {"alltoallv_staged", coll_alltoallv_staged, 1, 0, 0, 3},
};

typedef struct {
    coll_sync_t base;
    long calls;
} count_sync_t;

static int count_barrier(coll_sync_t *self)
{
    ((count_sync_t *)self)->calls++;
    return ZC_OK;
}

enum { COUNT = 300 };

typedef struct {
    float in[COUNT + 8];
    float out[COUNT + 8];
    unsigned char ccl[256];
    const void *inp[1];
    void *outp[1];
    void *cclp[1];
    uint64_t sc[1], sd[1], rc[1], rd[1], rce[1];
    const uint64_t *scp[1], *sdp[1], *rcp[1], *rdp[1];
    count_sync_t sync;
    coll_tuning_t tune;
    coll_args_t a;
} world1_t;

/* A valid one-rank call of COUNT fp32 elements, out of place. */
static void world1_init(world1_t *w)
{
    memset(w, 0, sizeof(*w));
    for (int i = 0; i < COUNT; i++) {
        w->in[i] = (float)i;
    }
    w->inp[0] = w->in;
    w->outp[0] = w->out;
    w->cclp[0] = w->ccl;
    w->sc[0] = w->rc[0] = w->rce[0] = COUNT;
    w->scp[0] = w->sc;
    w->sdp[0] = w->sd;
    w->rcp[0] = w->rc;
    w->rdp[0] = w->rd;
    w->sync.base.barrier = count_barrier;
    w->tune.oneshot_max = COLL_DEFAULT_ONESHOT_MAX;
    w->tune.nt_min = COLL_DEFAULT_NT_MIN;
    coll_args_t *a = &w->a;
    a->rank = 0;
    a->nranks = 1;
    a->root = 0;
    a->dtype = COLL_FP32;
    a->op = COLL_SUM;
    a->count = COUNT;
    a->in = w->inp;
    a->out = w->outp;
    a->send = w->in;
    a->recv = w->out;
    a->ccl = w->cclp;
    a->ccl_bytes = sizeof(w->ccl);
    a->send_counts = w->scp;
    a->send_displs = w->sdp;
    a->recv_counts = w->rcp;
    a->recv_displs = w->rdp;
    a->recv_count_each = w->rce;
    a->sync = &w->sync.base;
    a->tune = &w->tune;
}

/* Call f with one argument changed: it must return want, call no barrier and
 * leave out[] alone. */
#define EXPECT(f, want, mutate)                                                                    \
    do {                                                                                           \
        world1_t *w_ = malloc(sizeof(*w_));                                                        \
        assert_non_null(w_);                                                                       \
        world1_init(w_);                                                                           \
        coll_args_t *a = &w_->a;                                                                   \
        world1_t *w = w_;                                                                          \
        (void)w;                                                                                   \
        mutate;                                                                                    \
        int got_ = (f)->fn(a);                                                                     \
        if (got_ != (want)) {                                                                      \
            fail_msg("%s with %s: got %d, want %d", (f)->name, #mutate, got_, (int)(want));        \
        }                                                                                          \
        if ((want) != ZC_OK) {                                                                     \
            assert_int_equal(w_->sync.calls, 0);                                                   \
            for (int i_ = 0; i_ < COUNT + 8; i_++) {                                               \
                assert_true(w_->out[i_] == 0.0f);                                                  \
            }                                                                                      \
        }                                                                                          \
        free(w_);                                                                                  \
    } while (0)

static void test_good_call(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        world1_t w;
        world1_init(&w);
        assert_int_equal(fns[i].fn(&w.a), ZC_OK);
        /* a Broadcast root writes nothing */
        for (int k = 0;
             k < COUNT && fns[i].fn != coll_broadcast_direct && fns[i].fn != coll_broadcast_staged;
             k++) {
            if (w.out[k] != (float)k) {
                fail_msg("%s: out[%d] = %g", fns[i].name, k, (double)w.out[k]);
            }
        }
        /* 300 floats through a 256-byte CCL buffer: several chunks */
        assert_true(fns[i].staged ? w.sync.calls > 1 : w.sync.calls == 0);
    }
}

static void test_common_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        const fn_info_t *f = &fns[i];
        assert_int_equal(f->fn(NULL), ZC_ERR_PTR);
        EXPECT(f, ZC_ERR_INVAL, a->nranks = 0);
        EXPECT(f, ZC_ERR_INVAL, a->rank = 1);
        EXPECT(f, ZC_ERR_INVAL, a->rank = -1);
        EXPECT(f, ZC_ERR_INVAL, a->dtype = 13);
        EXPECT(f, ZC_ERR_INVAL, a->dtype = -1);
        EXPECT(f, ZC_ERR_INVAL, a->dtype = 255);
        EXPECT(f, f->reduces ? ZC_ERR_INVAL : ZC_OK, a->op = 4);
        EXPECT(f, f->reduces ? ZC_ERR_INVAL : ZC_OK, a->op = -1);
        EXPECT(f, f->rooted ? ZC_ERR_INVAL : ZC_OK, a->root = 1);
        EXPECT(f, f->rooted ? ZC_ERR_INVAL : ZC_OK, a->root = -1);
        if (f->v == 0) {
            EXPECT(f, ZC_ERR_INVAL, a->count = SIZE_MAX / 2);
        }
    }
}

static void test_dtype_errors(void **state)
{
    (void)state;
    static const int copy_only[] = {COLL_INT128, COLL_HIF8, COLL_FP8E4M3, COLL_FP8E5M2,
                                    COLL_FP8E8M0};
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        const fn_info_t *f = &fns[i];
        for (size_t k = 0; k < sizeof(copy_only) / sizeof(copy_only[0]); k++) {
            /* 8-bit types move fewer bytes; INT128 more than in[] holds, so
             * only check the reductions' rejection */
            if (f->reduces) {
                EXPECT(f, ZC_ERR_INVAL, a->dtype = copy_only[k]);
            } else if (copy_only[k] != COLL_INT128) {
                EXPECT(f, ZC_OK, a->dtype = copy_only[k]);
            }
        }
    }
}

static void test_pointer_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        const fn_info_t *f = &fns[i];
        if (f->staged) {
            EXPECT(f, ZC_ERR_PTR, a->sync = NULL);
            EXPECT(f, ZC_ERR_PTR, a->ccl = NULL);
            EXPECT(f, ZC_ERR_PTR, w->cclp[0] = NULL);
            EXPECT(f, ZC_ERR_INVAL, a->ccl_bytes = 3);
            /* only the CCL buffer matters here: in[] / out[] unused */
            EXPECT(f, ZC_OK, a->in = NULL; a->out = NULL);
        } else {
            EXPECT(f, ZC_ERR_PTR, a->in = NULL);
            EXPECT(f, ZC_ERR_PTR, a->out = NULL);
            if (f->fn == coll_broadcast_direct) {
                /* the root reads in[root], or out[root] when that is NULL */
                EXPECT(f, ZC_ERR_PTR, w->inp[0] = NULL; w->outp[0] = NULL);
            } else {
                EXPECT(f, ZC_ERR_PTR, w->inp[0] = NULL);
                EXPECT(f, ZC_ERR_PTR, w->outp[0] = NULL);
            }
            EXPECT(f, ZC_OK, a->send = NULL; a->recv = NULL; a->ccl = NULL);
            /* nothing to move: NULL buffers are fine */
            if (f->v == 0) {
                EXPECT(f, ZC_OK, a->count = 0; w->inp[0] = NULL; w->outp[0] = NULL);
            }
        }
    }
}

static void test_v_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        const fn_info_t *f = &fns[i];
        if (f->v == 1) {
            EXPECT(f, ZC_ERR_PTR, a->recv_counts = NULL);
            EXPECT(f, ZC_ERR_PTR, w->rdp[0] = NULL);
            EXPECT(f, ZC_ERR_INVAL, w->rd[0] = UINT64_MAX - 10);
            EXPECT(f, ZC_OK, w->rc[0] = 0; w->inp[0] = NULL; a->send = NULL);
        } else if (f->v == 2) {
            EXPECT(f, ZC_ERR_PTR, a->send_counts = NULL);
            /* send_counts then give the recv counts */
            EXPECT(f, ZC_OK, a->recv_count_each = NULL);
            EXPECT(f, ZC_ERR_PTR, w->scp[0] = NULL);
            EXPECT(f, ZC_ERR_INVAL, w->sc[0] = COUNT - 1);
            EXPECT(f, ZC_ERR_INVAL, w->sd[0] = UINT64_MAX / 2);
        } else if (f->v == 3) {
            EXPECT(f, ZC_ERR_PTR, a->send_displs = NULL);
            EXPECT(f, ZC_ERR_PTR, w->rcp[0] = NULL);
            EXPECT(f, ZC_ERR_INVAL, w->rc[0] = COUNT + 1);
            EXPECT(f, ZC_ERR_INVAL, w->rd[0] = UINT64_MAX);
        }
    }
}

/* A NULL send on the staged path is this rank's failure alone: it returns
 * ZC_ERR_PTR after as many barriers as a good call. */
static void test_staged_local_failure(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        const fn_info_t *f = &fns[i];
        if (!f->staged) {
            continue;
        }
        world1_t good, bad;
        world1_init(&good);
        world1_init(&bad);
        assert_int_equal(f->fn(&good.a), ZC_OK);
        bad.a.send = NULL;
        bad.a.recv = NULL;
        assert_int_equal(f->fn(&bad.a), ZC_ERR_PTR);
        assert_int_equal(bad.sync.calls, good.sync.calls);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_call),    cmocka_unit_test(test_common_errors),
        cmocka_unit_test(test_dtype_errors), cmocka_unit_test(test_pointer_errors),
        cmocka_unit_test(test_v_errors),     cmocka_unit_test(test_staged_local_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
