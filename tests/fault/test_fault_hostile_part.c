/*
 * A hostile local peer and the buffered point-to-point path: the sender
 * publishes in its control segment how many bytes of its staging buffer
 * each receiver owns (p2p_part), and the receiver offsets into the sender's
 * mapped buffer by it. Rank 1 sends one buffered message to rank 0 (checked),
 * then overwrites its published part with values that do not fit its
 * buffer (zccl_comm_poke_p2p_part) and sends again: rank 0's receive must
 * fail with an error, never read outside the mapping (a crash) or return
 * success, and rank 1's send must end with an error within the exec
 * timeout. Two forked ranks; one case per forged value.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "core/hccl_test_api.h"
#include "zt_launch.h"

#define TH_COUNT (16u * 1024u) /* int32: 64 KiB, past the inline size, several parts */

static HcclResult th_xfer(zt_env_t *env, int rank, int32_t *buf)
{
    HcclResult r = rank == 1
                       ? HcclSend(buf, TH_COUNT, HCCL_DATA_TYPE_INT32, 0, env->comm, env->stream)
                       : HcclRecv(buf, TH_COUNT, HCCL_DATA_TYPE_INT32, 1, env->comm, env->stream);
    if (r != HCCL_SUCCESS) {
        return r;
    }
    return aclrtSynchronizeStream(env->stream) == ACL_SUCCESS ? HCCL_SUCCESS : HCCL_E_INTERNAL;
}

/* The honest message: right data, and it really went through staging. */
static int th_first(zt_env_t *env, int rank, int32_t *buf)
{
    for (uint32_t i = 0; i < TH_COUNT; i++) {
        buf[i] = rank == 1 ? (int32_t)(i * 7u + 1u) : -1;
    }
    if (th_xfer(env, rank, buf) != HCCL_SUCCESS) {
        fprintf(stderr, "rank %d: the honest message failed\n", rank);
        return 1;
    }
    for (uint32_t i = 0; rank == 0 && i < TH_COUNT; i++) {
        if (buf[i] != (int32_t)(i * 7u + 1u)) {
            fprintf(stderr, "rank 0: element %u is %d\n", i, buf[i]);
            return 1;
        }
    }
    if (rank == 1 && zccl_comm_staged_bytes(env->comm) == 0) {
        fprintf(stderr, "rank 1: the message did not take the staged path\n");
        return 1;
    }
    return 0;
}

static int th_rank(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    uint64_t forged = *(const uint64_t *)arg;
    zt_env_t env;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0) {
        return 1;
    }
    int32_t *buf = NULL;
    int bad = aclrtMalloc((void **)&buf, TH_COUNT * sizeof(int32_t), ACL_MEM_MALLOC_HUGE_FIRST) !=
              ACL_SUCCESS;
    bad = bad || th_first(&env, rank, buf);
    if (!bad && rank == 1 && zccl_comm_poke_p2p_part(env.comm, forged) != 0) {
        bad = 1;
    }
    if (!bad) {
        HcclResult r = th_xfer(&env, rank, buf);
        if (r == HCCL_SUCCESS) {
            fprintf(stderr, "rank %d: the message with part %llu succeeded\n", rank,
                    (unsigned long long)forged);
            bad = 1;
        }
    }
    aclrtFree(buf);
    (void)zt_env_close(&env); /* the comm is broken by design here */
    return bad;
}

static void th_run(uint64_t forged)
{
    int failed = zt_launch_procs(2, th_rank, &forged, 60);
    assert_int_equal(failed, 0);
}

static void test_part_too_large(void **state)
{
    (void)state;
    th_run((uint64_t)1 << 40);
}

static void test_part_zero(void **state)
{
    (void)state;
    th_run(0);
}

static void test_part_wraps(void **state)
{
    (void)state;
    th_run(UINT64_MAX / 2 + 1); /* part x rank wraps to 0 for rank 2 */
}

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "5", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_part_too_large),
        cmocka_unit_test(test_part_zero),
        cmocka_unit_test(test_part_wraps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
