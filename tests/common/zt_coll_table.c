/* The scenario table of zt_coll_table.h and its cmocka runner, compiled once into the test library.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

#include "zt_coll_p2p.h"
#include "zt_coll_scen.h"
#include "zt_coll_table.h"

#define ZT_CS_BIG 300001 /* elements of the large cases */
#define ZT_CS_MAXNP 4    /* the most ranks the fork and thread launchers start */
#define ZT_CS_MAXCASES 32

/* ---- the adapters (arg: const zt_cs_arg_t *) ------------------------------------------- */

static const zt_cs_launcher_t *zt_cs_l(const void *arg)
{
    return ((const zt_cs_arg_t *)arg)->l;
}

static int zt_cs_matrix(zt_env_t *env, const void *arg)
{
    zt_ccmatrix_t m = {zt_cs_l(arg)->seed + (uint64_t)env->nranks, ZT_CS_BIG, 1};
    return zt_cc_matrix_run(env, &m);
}

static int zt_cs_mismatch(zt_env_t *env, const void *arg)
{
    zt_ccmismatch_t mm = {zt_cs_l(arg)->seed ^ 0x3153ull, -1, 0};
    return zt_cc_mismatch_run(env, &mm);
}

/* Variant v: the V-array mismatch of V collective v / 2, zero-copy (v even) or buffered. */
static int zt_cs_mismatch_counts(zt_env_t *env, const void *arg)
{
    static const int vcolls[4] = {ZT_CC_REDUCESCATTERV, ZT_CC_ALLGATHERV, ZT_CC_ALLTOALLV,
                                  ZT_CC_ALLTOALLVC};
    int v = ((const zt_cs_arg_t *)arg)->variant;
    zt_ccmismatch_t mm = {zt_cs_l(arg)->seed ^ 0x3154ull, vcolls[v / 2],
                          v % 2 == 0 ? ZT_MEM_ZC : ZT_MEM_PLAIN};
    return zt_cc_mismatch_run(env, &mm);
}

static int zt_cs_badargs(zt_env_t *env, const void *arg)
{
    (void)arg;
    return zt_cc_badargs_run(env);
}

static int zt_cs_p2p_ring(zt_env_t *env, const void *arg)
{
    const zt_cs_launcher_t *l = zt_cs_l(arg);
    return zt_p2p_ring_run(env, l->same_proc, ZT_CS_BIG, l->seed ^ 0x41ull);
}

static int zt_cs_p2p_a2a(zt_env_t *env, const void *arg)
{
    const zt_cs_launcher_t *l = zt_cs_l(arg);
    return zt_p2p_a2a_run(env, l->same_proc, ZT_CS_BIG, l->seed ^ 0x42ull);
}

static int zt_cs_p2p_mismatch(zt_env_t *env, const void *arg)
{
    const zt_cs_launcher_t *l = zt_cs_l(arg);
    return zt_p2p_mismatch_run(env, l->same_proc, l->seed ^ 0x43ull);
}

static int zt_cs_p2p_badargs(zt_env_t *env, const void *arg)
{
    return zt_p2p_badargs_run(env, zt_cs_l(arg)->same_proc);
}

/* ---- the table -------------------------------------------------------------------------- */

const zt_cs_t zt_cs_table[] = {
    {"test_matrix", zt_cs_matrix, ZT_CS_COLL, 1, 1, 1, 300},
    {"test_mismatch", zt_cs_mismatch, ZT_CS_COLL, 2, 0, 1, 120},
    {"test_mismatch_counts", zt_cs_mismatch_counts, ZT_CS_COLL, 2, 0, 8, 120},
    {"test_badargs", zt_cs_badargs, ZT_CS_COLL, 1, 0, 1, 120},
    {"test_p2p_ring", zt_cs_p2p_ring, ZT_CS_P2P, 2, 0, 1, 300},
    {"test_p2p_batch_alltoall", zt_cs_p2p_a2a, ZT_CS_P2P, 2, 0, 1, 300},
    {"test_p2p_mismatch", zt_cs_p2p_mismatch, ZT_CS_P2P, 2, 0, 1, 300},
    {"test_p2p_badargs", zt_cs_p2p_badargs, ZT_CS_P2P, 1, 0, 1, 300},
};

const int zt_cs_rows = (int)(sizeof(zt_cs_table) / sizeof(zt_cs_table[0]));

/* ---- the cmocka cases ------------------------------------------------------------------- */

/* One cmocka case: a row at rank counts lo..hi. */
typedef struct {
    const zt_cs_t *row;
    const zt_cs_launcher_t *l;
    int lo;
    int hi;
    char name[64];
} zt_cs_case_t;

/* Every variant of the case's row at each of its rank counts; fails on any failed launch. */
static void zt_cs_case_run(void **state)
{
    const zt_cs_case_t *c = *state;
    int launches = 0;
    int failed = 0;
    for (int n = c->lo; n <= c->hi; n++) {
        for (int v = 0; v < c->row->variants; v++) {
            zt_cs_arg_t a = {c->l, v};
            zt_cc_job_t job = {c->row->body, &a};
            failed += c->l->launch(n, &job, c->row->timeout_s) != 0;
            launches++;
        }
    }
    assert_true(launches > 0);
    assert_int_equal(failed, 0);
}

/* Add the cmocka cases of row at cases[*n]: one, or one per rank count. Returns 0, or -1
 * when cases is full. */
static int zt_cs_add(const zt_cs_launcher_t *l, const zt_cs_t *row, zt_cs_case_t *cases, int *n)
{
    int split = row->per_np && l->fixed_n <= 0;
    int lo = l->fixed_n > 0 ? l->fixed_n : row->lo;
    int hi = l->fixed_n > 0 ? l->fixed_n : ZT_CS_MAXNP;
    int ncases = split ? hi - lo + 1 : 1;
    if (*n + ncases > ZT_CS_MAXCASES) {
        return -1;
    }
    for (int k = 0; k < ncases; k++) {
        zt_cs_case_t *c = &cases[(*n)++];
        *c = (zt_cs_case_t){row, l, split ? lo + k : lo, split ? lo + k : hi, {0}};
        if (split) {
            snprintf(c->name, sizeof(c->name), "%s_np%d", row->name, c->lo);
        } else {
            snprintf(c->name, sizeof(c->name), "%s", row->name);
        }
    }
    return 0;
}

int zt_cs_launch_procs(int n, zt_cc_job_t *job, int timeout_s)
{
    return zt_launch_procs(n, zt_cc_rank_job, job, timeout_s);
}

int zt_cs_launch_threads(int n, zt_cc_job_t *job, int timeout_s)
{
    (void)timeout_s;
    return zt_launch_threads(n, zt_cc_rank_job, job);
}

int zt_cs_run(const zt_cs_launcher_t *l)
{
    static zt_cs_case_t cases[ZT_CS_MAXCASES];
    struct CMUnitTest tests[ZT_CS_MAXCASES];
    int n = 0;
    for (int r = 0; r < zt_cs_rows; r++) {
        if ((zt_cs_table[r].rows & l->rows) && zt_cs_add(l, &zt_cs_table[r], cases, &n) != 0) {
            fprintf(stderr, "zt_cs_run: more than %d cases\n", ZT_CS_MAXCASES);
            return 1;
        }
    }
    for (int i = 0; i < n; i++) {
        tests[i] = (struct CMUnitTest){cases[i].name, zt_cs_case_run, NULL, NULL, &cases[i]};
    }
    return _cmocka_run_group_tests("tests", tests, (size_t)n, NULL, NULL);
}
