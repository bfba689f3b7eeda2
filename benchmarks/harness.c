/*
 * The harness's set up and tear down: options, MPI + ACL + communicator
 * bring-up in the CANN order, the buffers (activated zero-copy memory or
 * plain aclrtMalloc, as large as the biggest op or, with --cold 1, the cold
 * pool), the reference's shared memory; bench_run.c does the sweep.
 *
 * Options (nccl-tests' and HCCL's test tool's, which agree where they
 * overlap): -b min bytes, -e max bytes, -f factor, -i step bytes, -n iters,
 * -w warm-up iters, -c check, -d type, -o reduction, -r root, -z zero copy,
 * -p ranks expected (HCCL's), plus -m MPI baseline, -I in place,
 * --blocking 0|1, --cold 0|1, --repeat R, --format nccl|hccl, --csv FILE, --rss,
 * --budget MS, --null 0|1, --version, --help (the last two need no mpirun).
 */
#include "bench_ctx.h"

#define ZCCL_BENCH_MAX(a, b) ((a) > (b) ? (a) : (b))

#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zc/llc.h"

void bench_die(const bench_ctx_t *ctx, const char *call, int code, const char *text)
{
    fprintf(stderr, "%s: rank %d: %s failed: %d (%s)\n", ctx->coll->tool, ctx->rank, call, code,
            text != NULL ? text : "");
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3);
}

/* "64K", "1M", "2G": binary units, as nccl-tests reads them. */
static int bench_parse_bytes(const char *s, size_t *out)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) {
        return -1;
    }
    unsigned long long mult = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mult = 1ull << 10;
        end++;
        break;
    case 'm':
    case 'M':
        mult = 1ull << 20;
        end++;
        break;
    case 'g':
    case 'G':
        mult = 1ull << 30;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'B' || *end == 'b') {
        end++;
    }
    if (*end != '\0' || v > SIZE_MAX / mult) {
        return -1;
    }
    *out = (size_t)(v * mult);
    return 0;
}

static int bench_parse_int(const char *s, int lo, int hi, int *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

static void bench_usage(FILE *f, const char *tool)
{
    fprintf(f,
            "usage: mpirun -np N %s [options]\n"
            "  -b BYTES   smallest size (K/M/G suffixes; default 8)\n"
            "  -e BYTES   largest size (default 64M)\n"
            "  -f FACTOR  size multiplication factor (default 2)\n"
            "  -i BYTES   additive size step instead of -f\n"
            "  -n ITERS   timed iterations per size (default 20)\n"
            "  -w ITERS   warm-up iterations per size (default 5)\n"
            "  -c 0|1     check results and count #wrong (default 1)\n"
            "  -d TYPE    int8 uint8 int16 uint16 int32 uint32 int64 uint64 half float\n"
            "             double bfloat16 (or HCCL's fp16 fp32 fp64 bfp16; default float)\n"
            "  -o OP      sum prod max min (default sum)\n"
            "  -r ROOT    root rank of rooted collectives (default 0)\n"
            "  -z 0|1     1: activated zero-copy memory, 0: aclrtMalloc buffers (default 1)\n"
            "  -m 0|1     also time the matching MPI collective (default 0)\n"
            "  -I 0|1     in place (default 0)\n"
            "  -p N       number of ranks expected (HCCL test tool; checked)\n"
            "  --format nccl|hccl  table layout (default nccl)\n"
            "  --csv FILE          also write the rows as CSV (rank 0)\n"
            "  --rss               print resident memory around every timed batch\n"
            "  --budget MS         cut iterations so a batch lasts about MS ms (min 3)\n"
            "  --blocking 0|1      1: synchronize the stream after every op (op + sync latency)\n"
            "  --cold 0|1          1: rotate through buffers past the last-level cache, so no\n"
            "                      op finds its data cached (0: reuse the same buffers)\n"
            "  --repeat R          R interleaved timed rounds of zccl, the reference and MPI\n"
            "                      per size (at most 64), the best time of each kept; %%ref is\n"
            "                      the median of the rounds' reference / zccl ratios, those\n"
            "                      with zccl first and those with the reference first\n"
            "                      apart, averaged (default 1)\n"
            "  --null 0|1          1: a null run: zccl's column times the reference's leading\n"
            "                      variant instead of zccl, so %%ref shows the host's noise\n"
            "                      alone (needs the reference on activated memory, -z 1)\n"
            "  --version           print the version and exit\n"
            "  --help              print this text and exit\n"
            "Every row also times the reference (the ideal kernel for the collective on raw\n"
            "shared memory, best of its variants) and prints %%ref = its time / zccl's.\n",
            tool);
}

/* "-n" or "--blocking": how the user spelled option c. */
static const char *bench_opt_name(const struct option *longopts, int c)
{
    static char buf[48];
    for (const struct option *o = longopts; o->name != NULL; o++) {
        if (o->val == c) {
            snprintf(buf, sizeof(buf), "--%s", o->name);
            return buf;
        }
    }
    snprintf(buf, sizeof(buf), "-%c", c);
    return buf;
}

static int bench_parse_args(int argc, char **argv, const bench_coll_t *coll, bench_args_t *a)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'F'},
        {"csv", required_argument, NULL, 'C'},
        {"rss", no_argument, NULL, 'R'},
        {"budget", required_argument, NULL, 'B'},
        {"blocking", required_argument, NULL, 'K'},
        {"cold", required_argument, NULL, 'L'},
        {"repeat", required_argument, NULL, 'P'},
        {"null", required_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *a = (bench_args_t){.min_bytes = 8,
                        .max_bytes = 64u << 20,
                        .factor = 2.0,
                        .iters = 20,
                        .warmup = 5,
                        .check = 1,
                        .dtype = HCCL_DATA_TYPE_FP32,
                        .redop = HCCL_REDUCE_SUM,
                        .zero_copy = 1,
                        .repeat = 1};
    int c;
    int fset = 0;
    while ((c = getopt_long(argc, argv, "b:e:f:i:n:w:c:d:o:r:z:m:I:p:h", longopts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'b':
            bad = bench_parse_bytes(optarg, &a->min_bytes);
            break;
        case 'e':
            bad = bench_parse_bytes(optarg, &a->max_bytes);
            break;
        case 'f':
            a->factor = strtod(optarg, NULL);
            bad = !(a->factor >= 1.0);
            fset = 1;
            break;
        case 'i':
            bad = bench_parse_bytes(optarg, &a->step_bytes);
            break;
        case 'n':
            bad = bench_parse_int(optarg, 1, INT_MAX, &a->iters);
            break;
        case 'w':
            bad = bench_parse_int(optarg, 0, INT_MAX, &a->warmup);
            break;
        case 'c':
            bad = bench_parse_int(optarg, 0, 1, &a->check);
            break;
        case 'd':
            a->dtype = bench_dtype_parse(optarg);
            bad = a->dtype < 0;
            break;
        case 'o':
            a->redop = bench_redop_parse(optarg);
            bad = a->redop < 0;
            break;
        case 'r':
            bad = bench_parse_int(optarg, 0, INT_MAX, &a->root);
            break;
        case 'z':
            bad = bench_parse_int(optarg, 0, 1, &a->zero_copy);
            break;
        case 'm':
            bad = bench_parse_int(optarg, 0, 1, &a->mpi);
            break;
        case 'I':
            bad = bench_parse_int(optarg, 0, 1, &a->inplace);
            break;
        case 'p':
            bad = bench_parse_int(optarg, 1, INT_MAX, &a->npus);
            break;
        case 'F':
            bad = strcmp(optarg, "nccl") != 0 && strcmp(optarg, "hccl") != 0;
            a->hccl_format = strcmp(optarg, "hccl") == 0;
            break;
        case 'C':
            a->csv = optarg;
            break;
        case 'R':
            a->rss = 1;
            break;
        case 'K':
            bad = bench_parse_int(optarg, 0, 1, &a->blocking);
            break;
        case 'L':
            bad = bench_parse_int(optarg, 0, 1, &a->cold);
            break;
        case 'P':
            bad = bench_parse_int(optarg, 1, BENCH_MAX_REPEAT, &a->repeat);
            break;
        case 'N':
            bad = bench_parse_int(optarg, 0, 1, &a->null_ref);
            break;
        case 'B': {
            int ms = 0;
            bad = bench_parse_int(optarg, 1, INT_MAX, &ms);
            a->budget_s = ms / 1000.0;
            break;
        }
        default:
            return -1;
        }
        if (bad) {
            fprintf(stderr, "%s: bad value '%s' for option %s\n", coll->tool, optarg,
                    bench_opt_name(longopts, c));
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", coll->tool, argv[optind]);
        return -1;
    }
    if (a->step_bytes > 0 && !fset) {
        a->factor = 1.0; /* -i alone: additive steps */
    }
    if (a->min_bytes > a->max_bytes) {
        fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", coll->tool, a->min_bytes,
                a->max_bytes);
        return -1;
    }
    if (a->inplace && (coll->flags & BENCH_NO_INPLACE)) {
        fprintf(stderr, "%s: %s has no in-place form (-I 1)\n", coll->tool, coll->name);
        return -1;
    }
    return 0;
}

/* Buffers for the largest size: one reservation holding send then receive,
   backed by one physical allocation, declared to the communicator and
   activated, so every op of the sweep is zero-copy eligible. */
static void bench_alloc_zero_copy(bench_ctx_t *ctx)
{
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.id = (uint32_t)ctx->device;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    size_t gran = 0;
    BENCH_ACL(ctx, aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
                                                    &gran));
    if (gran == 0) {
        bench_die(ctx, "aclrtMemGetAllocationGranularity (granularity 0)", 0, "no granularity");
    }
    size_t send_round = (ctx->send_cap + gran - 1) / gran * gran;
    size_t recv_round = (ctx->recv_cap + gran - 1) / gran * gran;
    ctx->va_size = send_round + recv_round;
    BENCH_ACL(ctx, aclrtReserveMemAddress(&ctx->va, ctx->va_size, 0, NULL, 0));
    BENCH_ACL(ctx, aclrtMallocPhysical(&ctx->phys, ctx->va_size, &prop, 0));
    BENCH_ACL(ctx, aclrtMapMem(ctx->va, ctx->va_size, 0, ctx->phys, 0));
    ctx->mapped = 1;
    BENCH_HCCL(ctx, HcclCommSetMemoryRange(ctx->comm, ctx->va, ctx->va_size, 0, 0));
    ctx->range_set = 1;
    BENCH_HCCL(ctx, HcclCommActivateCommMemory(ctx->comm, ctx->va, ctx->va_size, 0, ctx->phys, 0));
    ctx->activated = 1;
    ctx->sendbuf = ctx->va;
    ctx->recvbuf = (char *)ctx->va + send_round;
}

/* The last-level cache in bytes as the kernel reports it, before the cap per
   CPU the library applies (a VM's report can be the host's whole cache, and
   a cold pool must outgrow whatever part of it this program can reach);
   32 MiB when unknown. Each rank reads the cache
   of the CPU it runs on, and they need not agree (hybrid cores, odd VMs), but
   the cold pools' sizes and the warm-up ops must be alike on every rank: the
   largest answer counts. */
static size_t bench_llc_bytes(void)
{
    uint64_t llc = zc_llc_reported_bytes();
    if (llc == 0) {
        long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        llc = l3 > 0 ? (uint64_t)l3 : (uint64_t)32 << 20;
    }
    uint64_t all = llc;
    MPI_Allreduce(&llc, &all, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return all < SIZE_MAX ? (size_t)all : SIZE_MAX;
}

static void bench_alloc(bench_ctx_t *ctx)
{
    bench_op_t op = {.rank = ctx->rank,
                     .nranks = ctx->nranks,
                     .dtype = ctx->a.dtype,
                     .redop = ctx->a.redop,
                     .root = (uint32_t)ctx->a.root,
                     .esize = bench_dtype_size(ctx->a.dtype)};
    ctx->coll->shape(&op, ctx->a.max_bytes / op.esize, NULL, NULL, 0);
    ctx->send_span = op.send_elems * op.esize;
    ctx->recv_span = op.recv_elems * op.esize;
    ctx->llc_bytes = bench_llc_bytes();
    /* Cold mode's pools: twice the last-level cache per buffer. */
    size_t floor = ctx->a.cold ? 2 * ctx->llc_bytes : op.esize;
    ctx->send_cap = ZCCL_BENCH_MAX(ctx->send_span, floor);
    ctx->recv_cap = ZCCL_BENCH_MAX(ctx->recv_span, floor);
    if (ctx->a.zero_copy) {
        bench_alloc_zero_copy(ctx);
    } else {
        BENCH_ACL(ctx, aclrtMalloc(&ctx->sendbuf, ctx->send_cap, ACL_MEM_MALLOC_HUGE_FIRST));
        BENCH_ACL(ctx, aclrtMalloc(&ctx->recvbuf, ctx->recv_cap, ACL_MEM_MALLOC_HUGE_FIRST));
    }
    /* Touch every page now (valid numbers in send, zeros in recv), so neither
       page faults nor denormals are timed. */
    op.send = ctx->sendbuf;
    op.send_elems = ctx->send_cap / op.esize;
    bench_fill_send(&op);
    memset(ctx->recvbuf, 0, ctx->recv_cap);
}

static void bench_free(bench_ctx_t *ctx)
{
    if (!ctx->a.zero_copy) {
        BENCH_ACL(ctx, aclrtFree(ctx->sendbuf));
        BENCH_ACL(ctx, aclrtFree(ctx->recvbuf));
        return;
    }
    if (ctx->activated) {
        BENCH_HCCL(ctx, HcclCommDeactivateCommMemory(ctx->comm, ctx->va));
    }
    if (ctx->range_set) {
        BENCH_HCCL(ctx, HcclCommUnsetMemoryRange(ctx->comm, ctx->va));
    }
    if (ctx->mapped) {
        BENCH_ACL(ctx, aclrtUnmapMem(ctx->va));
    }
    BENCH_ACL(ctx, aclrtFreePhysical(ctx->phys));
    BENCH_ACL(ctx, aclrtReleaseMemAddress(ctx->va));
}

static void bench_setup(bench_ctx_t *ctx)
{
    uint32_t ndev = 0;
    BENCH_ACL(ctx, aclInit(NULL));
    BENCH_ACL(ctx, aclrtGetDeviceCount(&ndev));
    if (ndev == 0) {
        bench_die(ctx, "aclrtGetDeviceCount (0 devices)", 0, "no device");
    }
    ctx->device = (int)((uint32_t)ctx->rank % ndev);
    BENCH_ACL(ctx, aclrtSetDevice(ctx->device));
    BENCH_ACL(ctx, aclrtCreateStream(&ctx->stream));
    HcclRootInfo root;
    memset(&root, 0, sizeof(root));
    if (ctx->rank == 0) {
        BENCH_HCCL(ctx, HcclGetRootInfo(&root));
    }
    MPI_Bcast(&root, HCCL_ROOT_INFO_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
    BENCH_HCCL(ctx,
               HcclCommInitRootInfo((uint32_t)ctx->nranks, &root, (uint32_t)ctx->rank, &ctx->comm));
}

static void bench_teardown(bench_ctx_t *ctx)
{
    bench_ref_close(ctx);
    bench_free(ctx);
    BENCH_HCCL(ctx, HcclCommDestroy(ctx->comm));
    BENCH_ACL(ctx, aclrtDestroyStream(ctx->stream));
    BENCH_ACL(ctx, aclrtResetDevice(ctx->device));
    BENCH_ACL(ctx, aclFinalize());
}

int bench_main(int argc, char **argv, const bench_coll_t *coll)
{
    bench_ctx_t ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.coll = coll;
    /* --help and --version answer without MPI (and without mpirun). */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            bench_usage(stdout, coll->tool);
            return 0;
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("%s (zccl) %s\n", coll->tool, ZCCL_BENCH_VERSION);
            return 0;
        }
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &ctx.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ctx.nranks);
    if (bench_parse_args(argc, argv, coll, &ctx.a) != 0) {
        if (ctx.rank == 0) {
            bench_usage(stderr, coll->tool);
        }
        MPI_Finalize();
        return 2;
    }
    if (ctx.a.root >= ctx.nranks) {
        if (ctx.rank == 0) {
            fprintf(stderr, "%s: root %d is not a rank of %d\n", coll->tool, ctx.a.root,
                    ctx.nranks);
        }
        MPI_Finalize();
        return 2;
    }
    if (ctx.a.npus != 0 && ctx.a.npus != ctx.nranks && ctx.rank == 0) {
        fprintf(stderr, "%s: -p %d given but %d ranks run; using %d\n", coll->tool, ctx.a.npus,
                ctx.nranks, ctx.nranks);
    }
    if (ctx.a.mpi && bench_mpi_dtype(ctx.a.dtype) == MPI_DATATYPE_NULL) {
        if (ctx.rank == 0) {
            fprintf(stderr, "%s: MPI has no %s type: no MPI baseline\n", coll->tool,
                    bench_dtype_name(ctx.a.dtype));
        }
        ctx.a.mpi = 0;
    }
    if (ctx.a.mpi && ctx.a.max_bytes / bench_dtype_size(ctx.a.dtype) > INT_MAX) {
        if (ctx.rank == 0) {
            fprintf(stderr, "%s: -e %zu is past MPI's int counts: no MPI baseline\n", coll->tool,
                    ctx.a.max_bytes);
        }
        ctx.a.mpi = 0;
    }
    bench_setup(&ctx);
    bench_alloc(&ctx);
    if (bench_ref_usable(&ctx) && bench_ref_open(&ctx) != 0 && ctx.rank == 0) {
        fprintf(stderr, "%s: no reference this run (its shared memory could not be mapped)\n",
                coll->tool);
    }
    if (ctx.a.null_ref && !(ctx.ref.ok && ctx.a.zero_copy)) {
        if (ctx.rank == 0) {
            fprintf(stderr, "%s: --null 1 needs the reference on activated memory (-z 1): %s\n",
                    coll->tool, ctx.ref.ok ? "-z 0 given" : "no reference this run");
        }
        bench_teardown(&ctx);
        MPI_Finalize();
        return 2;
    }
    bench_run_sweep(&ctx);
    bench_teardown(&ctx);
    int status = ctx.wrong != 0 ? 1 : 0;
    MPI_Finalize();
    return status;
}
