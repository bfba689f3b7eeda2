/*
 * The sweep every C/C++ peer driver of scripts/bench_peers.sh runs, so each
 * peer is timed the same way: AllReduce SUM in place, per size one checked op
 * (every rank fills rank + 1, the result must be n(n + 1)/2 everywhere, a
 * wrong element fails the row), the buffer zeroed (repeated in-place sums of
 * non-zero values would overflow to inf within the loop), a warm-up op, then
 * PEER_PROBE_OPS timed ops that set the iteration count (the slowest rank's time, so every rank
 * runs the same count), then ROUNDS timed loops of that many ops, each started after a barrier and
 * lasting about BUDGET ms; the figure is the best round's time per op, the slowest rank's. Rank 0
 * prints one line per size: "bytes,us,note".
 *
 * A driver fills peer_ops_t with its library's calls and calls peer_sweep();
 * header only, so the C and the C++ drivers build it with their own compiler.
 */
#ifndef ZCCL_PEER_LOOP_H
#define ZCCL_PEER_LOOP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PEER_MAX_SIZES 64
#define PEER_MAX_ITERS 10000
#define PEER_PROBE_OPS 3 /* timed ops after the warm-up op that set the iteration count */

typedef struct {
    void *lib; /* the driver's own state */
    int rank;
    int nranks;
    int bf16; /* elements are bfloat16 (else float32) */
    /* In-place AllReduce SUM of count elements, finished when it returns. */
    int (*all_reduce)(void *lib, void *buf, size_t count);
    void (*barrier)(void *lib);
    /* The largest of every rank's v. */
    double (*max)(void *lib, double v);
} peer_ops_t;

static double peer_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* "8,64,4K,1M": binary units; returns the count, -1 (and a line) on a bad entry. */
static int peer_sizes_parse(const char *list, size_t *out)
{
    int n = 0;
    const char *p = list;
    while (*p != '\0') {
        char *end = NULL;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || n == PEER_MAX_SIZES) {
            fprintf(stderr, "peer: bad size list '%s' at '%s'\n", list, p);
            return -1;
        }
        if (*end == 'K' || *end == 'k') {
            v <<= 10;
            end++;
        } else if (*end == 'M' || *end == 'm') {
            v <<= 20;
            end++;
        } else if (*end == 'G' || *end == 'g') {
            v <<= 30;
            end++;
        }
        out[n++] = (size_t)v;
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0') {
            fprintf(stderr, "peer: bad size list '%s' at '%s'\n", list, end);
            return -1;
        }
    }
    return n;
}

/* float -> bfloat16 by truncation: exact for the small integers used here. */
static uint16_t peer_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return (uint16_t)(u >> 16);
}

static void peer_fill(const peer_ops_t *ops, void *buf, size_t count, float v)
{
    for (size_t i = 0; i < count; i++) {
        if (ops->bf16) {
            ((uint16_t *)buf)[i] = peer_bf16(v);
        } else {
            ((float *)buf)[i] = v;
        }
    }
}

static size_t peer_wrong(const peer_ops_t *ops, const void *buf, size_t count, float v)
{
    size_t bad = 0;
    uint16_t h = peer_bf16(v);
    for (size_t i = 0; i < count; i++) {
        bad += ops->bf16 ? ((const uint16_t *)buf)[i] != h : ((const float *)buf)[i] != v;
    }
    return bad;
}

/* One size; prints its row on rank 0. Returns 0, or 1 on a failed call or a wrong result. */
static int peer_size(const peer_ops_t *ops, void *buf, size_t bytes, double budget_us, int rounds)
{
    size_t esz = ops->bf16 ? 2 : 4;
    size_t count = bytes / esz > 0 ? bytes / esz : 1;
    float want = (float)ops->nranks * (float)(ops->nranks + 1) / 2.0f;
    peer_fill(ops, buf, count, (float)(ops->rank + 1));
    if (ops->all_reduce(ops->lib, buf, count) != 0) {
        if (ops->rank == 0) {
            printf("%zu,,all-reduce call failed\n", bytes);
        }
        return 1;
    }
    double wrong = ops->max(ops->lib, (double)peer_wrong(ops, buf, count, want));
    if (wrong > 0) {
        if (ops->rank == 0) {
            printf("%zu,,wrong result: %.0f of %zu elements\n", bytes, wrong, count);
        }
        return 1;
    }
    memset(buf, 0, count * esz);
    ops->all_reduce(ops->lib, buf, count);
    ops->barrier(ops->lib);
    double t0 = peer_now_us();
    for (int i = 0; i < PEER_PROBE_OPS; i++) {
        ops->all_reduce(ops->lib, buf, count);
    }
    double one = ops->max(ops->lib, (peer_now_us() - t0) / PEER_PROBE_OPS);
    long iters = one > 0 ? (long)(budget_us / one) : PEER_MAX_ITERS;
    iters = iters < 1 ? 1 : (iters > PEER_MAX_ITERS ? PEER_MAX_ITERS : iters);
    double best = -1.0;
    for (int r = 0; r < rounds; r++) {
        ops->barrier(ops->lib);
        t0 = peer_now_us();
        for (long i = 0; i < iters; i++) {
            ops->all_reduce(ops->lib, buf, count);
        }
        double t = ops->max(ops->lib, (peer_now_us() - t0) / (double)iters);
        best = best < 0 || t < best ? t : best;
    }
    if (ops->rank == 0) {
        printf("%zu,%.3f,\n", bytes, best);
        fflush(stdout);
    }
    return 0;
}

/* Every size of the list ("8,4K,1M") in turn; returns the exit code: 0, 1 (a size failed), 2. */
static int peer_sweep(const peer_ops_t *ops, const char *sizes_list, double budget_ms, int rounds)
{
    size_t sizes[PEER_MAX_SIZES];
    int n = peer_sizes_parse(sizes_list, sizes);
    if (n <= 0 || budget_ms <= 0 || rounds < 1) {
        fprintf(stderr, "peer: bad arguments: sizes '%s', budget %g ms, rounds %d\n", sizes_list,
                budget_ms, rounds);
        return 2;
    }
    size_t maxb = 0;
    for (int i = 0; i < n; i++) {
        maxb = sizes[i] > maxb ? sizes[i] : maxb;
    }
    void *buf = malloc(maxb + 64);
    if (buf == NULL) {
        fprintf(stderr, "peer: cannot allocate %zu bytes\n", maxb);
        return 2;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        rc |= peer_size(ops, buf, sizes[i], budget_ms * 1e3, rounds);
    }
    free(buf);
    return rc;
}

#endif
