/*
 * Profiling and path statistics, with two thread ranks of one process:
 * aclprofInit / CreateConfig / Start, then on each rank an AllReduce on the
 * inline path (32 B on activated memory), one zero-copy (64 KiB), one
 * buffered (plain memory), a stream copy and a Send/Recv (zero-copy: the
 * peers share the process); aclprofStop must
 * write one trace file per rank that json-c parses, with exactly one event
 * per op, in issue order on the rank's stream, each naming its op, rank,
 * communicator, dtype, count, bytes and path. A second start / stop with no
 * op writes nothing. Every bad call returns its exact code. ZCCL_PRINT_STATS
 * makes each rank print its stats line at HcclCommDestroy (checked to the
 * letter against the comm's counters), and HcclGetCommConfigCapability is
 * CANN's count, not a mask.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_prof.h"
#include "core/hccl_test_api.h"
#include "zt_check.h"

#define NRANKS 2
#define ZC_BYTES 65536
#define PLAIN_COUNT 1000
#define P2P_COUNT 100
#define COPY_BYTES 4096

static char g_dir[256];

typedef struct {
    uint64_t zc, inl, buf, staged;
    char name[COMM_NAME_MAX_LENGTH];
} rank_stats_t;

static rank_stats_t g_stats[NRANKS];

static int rank_ops(int rank, int nranks, const HcclRootInfo *root, void *arg)
{
    (void)arg;
    zt_env_t env;
    int fails = 0;
    if (zt_env_open(&env, rank, nranks, root, NULL) != 0 || zt_env_arena(&env, ZC_BYTES) != 0) {
        return 1;
    }
    float *zs = env.zc.va;
    float *zr = (float *)((char *)env.zc.va + env.zc.block);
    float *ps = (float *)(void *)env.plain;
    float *pr = (float *)(void *)(env.plain + env.half);
    for (size_t i = 0; i < ZC_BYTES / sizeof(float); i++) {
        zs[i] = (float)(rank + 1);
    }
    for (size_t i = 0; i < PLAIN_COUNT; i++) {
        ps[i] = (float)(rank + 1);
    }
    /* msproftx: a range around the ops and a mark in it */
    void *stamp = aclprofCreateStamp();
    char msg[32];
    snprintf(msg, sizeof(msg), "ops of rank %d", rank);
    ZT_EXPECT(&env, stamp != NULL, "stamp");
    ZT_EXPECT(&env, aclprofSetStampTraceMessage(stamp, msg, (uint32_t)strlen(msg)) == ACL_SUCCESS,
              "message");
    ZT_EXPECT(&env, aclprofPush(stamp) == ACL_SUCCESS && aclprofMark(stamp) == ACL_SUCCESS,
              "push, mark");
    ZT_EXPECT(&env, aclprofMarkEx(msg, strlen(msg), env.stream) == ACL_SUCCESS, "mark ex");
    ZT_EXPECT_RC(
        &env, HcclAllReduce(zs, zr, 8, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, env.comm, env.stream),
        HCCL_SUCCESS, "inline AllReduce");
    ZT_EXPECT_RC(&env,
                 HcclAllReduce(zs, zr, ZC_BYTES / sizeof(float), HCCL_DATA_TYPE_FP32,
                               HCCL_REDUCE_SUM, env.comm, env.stream),
                 HCCL_SUCCESS, "zero-copy AllReduce");
    ZT_EXPECT_RC(&env,
                 HcclAllReduce(ps, pr, PLAIN_COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, env.comm,
                               env.stream),
                 HCCL_SUCCESS, "buffered AllReduce");
    ZT_EXPECT(&env,
              aclrtMemcpyAsync(ps, COPY_BYTES, pr, COPY_BYTES, ACL_MEMCPY_DEVICE_TO_DEVICE,
                               env.stream) == ACL_SUCCESS,
              "memcpy async");
    if (rank == 0) {
        ZT_EXPECT_RC(&env, HcclSend(pr, P2P_COUNT, HCCL_DATA_TYPE_INT32, 1, env.comm, env.stream),
                     HCCL_SUCCESS, "send");
    } else {
        ZT_EXPECT_RC(&env, HcclRecv(ps, P2P_COUNT, HCCL_DATA_TYPE_INT32, 0, env.comm, env.stream),
                     HCCL_SUCCESS, "recv");
    }
    ZT_EXPECT(&env, aclrtSynchronizeStream(env.stream) == ACL_SUCCESS, "sync");
    ZT_EXPECT(&env, aclprofPop() == ACL_SUCCESS && aclprofPop() == ACL_ERROR_INVALID_PARAM, "pop");
    aclprofDestroyStamp(stamp);
    ZT_EXPECT(&env, aclprofMark(stamp) == ACL_ERROR_INVALID_PARAM, "mark of a freed stamp");
    ZT_EXPECT(&env, zr[5] == 3.0f && pr[PLAIN_COUNT - 1] == 3.0f, "results %f %f", zr[5],
              pr[PLAIN_COUNT - 1]);
    rank_stats_t *st = &g_stats[rank];
    st->zc = zccl_comm_zero_copy_ops(env.comm);
    st->buf = zccl_comm_buffered_ops(env.comm);
    st->staged = zccl_comm_staged_bytes(env.comm);
    ZT_EXPECT_RC(&env, HcclGetCommName(env.comm, st->name), HCCL_SUCCESS, "comm name");
    return zt_env_close(&env) != 0 ? fails + 1 : fails;
}

/* The trace file of rank r of this process's run, parsed; NULL if missing. */
static json_object *load_trace(int rank, unsigned run)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/zccl-rank%d-pid%d-%u.trace.json", g_dir, rank, (int)getpid(),
             run);
    if (access(path, R_OK) != 0) {
        return NULL;
    }
    json_object *o = json_object_from_file(path);
    assert_non_null(o);
    return o;
}

static json_object *arg_get(json_object *ev, const char *key)
{
    json_object *args = NULL;
    json_object *v = NULL;
    assert_true(json_object_object_get_ex(ev, "args", &args));
    assert_true(json_object_object_get_ex(args, key, &v));
    return v;
}

static const char *arg_str(json_object *ev, const char *key)
{
    return json_object_get_string(arg_get(ev, key));
}

static int64_t arg_int(json_object *ev, const char *key)
{
    return json_object_get_int64(arg_get(ev, key));
}

static int64_t field_int(json_object *ev, const char *key)
{
    json_object *v = NULL;
    assert_true(json_object_object_get_ex(ev, key, &v));
    return json_object_get_int64(v);
}

/* One rank's file: exactly the five ops, in issue order, with their facts. */
static void check_rank_trace(int rank)
{
    json_object *root = load_trace(rank, 0);
    assert_non_null(root);
    json_object *events = NULL;
    assert_true(json_object_object_get_ex(root, "traceEvents", &events));
    static const struct {
        const char *op;
        const char *path;
        const char *dtype;
        int64_t count, bytes;
    } want[] = {
        {"HcclAllReduce", "inline", "fp32", 8, 32},
        {"HcclAllReduce", "zero-copy", "fp32", ZC_BYTES / 4, ZC_BYTES},
        {"HcclAllReduce", "buffered", "fp32", PLAIN_COUNT, PLAIN_COUNT * 4},
        {"aclrtMemcpyAsync", "copy", "none", COPY_BYTES, COPY_BYTES},
        /* peers in one process read each other's buffers directly */
        {"?", "zero-copy", "int32", P2P_COUNT, P2P_COUNT * 4},
    };
    size_t k = 0;
    int tx = 0;
    double last_ts = 0;
    int64_t tid = -1;
    for (size_t i = 0; i < json_object_array_length(events); i++) {
        json_object *ev = json_object_array_get_idx(events, i);
        json_object *ph = NULL;
        assert_true(json_object_object_get_ex(ev, "ph", &ph));
        json_object *cat = NULL;
        if (json_object_object_get_ex(ev, "cat", &cat) &&
            strcmp(json_object_get_string(cat), "msproftx") == 0) {
            char want_msg[32];
            snprintf(want_msg, sizeof(want_msg), "ops of rank %d", rank);
            assert_string_equal(json_object_get_string(json_object_object_get(ev, "name")),
                                want_msg);
            tx += strcmp(json_object_get_string(ph), "X") == 0 ? 1 : 100; /* range, mark */
            continue;
        }
        if (strcmp(json_object_get_string(ph), "X") != 0) {
            continue;
        }
        assert_true(k < sizeof(want) / sizeof(want[0]));
        json_object *name = NULL;
        json_object *ts = NULL;
        assert_true(json_object_object_get_ex(ev, "name", &name));
        assert_true(json_object_object_get_ex(ev, "ts", &ts));
        const char *op = k == 4 ? (rank == 0 ? "HcclSend" : "HcclRecv") : want[k].op;
        assert_string_equal(json_object_get_string(name), op);
        assert_string_equal(arg_str(ev, "path"), want[k].path);
        assert_string_equal(arg_str(ev, "dtype"), want[k].dtype);
        assert_int_equal(arg_int(ev, "count"), want[k].count);
        assert_int_equal(arg_int(ev, "bytes"), want[k].bytes);
        assert_int_equal(arg_int(ev, "result"), 0);
        assert_int_equal(field_int(ev, "pid"), rank);
        if (k != 3) {
            assert_int_equal(arg_int(ev, "rank"), rank);
            assert_string_equal(arg_str(ev, "comm"), g_stats[rank].name);
        }
        /* one stream: one thread, events in issue order, issue <= start <= end */
        assert_true(tid < 0 || tid == field_int(ev, "tid"));
        tid = field_int(ev, "tid");
        assert_true(json_object_get_double(ts) >= last_ts);
        last_ts = json_object_get_double(ts);
        assert_true(json_object_get_double(arg_get(ev, "enqueue_us")) <= last_ts);
        k++;
    }
    assert_int_equal(k, sizeof(want) / sizeof(want[0]));
    assert_int_equal(tx, 201); /* one range and two marks */
    json_object_put(root);
}

/* rm -r of the test's directory and its parent (both ours). */
static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            char path[512];
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    rmdir(dir);
    char parent[256];
    snprintf(parent, sizeof(parent), "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash != NULL) {
        *slash = '\0';
        rmdir(parent);
    }
}

static void test_trace(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof(g_dir), "/tmp/zt-prof-test-%d/sub", (int)getpid());
    assert_int_equal(aclprofInit(NULL, 4), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofInit(g_dir, strlen(g_dir) + 3), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofFinalize(), ACL_ERROR_PROF_NOT_RUN);
    assert_int_equal(aclprofInit(g_dir, strlen(g_dir)), ACL_SUCCESS);
    assert_int_equal(aclprofInit(g_dir, strlen(g_dir)), ACL_ERROR_REPEAT_INITIALIZE);

    uint32_t devs[NRANKS] = {0, 1};
    uint32_t bad_dev[1] = {100000};
    uint32_t dup_dev[2] = {1, 1};
    uint64_t sw =
        ACL_PROF_HCCL_TRACE | ACL_PROF_TASK_TIME | ACL_PROF_RUNTIME_API | ACL_PROF_MSPROFTX;
    assert_null(aclprofCreateConfig(bad_dev, 1, ACL_AICORE_NONE, NULL, sw));
    assert_null(aclprofCreateConfig(dup_dev, 2, ACL_AICORE_NONE, NULL, sw));
    assert_null(aclprofCreateConfig(devs, 0, ACL_AICORE_NONE, NULL, sw));
    assert_null(aclprofCreateConfig(devs, NRANKS, (aclprofAicoreMetrics)42, NULL, sw));
    assert_null(aclprofCreateConfig(devs, NRANKS, ACL_AICORE_NONE, NULL, 1ULL << 40));
    aclprofConfig *cfg = aclprofCreateConfig(devs, NRANKS, ACL_AICORE_PIPE_UTILIZATION, NULL, sw);
    assert_non_null(cfg);
    assert_int_equal(aclprofStart(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofStop(cfg), ACL_ERROR_PROF_NOT_RUN);
    assert_int_equal(aclprofStart(cfg), ACL_SUCCESS);
    assert_int_equal(aclprofStart(cfg), ACL_ERROR_PROF_ALREADY_RUN);

    assert_int_equal(zt_launch_threads(NRANKS, rank_ops, NULL), 0);
    assert_int_equal(aclprofStop(cfg), ACL_SUCCESS);
    for (int r = 0; r < NRANKS; r++) {
        check_rank_trace(r);
    }
    /* a run with no op writes no file */
    assert_int_equal(aclprofStart(cfg), ACL_SUCCESS);
    assert_int_equal(aclprofStop(cfg), ACL_SUCCESS);
    assert_null(load_trace(0, 1));
    assert_int_equal(aclprofDestroyConfig(cfg), ACL_SUCCESS);
    assert_int_equal(aclprofDestroyConfig(cfg), ACL_ERROR_INVALID_PARAM);
    /* msproftx bad input; marks while nothing records are accepted */
    uint32_t id = 0;
    void *st = aclprofCreateStamp();
    assert_non_null(st);
    assert_int_equal(aclprofSetStampTraceMessage(st, NULL, 3), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofSetStampTraceMessage(st, "m", 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofSetStampTraceMessage(&id, "m", 1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofRangeStart(st, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofRangeStart(&id, &id), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofRangeStart(st, &id), ACL_SUCCESS);
    assert_int_equal(aclprofRangeStop(id), ACL_SUCCESS);
    assert_int_equal(aclprofRangeStop(id), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofRangeStop(0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofMark(st), ACL_SUCCESS);
    assert_int_equal(aclprofPush(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofMarkEx(NULL, 3, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofMarkEx("m", 0, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclprofMarkEx("m", 1, (aclrtStream)&id), ACL_ERROR_INVALID_PARAM);
    aclprofDestroyStamp(st);
    assert_int_equal(aclprofFinalize(), ACL_SUCCESS);
    assert_int_equal(aclprofFinalize(), ACL_ERROR_PROF_NOT_RUN);
    remove_tree(g_dir);
}

/* The stats lines printed at destroy (stdout went to the file named g_stats_file). */
static char g_stats_file[256];

static void test_stats_lines(void **state)
{
    (void)state;
    fflush(stdout);
    FILE *f = fopen(g_stats_file, "r");
    assert_non_null(f);
    char line[512];
    int seen[NRANKS] = {0};
    while (fgets(line, sizeof(line), f) != NULL) {
        int r;
        char name[256];
        unsigned long long z, i, b, s, caller;
        if (sscanf(line,
                   "zccl stats: rank %d comm %255[^:]: %llu zero-copy ops, %llu inline ops, "
                   "%llu buffered ops, %llu bytes staged; %llu ops finished on the caller's "
                   "thread",
                   &r, name, &z, &i, &b, &s, &caller) != 7) {
            continue;
        }
        assert_true(r >= 0 && r < NRANKS);
        /* which ops finish on the caller's thread depends on when the peers
           post; never more than the ops */
        assert_true(caller <= z + i + b);
        char want[512];
        /* zero-copy AllReduce and Send/Recv; inline AllReduce; buffered AllReduce */
        snprintf(want, sizeof(want),
                 "zccl stats: rank %d comm %s: 2 zero-copy ops, 1 inline ops, 1 buffered ops, "
                 "%llu bytes staged; %llu ops finished on the caller's thread\n",
                 r, g_stats[r].name, (unsigned long long)g_stats[r].staged, caller);
        assert_string_equal(line, want);
        assert_int_equal(g_stats[r].zc, 3); /* the counter includes inline ops */
        assert_int_equal(g_stats[r].buf, 1);
        seen[r]++;
    }
    fclose(f);
    for (int r = 0; r < NRANKS; r++) {
        assert_int_equal(seen[r], 1);
    }
}

static void test_config_capability(void **state)
{
    (void)state;
    uint32_t cap = HcclGetCommConfigCapability();
    assert_int_equal(cap, HCCL_COMM_CONFIG_RESERVED);
    assert_true(cap > HCCL_COMM_CONFIG_COMM_NAME && cap > HCCL_COMM_CONFIG_EXEC_TIMEOUT);
}

int main(void)
{
    setenv("ZCCL_PRINT_STATS", "1", 1);
    /* The stats lines go to stdout: collect them in a file, keep cmocka's output on stderr. */
    snprintf(g_stats_file, sizeof(g_stats_file), "/tmp/zt-prof-stats-%d.txt", (int)getpid());
    if (freopen(g_stats_file, "w", stdout) == NULL) {
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    cmocka_set_message_output(CM_OUTPUT_STDOUT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace),
        cmocka_unit_test(test_stats_lines),
        cmocka_unit_test(test_config_capability),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fflush(stdout);
    FILE *f = fopen(g_stats_file, "r");
    char line[512];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        fputs(line, stderr); /* what the run printed, for the ctest log */
    }
    if (f != NULL) {
        fclose(f);
    }
    unlink(g_stats_file);
    return rc;
}
