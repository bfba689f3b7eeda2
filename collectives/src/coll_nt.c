/*
 * Cached or streaming stores: chosen by measurement for the large direct
 * AllReduce and AllGather.
 *
 * Which store kind is faster depends on whether the op's buffers are still
 * in the cache, which the size alone does not say: a program that reuses
 * its buffers finds a 1 MiB op's data cached (cached stores win by about a
 * third), one that cycles through many buffers finds it cold (streaming
 * stores win by 2x and more, since a cached store first reads every line
 * from DRAM). So each (collective, size class) keeps the measured cost of
 * both kinds, and ops use the cheaper one:
 *  - size class = log2 of the op's data over all ranks (inputs + outputs);
 *    below 256 KiB of it, always cached (it fits any cache, and streaming
 *    would push it out);
 *  - the first four ops of a class alternate, starting with the static rule
 *    (coll_use_nt_op); after that the other kind is re-measured once per
 *    `gap` ops, so a program that changes its pattern is followed. The gap
 *    starts at 16 and doubles (up to 1024) each time the re-measurement
 *    loses again; a re-measurement that beats the current kind's average
 *    sets it back to 16. A fixed gap of 16 cost a steady 1/16 of the slower
 *    kind's excess: with buffers rotated past the cache, where a cached-store
 *    op costs several streaming ones, that alone was 6-60 % more time;
 *  - the cost is the time of this rank's copy / reduce loop alone (no
 *    barriers) per KiB it writes, kept as an average weighting the newest
 *    quarter. tune->nt_min = 0 still means never streaming.
 * Each rank decides for its own stores (they are fenced before the next
 * barrier either way), so ranks need not agree; results are the same bits.
 * The table is process-wide and updated with relaxed atomics: it is a hint,
 * a lost update costs nothing but a slightly older average.
 */
#include "coll_internal.h"

#include <stdatomic.h>
#include <time.h>

#define COLL_NT_CLASSES 48
#define COLL_NT_MIN_CLASS 18 /* 256 KiB of data over all ranks */
#define COLL_NT_GAP_MIN 16u
#define COLL_NT_GAP_MAX 1024u

typedef struct {
    atomic_uint_fast64_t cost[2]; /* ps per KiB written; 0 = not measured */
    atomic_uint_fast32_t ops;
    atomic_uint_fast32_t gap; /* ops per re-measurement; 0 = COLL_NT_GAP_MIN */
} coll_nt_slot_t;

static coll_nt_slot_t coll_nt_tab[COLL_NT_KINDS][COLL_NT_CLASSES];

static int coll_nt_class(size_t bytes)
{
    int c = 0;
    while (bytes > 1 && c < COLL_NT_CLASSES - 1) {
        bytes >>= 1;
        c++;
    }
    return c;
}

static uint64_t coll_nt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int coll_nt_choose(const coll_args_t *a, int kind, size_t in_bytes, size_t out_bytes,
                   coll_nt_ticket_t *t)
{
    t->slot = NULL;
    size_t nt_min = a->tune != NULL ? a->tune->nt_min : COLL_DEFAULT_NT_MIN;
    int rule = coll_use_nt_op(a, in_bytes, out_bytes);
    size_t per_rank = in_bytes + out_bytes;
    size_t total = per_rank * (size_t)a->nranks;
    if (nt_min == 0 || kind < 0 || kind >= COLL_NT_KINDS || per_rank < in_bytes ||
        total / (size_t)a->nranks != per_rank) {
        return rule;
    }
    int c = coll_nt_class(total);
    if (c < COLL_NT_MIN_CLASS) {
        return 0;
    }
    coll_nt_slot_t *s = &coll_nt_tab[kind][c];
    uint32_t n = (uint32_t)atomic_fetch_add_explicit(&s->ops, 1, memory_order_relaxed);
    uint64_t cc = atomic_load_explicit(&s->cost[0], memory_order_relaxed);
    uint64_t cn = atomic_load_explicit(&s->cost[1], memory_order_relaxed);
    int nt;
    t->explore = 0;
    if (n < 4 || cc == 0 || cn == 0) {
        nt = (n & 1u) ? !rule : rule;
    } else {
        uint32_t gap = (uint32_t)atomic_load_explicit(&s->gap, memory_order_relaxed);
        gap = gap != 0 ? gap : COLL_NT_GAP_MIN;
        int best = cn < cc;
        t->explore = n % gap == 0;
        nt = t->explore ? !best : best;
    }
    t->slot = s;
    t->nt = nt;
    t->start_ns = coll_nt_now_ns();
    return nt;
}

void coll_nt_learn(const coll_nt_ticket_t *t, size_t written)
{
    if (t->slot != NULL) {
        coll_nt_record(t, coll_nt_now_ns() - t->start_ns, written);
    }
}

void coll_nt_record(const coll_nt_ticket_t *t, uint64_t ns, size_t written)
{
    if (t->slot == NULL || written < 1024) {
        return;
    }
    coll_nt_slot_t *s = t->slot;
    uint64_t x = ns * 1000u / (written / 1024u);
    if (x == 0) {
        x = 1;
    }
    uint64_t old = atomic_load_explicit(&s->cost[t->nt], memory_order_relaxed);
    uint64_t avg = old == 0 ? x : (3 * old + x) / 4;
    atomic_store_explicit(&s->cost[t->nt], avg != 0 ? avg : 1, memory_order_relaxed);
    if (t->explore) {
        /* lost again: re-measure half as often; won: soon again */
        uint64_t other = atomic_load_explicit(&s->cost[!t->nt], memory_order_relaxed);
        uint32_t gap = (uint32_t)atomic_load_explicit(&s->gap, memory_order_relaxed);
        gap = gap != 0 ? gap : COLL_NT_GAP_MIN;
        gap = x < other ? COLL_NT_GAP_MIN : ZC_MIN(2 * gap, COLL_NT_GAP_MAX);
        atomic_store_explicit(&s->gap, gap, memory_order_relaxed);
    }
}

void coll_nt_reset(void)
{
    for (int k = 0; k < COLL_NT_KINDS; k++) {
        for (int c = 0; c < COLL_NT_CLASSES; c++) {
            coll_nt_slot_t *s = &coll_nt_tab[k][c];
            atomic_store_explicit(&s->cost[0], 0, memory_order_relaxed);
            atomic_store_explicit(&s->cost[1], 0, memory_order_relaxed);
            atomic_store_explicit(&s->ops, 0, memory_order_relaxed);
            atomic_store_explicit(&s->gap, 0, memory_order_relaxed);
        }
    }
}
