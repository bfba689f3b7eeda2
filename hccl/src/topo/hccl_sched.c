/*
 * What a collective's schedule moves between ranks, transfer by transfer,
 * and the bytes that cross each level (hccl_topo.h). Counted, not timed:
 * a transfer is `bytes` that rank `by` reads from or writes into memory of
 * rank `owner` (memory lies where its owner runs); a rank's work on its own
 * memory is not a transfer. Bytes: S is the op's message, per rank: the
 * buffer of AllReduce, Broadcast and Reduce, the output of AllGather, the
 * input of ReduceScatter; n ranks; slice i of S among m is bytes
 * [S·i/m, S·(i+1)/m) (the code cuts on whole cache lines and elements: the
 * counts differ by less than a line per slice).
 *
 * Flat: the direct algorithms of collectives/ above the one-shot and
 * inline sizes:
 *  - AllReduce, reduce-scatter-write: rank r reads slice r of every other
 *    input and writes it into every other output (2·S/n per pair);
 *  - AllGather: rank r reads every other rank's block (pull) or writes its
 *    block into every other output (push): S/n per pair either way;
 *  - ReduceScatter: rank r reads block r of every other input;
 *  - Broadcast: every rank but the root reads S from the root;
 *  - Reduce: rank r reads slice r of every other input and writes it into
 *    the root's output.
 * Hierarchical, over the innermost level kept ("node": its groups), the
 * shape issue 34 describes, within the node first, then among the ranks
 * holding each slice, then back:
 *  - AllReduce: member i of a node reduces slice i (of the node's m) of its
 *    node's inputs; then for each stretch of bytes the same holders hold
 *    (one holder per node), the stretch is cut into one part per node and
 *    node j's holder reduces part j, reading it from the other holders and
 *    writing the result back to them; then each member reads the other
 *    slices from its node's holders;
 *  - Reduce: the same first step; the root node's holders read each
 *    stretch from the other nodes' holders and write the sum into the
 *    root's output;
 *  - AllGather: each member reads its node-mates' blocks; member i of node
 *    g reads slice i (of g's m) of each other node h's blocks from member
 *    i mod (h's m) of h; then each member reads the slices its node-mates
 *    fetched;
 *  - ReduceScatter: block k's node partial in node g is reduced by member
 *    k mod (g's m), reading block k from its node-mates; rank k then reads
 *    the partials of block k from every other holder;
 *  - Broadcast: the root's node-mates read S from the root; member i of
 *    every other node reads slice i from the root, then its node-mates
 *    read that slice from it.
 * One node (only the host level kept): the hierarchical schedule is the
 * flat one.
 */
#include "topo/hccl_topo.h"

#include <stdlib.h>

typedef struct {
    zh_sched_fn fn;
    void *ctx;
    int n;
    uint64_t s;
    int root;
    const zh_level_t *node; /* hierarchical: the innermost level */
} zh_sched_t;

static uint64_t zh_slice_off(uint64_t s, int m, int i)
{
    return (uint64_t)((unsigned __int128)s * (unsigned)i / (unsigned)m);
}
static uint64_t zh_slice_len(uint64_t s, int m, int i)
{
    return zh_slice_off(s, m, i + 1) - zh_slice_off(s, m, i);
}

static void zh_put(const zh_sched_t *x, int by, int owner, uint64_t bytes)
{
    if (by != owner && bytes > 0) {
        x->fn(x->ctx, by, owner, bytes);
    }
}

/* ---- flat ---------------------------------------------------------------------------- */

static void zh_flat(const zh_sched_t *x, int kind)
{
    int n = x->n;
    for (int r = 0; r < n; r++) {
        uint64_t mine = zh_slice_len(x->s, n, r);
        for (int q = 0; q < n; q++) {
            switch (kind) {
            case ZH_OP_ALLREDUCE:
                zh_put(x, r, q, 2 * mine);
                break;
            case ZH_OP_REDUCE:
                zh_put(x, r, q, mine);
                break;
            case ZH_OP_ALLGATHER:
            case ZH_OP_REDUCESCATTER:
                zh_put(x, r, q, x->s / (uint64_t)n);
                break;
            default:
                break;
            }
        }
        if (kind == ZH_OP_REDUCE) {
            zh_put(x, r, x->root, mine);
        } else if (kind == ZH_OP_BROADCAST) {
            zh_put(x, r, x->root, x->s);
        }
    }
}

/* ---- hierarchical -------------------------------------------------------------------- */

/* Within each node, member i reads slice i of its node-mates' buffers
 * (step 1 of AllReduce and Reduce), or each member reads the other slices
 * from their holders (AllReduce's step 3): same transfers. */
static void zh_hier_slices(const zh_sched_t *x)
{
    const zh_level_t *nd = x->node;
    for (int g = 0; g < nd->ngroups; g++) {
        int m = zh_level_size(nd, g);
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < m; j++) {
                zh_put(x, zh_level_member(nd, g, i), zh_level_member(nd, g, j),
                       zh_slice_len(x->s, m, i));
            }
        }
    }
}

/* The member of node g holding byte `at` of S (node slicing). */
static int zh_holder(const zh_level_t *nd, int g, uint64_t s, uint64_t at)
{
    int m = zh_level_size(nd, g);
    int i = 0;
    while (i + 1 < m && zh_slice_off(s, m, i + 1) <= at) {
        i++;
    }
    return zh_level_member(nd, g, i);
}

/* The end of the stretch starting at `at` over which no node's holder
 * changes. */
static uint64_t zh_stretch_end(const zh_level_t *nd, uint64_t s, uint64_t at)
{
    uint64_t end = s;
    for (int g = 0; g < nd->ngroups; g++) {
        int m = zh_level_size(nd, g);
        for (int i = 1; i < m; i++) {
            uint64_t b = zh_slice_off(s, m, i);
            if (b > at && b < end) {
                end = b;
            }
        }
    }
    return end;
}

/* Step 2 among holders, stretch by stretch. AllReduce: part j of each
 * stretch is reduced by node j's holder (reads from, writes back to every
 * other holder). Reduce: the root node's holder reads every other holder's
 * stretch, then writes the sum into the root's output. */
static void zh_hier_across(const zh_sched_t *x, int kind)
{
    const zh_level_t *nd = x->node;
    int nn = nd->ngroups;
    int rg = nd->group_of[x->root];
    for (uint64_t at = 0, end; at < x->s; at = end) {
        end = zh_stretch_end(nd, x->s, at);
        uint64_t len = end - at;
        for (int j = 0; j < nn; j++) {
            int hj = zh_holder(nd, j, x->s, at);
            for (int k = 0; k < nn; k++) {
                int hk = zh_holder(nd, k, x->s, at);
                if (kind == ZH_OP_ALLREDUCE) {
                    zh_put(x, hj, hk, 2 * zh_slice_len(len, nn, j));
                } else if (j == rg) {
                    zh_put(x, hj, hk, len);
                }
            }
        }
        if (kind == ZH_OP_REDUCE) {
            zh_put(x, zh_holder(nd, rg, x->s, at), x->root, len);
        }
    }
}

static void zh_hier_allgather(const zh_sched_t *x)
{
    const zh_level_t *nd = x->node;
    uint64_t b = x->s / (uint64_t)x->n;
    for (int g = 0; g < nd->ngroups; g++) {
        int m = zh_level_size(nd, g);
        for (int i = 0; i < m; i++) {
            int r = zh_level_member(nd, g, i);
            for (int j = 0; j < m; j++) {
                zh_put(x, r, zh_level_member(nd, g, j), b); /* node-mates' blocks */
            }
            for (int h = 0; h < nd->ngroups; h++) {
                int mh = zh_level_size(nd, h);
                uint64_t part = zh_slice_len((uint64_t)mh * b, m, i);
                if (h == g) {
                    continue;
                }
                zh_put(x, r, zh_level_member(nd, h, i % mh), part);
                for (int j = 0; j < m; j++) {
                    zh_put(x, zh_level_member(nd, g, j), r, part); /* then shared */
                }
            }
        }
    }
}

static void zh_hier_reducescatter(const zh_sched_t *x)
{
    const zh_level_t *nd = x->node;
    uint64_t b = x->s / (uint64_t)x->n;
    for (int k = 0; k < x->n; k++) {
        for (int g = 0; g < nd->ngroups; g++) {
            int m = zh_level_size(nd, g);
            int holder = zh_level_member(nd, g, k % m);
            for (int j = 0; j < m; j++) {
                zh_put(x, holder, zh_level_member(nd, g, j), b);
            }
            zh_put(x, k, holder, b);
        }
    }
}

static void zh_hier_broadcast(const zh_sched_t *x)
{
    const zh_level_t *nd = x->node;
    int rg = nd->group_of[x->root];
    for (int g = 0; g < nd->ngroups; g++) {
        int m = zh_level_size(nd, g);
        for (int i = 0; i < m; i++) {
            int r = zh_level_member(nd, g, i);
            if (g == rg) {
                zh_put(x, r, x->root, x->s);
                continue;
            }
            uint64_t part = zh_slice_len(x->s, m, i);
            zh_put(x, r, x->root, part);
            for (int j = 0; j < m; j++) {
                zh_put(x, zh_level_member(nd, g, j), r, part);
            }
        }
    }
}

static void zh_hier(const zh_sched_t *x, int kind)
{
    switch (kind) {
    case ZH_OP_ALLREDUCE:
        zh_hier_slices(x);
        zh_hier_across(x, kind);
        zh_hier_slices(x);
        break;
    case ZH_OP_REDUCE:
        zh_hier_slices(x);
        zh_hier_across(x, kind);
        break;
    case ZH_OP_ALLGATHER:
        zh_hier_allgather(x);
        break;
    case ZH_OP_REDUCESCATTER:
        zh_hier_reducescatter(x);
        break;
    default:
        zh_hier_broadcast(x);
        break;
    }
}

int zh_sched_walk(const zh_levels_t *lv, int algo, int kind, uint64_t bytes, int root,
                  zh_sched_fn fn, void *ctx)
{
    if (kind != ZH_OP_ALLREDUCE && kind != ZH_OP_ALLGATHER && kind != ZH_OP_REDUCESCATTER &&
        kind != ZH_OP_BROADCAST && kind != ZH_OP_REDUCE) {
        return ZC_ERR_INVAL;
    }
    if (root < 0 || root >= lv->nranks || (algo != ZH_SCHED_FLAT && algo != ZH_SCHED_HIER)) {
        return ZC_ERR_INVAL;
    }
    zh_sched_t x = {fn, ctx, lv->nranks, bytes, root, &lv->level[lv->n - 1]};
    if (algo == ZH_SCHED_FLAT || lv->n == 1) {
        zh_flat(&x, kind);
    } else {
        zh_hier(&x, kind);
    }
    return ZC_OK;
}

typedef struct {
    const zh_levels_t *lv;
    uint64_t *cross;
} zh_cost_t;

static void zh_cost_add(void *ctx, int by, int owner, uint64_t bytes)
{
    const zh_cost_t *c = ctx;
    for (int i = 0; i < c->lv->n; i++) {
        if (c->lv->level[i].group_of[by] != c->lv->level[i].group_of[owner]) {
            c->cross[i] += bytes;
        }
    }
    c->cross[ZH_KINDS] += bytes;
}

int zh_sched_cost(const zh_levels_t *lv, int algo, int kind, uint64_t bytes, int root,
                  uint64_t cross[ZH_KINDS + 1])
{
    for (int i = 0; i <= ZH_KINDS; i++) {
        cross[i] = 0;
    }
    zh_cost_t c = {lv, cross};
    return zh_sched_walk(lv, algo, kind, bytes, root, zh_cost_add, &c);
}
