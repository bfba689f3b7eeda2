/*
 * AllReduce / AllGather up to 64 KiB while cores are busy: 2 forked ranks
 * (no more than the cores of the smallest test machine, so yields stay on
 * and the busy state is the one a busy core gives), taken as busy or free
 * by the test hook (zccl_test_cores_busy: as after a yield that lost a
 * whole slice, or never, whatever this machine's load does to yields).
 * With every rank busy, ops of 64 KiB per rank on activated memory carry
 * their input in the post and finish inline (the inline byte counter grows
 * by each op's bytes); one element more, or one rank not busy, and the
 * same ops run zero-copy (it does not grow). Every result is checked
 * element by element by zt_case_run (fp32 SUM, bf16 SUM with rounding,
 * int8 MAX, AllGather of raw bits; in place and out of place, odd
 * addresses), twice over.
 * Nothing of the library runs in this parent process: ranks are forked first.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hccl_test_api.h"
#include "zt_check.h"
#include "zt_launch.h"

#define TB_N 2
#define TB_MAX ((size_t)64 << 10)

typedef struct {
    int busy[TB_N]; /* rank r takes its cores as busy */
} tb_case_t;

/* Run c; *inl the inline bytes it added on this rank. 0 or 1 (printed). */
static int tb_run(zt_env_t *env, const zt_case_t *c, uint64_t *inl)
{
    uint64_t before = zccl_comm_inline_bytes(env->comm);
    int st = zt_case_run(env, c);
    *inl = zccl_comm_inline_bytes(env->comm) - before;
    return st != 0;
}

/* One case: 64 KiB (inline when every rank is busy) and one element more
 * (never inline), for each shape of the list. */
static int tb_shapes(zt_env_t *env, int all_busy)
{
    static const struct {
        int coll, dtype, op, in_place, misalign, mode;
    } shapes[] = {
        {ZT_ALLREDUCE, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 0, 0, ZT_FILL_EXACT},
        {ZT_ALLREDUCE, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, 1, 1, ZT_FILL_EXACT},
        {ZT_ALLREDUCE, HCCL_DATA_TYPE_BFP16, HCCL_REDUCE_SUM, 0, 1, ZT_FILL_ROUNDING},
        {ZT_ALLREDUCE, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_MAX, 1, 0, ZT_FILL_EXACT},
        {ZT_ALLGATHER, HCCL_DATA_TYPE_FP32, -1, 0, 1, ZT_FILL_EXACT},
        {ZT_ALLGATHER, HCCL_DATA_TYPE_INT8, -1, 1, 0, ZT_FILL_EXACT},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        size_t esize = zt_dtype_size(shapes[i].dtype);
        for (size_t extra = 0; extra <= 1; extra++) {
            zt_case_t c = {.coll = shapes[i].coll,
                           .dtype = shapes[i].dtype,
                           .op = shapes[i].op,
                           .count = TB_MAX / esize + extra,
                           .zero_copy = 1,
                           .in_place = shapes[i].in_place,
                           .misalign = shapes[i].misalign,
                           .mode = shapes[i].mode,
                           .seed = 17 + i};
            uint64_t inl = 0;
            if (tb_run(env, &c, &inl) != 0) {
                return 1;
            }
            uint64_t want = all_busy && extra == 0 ? TB_MAX : 0;
            if (inl != want) {
                fprintf(stderr, "rank %d: shape %zu, %zu elements: %llu bytes inline, want %llu\n",
                        env->rank, i, c.count, (unsigned long long)inl, (unsigned long long)want);
                return 1;
            }
        }
    }
    return 0;
}

static int tb_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    const tb_case_t *tc = arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int bad = zt_env_arena(
                  &env, zt_case_bytes(ZT_ALLGATHER, HCCL_DATA_TYPE_INT8, TB_MAX + 1, nranks)) != 0;
    int all_busy = 1;
    for (int r = 0; r < nranks; r++) {
        all_busy &= tc->busy[r];
    }
    for (int round = 0; round < 2 && !bad; round++) {
        zccl_test_cores_busy(tc->busy[rank]);
        bad = tb_shapes(&env, all_busy);
    }
    zccl_test_cores_busy(-1);
    return zt_env_close(&env) != 0 || bad;
}

static void tb_run_case(const tb_case_t *tc)
{
    assert_int_equal(zt_launch_procs(TB_N, tb_rank, (void *)tc, 120), 0);
}

static void test_busy_inline(void **state)
{
    (void)state;
    static const tb_case_t tc = {{1, 1}};
    tb_run_case(&tc);
}

static void test_busy_one_rank(void **state)
{
    (void)state;
    static const tb_case_t tc = {{0, 1}};
    tb_run_case(&tc);
}

static void test_busy_none(void **state)
{
    (void)state;
    static const tb_case_t tc = {{0, 0}};
    tb_run_case(&tc);
}

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busy_inline),
        cmocka_unit_test(test_busy_one_rank),
        cmocka_unit_test(test_busy_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
