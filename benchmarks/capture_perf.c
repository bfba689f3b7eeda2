/*
 * capture_perf: the per-op cost of a captured sequence of collectives
 * replayed with aclmdlRIExecuteAsync, against the same ops issued one by one.
 *
 *   mpirun -np N capture_perf [-n ops per sequence] [-i iterations] [-w warm-up]
 *                             [-c count] [-z 1|0] [-p trace dir]
 *
 * Each rank issues sequences of n AllReduces of count floats (default 2:
 * 8 bytes) on its stream, one aclrtSynchronizeStream per sequence; the time of
 * a mode is the slowest rank's, divided by iterations x n. -z 1 (default) puts
 * the buffers in activated memory (zero-copy; small ops take the inline path),
 * -z 0 in aclrtMalloc memory (buffered path). -p DIR runs both modes with
 * profiling on (aclprofStart .. Stop around them), to show what recording
 * costs. The last replay's result is checked element by element.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_prof.h"
#include "hccl/hccl.h"

#define CP_CHECK(what, ok, code)                                                                   \
    do {                                                                                           \
        if (!(ok)) {                                                                               \
            fprintf(stderr, "capture_perf: %s failed (%d)\n", what, (int)(code));                  \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)
#define CP_ACL(call) CP_CHECK(#call, (cp_e = (call)) == ACL_SUCCESS, cp_e)
#define CP_HCCL(call) CP_CHECK(#call, (cp_h = (call)) == HCCL_SUCCESS, cp_h)

static aclError cp_e;
static HcclResult cp_h;

typedef struct {
    int ops, iters, warmup, zero_copy;
    uint64_t count;
    const char *prof_dir;
} cp_args_t;

static double cp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void cp_usage(void)
{
    fprintf(stderr, "usage: capture_perf [-n ops] [-i iters] [-w warmup] [-c count] [-z 1|0] "
                    "[-p trace_dir]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static cp_args_t cp_parse(int argc, char **argv)
{
    cp_args_t a = {16, 200, 20, 1, 2, NULL};
    int c;
    while ((c = getopt(argc, argv, "n:i:w:c:z:p:h")) != -1) {
        switch (c) {
        case 'n':
            a.ops = atoi(optarg);
            break;
        case 'i':
            a.iters = atoi(optarg);
            break;
        case 'w':
            a.warmup = atoi(optarg);
            break;
        case 'c':
            a.count = strtoull(optarg, NULL, 0);
            break;
        case 'z':
            a.zero_copy = atoi(optarg);
            break;
        case 'p':
            a.prof_dir = optarg;
            break;
        default:
            cp_usage();
        }
    }
    if (a.ops < 1 || a.iters < 1 || a.warmup < 0 || a.count < 1) {
        cp_usage();
    }
    return a;
}

/* Buffers of 2 * bytes: activated memory (zero-copy) or aclrtMalloc. */
static float *cp_buffers(HcclComm comm, int dev, size_t bytes, int zero_copy)
{
    void *p = NULL;
    if (!zero_copy) {
        CP_ACL(aclrtMalloc(&p, 2 * bytes, ACL_MEM_MALLOC_HUGE_FIRST));
        return p;
    }
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.id = (uint32_t)dev;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    size_t g = 0;
    CP_ACL(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, &g));
    size_t size = (2 * bytes + g - 1) / g * g;
    aclrtDrvMemHandle h = NULL;
    CP_ACL(aclrtReserveMemAddress(&p, size, 0, NULL, 0));
    CP_ACL(aclrtMallocPhysical(&h, size, &prop, 0));
    CP_ACL(aclrtMapMem(p, size, 0, h, 0));
    CP_HCCL(HcclCommSetMemoryRange(comm, p, size, 0, 0));
    CP_HCCL(HcclCommActivateCommMemory(comm, p, size, 0, h, 0));
    return p;
}

/* Seconds per op of `iters` sequences (the slowest rank). */
static double cp_time(aclmdlRI model, const cp_args_t *a, float *buf, HcclComm comm, aclrtStream s)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = 0;
    for (int it = -a->warmup; it < a->iters; it++) {
        if (it == 0) {
            CP_ACL(aclrtSynchronizeStream(s));
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = cp_now();
        }
        if (model != NULL) {
            CP_ACL(aclmdlRIExecuteAsync(model, s));
        } else {
            for (int j = 0; j < a->ops; j++) {
                CP_HCCL(HcclAllReduce(buf, buf + a->count, a->count, HCCL_DATA_TYPE_FP32,
                                      HCCL_REDUCE_SUM, comm, s));
            }
        }
        CP_ACL(aclrtSynchronizeStream(s));
    }
    double t = (cp_now() - t0) / ((double)a->iters * a->ops);
    double worst = 0;
    MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    int nranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    cp_args_t a = cp_parse(argc, argv);
    CP_ACL(aclInit(NULL));
    uint32_t ndev = 0;
    CP_ACL(aclrtGetDeviceCount(&ndev));
    int dev = rank % (int)ndev;
    CP_ACL(aclrtSetDevice(dev));
    aclrtStream s = NULL;
    CP_ACL(aclrtCreateStream(&s));
    HcclRootInfo root;
    if (rank == 0) {
        CP_HCCL(HcclGetRootInfo(&root));
    }
    MPI_Bcast(&root, HCCL_ROOT_INFO_BYTES, MPI_CHAR, 0, MPI_COMM_WORLD);
    HcclComm comm = NULL;
    CP_HCCL(HcclCommInitRootInfo((uint32_t)nranks, &root, (uint32_t)rank, &comm));
    float *buf = cp_buffers(comm, dev, a.count * sizeof(float), a.zero_copy);
    for (uint64_t i = 0; i < a.count; i++) {
        buf[i] = (float)(rank + 1);
    }
    aclprofConfig *cfg = NULL;
    if (a.prof_dir != NULL) {
        uint32_t d = (uint32_t)dev;
        CP_ACL(aclprofInit(a.prof_dir, strlen(a.prof_dir)));
        cfg = aclprofCreateConfig(&d, 1, ACL_AICORE_NONE, NULL, ACL_PROF_HCCL_TRACE);
        CP_CHECK("aclprofCreateConfig", cfg != NULL, 0);
        CP_ACL(aclprofStart(cfg));
    }
    aclmdlRI model = NULL;
    CP_ACL(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    for (int j = 0; j < a.ops; j++) {
        CP_HCCL(HcclAllReduce(buf, buf + a.count, a.count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM,
                              comm, s));
    }
    CP_ACL(aclmdlRICaptureEnd(s, &model));
    double one = cp_time(NULL, &a, buf, comm, s);
    double replay = cp_time(model, &a, buf, comm, s);
    float want = (float)(nranks * (nranks + 1) / 2);
    int bad = 0;
    for (uint64_t i = 0; i < a.count; i++) {
        bad += buf[a.count + i] != want;
    }
    if (cfg != NULL) {
        CP_ACL(aclprofStop(cfg));
        CP_ACL(aclprofDestroyConfig(cfg));
        CP_ACL(aclprofFinalize());
    }
    int wrong = 0;
    MPI_Allreduce(&bad, &wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# capture_perf: %d ranks, AllReduce of %llu floats (%llu B), %s memory, "
               "%d ops per sequence, %d sequences, profiling %s\n",
               nranks, (unsigned long long)a.count, (unsigned long long)(a.count * 4),
               a.zero_copy ? "activated" : "aclrtMalloc", a.ops, a.iters,
               cfg != NULL ? "on" : "off");
        printf("%-22s %12s\n", "mode", "us/op");
        printf("%-22s %12.3f\n", "one by one", one * 1e6);
        printf("%-22s %12.3f\n", "replayed (aclmdlRI)", replay * 1e6);
        printf("# #wrong %d\n", wrong);
    }
    CP_ACL(aclmdlRIDestroy(model));
    CP_HCCL(HcclCommDestroy(comm));
    CP_ACL(aclrtDestroyStream(s));
    MPI_Finalize();
    return wrong != 0;
}
