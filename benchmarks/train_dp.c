/*
 * train_dp: data-parallel training of a small MLP over zccl, written the way
 * a training framework drives HCCL on CANN, and linked like a user's program.
 *
 * Every rank holds the whole model (same seed, so the same initial weights)
 * and a slice of each step's global batch (a fixed teacher labels synthetic
 * inputs; sample j of step t is the same on every rank and in every run).
 * The gradients live in one buffer of activated memory (reserve, physical
 * memory, map, HcclCommSetMemoryRange, HcclCommActivateCommMemory), laid out
 * last layer first and cut into buckets of about --bucket-mb. The backward
 * pass runs on the host thread; when it has written the last layer of a
 * bucket it records an event on the compute stream, makes the communication
 * stream wait for it (aclrtStreamWaitEvent) and enqueues the bucket's in-place
 * HcclAllReduce (sum) there, then goes on with the layers below while the
 * stream's worker reduces. Before the optimizer step the host synchronises the
 * communication stream; weights are updated with sum / N. The step's loss
 * rides in one extra float at the end of the last bucket.
 *
 * Reported: step time, compute time, communication time (the comm stream's
 * busy time from timing events, which includes waiting for peers, and the
 * same buckets all-reduced alone, with no compute to hide behind), the wait
 * for slower ranks (load imbalance: until the last rank's backward pass ends),
 * the exposed communication (the rest of the host's wait), and the overlap
 * two ways: the share of the comm stream's busy time that ran while the host
 * computed, and (communication alone - exposed) / communication alone, the
 * share of the communication cost the step no longer pays. On a host the
 * collectives run on the same cores as the compute, so the second can stay
 * low even when the first is high.
 * Checked (PASS/FAIL, exit status): after the last step every rank's weights
 * are bitwise identical, and the loss curve matches a 1-rank run on the full
 * batch that rank 0 computes first (relative difference <= 1e-5 every step).
 * MPI broadcasts the root info and carries the checks' results; the
 * gradients move only through zccl.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acl/acl.h"
#include "hccl/hccl.h"
#include "train_mlp.h"

#define TRAIN_TOL 1e-5

typedef struct train_opts {
    int steps;
    int batch; /* global */
    float lr;
    double bucket_mb;
    int overlap;
    int quick;
    uint64_t seed;
} train_opts_t;

typedef struct train_bucket {
    size_t first; /* floats into the gradient buffer */
    size_t count;
    int last_layer; /* the layer whose gradient completes the bucket */
    aclrtEvent ready, start, end;
} train_bucket_t;

/* One rank's training state. */
typedef struct train_ctx {
    int rank, nranks, device;
    train_opts_t o;
    aclrtStream compute, comm_stream;
    HcclComm comm;
    void *va;
    size_t va_size;
    aclrtDrvMemHandle phys;
    float *grads;
    train_bucket_t buckets[TRAIN_MAX_LAYERS];
    int nbuckets;
    int enqueued;
} train_ctx_t;

static int train_rank_for_log = -1;

static void train_die(const char *call, int code)
{
    fprintf(stderr, "train_dp: rank %d: %s failed (%d)\n", train_rank_for_log, call, code);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3);
}

#define TRAIN_CHECK(call)                                                                          \
    do {                                                                                           \
        int train_rc_ = (int)(call);                                                               \
        if (train_rc_ != 0) {                                                                      \
            train_die(#call, train_rc_);                                                           \
        }                                                                                          \
    } while (0)

static double train_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int train_parse(int argc, char **argv, train_opts_t *o)
{
    *o = (train_opts_t){
        .steps = 20, .batch = 64, .lr = 0.02f, .bucket_mb = 4.0, .overlap = 1, .seed = 20240601};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            o->quick = 1;
        } else if (strcmp(a, "--no-overlap") == 0) {
            o->overlap = 0;
        } else if (strcmp(a, "--steps") == 0 && v != NULL) {
            o->steps = atoi(v);
            i++;
        } else if (strcmp(a, "--batch") == 0 && v != NULL) {
            o->batch = atoi(v);
            i++;
        } else if (strcmp(a, "--lr") == 0 && v != NULL) {
            o->lr = strtof(v, NULL);
            i++;
        } else if (strcmp(a, "--bucket-mb") == 0 && v != NULL) {
            o->bucket_mb = strtod(v, NULL);
            i++;
        } else if (strcmp(a, "--seed") == 0 && v != NULL) {
            o->seed = strtoull(v, NULL, 10);
            i++;
        } else {
            fprintf(stderr, "usage: train_dp [--steps N] [--batch B] [--lr X] [--bucket-mb M] "
                            "[--seed S] [--quick] [--no-overlap]\n");
            return -1;
        }
    }
    if (o->steps < 1 || o->batch < 1 || !(o->lr > 0.0f) || !(o->bucket_mb > 0.0)) {
        fprintf(stderr, "train_dp: --steps, --batch, --lr and --bucket-mb must be positive\n");
        return -1;
    }
    return 0;
}

/* Buckets over the gradient layout (layer L-1 first): a bucket closes once it
   holds --bucket-mb, after a whole layer; the last one also carries the loss. */
static void train_make_buckets(train_ctx_t *c, const train_mlp_t *m)
{
    size_t cap = (size_t)(c->o.bucket_mb * 1048576.0 / sizeof(float));
    size_t first = 0;
    c->nbuckets = 0;
    for (int l = m->nlayers - 1; l >= 0; l--) {
        size_t end = l > 0 ? m->offset[l - 1] : m->nparams + 1;
        if (end - first >= cap || l == 0) {
            train_bucket_t *b = &c->buckets[c->nbuckets++];
            b->first = first;
            b->count = end - first;
            b->last_layer = l;
            first = end;
        }
    }
}

static void train_enqueue_bucket(train_ctx_t *c, train_bucket_t *b)
{
    /* The compute "kernel" that produced the gradient ran on the host, so the
       event completes at once; the pattern is the one a device program uses. */
    TRAIN_CHECK(aclrtRecordEvent(b->ready, c->compute));
    TRAIN_CHECK(aclrtStreamWaitEvent(c->comm_stream, b->ready));
    TRAIN_CHECK(aclrtRecordEvent(b->start, c->comm_stream));
    float *p = c->grads + b->first;
    TRAIN_CHECK(HcclAllReduce(p, p, b->count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, c->comm,
                              c->comm_stream));
    TRAIN_CHECK(aclrtRecordEvent(b->end, c->comm_stream));
    c->enqueued++;
}

static void train_layer_done(int layer, void *arg)
{
    train_ctx_t *c = arg;
    if (c->enqueued < c->nbuckets && c->buckets[c->enqueued].last_layer == layer) {
        train_enqueue_bucket(c, &c->buckets[c->enqueued]);
    }
}

static void train_setup(train_ctx_t *c, size_t nfloats)
{
    uint32_t ndev = 0;
    TRAIN_CHECK(aclInit(NULL));
    TRAIN_CHECK(aclrtGetDeviceCount(&ndev));
    c->device = (int)((uint32_t)c->rank % (ndev > 0 ? ndev : 1));
    TRAIN_CHECK(aclrtSetDevice(c->device));
    TRAIN_CHECK(aclrtCreateStream(&c->compute));
    TRAIN_CHECK(aclrtCreateStream(&c->comm_stream));
    HcclRootInfo root;
    memset(&root, 0, sizeof(root));
    if (c->rank == 0) {
        TRAIN_CHECK(HcclGetRootInfo(&root));
    }
    MPI_Bcast(&root, HCCL_ROOT_INFO_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
    TRAIN_CHECK(HcclCommInitRootInfo((uint32_t)c->nranks, &root, (uint32_t)c->rank, &c->comm));

    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.id = (uint32_t)c->device;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    size_t gran = 0;
    TRAIN_CHECK(
        aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, &gran));
    gran = gran > 0 ? gran : 4096;
    c->va_size = (nfloats * sizeof(float) + gran - 1) / gran * gran;
    TRAIN_CHECK(aclrtReserveMemAddress(&c->va, c->va_size, 0, NULL, 0));
    TRAIN_CHECK(aclrtMallocPhysical(&c->phys, c->va_size, &prop, 0));
    TRAIN_CHECK(aclrtMapMem(c->va, c->va_size, 0, c->phys, 0));
    TRAIN_CHECK(HcclCommSetMemoryRange(c->comm, c->va, c->va_size, 0, 0));
    TRAIN_CHECK(HcclCommActivateCommMemory(c->comm, c->va, c->va_size, 0, c->phys, 0));
    c->grads = c->va;
}

static void train_teardown(train_ctx_t *c)
{
    for (int b = 0; b < c->nbuckets; b++) {
        TRAIN_CHECK(aclrtDestroyEvent(c->buckets[b].ready));
        TRAIN_CHECK(aclrtDestroyEvent(c->buckets[b].start));
        TRAIN_CHECK(aclrtDestroyEvent(c->buckets[b].end));
    }
    TRAIN_CHECK(HcclCommDeactivateCommMemory(c->comm, c->va));
    TRAIN_CHECK(HcclCommUnsetMemoryRange(c->comm, c->va));
    TRAIN_CHECK(aclrtUnmapMem(c->va));
    TRAIN_CHECK(aclrtFreePhysical(c->phys));
    TRAIN_CHECK(aclrtReleaseMemAddress(c->va));
    TRAIN_CHECK(HcclCommDestroy(c->comm));
    TRAIN_CHECK(aclrtDestroyStream(c->comm_stream));
    TRAIN_CHECK(aclrtDestroyStream(c->compute));
    TRAIN_CHECK(aclrtResetDevice(c->device));
    TRAIN_CHECK(aclFinalize());
}

/* The 1-rank reference: the same model, the full batch, no communication. */
static int train_reference(const train_opts_t *o, int nlayers, const int *dims,
                           const train_teacher_t *teacher, double *loss)
{
    train_mlp_t m;
    size_t n = train_mlp_count(nlayers, dims);
    float *grads = malloc(n * sizeof(float));
    float *x = malloc((size_t)o->batch * (size_t)dims[0] * sizeof(float));
    float *t = malloc((size_t)o->batch * (size_t)dims[nlayers] * sizeof(float));
    if (grads == NULL || x == NULL || t == NULL ||
        train_mlp_init(&m, nlayers, dims, o->batch, grads, o->seed) != 0) {
        free(grads);
        free(x);
        free(t);
        return -1;
    }
    for (int s = 0; s < o->steps; s++) {
        train_teacher_batch(teacher, (uint64_t)s, 0, o->batch, x, t);
        loss[s] = train_mlp_forward(&m, x, t, o->batch);
        train_mlp_backward(&m, t, o->batch, NULL, NULL);
        train_mlp_update(&m, o->lr, 1.0f);
    }
    train_mlp_free(&m);
    free(grads);
    free(x);
    free(t);
    return 0;
}

/* Wait for rank 0 without spinning a core it needs (ranks may share cores). */
static void train_wait_rank0(void)
{
    MPI_Request req;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    while (!done) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
}

/* Per-step timings, seconds. */
typedef struct train_times {
    double step, compute, exposed, comm_busy;
    double bwd_end;  /* clock when this rank's backward pass ended */
    double sync_end; /* clock when its communication stream drained */
} train_times_t;

static void train_step(train_ctx_t *c, train_mlp_t *m, const train_teacher_t *teacher, int s,
                       float *x, float *t, double *loss, train_times_t *tm)
{
    int local = c->o.batch / c->nranks;
    double t0 = train_now();
    train_teacher_batch(teacher, (uint64_t)s, c->rank * local, local, x, t);
    double l = train_mlp_forward(m, x, t, local);
    c->grads[m->nparams] = (float)l; /* the loss rides in the last bucket */
    c->enqueued = 0;
    train_mlp_backward(m, t, local, c->o.overlap ? train_layer_done : NULL, c);
    while (c->enqueued < c->nbuckets) {
        train_enqueue_bucket(c, &c->buckets[c->enqueued]);
    }
    double t1 = train_now();
    TRAIN_CHECK(aclrtSynchronizeStream(c->comm_stream));
    double t2 = train_now();
    train_mlp_update(m, c->o.lr, 1.0f / (float)c->nranks);
    double t3 = train_now();
    *loss = (double)c->grads[m->nparams] / c->nranks;
    tm->step = t3 - t0;
    tm->compute = (t1 - t0) + (t3 - t2);
    tm->exposed = t2 - t1;
    tm->bwd_end = t1;
    tm->sync_end = t2;
    tm->comm_busy = 0.0;
    for (int b = 0; b < c->nbuckets; b++) {
        float ms = 0.0f;
        TRAIN_CHECK(aclrtEventElapsedTime(&ms, c->buckets[b].start, c->buckets[b].end));
        tm->comm_busy += ms * 1e-3;
    }
}

/* The buckets all-reduced alone (nothing to hide behind): seconds per step. */
static double train_comm_alone(train_ctx_t *c, int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = train_now();
        c->enqueued = 0;
        for (int b = 0; b < c->nbuckets; b++) {
            train_enqueue_bucket(c, &c->buckets[b]);
        }
        TRAIN_CHECK(aclrtSynchronizeStream(c->comm_stream));
        double t = train_now() - t0, tmax = t;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        best = tmax < best ? tmax : best;
    }
    return best;
}

static int train_run(train_ctx_t *c)
{
    static const int dims_full[] = {512, 1024, 1024, 1024, 1024, 32};
    static const int dims_quick[] = {32, 64, 64, 8};
    const int *dims = c->o.quick ? dims_quick : dims_full;
    int nlayers = c->o.quick ? 3 : 5;
    train_teacher_t teacher;
    TRAIN_CHECK(
        train_teacher_init(&teacher, dims[0], c->o.quick ? 16 : 64, dims[nlayers], c->o.seed));
    size_t nparams = train_mlp_count(nlayers, dims);
    int steps = c->o.steps;
    double *ref = calloc((size_t)steps, sizeof(double));
    double *loss = calloc((size_t)steps, sizeof(double));
    if (ref == NULL || loss == NULL) {
        train_die("calloc of the loss curves (--steps)", steps);
    }
    if (c->rank == 0) {
        double t0 = train_now();
        TRAIN_CHECK(train_reference(&c->o, nlayers, dims, &teacher, ref));
        printf("# train_dp: %zu parameters in %d layers, global batch %d, %d steps, lr %g; "
               "1-rank reference computed in %.2f s\n",
               nparams, nlayers, c->o.batch, steps, (double)c->o.lr, train_now() - t0);
    }
    train_wait_rank0();

    train_setup(c, nparams + 1);
    train_mlp_t m;
    int local = c->o.batch / c->nranks;
    TRAIN_CHECK(train_mlp_init(&m, nlayers, dims, local, c->grads, c->o.seed));
    train_make_buckets(c, &m);
    for (int b = 0; b < c->nbuckets; b++) {
        TRAIN_CHECK(aclrtCreateEvent(&c->buckets[b].ready));
        TRAIN_CHECK(aclrtCreateEventWithFlag(&c->buckets[b].start, ACL_EVENT_TIME_LINE));
        TRAIN_CHECK(aclrtCreateEventWithFlag(&c->buckets[b].end, ACL_EVENT_TIME_LINE));
    }
    float *x = malloc((size_t)local * (size_t)dims[0] * sizeof(float));
    float *t = malloc((size_t)local * (size_t)dims[nlayers] * sizeof(float));
    if (x == NULL || t == NULL) {
        train_die("malloc of the local batch (--batch / ranks)", local);
    }
    if (c->rank == 0) {
        printf("# %d ranks, %d samples each, %d buckets (%.1f MB cap), overlap %s\n", c->nranks,
               local, c->nbuckets, c->o.bucket_mb, c->o.overlap ? "on" : "off");
        printf("# %4s %12s %12s %9s %9s %9s %9s %9s %9s\n", "step", "loss", "ref loss", "rel diff",
               "step ms", "compute", "comm", "imbal.", "exposed");
    }
    train_times_t sum = {0, 0, 0, 0, 0, 0};
    double maxrel = 0.0;
    double skew_sum = 0.0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int s = 0; s < steps; s++) {
        train_times_t tm;
        train_step(c, &m, &teacher, s, x, t, &loss[s], &tm);
        /* The last bucket cannot finish before the slowest rank's backward
           pass does: waiting for that is load imbalance, not communication.
           CLOCK_MONOTONIC is one clock for every process of the host. */
        double last_bwd = tm.bwd_end;
        MPI_Allreduce(&tm.bwd_end, &last_bwd, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        double comm_wait = tm.sync_end > last_bwd ? tm.sync_end - last_bwd : 0.0;
        double skew = tm.exposed - comm_wait;
        tm.exposed = comm_wait;
        double rel = fabs(loss[s] - ref[s]) / (fabs(ref[s]) > 1e-30 ? fabs(ref[s]) : 1e-30);
        if (c->rank == 0) {
            maxrel = rel > maxrel ? rel : maxrel;
            printf("  %4d %12.7f %12.7f %9.2e %9.2f %9.2f %9.2f %9.2f %9.2f\n", s, loss[s], ref[s],
                   rel, tm.step * 1e3, tm.compute * 1e3, tm.comm_busy * 1e3, skew * 1e3,
                   tm.exposed * 1e3);
        }
        if (s > 0 || steps == 1) { /* step 0 also maps the peers' memory */
            sum.step += tm.step;
            sum.compute += tm.compute;
            sum.exposed += tm.exposed;
            sum.comm_busy += tm.comm_busy;
            skew_sum += skew;
        }
    }
    int counted = steps > 1 ? steps - 1 : 1;
    uint64_t hash = train_mlp_hash(&m);
    double alone = train_comm_alone(c, 5);

    uint64_t *hashes = calloc((size_t)c->nranks, sizeof(uint64_t));
    if (hashes == NULL) {
        train_die("calloc of the weight hashes (ranks)", c->nranks);
    }
    MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    int same = 1;
    for (int r = 1; r < c->nranks; r++) {
        same = same && hashes[r] == hashes[0];
    }
    int pass = 0;
    if (c->rank == 0) {
        double exposed = sum.exposed / counted;
        double busy = sum.comm_busy / counted;
        double hidden = busy > 0.0 ? 1.0 - exposed / busy : 0.0;
        double saved = alone > 0.0 ? (alone - exposed) / alone : 0.0;
        printf("# means over steps 1..%d (rank 0): step %.2f ms = compute %.2f ms + waiting for "
               "slower ranks %.2f ms + exposed communication %.2f ms\n",
               steps - 1, sum.step / counted * 1e3, sum.compute / counted * 1e3,
               skew_sum / counted * 1e3, exposed * 1e3);
        printf("# overlap: %.0f %% of the comm stream's busy time (%.2f ms per step) ran under "
               "compute; exposed communication is %.2f ms against %.2f ms for the same buckets "
               "alone (%.0f %% hidden)\n",
               (hidden > 0.0 ? hidden : 0.0) * 100.0, busy * 1e3, exposed * 1e3, alone * 1e3,
               (saved > 0.0 ? saved : 0.0) * 100.0);
        printf("# weights after %d steps: %s on all %d ranks (hash %016llx)\n", steps,
               same ? "bitwise identical" : "DIFFERENT", c->nranks, (unsigned long long)hashes[0]);
        printf("# loss curve vs the 1-rank full-batch run: max relative difference %.2e "
               "(limit %.0e), loss %.6f -> %.6f\n",
               maxrel, TRAIN_TOL, loss[0], loss[steps - 1]);
        pass = same && maxrel <= TRAIN_TOL;
        printf("train_dp: %s\n", pass ? "PASS" : "FAIL");
        fflush(stdout);
    }
    MPI_Bcast(&pass, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(hashes);
    free(x);
    free(t);
    free(ref);
    free(loss);
    train_mlp_free(&m);
    train_teardown(c);
    train_teacher_free(&teacher);
    return pass;
}

int main(int argc, char **argv)
{
    train_ctx_t c;
    memset(&c, 0, sizeof(c));
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.nranks);
    train_rank_for_log = c.rank;
    if (train_parse(argc, argv, &c.o) != 0) {
        MPI_Finalize();
        return 2;
    }
    if (c.o.batch % c.nranks != 0) {
        if (c.rank == 0) {
            fprintf(stderr, "train_dp: --batch %d does not split over %d ranks\n", c.o.batch,
                    c.nranks);
        }
        MPI_Finalize();
        return 2;
    }
    int pass = train_run(&c);
    MPI_Finalize();
    return pass ? 0 : 1;
}
