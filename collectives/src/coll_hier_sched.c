/*
 * The hierarchical schedules of one rank (x->me), run by the executor
 * (coll_hier_exec.c) to move data or to count it. Notation: G groups, my
 * group g of L ranks, my index li in it; B = count elements.
 *
 * AllReduce / Reduce pieces: the count is cut into K = nranks pieces of
 * whole 64-byte lines (coll_slice). In group g piece k is held by member
 * k mod L, in slot k / L of its scratch (slots of the first piece's size S);
 * sub-piece s of a piece is its slice s of G. Partials (HX_PART) are fp32
 * for fp16 / bf16, so their results are rounded once, in the last step.
 *
 * AllReduce (2 barriers):
 *   1. every holder reduces its pieces over its group's inputs, in member
 *      order, into its scratch (the group partial P_g);  barrier
 *   2. the holder of piece k in group g reduces sub-piece g of piece k over
 *      all groups' partials, in group order, into its own output;  barrier
 *   3. the holder of piece k copies the other groups' reduced sub-pieces
 *      from their holders' outputs into its output and copies the piece to
 *      its group's other outputs (no one reads an output it writes).
 *   Outputs are written only after the first barrier, when no input is read
 *   any more: in place and any overlap of in and out are safe.
 *   Crossing: each piece's partial sub-pieces and reduced sub-pieces cross
 *   once per other group, 2 (G - 1) B bytes in all (3 (G - 1) B for
 *   fp16 / bf16, whose partials cross as fp32).
 *
 * Reduce (1 barrier): step 1 above; barrier; the holder of piece k in the
 *   root's group reduces all groups' partials of piece k, in group order,
 *   into out[root]. Crossing (G - 1) B (twice for fp16 / bf16).
 *
 * ReduceScatter (1 barrier, +1 on a conflicting overlap): the destinations
 *   outside group g, in rank order, are dealt to g's members (the i-th to
 *   member i mod L, slot i / L of B elements):
 *   1. each member reduces block b of its group's inputs into its slot;
 *      barrier
 *   2. rank b reduces block b of its own group's inputs into its own slot
 *      (the one after the dealt ones), then all groups' partials, in group
 *      order, into out[b]. Only rank b reads block b of an input in step 2,
 *      so out[b] == block b of in[b] is safe; any other overlap goes
 *      through a private buffer committed after one more barrier.
 *   Crossing (G - 1) x nranks x B (twice for fp16 / bf16).
 *
 * AllGather (0 barriers, +1 on a conflicting overlap): each rank copies its
 *   block to slot me of its group's outputs; the blocks of other groups'
 *   ranks, in rank order, are dealt to g's members (the i-th to member
 *   i mod L), which fetch each once into their own output and copy it to
 *   the group's other outputs. A rank whose in overlaps its out other than
 *   as its own slot first copies in into its scratch; barrier; peers read
 *   it there. Crossing (G - 1) x nranks x B.
 *
 * Broadcast (1 barrier): the root's group copies from the root; in every
 *   other group member i fetches slice i of L from the root into its own
 *   buffer; barrier; each member copies the other slices from its group's
 *   members. Crossing (G - 1) x B.
 *
 * The flat models (coll_hier_cost only) list the moves of the flat direct
 * algorithms' large-message forms in the same terms.
 */
#include "coll_hier_sched.h"

/* ---- AllReduce / Reduce pieces ---- */

typedef struct {
    size_t off, len; /* piece k, elements */
    size_t stride;   /* slot size, elements */
} hx_piece_t;

static hx_piece_t hx_piece(const hx_t *x, int k)
{
    hx_piece_t p;
    size_t o0;
    coll_slice(x->count, x->nranks, 0, x->es, &o0, &p.stride);
    coll_slice(x->count, x->nranks, k, x->es, &p.off, &p.len);
    return p;
}

/* The member of group g holding piece k. */
static int hx_holder(const hx_t *x, int g, int k)
{
    return hx_member(x, g, k % hx_size(x, g));
}

/* Where group g keeps its partial of piece k, from element e0 of it. */
static hx_loc_t hx_partial(const hx_t *x, int g, int k, size_t stride, size_t e0)
{
    size_t slot = (size_t)(k / hx_size(x, g)) * stride;
    return hx_loc(HX_PART, hx_holder(x, g, k), (slot + e0) * x->pes);
}

/* Step 1: my pieces over my group's inputs into my scratch. */
static void hx_group_partials(hx_t *x)
{
    int g = hx_group(x, x->me);
    int l = hx_size(x, g);
    for (int k = x->g->index_of[x->me]; k < x->nranks; k += l) {
        hx_piece_t p = hx_piece(x, k);
        for (int i = 0; i < l; i++) {
            x->locs[i] = hx_loc(HX_IN, hx_member(x, g, i), p.off * x->es);
        }
        hx_reduce(x, hx_partial(x, g, k, p.stride, 0), x->locs, l, p.len);
    }
}

/* Sources: every group's partial of piece k from element e0, group order. */
static void hx_all_partials(hx_t *x, int k, size_t stride, size_t e0)
{
    for (int h = 0; h < x->g->ngroups; h++) {
        x->locs[h] = hx_partial(x, h, k, stride, e0);
    }
}

void hx_allreduce(hx_t *x)
{
    int g = hx_group(x, x->me);
    int l = hx_size(x, g);
    int li = x->g->index_of[x->me];
    int ng = x->g->ngroups;
    hx_group_partials(x);
    if (hx_barrier(x) != ZC_OK) {
        return;
    }
    for (int k = li; k < x->nranks; k += l) {
        hx_piece_t p = hx_piece(x, k);
        size_t so, sl;
        coll_slice(p.len, ng, g, x->es, &so, &sl);
        hx_all_partials(x, k, p.stride, so);
        hx_reduce(x, hx_loc(HX_OUT, x->me, (p.off + so) * x->es), x->locs, ng, sl);
    }
    if (hx_barrier(x) != ZC_OK) {
        return;
    }
    for (int k = li; k < x->nranks; k += l) {
        hx_piece_t p = hx_piece(x, k);
        for (int j = 1; j < ng; j++) {
            int s = (g + j) % ng;
            size_t so, sl;
            coll_slice(p.len, ng, s, x->es, &so, &sl);
            size_t at = (p.off + so) * x->es;
            hx_copy(x, hx_loc(HX_OUT, x->me, at), hx_loc(HX_OUT, hx_holder(x, s, k), at), sl);
        }
        for (int j = 1; j < l; j++) {
            int q = hx_member(x, g, (li + j) % l);
            hx_copy(x, hx_loc(HX_OUT, q, p.off * x->es), hx_loc(HX_OUT, x->me, p.off * x->es),
                    p.len);
        }
    }
}

void hx_reduce_root(hx_t *x)
{
    int g = hx_group(x, x->me);
    hx_group_partials(x);
    if (hx_barrier(x) != ZC_OK || g != hx_group(x, x->root)) {
        return;
    }
    int l = hx_size(x, g);
    for (int k = x->g->index_of[x->me]; k < x->nranks; k += l) {
        hx_piece_t p = hx_piece(x, k);
        hx_all_partials(x, k, p.stride, 0);
        hx_reduce(x, hx_loc(HX_OUT, x->root, p.off * x->es), x->locs, x->g->ngroups, p.len);
    }
}

/* ---- ReduceScatter / AllGather: ranks outside a group, dealt to its members ---- */

/* Index of rank b among the ranks outside group h, in rank order. */
static int hx_outside_index(const hx_t *x, int h, int b)
{
    int below = 0;
    for (int i = 0; i < hx_size(x, h) && hx_member(x, h, i) < b; i++) {
        below++;
    }
    return b - below;
}

/* Group h's partial of block b: b outside h, dealt to slot i / L of member
 * i mod L; b in h, in b's slot after those (ceil((nranks - L) / L)). */
static hx_loc_t hx_rs_partial(const hx_t *x, int h, int b)
{
    int l = hx_size(x, h);
    size_t bytes = x->count * x->pes;
    if (hx_group(x, b) == h) {
        return hx_loc(HX_PART, b, (size_t)((x->nranks - 1) / l) * bytes);
    }
    int i = hx_outside_index(x, h, b);
    return hx_loc(HX_PART, hx_member(x, h, i % l), (size_t)(i / l) * bytes);
}

/* Sources: block b of my group's inputs, member order. */
static void hx_group_blocks(hx_t *x, int g, int b)
{
    for (int i = 0; i < hx_size(x, g); i++) {
        x->locs[i] = hx_loc(HX_IN, hx_member(x, g, i), (size_t)b * x->count * x->es);
    }
}

void hx_reducescatter(hx_t *x)
{
    int g = hx_group(x, x->me);
    int l = hx_size(x, g);
    int li = x->g->index_of[x->me];
    for (int b = 0, i = 0; b < x->nranks; b++) {
        if (hx_group(x, b) == g) {
            continue;
        }
        if (i % l == li) {
            hx_group_blocks(x, g, b);
            hx_reduce(x, hx_rs_partial(x, g, b), x->locs, l, x->count);
        }
        i++;
    }
    if (hx_barrier(x) != ZC_OK) {
        return;
    }
    hx_group_blocks(x, g, x->me);
    hx_reduce(x, hx_rs_partial(x, g, x->me), x->locs, l, x->count);
    for (int h = 0; h < x->g->ngroups; h++) {
        x->locs[h] = hx_rs_partial(x, h, x->me);
    }
    hx_reduce(x, hx_loc(HX_OUT, x->me, 0), x->locs, x->g->ngroups, x->count);
    if (x->conflict_any) {
        hx_barrier(x);
    }
}

/* Where block q is read: in[q], or its copy in scratch[q] when in[q]
 * overlaps out[q] in a conflicting way. */
static hx_loc_t hx_ag_src(const hx_t *x, int q)
{
    int snap = x->a != NULL && x->conflict_any && hx_ag_conflict(x->a, q, x->count * x->es);
    return hx_loc(snap ? HX_SCR : HX_IN, q, 0);
}

/* Copy slot q of my output to my group's other outputs. */
static void hx_share_slot(hx_t *x, int g, int q)
{
    int l = hx_size(x, g);
    int li = x->g->index_of[x->me];
    size_t so = (size_t)q * x->count * x->es;
    for (int j = 1; j < l; j++) {
        int p = hx_member(x, g, (li + j) % l);
        hx_copy(x, hx_loc(HX_OUT, p, so), hx_loc(HX_OUT, x->me, so), x->count);
    }
}

void hx_allgather(hx_t *x)
{
    int me = x->me;
    if (x->conflict_any) {
        if (x->conflict_me) {
            hx_copy(x, hx_loc(HX_SCR, me, 0), hx_loc(HX_IN, me, 0), x->count);
        }
        if (hx_barrier(x) != ZC_OK) {
            return;
        }
    }
    int g = hx_group(x, me);
    int l = hx_size(x, g);
    int li = x->g->index_of[me];
    size_t bytes = x->count * x->es;
    hx_copy(x, hx_loc(HX_OUT, me, (size_t)me * bytes), hx_ag_src(x, me), x->count);
    hx_share_slot(x, g, me);
    for (int q = 0, i = 0; q < x->nranks; q++) {
        if (hx_group(x, q) == g) {
            continue;
        }
        if (i % l == li) {
            hx_copy(x, hx_loc(HX_OUT, me, (size_t)q * bytes), hx_ag_src(x, q), x->count);
            hx_share_slot(x, g, q);
        }
        i++;
    }
}

void hx_broadcast(hx_t *x)
{
    int g = hx_group(x, x->me);
    int rooted = g == hx_group(x, x->root);
    int l = hx_size(x, g);
    int li = x->g->index_of[x->me];
    size_t es = x->es;
    if (rooted && x->me != x->root) {
        hx_copy(x, hx_loc(HX_OUT, x->me, 0), hx_loc(HX_IN, x->root, 0), x->count);
    }
    size_t off, len;
    coll_slice(x->count, l, li, es, &off, &len);
    if (!rooted) {
        hx_copy(x, hx_loc(HX_OUT, x->me, off * es), hx_loc(HX_IN, x->root, off * es), len);
    }
    if (hx_barrier(x) != ZC_OK || rooted) {
        return;
    }
    for (int j = 1; j < l; j++) {
        int i = (li + j) % l;
        coll_slice(x->count, l, i, es, &off, &len);
        hx_copy(x, hx_loc(HX_OUT, x->me, off * es), hx_loc(HX_OUT, hx_member(x, g, i), off * es),
                len);
    }
}

/* ---- flat models (counting only) ---- */

/* Every rank's input from byte off, rank order. */
static void hx_all_inputs(hx_t *x, size_t off)
{
    for (int q = 0; q < x->nranks; q++) {
        x->locs[q] = hx_loc(HX_IN, q, off);
    }
}

void hx_flat(hx_t *x, int kind)
{
    int me = x->me;
    size_t es = x->es;
    size_t bytes = x->count * es;
    size_t off, len;
    coll_slice(x->count, x->nranks, me, es, &off, &len);
    switch (kind) {
    case COLL_HIER_ALLREDUCE: /* reduce-scatter-write */
        hx_all_inputs(x, off * es);
        hx_reduce(x, hx_loc(HX_OUT, me, off * es), x->locs, x->nranks, len);
        for (int q = 0; q < x->nranks; q++) {
            hx_copy(x, hx_loc(HX_OUT, q, off * es), hx_loc(HX_OUT, me, off * es), len);
        }
        break;
    case COLL_HIER_ALLGATHER: /* pull */
        for (int q = 0; q < x->nranks; q++) {
            hx_copy(x, hx_loc(HX_OUT, me, (size_t)q * bytes), hx_loc(HX_IN, q, 0), x->count);
        }
        break;
    case COLL_HIER_REDUCESCATTER:
        hx_all_inputs(x, (size_t)me * bytes);
        hx_reduce(x, hx_loc(HX_OUT, me, 0), x->locs, x->nranks, x->count);
        break;
    case COLL_HIER_BROADCAST:
        if (me != x->root) {
            hx_copy(x, hx_loc(HX_OUT, me, 0), hx_loc(HX_IN, x->root, 0), x->count);
        }
        break;
    default: /* Reduce, sliced */
        hx_all_inputs(x, off * es);
        hx_reduce(x, hx_loc(HX_OUT, x->root, off * es), x->locs, x->nranks, len);
        break;
    }
}
