/*
 * The size sweep and the tables.
 *
 * Timing. Queued mode (the default, --blocking 0): ops are enqueued back to
 * back on one stream and the stream is synchronised once per batch. Blocking
 * mode (--blocking 1, nccl-tests' blocking mode): the stream is synchronised
 * after every op, so a row is the latency of op + synchronize. An
 * MPI_Barrier starts each batch on every rank together; the batch lasts until
 * the slowest rank is done (MPI_Allreduce MAX), and time per op is that over
 * the iteration count. Before the sweep a few ops at the largest and the
 * smallest size absorb first-use costs; each size then starts with its own
 * warm-up batch, and with --budget the warm-up also fixes how many
 * iterations fit the budget (see bench_calibrate()).
 *
 * Buffers. Reuse mode (the default): every op of a size uses the same
 * buffers, so whatever fits the caches is cache-resident, as in nccl-tests.
 * Cold mode (--cold 1): the buffers are a pool of at least twice the last-
 * level cache per buffer and rank, and op i of a batch uses entry i mod n of
 * a ring of n non-overlapping buffer sets cut from it (n = pool / size), so
 * an op's data was last touched n ops ago and is not cache-resident (how
 * shared-memory collective papers measure). zccl, MPI and the reference
 * rotate through the same ring.
 *
 * For each size: warm-ups of zccl, the MPI collective (-m 1, on the same
 * buffers) and the reference's variants (bench_ref.c), which also fix each
 * one's iterations; then --repeat rounds (default 1) of one timed batch of
 * each, interleaved, keeping each one's best; then one checked run of zccl
 * and of the best reference variant (send refilled, receive poisoned, every
 * element compared). Rank 0 prints nccl-tests' columns (or
 * HCCL's test tool's with --format hccl) plus the reference time and %ref
 * (reference time / zccl time), and the CSV rows; the footer gives the
 * average busbw, #wrong, the lowest %ref from 1 MiB up, the growth of the
 * resident memory (outside Open MPI's shared memory) over zccl's timed
 * batches and how many ops took which path.
 */
#include "bench_ctx.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hccl_test_api.h"

static double bench_allmax(double v)
{
    double m = v;
    MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

static void bench_die_op(const bench_ctx_t *ctx, const bench_op_t *op, const char *what, int code,
                         const char *text)
{
    char call[192];
    snprintf(call, sizeof(call), "%s %s(count %llu, %s, %s, root %u)", what, ctx->coll->name,
             (unsigned long long)op->count, bench_dtype_name(op->dtype),
             bench_redop_name(op->redop), op->root);
    bench_die(ctx, call, code, text);
}

static void bench_zccl_sync(bench_ctx_t *ctx, const bench_op_t *op)
{
    aclError e = aclrtSynchronizeStream(ctx->stream);
    if (e != ACL_SUCCESS) {
        HcclResult async = HCCL_SUCCESS;
        (void)HcclGetCommAsyncError(ctx->comm, &async);
        bench_die_op(ctx, op, "aclrtSynchronizeStream after", (int)e,
                     async != HCCL_SUCCESS ? HcclGetErrorString(async) : "aclError");
    }
}

static void bench_zccl_launch(bench_ctx_t *ctx, const bench_op_t *op)
{
    HcclResult r = ctx->coll->run(op, ctx->comm, ctx->stream);
    if (r != HCCL_SUCCESS) {
        bench_die_op(ctx, op, "launching", (int)r, HcclGetErrorString(r));
    }
    if (ctx->a.blocking) {
        bench_zccl_sync(ctx, op);
    }
}

static void bench_mpi_launch(bench_ctx_t *ctx, const bench_op_t *op)
{
    int rc = ctx->coll->run_mpi(op, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        bench_die_op(ctx, op, ctx->coll->mpi_name, rc, "MPI error");
    }
}

/* `iters` ops of the ring through launch after a common start; returns the
   start time (the last op launched is left in *last). */
static double bench_loop(bench_ctx_t *ctx, const bench_ring_t *ring, int iters,
                         void (*launch)(bench_ctx_t *, const bench_op_t *), bench_op_t *last)
{
    bench_ring_op(ctx, ring, 0, ctx->rank, last);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    for (int i = 0; i < iters; i++) {
        if (ring->n > 1) {
            bench_ring_op(ctx, ring, (size_t)i % ring->n, ctx->rank, last);
        }
        launch(ctx, last);
    }
    return t0;
}

/* Launch `iters` ops back to back and synchronise once (or after every op
   with --blocking 1); seconds, max over ranks. */
static double bench_zccl_batch(bench_ctx_t *ctx, const bench_ring_t *ring, int iters)
{
    if (ctx->a.null_ref) {
        return bench_ref_null_batch(ctx, ring, iters);
    }
    bench_op_t op;
    double t0 = bench_loop(ctx, ring, iters, bench_zccl_launch, &op);
    if (!ctx->a.blocking) {
        bench_zccl_sync(ctx, &op);
    }
    double t = bench_now() - t0;
    ctx->zccl_ops += (uint64_t)iters;
    return bench_allmax(t);
}

static double bench_mpi_batch(bench_ctx_t *ctx, const bench_ring_t *ring, int iters)
{
    bench_op_t op;
    double t0 = bench_loop(ctx, ring, iters, bench_mpi_launch, &op);
    return bench_allmax(bench_now() - t0);
}

/* Fewest ops of a budget-cut batch. At the largest sizes three ops already
 * last long enough to time: more would buy no precision, only fewer rounds
 * in the same time (the rounds are what the paired %ref needs). */
#define BENCH_MIN_ITERS 3

/*
 * Warm up, and choose the timed batch's iterations: -n, or with --budget as
 * many as fit the budget (at least BENCH_MIN_ITERS). A batch has a fixed cost (barrier,
 * waking the stream, one synchronisation) that a short warm-up would charge
 * to every op, so while a batch lasts under an eighth of the budget the
 * warm-up grows fourfold and is timed again. The last size is timed twice
 * and the faster counts: one batch the scheduler stalled (two ranks a core)
 * would otherwise cut the row to a fifth of its ops, so each batch's fixed
 * cost and the library's own first-use work weigh five times as much in
 * every round (perf log 2026-12-07, late). Every rank sees the same agreed
 * times, so every rank picks the same count.
 */
int bench_calibrate(bench_ctx_t *ctx, const bench_ring_t *ring, bench_batch_fn batch)
{
    int k = ctx->a.warmup;
    if (k <= 0) {
        return ctx->a.iters;
    }
    double t = batch(ctx, ring, k);
    if (ctx->a.budget_s <= 0.0) {
        return ctx->a.iters;
    }
    while (t < ctx->a.budget_s / 8.0 && k < ctx->a.iters) {
        k = k > ctx->a.iters / 4 ? ctx->a.iters : k * 4;
        t = batch(ctx, ring, k);
    }
    double again = batch(ctx, ring, k);
    t = again < t ? again : t;
    double fit = t > 0.0 ? ctx->a.budget_s / (t / k) : (double)ctx->a.iters;
    int n = fit < (double)ctx->a.iters ? (int)fit : ctx->a.iters;
    return n < BENCH_MIN_ITERS ? (ctx->a.iters < BENCH_MIN_ITERS ? ctx->a.iters : BENCH_MIN_ITERS)
                               : n;
}

/*
 * Reuse mode measures each side in its steady state, its data cached as far
 * as it fits. But zccl's batch, the reference's variants (their own memfd
 * regions) and MPI's (its own internal buffers) follow one another, and the
 * batch that comes after another side's finds the cache holding that side's
 * data: it would pay the refill inside its timing, and as zccl runs after the
 * reference in odd rounds and the reference after zccl in even ones, %ref
 * would lean to whichever order has more rounds. One untimed op first puts
 * every side's data back. Ops past the last-level cache keep nothing cached,
 * and cold mode is cold by design: neither gets the extra op.
 */
void bench_warm(bench_ctx_t *ctx, const bench_ring_t *ring, bench_batch_fn batch)
{
    if (!ctx->a.cold && ring->bytes <= ctx->llc_bytes) {
        (void)batch(ctx, ring, 1);
    }
}

static void bench_op_shape(const bench_ctx_t *ctx, bench_op_t *op, size_t bytes, int rank,
                           int inplace, void *sendbuf, void *recvbuf)
{
    memset(op, 0, sizeof(*op));
    op->rank = rank;
    op->nranks = ctx->nranks;
    op->dtype = ctx->a.dtype;
    op->redop = (ctx->coll->flags & BENCH_REDUCES) ? ctx->a.redop : HCCL_REDUCE_SUM;
    op->root = (uint32_t)ctx->a.root;
    op->esize = bench_dtype_size(ctx->a.dtype);
    ctx->coll->shape(op, bytes / op->esize, sendbuf, recvbuf, inplace);
}

/* Distance between ring entries: whole pages from one page up, whole cache
   lines below, so no two entries share a line. */
static size_t bench_ring_stride(size_t bytes)
{
    size_t unit = bytes >= 4096 ? 4096 : 64;
    size_t s = (bytes + unit - 1) / unit * unit;
    return s > 0 ? s : unit;
}

void bench_ring_init(const bench_ctx_t *ctx, bench_ring_t *ring, size_t bytes, int inplace)
{
    bench_op_t op;
    bench_op_shape(ctx, &op, bytes, ctx->rank, inplace, ctx->sendbuf, ctx->recvbuf);
    memset(ring, 0, sizeof(*ring));
    ring->bytes = bytes;
    ring->inplace = inplace;
    ring->n = 1;
    if (!ctx->a.cold) {
        return;
    }
    ring->sstride = bench_ring_stride(op.send_elems * op.esize);
    ring->rstride = bench_ring_stride(op.recv_elems * op.esize);
    size_t ns = ctx->send_cap / ring->sstride;
    size_t nr = ctx->recv_cap / ring->rstride;
    ring->n = ns < nr ? ns : nr;
    if (ring->n == 0) {
        ring->n = 1;
    }
}

void bench_ring_op(const bench_ctx_t *ctx, const bench_ring_t *ring, size_t j, int rank,
                   bench_op_t *op)
{
    j %= ring->n;
    bench_op_shape(ctx, op, ring->bytes, rank, ring->inplace,
                   (char *)ctx->sendbuf + j * ring->sstride,
                   (char *)ctx->recvbuf + j * ring->rstride);
}

/* before/after: resident kB outside and inside Open MPI's shared memory. */
static void bench_measure_rss(bench_ctx_t *ctx, const long before[2], const long after[2],
                              size_t size, int iters)
{
    long own = after[0] - before[0];
    if (ctx->nsizes == 0) {
        ctx->rss_first_kb = own;
        ctx->rss_first_mpi_kb = after[1] - before[1];
    } else {
        ctx->rss_growth_kb += own;
    }
    if (ctx->a.rss) {
        long r[3] = {before[0], after[0], own}, m[3];
        MPI_Reduce(r, m, 3, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
        if (ctx->rank == 0) {
            printf("# rss: size %zu: %ld kB before, %ld kB after %d ops, %+ld kB (max over "
                   "ranks; outside Open MPI's shared memory)\n",
                   size, m[0], m[1], iters, m[2]);
        }
    }
}

static void bench_measure(bench_ctx_t *ctx, size_t bytes, bench_row_t *row)
{
    const bench_coll_t *coll = ctx->coll;
    bench_ring_t ring;
    bench_ring_init(ctx, &ring, bytes, ctx->a.inplace);
    bench_op_t op;
    bench_ring_op(ctx, &ring, 0, ctx->rank, &op);
    size_t elems = op.send_elems > op.recv_elems ? op.send_elems : op.recv_elems;
    memset(row, 0, sizeof(*row));
    row->size = elems * op.esize;
    row->count = elems;
    row->ref_variant = -1;
    ctx->ref.lead = -1;
    double factor = coll->bus_factor(ctx->nranks);

    row->iters = bench_calibrate(ctx, &ring, bench_zccl_batch);
    bench_ring_t mring;
    bench_ring_init(ctx, &mring, bytes, 0);
    if (ctx->a.mpi) {
        row->mpi_iters = bench_calibrate(ctx, &mring, bench_mpi_batch);
        row->has_mpi = 1;
    }
    /* --repeat rounds of zccl, the reference and MPI, interleaved so a burst
       of other load hits each alike; the best of each is kept. zccl and the
       reference run next to each other, in turn first, so each round's pair
       saw the same machine: %ref is the median of the rounds' ratios. */
    double t = 0.0;
    double mt = 0.0;
    double zr[BENCH_MAX_REPEAT];
    double probe[BENCH_MAX_REPEAT];
    uint64_t kind0[2] = {zccl_comm_store_kind_ops(ctx->comm, 0),
                         zccl_comm_store_kind_ops(ctx->comm, 1)};
    for (int rep = 0; rep < ctx->a.repeat; rep++) {
        /* The host's state this round (its cache-to-cache latency moves
           within seconds): a reader can tell a slow row from a slow host. */
        probe[rep] = bench_ref_probe_ns(ctx);
        row->probe_max_ns = probe[rep] > row->probe_max_ns ? probe[rep] : row->probe_max_ns;
        if (rep % 2) {
            bench_ref_measure(ctx, &ring, row, rep, 0);
        }
        /* Read before the warm-up op: the probe walks every mapping's page
           tables, which must not stand between the warm-up and the batch.
           Only in the round that reports it: a walk takes long and evicts
           cached data ahead of zccl's batches alone. */
        long rss0[2] = {0, 0};
        if (rep == 0) {
            rss0[0] = bench_probe_rss_kb(&rss0[1]);
        }
        bench_warm(ctx, &ring, bench_zccl_batch);
        uint64_t net0 = zccl_comm_net_bytes(ctx->comm);
        double z = bench_zccl_batch(ctx, &ring, row->iters) / row->iters;
        if (rep == 0) {
            long rss1[2];
            rss1[0] = bench_probe_rss_kb(&rss1[1]);
            bench_measure_rss(ctx, rss0, rss1, row->size, row->iters);
            uint64_t net = zccl_comm_net_bytes(ctx->comm) - net0;
            MPI_Allreduce(MPI_IN_PLACE, &net, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
            row->net_bytes = net / (uint64_t)row->iters;
        }
        zr[rep] = z * 1e6;
        t = rep == 0 || z < t ? z : t;
        if (rep % 2 == 0) {
            bench_ref_measure(ctx, &ring, row, rep, 1);
        }
        if (ctx->a.mpi) {
            bench_warm(ctx, &mring, bench_mpi_batch);
            double m = bench_mpi_batch(ctx, &mring, row->mpi_iters) / row->mpi_iters;
            mt = rep == 0 || m < mt ? m : mt;
        }
    }
    bench_ref_pair(ctx, zr, ctx->a.repeat, row);
    row->probe_ns = bench_median(probe, ctx->a.repeat);
    uint64_t cached = zccl_comm_store_kind_ops(ctx->comm, 0) - kind0[0];
    uint64_t streamed = zccl_comm_store_kind_ops(ctx->comm, 1) - kind0[1];
    row->streamed_pct =
        cached + streamed > 0 ? 100.0 * (double)streamed / (double)(cached + streamed) : -1.0;
    row->time_us = t * 1e6;
    row->algbw = t > 0.0 ? (double)row->size / t / 1e9 : 0.0;
    row->busbw = row->algbw * factor;
    if (ctx->a.mpi) {
        row->mpi_time_us = mt * 1e6;
        row->mpi_algbw = mt > 0.0 ? (double)row->size / mt / 1e9 : 0.0;
        row->mpi_busbw = row->mpi_algbw * factor;
    }

    if (ctx->a.check) {
        bench_ring_t one = ring;
        one.n = 1;
        bench_poison_recv(&op);
        bench_fill_send(&op);
        (void)bench_zccl_batch(ctx, &one, 1);
        uint64_t wrong = bench_check_recv(coll, &op);
        MPI_Allreduce(&wrong, &row->wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        ctx->wrong += row->wrong;
    }
    bench_ref_check_row(ctx, &ring, row);
}

/* Before the sweep, as nccl-tests does: a few ops at the largest size and
   warm-up's worth at the smallest, on zccl and MPI, so first-use costs
   (page faults, peer mappings, lazily built state) land in no timed row. */
static void bench_prewarm(bench_ctx_t *ctx)
{
    int big = ctx->a.warmup < 5 ? ctx->a.warmup : 5;
    size_t sizes[2] = {ctx->a.max_bytes, ctx->a.min_bytes};
    int iters[2] = {big > 0 ? big : 1, ctx->a.warmup > 0 ? ctx->a.warmup : 1};
    for (int k = 0; k < 2; k++) {
        bench_ring_t ring;
        bench_ring_init(ctx, &ring, sizes[k], ctx->a.inplace);
        (void)bench_zccl_batch(ctx, &ring, iters[k]);
        if (ctx->a.mpi) {
            bench_ring_init(ctx, &ring, sizes[k], 0);
            (void)bench_mpi_batch(ctx, &ring, iters[k]);
        }
    }
}

static const char *bench_path_name(const bench_ctx_t *ctx)
{
    if (ctx->a.null_ref) {
        return "null"; /* not zccl's: the reference against itself */
    }
    return ctx->a.zero_copy ? "zero-copy" : "buffered";
}

static const char *bench_mode_name(const bench_ctx_t *ctx)
{
    return ctx->a.blocking ? "blocking" : "queued";
}

static const char *bench_cache_name(const bench_ctx_t *ctx)
{
    return ctx->a.cold ? "cold" : "reuse";
}

/* Who ran: gathered to rank 0 for the header. */
typedef struct bench_ident {
    int pid;
    int device;
    char host[64];
} bench_ident_t;

static void bench_print_ranks(const bench_ctx_t *ctx, const bench_ident_t *all)
{
    for (int r = 0; r < ctx->nranks; r++) {
        printf("#  Rank %2d Pid %7d on %10s device %2d\n", r, all[r].pid, all[r].host,
               all[r].device);
    }
}

static void bench_print_header(const bench_ctx_t *ctx)
{
    const bench_coll_t *coll = ctx->coll;
    const bench_args_t *a = &ctx->a;
    bench_ident_t me, *all = NULL;
    memset(&me, 0, sizeof(me));
    me.pid = (int)getpid();
    me.device = ctx->device;
    gethostname(me.host, sizeof(me.host) - 1);
    if (ctx->rank == 0) {
        all = calloc((size_t)ctx->nranks, sizeof(me));
    }
    MPI_Gather(&me, (int)sizeof(me), MPI_BYTE, all, (int)sizeof(me), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (ctx->rank != 0) {
        return;
    }
    if (a->hccl_format) {
        printf("the minbytes is %zu, maxbytes is %zu, iters is %d, warmup_iters is %d\n",
               a->min_bytes, a->max_bytes, a->iters, a->warmup);
    }
    char root[32] = "";
    if (coll->flags & BENCH_ROOTED) {
        snprintf(root, sizeof(root), ", root %d", a->root);
    }
    printf("# zccl %s %s: %d ranks, %s path (%s), %s %s, %s%s, iters %d%s, warmup %d, check %s, "
           "MPI baseline %s\n",
           coll->tool, ZCCL_BENCH_VERSION, ctx->nranks, bench_path_name(ctx),
           a->zero_copy ? "activated memory" : "aclrtMalloc buffers", bench_dtype_name(a->dtype),
           (coll->flags & BENCH_REDUCES) ? bench_redop_name(a->redop) : "",
           a->inplace ? "in place" : "out of place", root, a->iters,
           a->budget_s > 0.0 ? " (or fewer, --budget)" : "", a->warmup, a->check ? "on" : "off",
           a->mpi ? coll->mpi_name : "off");
    printf("# mode: %s (%s), buffers %s (%s)\n", bench_mode_name(ctx),
           a->blocking ? "aclrtSynchronizeStream after every op"
                       : "ops queued back to back, one synchronize per batch",
           bench_cache_name(ctx),
           a->cold ? "a ring of buffers past twice the last-level cache per buffer"
                   : "the same buffers for every op of a size");
    bench_print_ranks(ctx, all);
    free(all);
    if (ctx->ref.ok) {
        printf("# reference: the ideal %s kernel on raw shared memory in the same run (best of "
               "its variants, see bench_ref.c); %%ref = reference time / zccl time, the median of "
               "the --repeat rounds' ratios (each order of the pair apart, averaged)\n",
               coll->name);
        if (a->null_ref) {
            printf("# NULL RUN (--null 1): the zccl column times the reference's leading variant, "
                   "not zccl; %%ref shows the host's noise alone\n");
        }
    } else {
        printf("# reference: none for this tool, type or reduction ('-' below)\n");
    }
    if (a->hccl_format) {
        printf("data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result: | "
               "ref_time(us): | ref_percent:%s\n",
               a->mpi ? " | mpi_time(us): | mpi_bandwidth(GB/s):" : "");
        return;
    }
    printf("#\n#%60s zccl %-9s %-8s %20s %28s\n", "", bench_path_name(ctx), bench_mode_name(ctx),
           "reference", a->mpi ? coll->mpi_name : "");
    printf("# %10s %12s %8s %6s %5s %10s %7s %7s %6s %10s %6s %-9s%s\n", "size", "count", "type",
           "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "%ref", "variant",
           a->mpi ? "       time   busbw  speedup" : "");
    printf("# %10s %12s %8s %6s %5s %10s %7s %7s %6s %10s %6s %-9s%s\n", "(B)", "(elements)", "",
           "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(%)", "",
           a->mpi ? "       (us)  (GB/s)      (x)" : "");
    fflush(stdout);
}

static double bench_ref_pct(const bench_row_t *row)
{
    return row->ref_variant >= 0 ? row->ref_pct : -1.0;
}

static void bench_print_csv(bench_ctx_t *ctx, const bench_row_t *row)
{
    const bench_coll_t *coll = ctx->coll;
    double pct = bench_ref_pct(row);
    fprintf(ctx->csv, "%s,%s,%d,%s,%d,%s,%s,%zu,%zu,%s,%s,%d,%d,%.3f,%.4f,%.4f,%llu,", coll->tool,
            coll->name, ctx->nranks, bench_path_name(ctx), ctx->a.inplace, bench_cache_name(ctx),
            bench_mode_name(ctx), row->size, row->count, bench_dtype_name(ctx->a.dtype),
            (coll->flags & BENCH_REDUCES) ? bench_redop_name(ctx->a.redop) : "none",
            (coll->flags & BENCH_ROOTED) ? ctx->a.root : -1, row->iters, row->time_us, row->algbw,
            row->busbw, (unsigned long long)row->wrong);
    if (pct >= 0.0) {
        fprintf(ctx->csv, "%.3f,%.2f,%s,", row->ref_us, pct, bench_ref_name(row->ref_variant));
    } else {
        fprintf(ctx->csv, ",,,");
    }
    if (row->has_mpi) {
        fprintf(ctx->csv, "%d,%.3f,%.4f,%.4f,", row->mpi_iters, row->mpi_time_us, row->mpi_algbw,
                row->mpi_busbw);
    } else {
        fprintf(ctx->csv, ",,,,");
    }
    fprintf(ctx->csv, "%llu,", (unsigned long long)row->net_bytes);
    if (row->probe_ns > 0.0) {
        fprintf(ctx->csv, "%.0f,%.0f,", row->probe_ns, row->probe_max_ns);
    } else {
        fprintf(ctx->csv, ",,");
    }
    if (row->streamed_pct >= 0.0) {
        fprintf(ctx->csv, "%.1f\n", row->streamed_pct);
    } else {
        fprintf(ctx->csv, "\n");
    }
    fflush(ctx->csv);
}

static void bench_print_row(bench_ctx_t *ctx, const bench_row_t *row)
{
    const bench_coll_t *coll = ctx->coll;
    double pct = bench_ref_pct(row);
    if (ctx->csv != NULL) {
        bench_print_csv(ctx, row);
    }
    if (ctx->a.hccl_format) {
        printf("%16zu %16.2f %20.5f %20s %16.2f %12.1f", row->size, row->time_us, row->algbw,
               !ctx->a.check     ? "NULL"
               : row->wrong == 0 ? "success"
                                 : "failed",
               row->ref_us, pct);
        if (row->has_mpi) {
            printf(" %16.2f %20.5f", row->mpi_time_us, row->mpi_algbw);
        }
        printf("\n");
        fflush(stdout);
        return;
    }
    printf("  %10zu %12zu %8s %6s %5d %10.2f %7.2f %7.2f %6llu", row->size, row->count,
           bench_dtype_name(ctx->a.dtype),
           (coll->flags & BENCH_REDUCES) ? bench_redop_name(ctx->a.redop) : "none",
           (coll->flags & BENCH_ROOTED) ? ctx->a.root : -1, row->time_us, row->algbw, row->busbw,
           (unsigned long long)row->wrong);
    if (pct >= 0.0) {
        printf(" %10.2f %6.1f %-9s", row->ref_us, pct, bench_ref_name(row->ref_variant));
    } else {
        printf(" %10s %6s %-9s", "-", "-", "-");
    }
    if (row->has_mpi) {
        printf(" %10.2f %7.2f %8.2f", row->mpi_time_us, row->mpi_busbw,
               row->time_us > 0.0 ? row->mpi_time_us / row->time_us : 0.0);
    }
    printf("\n");
    fflush(stdout);
}

static void bench_print_footer(bench_ctx_t *ctx)
{
    long mine_rss[3] = {ctx->rss_first_kb, ctx->rss_growth_kb, ctx->rss_first_mpi_kb};
    long growth[3] = {0, 0, 0};
    MPI_Reduce(mine_rss, growth, 3, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    uint64_t mine[5] = {zccl_comm_zero_copy_ops(ctx->comm), zccl_comm_buffered_ops(ctx->comm),
                        zccl_comm_staged_bytes(ctx->comm),
                        (uint64_t)(zccl_comm_ccl_allocated(ctx->comm) != 0),
                        zccl_comm_net_bytes(ctx->comm)};
    uint64_t sum[5] = {0, 0, 0, 0, 0};
    MPI_Reduce(mine, sum, 5, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    int hosts = zccl_comm_hosts(ctx->comm);
    long rss_now = bench_probe_rss_kb(NULL);
    if (ctx->rank != 0) {
        return;
    }
    const bench_coll_t *coll = ctx->coll;
    printf("# Out of bounds values : %llu %s\n", (unsigned long long)ctx->wrong,
           ctx->wrong == 0 ? "OK" : "FAILED");
    printf("# Avg bus bandwidth    : %.4f", ctx->nsizes > 0 ? ctx->busbw_sum / ctx->nsizes : 0.0);
    if (ctx->nmpi > 0) {
        printf("   (%s: %.4f)", coll->mpi_name, ctx->mpi_busbw_sum / ctx->nmpi);
    }
    printf("\n");
    if (ctx->ref_pct_min >= 0.0) {
        printf("# Reference            : zccl's lowest %%ref from 1 MiB up: %.1f %% at %zu bytes\n",
               ctx->ref_pct_min, ctx->ref_pct_min_size);
    }
    if (ctx->probe_hi_ns > 0.0) {
        printf("# Host probe           : a flag barrier of the reference's counters took %.0f-%.0f "
               "ns (rows' medians over their rounds; per row: the CSV's probe_ns, "
               "probe_max_ns)\n",
               ctx->probe_lo_ns, ctx->probe_hi_ns);
    }
    if (ctx->ref_over > 0) {
        printf("# WARNING: %d row(s) above 105 %% of the reference: the reference is not ideal "
               "there (bench_ref.c)\n",
               ctx->ref_over);
    }
    printf("# Resident memory      : %+ld kB over zccl's later timed batches, %+ld kB over the "
           "first (max over ranks; not counted: Open MPI's shared memory, %+ld kB in the "
           "first); %llu zccl ops on this rank; rank 0 at %ld kB (%ld kB at start)\n",
           growth[1], growth[0], growth[2], (unsigned long long)ctx->zccl_ops, rss_now,
           ctx->rss_start_kb);
    printf("# Paths (all ranks)    : %llu zero-copy ops, %llu buffered ops, %llu bytes staged, "
           "CCL buffer %s\n",
           (unsigned long long)sum[0], (unsigned long long)sum[1], (unsigned long long)sum[2],
           sum[3] == 0 ? "never created" : "created");
    if (hosts > 1) {
        printf("# Across hosts         : %d hosts, %llu bytes sent to other hosts (all ranks, "
               "every op of the run; per op: the CSV's net_bytes)\n",
               hosts, (unsigned long long)sum[4]);
    }
    if (ctx->a.zero_copy && sum[1] != 0) {
        printf("# WARNING: %llu ops on activated memory took the buffered path\n",
               (unsigned long long)sum[1]);
    }
    fflush(stdout);
}

static void bench_open_csv(bench_ctx_t *ctx)
{
    ctx->csv = fopen(ctx->a.csv, "w");
    if (ctx->csv == NULL) {
        fprintf(stderr, "%s: cannot write --csv %s\n", ctx->coll->tool, ctx->a.csv);
        return;
    }
    fprintf(ctx->csv, "tool,op,nranks,path,inplace,cache,mode,size,count,type,redop,root,iters,"
                      "time_us,algbw,busbw,wrong,ref_time_us,ref_pct,ref_variant,mpi_iters,"
                      "mpi_time_us,mpi_algbw,mpi_busbw,net_bytes,probe_ns,probe_max_ns,"
                      "zccl_streamed_pct\n");
}

void bench_run_sweep(bench_ctx_t *ctx)
{
    ctx->rss_start_kb = bench_probe_rss_kb(NULL);
    ctx->ref_pct_min = -1.0;
    if (ctx->rank == 0 && ctx->a.csv != NULL) {
        bench_open_csv(ctx);
    }
    bench_print_header(ctx);
    bench_prewarm(ctx);
    size_t bytes = ctx->a.min_bytes;
    for (;;) {
        bench_row_t row;
        bench_measure(ctx, bytes, &row);
        if (ctx->rank == 0) {
            bench_print_row(ctx, &row);
        }
        ctx->busbw_sum += row.busbw;
        ctx->nsizes++;
        if (row.has_mpi) {
            ctx->mpi_busbw_sum += row.mpi_busbw;
            ctx->nmpi++;
        }
        if (row.probe_ns > 0.0) {
            ctx->probe_lo_ns = ctx->probe_lo_ns == 0.0 || row.probe_ns < ctx->probe_lo_ns
                                   ? row.probe_ns
                                   : ctx->probe_lo_ns;
            ctx->probe_hi_ns = row.probe_ns > ctx->probe_hi_ns ? row.probe_ns : ctx->probe_hi_ns;
        }
        double pct = bench_ref_pct(&row);
        if (pct > 105.0) {
            ctx->ref_over++;
        }
        if (pct >= 0.0 && row.size >= ((size_t)1 << 20) &&
            (ctx->ref_pct_min < 0.0 || pct < ctx->ref_pct_min)) {
            ctx->ref_pct_min = pct;
            ctx->ref_pct_min_size = row.size;
        }
        size_t next = ctx->a.factor > 1.0 ? (size_t)((double)bytes * ctx->a.factor)
                                          : bytes + ctx->a.step_bytes;
        if (next <= bytes || next > ctx->a.max_bytes) {
            break;
        }
        bytes = next;
    }
    bench_print_footer(ctx);
    if (ctx->csv != NULL) {
        fclose(ctx->csv);
        ctx->csv = NULL;
    }
}
