/*
 * The reference: the limit every table row is measured against.
 *
 * Model. On one host a collective is memory traffic plus the synchronisation
 * that orders it. The reference is the ideal kernel for the tool's
 * collective, written for this one job and run in the same processes, in the
 * same run, on the same sizes (and, in cold mode, the same rotation of
 * buffers) as zccl: no library, raw shared memory, the least flag
 * synchronisation, and the best of cached and non-temporal stores. Its time
 * is a lower bound one can actually reach, so zccl's fraction of it (the
 * %ref column, reference time / zccl time) says how much of the machine zccl
 * leaves on the table. A row above 105 % means some reference variant is not
 * ideal and must be improved here, never that the figure should be clamped.
 *
 * Memory. Each rank creates one memfd (a header page with its barrier
 * counter, two inline slots), and every rank maps every peer's memfd
 * through /proc/PID/fd (same host, same user). The data is zccl's own: when
 * the tool runs on activated memory (-z 1) the reference reads and writes
 * zccl's send and receive buffers of every rank, through the same views of
 * the peers' buffers zccl uses (zccl_comm_peer_addr), so both sides run on
 * the same physical pages. Otherwise (-z 0, aclrtMalloc buffers no peer
 * maps) each memfd also holds a send and a receive area as large as zccl's,
 * and each process sees all ranks' areas, as zccl's zero-copy path would.
 * Why the same pages: on a VM, memory allocated at different times can
 * stream at different speeds for the whole life of the process (the host
 * backs it differently); with separate buffers the side allocated first ran
 * 20-30 % slower on cold data whichever side it was (perf log 2026-12-06).
 * MPI only swaps the pids, fds and addresses and starts and times the
 * batches.
 *
 * Synchronisation. One counter per rank on its own cache line, written only
 * by that rank and only ever increased; a barrier is: fence the streaming
 * stores, store counter + 1 (release), wait until every peer's counter is at
 * least as large (acquire), spinning with pause and yielding the core after
 * a while (at once when there are more ranks than cores).
 *
 * Variants, each timed as a batch like zccl's, once per --repeat round; the
 * reference is the variant with the fastest median round, and
 * its time column is its best round. After three rounds, variants whose
 * best round is slower than 1.25 x the fastest best round are no longer
 * timed (BENCH_REF_PRUNE).
 * (Not the best round of any variant: that is the minimum of variants x
 * rounds samples against zccl's rounds, and on a loaded machine that alone
 * favours the reference by the spread of the noise.)
 *
 * %ref pairs rounds: each round runs zccl's batch and the variants' batches
 * next to each other (in turn first, the leading variant always adjacent to
 * zccl's batch), and %ref is the median over the rounds of that round's
 * reference time / zccl time, taken for each order apart and averaged
 * (bench_ref_pair). The shared machine's memory bandwidth drifts within
 * seconds, so the best round of one side and the best round of the
 * other could come from different states of the machine; a pair shares one.
 * In reuse mode every timed batch, zccl's and each variant's, starts after
 * one untimed op of its own (bench_warm), so none pays to refill the cache
 * with its data after the other's.
 *
 * Memory placement (the own data areas of -z 0). The regions are madvised
 * for transparent huge pages, as zccl's physical memory is (vmm/), so
 * neither side gets huge pages the other lacks when shmem THP is enabled
 * ("advise"), and every rank maps the regions at zccl's address colours
 * (BENCH_REF_COLOR_STEP).
 * The variants:
 *  - direct:     barrier (every input ready); the tool's kernel reads peers'
 *                inputs and writes outputs in place; barrier (all writes done,
 *                nobody reads my input any more). The least a collective that
 *                reads and writes user buffers can do.
 *  - own:        the same with the kernel form that writes only the caller's
 *                own output (one-shot AllReduce, pull AllGather, ...), for the
 *                tools whose best kernel also has a form that writes peers'
 *                outputs (BENCH_REF_SPREAD).
 *  - +nt:        either of them with streaming stores (from 64 KiB).
 *  - slot:       up to 64 KiB of input: copy it into my slot (two by parity,
 *                so the one barrier per op is enough: reusing a slot two ops
 *                later needs every peer's arrival at the op between), barrier,
 *                own-output kernel reading the slots. No exit barrier.
 * Null runs (--null 1, bench_ref_null_batch): zccl's column times the
 * reference's leading variant so far (direct until the first round has
 * chosen one), through the same calibration, warm-up and pairing as zccl.
 * %ref then compares the reference with itself, so the distance of its
 * rows from 100 % is what this host's noise, the order of the pair and the
 * choice among the variants put into a %ref alone.
 * The host probe (bench_ref_probe_ns): 256 of the barriers above, timed at
 * the start of every round; the row keeps the rounds' median and maximum.
 * At np 2 that is a line's round trip between the two ranks' cores, and the
 * host decides what it is: it varies from one probe to the next.
 * Pruning (documented so it can be revisited): streaming stores are not
 * tried under 64 KiB (they push to DRAM what the next op reads from cache),
 * nor a reduction's own-output form past 4 MiB (every rank reads all inputs)
 * or in place (peers would read an input that is being overwritten).
 */
#include "bench_ctx.h"

#include "core/hccl_test_api.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define BENCH_REF_HDR 4096
#define BENCH_REF_SLOT_BYTES ((size_t)64 << 10)
#define BENCH_REF_NT_MIN ((size_t)64 << 10)
#define BENCH_REF_OWN_MAX ((size_t)4 << 20)

static const char *const bench_ref_names[BENCH_REF_NVAR] = {"direct", "direct+nt", "own", "own+nt",
                                                            "slot"};

const char *bench_ref_name(int variant)
{
    return variant >= 0 && variant < BENCH_REF_NVAR ? bench_ref_names[variant] : "-";
}

static size_t bench_round_page(size_t v)
{
    return (v + 4095) / 4096 * 4096;
}

static atomic_uint_fast64_t *bench_ref_counter(const bench_ref_t *r, int q)
{
    return (atomic_uint_fast64_t *)(void *)r->base[q];
}

static unsigned char *bench_ref_slot(const bench_ref_t *r, int q, uint64_t epoch)
{
    return r->base[q] + 64 + (size_t)(epoch & 1) * BENCH_REF_SLOT_BYTES;
}

/* Address colours, as zccl gives its shadow windows (hccl_memwin.c): rank
 * q's region starts 37 x 2 MiB x ((q - me) mod n) above my own modulo
 * 256 MiB, so no two ranks' buffers at the same offset agree in address
 * bits 12-27, which AMD's L1 way predictor hashes. Left to the kernel, the
 * regions sit a region's size apart, where they can agree in those bits,
 * and the reference would lose to zccl by placement, not by its kernel. */
#define BENCH_REF_COLOR_SPAN ((uintptr_t)1 << 28)
#define BENCH_REF_COLOR_STEP ((uintptr_t)37 << 21)

/* Map size bytes of fd at an address congruent to at modulo the colour span;
 * MAP_FAILED when that fails. */
static void *bench_ref_map(int fd, size_t size, uintptr_t at)
{
    size_t span = size + BENCH_REF_COLOR_SPAN;
    char *w = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (w == MAP_FAILED) {
        return MAP_FAILED;
    }
    size_t lead = (at - (uintptr_t)w) % BENCH_REF_COLOR_SPAN;
    if (lead > 0) {
        munmap(w, lead);
    }
    munmap(w + lead + size, span - lead - size);
    return mmap(w + lead, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
}

/* zccl's send and receive buffers of every rank, as this process sees them
 * (zccl_comm_peer_addr), when they are activated memory mapped from every
 * peer: 1 on every rank, or 0 on every rank (then the data lives in the
 * regions' own send and receive areas). */
static int bench_ref_views(bench_ctx_t *ctx)
{
    bench_ref_t *r = &ctx->ref;
    size_t n = (size_t)ctx->nranks;
    uint64_t mine[2] = {(uint64_t)(uintptr_t)ctx->sendbuf, (uint64_t)(uintptr_t)ctx->recvbuf};
    uint64_t *all = malloc(2 * sizeof(uint64_t) * n);
    r->zsend = calloc(n, sizeof(*r->zsend));
    r->zrecv = calloc(n, sizeof(*r->zrecv));
    if (all == NULL || r->zsend == NULL || r->zrecv == NULL) {
        bench_die(ctx, "malloc (reference views)", 0, "out of memory");
    }
    MPI_Allgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, MPI_COMM_WORLD);
    int ok = ctx->a.zero_copy;
    for (size_t q = 0; ok && q < n; q++) {
        r->zsend[q] = zccl_comm_peer_addr(ctx->comm, (uint32_t)q, (void *)(uintptr_t)all[2 * q],
                                          ctx->send_cap);
        r->zrecv[q] = zccl_comm_peer_addr(ctx->comm, (uint32_t)q, (void *)(uintptr_t)all[2 * q + 1],
                                          ctx->recv_cap);
        ok = r->zsend[q] != NULL && r->zrecv[q] != NULL;
    }
    free(all);
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        free(r->zsend);
        free(r->zrecv);
        r->zsend = NULL;
        r->zrecv = NULL;
    }
    return all_ok;
}

/* Map every rank's memfd; 0 on every rank or -1 on every rank (told why). */
int bench_ref_open(bench_ctx_t *ctx)
{
    bench_ref_t *r = &ctx->ref;
    int views = bench_ref_views(ctx);
    r->send_off = BENCH_REF_HDR + 2 * BENCH_REF_SLOT_BYTES;
    r->recv_off = r->send_off + (views ? 0 : bench_round_page(ctx->send_cap));
    r->region = r->recv_off + (views ? 0 : bench_round_page(ctx->recv_cap));
    r->base = calloc((size_t)ctx->nranks, sizeof(*r->base));
    r->in = calloc((size_t)ctx->nranks, sizeof(*r->in));
    r->out = calloc((size_t)ctx->nranks, sizeof(*r->out));
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    r->yield = cores > 0 && ctx->nranks > cores;
    int me[2] = {(int)getpid(), -1};
    int ok = r->base != NULL && r->in != NULL && r->out != NULL;
    if (ok) {
        me[1] = memfd_create("zccl-bench-ref", MFD_CLOEXEC);
        ok = me[1] >= 0 && ftruncate(me[1], (off_t)r->region) == 0;
    }
    int *all = malloc(2 * sizeof(int) * (size_t)ctx->nranks);
    if (all == NULL) {
        bench_die(ctx, "malloc (reference fd table)", 0, "out of memory");
    }
    MPI_Allgather(me, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
    for (int k = 0; ok && k < ctx->nranks; k++) {
        int q = (ctx->rank + k) % ctx->nranks; /* mine first: the colours count from it */
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", all[2 * q], all[2 * q + 1]);
        int fd = q == ctx->rank ? me[1] : open(path, O_RDWR | O_CLOEXEC);
        uintptr_t at =
            k == 0 ? 0 : (uintptr_t)r->base[ctx->rank] + (uintptr_t)k * BENCH_REF_COLOR_STEP;
        void *p = fd < 0 ? MAP_FAILED : bench_ref_map(fd, r->region, at);
        if (p == MAP_FAILED) {
            fprintf(stderr, "%s: rank %d: reference: cannot map rank %d's memory (%s): %s\n",
                    ctx->coll->tool, ctx->rank, q, path, strerror(errno));
            ok = 0;
        } else {
            r->base[q] = p;
            (void)madvise(p, r->region, MADV_HUGEPAGE);
        }
        if (fd >= 0 && q != ctx->rank) {
            close(fd);
        }
    }
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    free(all);
    if (me[1] >= 0) {
        close(me[1]); /* every peer has mapped it (or given up) */
    }
    if (!all_ok) {
        bench_ref_close(ctx);
        return -1;
    }
    r->ok = 1;
    /* Touch every page of my region now, so no page fault is timed. */
    memset(r->base[ctx->rank] + BENCH_REF_HDR, 0, r->region - BENCH_REF_HDR);
    if (views) {
        MPI_Barrier(MPI_COMM_WORLD);
        return 0; /* the data is zccl's, filled already */
    }
    bench_op_t op = {.rank = ctx->rank,
                     .nranks = ctx->nranks,
                     .dtype = ctx->a.dtype,
                     .redop = ctx->a.redop,
                     .esize = bench_dtype_size(ctx->a.dtype)};
    op.send = r->base[ctx->rank] + r->send_off;
    op.send_elems = ctx->send_cap / op.esize;
    bench_fill_send(&op);
    MPI_Barrier(MPI_COMM_WORLD);
    return 0;
}

void bench_ref_close(bench_ctx_t *ctx)
{
    bench_ref_t *r = &ctx->ref;
    for (int q = 0; r->base != NULL && q < ctx->nranks; q++) {
        if (r->base[q] != NULL) {
            munmap(r->base[q], r->region);
        }
    }
    free(r->base);
    free(r->in);
    free(r->out);
    free(r->zsend);
    free(r->zrecv);
    r->zsend = NULL;
    r->zrecv = NULL;
    r->base = NULL;
    r->in = NULL;
    r->out = NULL;
    r->ok = 0;
}

static void bench_ref_relax(const bench_ref_t *r, unsigned *spins)
{
    if (r->yield || ++*spins > 4096) {
        sched_yield();
        return;
    }
#if defined(__x86_64__)
    _mm_pause();
#endif
}

static void bench_ref_barrier(bench_ctx_t *ctx)
{
    bench_ref_t *r = &ctx->ref;
#if defined(__x86_64__)
    _mm_sfence(); /* streaming stores are not ordered by the release store */
#endif
    uint64_t k = ++r->epoch;
    atomic_store_explicit(bench_ref_counter(r, ctx->rank), k, memory_order_release);
    for (int q = 0; q < ctx->nranks; q++) {
        unsigned spins = 0;
        while (atomic_load_explicit(bench_ref_counter(r, q), memory_order_acquire) < k) {
            bench_ref_relax(r, &spins);
        }
    }
}

/* Barriers per probe: a mean over many round trips, and short enough that
 * every round can afford one. */
#define BENCH_REF_PROBE_BARRIERS 256

double bench_ref_probe_ns(bench_ctx_t *ctx)
{
    if (!ctx->ref.ok) {
        return 0.0;
    }
    bench_ref_barrier(ctx); /* start together */
    double t0 = bench_now();
    for (int i = 0; i < BENCH_REF_PROBE_BARRIERS; i++) {
        bench_ref_barrier(ctx);
    }
    return (bench_now() - t0) / BENCH_REF_PROBE_BARRIERS * 1e9;
}

/* Where the reference finds rank q's data at p, a pointer into zccl's send
 * or receive buffer: zccl's own buffer as seen here, or the same offset in
 * q's region. */
static unsigned char *bench_ref_at(const bench_ctx_t *ctx, int q, const void *p)
{
    const bench_ref_t *r = &ctx->ref;
    const char *c = p;
    const char *s = ctx->sendbuf;
    int in_send = c >= s && c < s + ctx->send_cap;
    size_t off = (size_t)(c - (in_send ? s : (const char *)ctx->recvbuf));
    if (r->zsend != NULL) {
        return (in_send ? r->zsend[q] : r->zrecv[q]) + off;
    }
    return r->base[q] + (in_send ? r->send_off : r->recv_off) + off;
}

/* in[q] / out[q] of ring entry j in the ref regions, every rank's shape. */
static void bench_ref_ptrs(bench_ctx_t *ctx, const bench_ring_t *ring, size_t j, bench_op_t *mine)
{
    bench_ref_t *r = &ctx->ref;
    for (int q = 0; q < ctx->nranks; q++) {
        bench_op_t op;
        bench_ring_op(ctx, ring, j, q, &op);
        r->in[q] = bench_ref_at(ctx, q, op.send);
        r->out[q] = bench_ref_at(ctx, q, op.recv);
        if (q == ctx->rank) {
            *mine = op;
            mine->send = (void *)r->in[q];
            mine->recv = r->out[q];
        }
    }
}

/* One op of `variant` on ring entry j. */
static void bench_ref_op(bench_ctx_t *ctx, const bench_ring_t *ring, size_t j, int variant)
{
    bench_ref_t *r = &ctx->ref;
    bench_op_t op;
    bench_ref_ptrs(ctx, ring, j, &op);
    bench_ref_args_t args = {.op = &op,
                             .in = (const void *const *)r->in,
                             .out = r->out,
                             .own_only = variant >= BENCH_REF_OWN,
                             .nt = variant == BENCH_REF_DIRECT_NT || variant == BENCH_REF_OWN_NT};
    if (variant == BENCH_REF_SLOT) {
        uint64_t next = r->epoch + 1;
        memcpy(bench_ref_slot(r, ctx->rank, next), op.send, op.send_elems * op.esize);
        bench_ref_barrier(ctx);
        for (int q = 0; q < ctx->nranks; q++) {
            r->in[q] = bench_ref_slot(r, q, next);
        }
        ctx->coll->ref(&args);
        return;
    }
    bench_ref_barrier(ctx);
    ctx->coll->ref(&args);
    bench_ref_barrier(ctx);
}

/* Does `variant` apply to this ring's op? The same answer on every rank. */
static int bench_ref_applies(bench_ctx_t *ctx, const bench_ring_t *ring, int variant)
{
    bench_op_t op;
    bench_ring_op(ctx, ring, 0, ctx->rank, &op);
    size_t big = ring->bytes;
    int spread = (ctx->coll->flags & BENCH_REF_SPREAD) != 0;
    int inplace_any = 0;
    for (int q = 0; q < ctx->nranks; q++) {
        bench_op_t oq;
        bench_ring_op(ctx, ring, 0, q, &oq);
        inplace_any |= oq.send == oq.recv;
    }
    /* A reduction's own-output form reads every input on every rank: useless
       past 4 MiB, and wrong in place (peers read the input I overwrite). */
    int reduces = (ctx->coll->flags & BENCH_REDUCES) != 0;
    int own_ok = !reduces || (big <= BENCH_REF_OWN_MAX && !inplace_any);
    switch (variant) {
    case BENCH_REF_DIRECT:
        return 1;
    case BENCH_REF_DIRECT_NT:
        return big >= BENCH_REF_NT_MIN;
    case BENCH_REF_OWN:
        return spread && own_ok;
    case BENCH_REF_OWN_NT:
        return spread && own_ok && big >= BENCH_REF_NT_MIN;
    case BENCH_REF_SLOT:
        return op.send_elems * op.esize <= BENCH_REF_SLOT_BYTES;
    default:
        return 0;
    }
}

double bench_ref_batch(bench_ctx_t *ctx, const bench_ring_t *ring, int iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    for (int i = 0; i < iters; i++) {
        bench_ref_op(ctx, ring, (size_t)i % ring->n, ctx->ref.variant);
    }
    double t = bench_now() - t0;
    double m = t;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

/* One checked op of the best variant: #wrong over all ranks. */
static uint64_t bench_ref_check(bench_ctx_t *ctx, const bench_ring_t *ring)
{
    bench_op_t op;
    bench_ref_ptrs(ctx, ring, 0, &op);
    bench_poison_recv(&op);
    bench_fill_send(&op);
    MPI_Barrier(MPI_COMM_WORLD);
    bench_ref_op(ctx, ring, 0, ctx->ref.variant);
    bench_ref_barrier(ctx); /* the slot variant has no exit barrier */
    uint64_t wrong = bench_check_recv(ctx->coll, &op);
    uint64_t sum = 0;
    MPI_Allreduce(&wrong, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

int bench_ref_usable(const bench_ctx_t *ctx)
{
    const bench_coll_t *c = ctx->coll;
    if (c->ref == NULL || ctx->nranks > BENCH_REF_MAX_RANKS) {
        return 0;
    }
    return !(c->flags & BENCH_REDUCES) || bench_ref_reducible(ctx->a.dtype, ctx->a.redop);
}

/* After this many rounds a variant whose best round is slower than
 * BENCH_REF_PRUNE x the fastest best round stops being timed: the rounds
 * left go faster, and the variant that stays sits next to zccl's batch (see
 * bench_ref_measure). Best rounds, not totals: one burst of other load in
 * one of three rounds is enough to lift a total past the bar. */
#define BENCH_REF_PRUNE_ROUNDS 3
#define BENCH_REF_PRUNE 1.25

static int bench_cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x;
    double b = *(const double *)y;
    return a < b ? -1 : a > b;
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(v[0]), bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* Median of variant v's rounds 0..round. */
static double bench_ref_median_round(const bench_ref_t *r, int v, int round)
{
    double t[BENCH_MAX_REPEAT];
    memcpy(t, r->round_us[v], sizeof(t[0]) * (size_t)(round + 1));
    return bench_median(t, round + 1);
}

/* One timed batch of variant v in round `round`. */
static void bench_ref_time(bench_ctx_t *ctx, const bench_ring_t *ring, int v, int round)
{
    bench_ref_t *r = &ctx->ref;
    r->variant = v;
    bench_warm(ctx, ring, bench_ref_batch);
    double t = bench_ref_batch(ctx, ring, r->iters[v]) / r->iters[v] * 1e6;
    r->round_us[v][round] = t;
    r->best_us[v] = round == 0 || t < r->best_us[v] ? t : r->best_us[v];
}

void bench_ref_measure(bench_ctx_t *ctx, const bench_ring_t *ring, bench_row_t *row, int round,
                       int after_zccl)
{
    bench_ref_t *r = &ctx->ref;
    if (!r->ok) {
        return;
    }
    if (round == 0) {
        row->ref_variant = -1;
        for (int v = 0; v < BENCH_REF_NVAR; v++) {
            r->iters[v] = 0;
            r->pruned[v] = 0;
            if (bench_ref_applies(ctx, ring, v)) {
                r->variant = v;
                r->iters[v] = bench_calibrate(ctx, ring, bench_ref_batch);
            }
        }
    }
    /* The leading variant runs next to zccl's batch: first after it, last
       before it. */
    int lead = row->ref_variant;
    if (after_zccl && lead >= 0) {
        bench_ref_time(ctx, ring, lead, round);
    }
    for (int v = 0; v < BENCH_REF_NVAR; v++) {
        if (v != lead && r->iters[v] != 0 && !r->pruned[v]) {
            bench_ref_time(ctx, ring, v, round);
        }
    }
    if (!after_zccl && lead >= 0) {
        bench_ref_time(ctx, ring, lead, round);
    }
    /* The variant with the fastest median round so far (a burst of other
       load in one round moves a median less than a total); its best round
       is the reference, so it has as many samples as zccl's best (see the
       top). */
    row->ref_variant = -1;
    double lead_us = 0.0;
    for (int v = 0; v < BENCH_REF_NVAR; v++) {
        if (r->iters[v] == 0 || r->pruned[v]) {
            continue;
        }
        double m = bench_ref_median_round(r, v, round);
        if (row->ref_variant < 0 || m < lead_us) {
            row->ref_variant = v;
            lead_us = m;
        }
    }
    if (row->ref_variant >= 0 && round + 1 == BENCH_REF_PRUNE_ROUNDS) {
        double base = r->best_us[row->ref_variant];
        for (int v = 0; v < BENCH_REF_NVAR; v++) {
            base = r->iters[v] != 0 && r->best_us[v] < base ? r->best_us[v] : base;
        }
        for (int v = 0; v < BENCH_REF_NVAR; v++) {
            r->pruned[v] = r->best_us[v] > BENCH_REF_PRUNE * base;
        }
    }
    row->ref_us = row->ref_variant >= 0 ? r->best_us[row->ref_variant] : 0.0;
    r->lead = row->ref_variant;
}

double bench_ref_null_batch(bench_ctx_t *ctx, const bench_ring_t *ring, int iters)
{
    /* every other batch of the reference sets the variant it runs */
    ctx->ref.variant = ctx->ref.lead >= 0 ? ctx->ref.lead : BENCH_REF_DIRECT;
    return bench_ref_batch(ctx, ring, iters);
}

void bench_ref_check_row(bench_ctx_t *ctx, const bench_ring_t *ring, bench_row_t *row)
{
    if (!ctx->ref.ok || row->ref_variant < 0 || !ctx->a.check) {
        return;
    }
    ctx->ref.variant = row->ref_variant;
    row->ref_wrong = bench_ref_check(ctx, ring);
    ctx->wrong += row->ref_wrong;
}

/*
 * %ref: the median of each order's rounds, averaged. Even rounds run zccl's
 * batch first and the reference right after it, odd rounds the other way
 * round (bench_measure), and whichever runs second may inherit a cost of the
 * first (the cache, the scheduler's placement). One median over all rounds
 * would come from the order that has more rounds (with an odd --repeat),
 * so a cost of order would show as a bias.
 */
void bench_ref_pair(const bench_ctx_t *ctx, const double *zccl_us, int rounds, bench_row_t *row)
{
    row->ref_pct = -1.0;
    int v = row->ref_variant;
    if (!ctx->ref.ok || v < 0 || rounds < 1) {
        return;
    }
    double pct[2][BENCH_MAX_REPEAT];
    int n[2] = {0, 0};
    for (int i = 0; i < rounds; i++) {
        pct[i % 2][n[i % 2]++] =
            zccl_us[i] > 0.0 ? ctx->ref.round_us[v][i] / zccl_us[i] * 100.0 : 0.0;
    }
    double even = bench_median(pct[0], n[0]);
    row->ref_pct = n[1] > 0 ? (even + bench_median(pct[1], n[1])) / 2.0 : even;
}
