/*
 * Agreement across hosts: one rank of another host passes a different
 * count, dtype, reduce op or root than everyone else, or V arrays that
 * disagree (AllGatherV, ReduceScatterV, AlltoAllV). Every rank must get
 * HCCL_E_PARA (from the stream's synchronize), nothing may be written to
 * any rank's output, and the next agreeing op on the same communicator must
 * work, as on one host. Run on zero-copy (activated) and on plain memory,
 * with the deviating rank the last rank and the first rank of the last host.
 *
 * Usage: test_mh_agree TAG NETNS_SH LAYOUT (ranks per host, as "2,2"),
 * normally through tests/multihost/run.sh, which makes the namespace hosts
 * and always removes them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zt_coll_run.h"
#include "zt_netns.h"

#define MH_COUNT 1000
#define MH_FILL 0xab
#define MH_TIMEOUT_S 200

static zt_hosts_t mh_hosts;

enum { MH_DEV_COUNT, MH_DEV_DTYPE, MH_DEV_OP, MH_DEV_ROOT, MH_DEV_MAX };
static const char *const mh_dev_names[MH_DEV_MAX] = {"count", "dtype", "reduce op", "root"};

/* One mismatching collective (the deviation dev on rank odd), then checks. */
static int mh_one(zt_env_t *env, unsigned char *send, unsigned char *recv, int dev, int odd)
{
    int fails = 0;
    int me = env->rank;
    uint64_t count = MH_COUNT + (dev == MH_DEV_COUNT && me == odd ? 1 : 0);
    HcclDataType dt = dev == MH_DEV_DTYPE && me == odd ? HCCL_DATA_TYPE_FP32 : HCCL_DATA_TYPE_INT32;
    HcclReduceOp op = dev == MH_DEV_OP && me == odd ? HCCL_REDUCE_MAX : HCCL_REDUCE_SUM;
    uint32_t root = dev == MH_DEV_ROOT && me == odd ? 1u : 0u;
    size_t rbytes = (MH_COUNT + 1) * 4;
    memset(send, me + 1, rbytes);
    memset(recv, MH_FILL, rbytes);
    HcclResult h = dev == MH_DEV_ROOT
                       ? HcclReduce(send, recv, count, dt, op, root, env->comm, env->stream)
                       : HcclAllReduce(send, recv, count, dt, op, env->comm, env->stream);
    ZT_EXPECT(env, h == HCCL_SUCCESS, "%s mismatch: the call returned %d", mh_dev_names[dev],
              (int)h);
    aclError e = aclrtSynchronizeStream(env->stream);
    ZT_EXPECT(env, e == (aclError)HCCL_E_PARA, "%s mismatch (rank %d deviates): sync returned %d",
              mh_dev_names[dev], odd, (int)e);
    size_t written = 0;
    for (size_t i = 0; i < rbytes; i++) {
        written += recv[i] != MH_FILL;
    }
    ZT_EXPECT(env, written == 0, "%s mismatch: %zu output bytes written", mh_dev_names[dev],
              written);
    /* The communicator is still usable: an agreeing op works. */
    fails += zt_allreduce_path(env, env->comm, send, recv, MH_COUNT, -1, __LINE__);
    return fails;
}

/* V arrays that disagree across hosts: rank odd's AllGatherV recvCounts or
 * ReduceScatterV sendCounts differ from everyone's, or its AlltoAllV sends
 * one more element to rank odd + 1 than that rank receives. (A count that
 * contradicts the rank's own array is refused by the call itself.) */
enum { MH_V_AGV_ARRAY, MH_V_RSV_ARRAY, MH_V_A2AV_PAIR, MH_V_MAX };
static const char *const mh_v_names[MH_V_MAX] = {
    "AllGatherV recvCounts", "ReduceScatterV sendCounts", "AlltoAllV pair counts"};

#define MH_VC 100

static HcclResult mh_call_v(zt_env_t *env, void *send, void *recv, int dev, int odd)
{
    int n = env->nranks;
    int me = env->rank;
    uint64_t cnt[ZT_CC_MAXR];
    uint64_t rcv[ZT_CC_MAXR];
    uint64_t dsp[ZT_CC_MAXR];
    for (int q = 0; q < n; q++) {
        cnt[q] = rcv[q] = MH_VC;
        dsp[q] = (uint64_t)q * (MH_VC + 1);
    }
    HcclDataType dt = HCCL_DATA_TYPE_INT32;
    if (me == odd) {
        cnt[0] += dev == MH_V_AGV_ARRAY || dev == MH_V_RSV_ARRAY;
        cnt[(odd + 1) % n] += dev == MH_V_A2AV_PAIR;
    }
    switch (dev) {
    case MH_V_AGV_ARRAY:
        return HcclAllGatherV(send, MH_VC, recv, cnt, dsp, dt, env->comm, env->stream);
    case MH_V_RSV_ARRAY:
        return HcclReduceScatterV(send, cnt, dsp, recv, MH_VC, dt, HCCL_REDUCE_SUM, env->comm,
                                  env->stream);
    default:
        return HcclAlltoAllV(send, cnt, dsp, dt, recv, rcv, dsp, dt, env->comm, env->stream);
    }
}

/* One V-array mismatch, then the checks of mh_one. */
static int mh_one_v(zt_env_t *env, unsigned char *send, unsigned char *recv, int dev, int odd)
{
    int fails = 0;
    size_t bytes = (size_t)env->nranks * (MH_VC + 1) * 4;
    memset(send, env->rank + 1, bytes);
    memset(recv, MH_FILL, bytes);
    HcclResult h = mh_call_v(env, send, recv, dev, odd);
    ZT_EXPECT(env, h == HCCL_SUCCESS, "%s mismatch: the call returned %d", mh_v_names[dev], (int)h);
    aclError e = aclrtSynchronizeStream(env->stream);
    ZT_EXPECT(env, e == (aclError)HCCL_E_PARA, "%s mismatch (rank %d deviates): sync returned %d",
              mh_v_names[dev], odd, (int)e);
    size_t written = 0;
    for (size_t i = 0; i < bytes; i++) {
        written += recv[i] != MH_FILL;
    }
    ZT_EXPECT(env, written == 0, "%s mismatch: %zu output bytes written", mh_v_names[dev], written);
    fails += zt_allreduce_path(env, env->comm, send, recv, MH_COUNT, -1, __LINE__);
    return fails;
}

static int mh_body(zt_env_t *env, const void *arg)
{
    const int *odd = arg;
    int fails = 0;
    if (zt_env_arena(env, 1 << 16) != 0) {
        return 1;
    }
    for (int mem = 0; mem < 2; mem++) {
        unsigned char *send = mem ? env->zc.va : env->plain;
        unsigned char *recv =
            mem ? (unsigned char *)env->zc.va + env->half : env->plain + env->half;
        for (int dev = 0; dev < MH_DEV_MAX; dev++) {
            fails += mh_one(env, send, recv, dev, *odd);
        }
        for (int dev = 0; dev < MH_V_MAX; dev++) {
            fails += mh_one_v(env, send, recv, dev, *odd);
        }
    }
    if (env->rank == 0) {
        printf("# agreement across hosts, rank %d deviating: %d failures on rank 0\n", *odd, fails);
        fflush(stdout);
    }
    return fails;
}

static int mh_run(int odd)
{
    zt_cc_job_t job = {mh_body, &odd};
    return zt_launch_procs(mh_hosts.nranks, zt_cc_rank_job, &job, MH_TIMEOUT_S);
}

/* The last rank deviates (on the last host, not its first rank when that host has two). */
static void test_last_rank(void **state)
{
    (void)state;
    assert_int_equal(mh_run(mh_hosts.nranks - 1), 0);
}

/* The first rank of the last host deviates. */
static void test_first_of_last_host(void **state)
{
    (void)state;
    int odd = mh_hosts.nranks - 1;
    while (odd > 0 && mh_hosts.host_of[odd - 1] == mh_hosts.host_of[mh_hosts.nranks - 1]) {
        odd--;
    }
    assert_int_equal(mh_run(odd), 0);
}

int main(int argc, char **argv)
{
    if (argc != 4 || zt_hosts_parse(&mh_hosts, argv[1], argv[2], argv[3]) != 0) {
        fprintf(stderr, "usage: %s TAG NETNS_SH LAYOUT (e.g. 2,2)\n", argv[0]);
        return 2;
    }
    setenv("HCCL_BUFFSIZE", "1", 0);
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    zt_hosts_use(&mh_hosts);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_last_rank),
        cmocka_unit_test(test_first_of_last_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
