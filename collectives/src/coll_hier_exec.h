/*
 * The executor the hierarchical schedules (coll_hier.c) run on. A schedule
 * names every byte range as (buffer kind, owner rank, byte offset) and
 * calls hx_reduce / hx_copy / hx_barrier; the executor either moves the
 * data (one rank of a real op) or counts the bytes that cross a boundary
 * of a grouping (the schedule's own groups or another) and the barriers (coll_hier_cost, for every
 * rank in turn). The counts therefore come from the code that moves the data.
 */
#ifndef COLL_HIER_EXEC_H
#define COLL_HIER_EXEC_H

#include "coll/coll_hier.h"
#include "coll_internal.h"

/* HX_SCR holds dtype elements, HX_PART (the same scratch) reduction
 * partials: fp32 for fp16 / bf16 (rounded once, at the end), else dtype. */
enum { HX_IN, HX_OUT, HX_SCR, HX_PART };

typedef struct {
    int kind; /* HX_IN, HX_OUT, HX_SCR, HX_PART */
    int rank; /* whose buffer */
    size_t off;
} hx_loc_t;

typedef struct {
    const coll_args_t *a; /* the op (NULL when counting) */
    const coll_groups_t *g;
    const coll_groups_t *across; /* counting: the boundaries counted (g or another grouping) */
    void *const *scr;
    char *out_me; /* where this rank's HX_OUT resolves: out[me] or a private buffer */
    int me, nranks, root, dtype, op;
    size_t count, es;
    size_t pes;        /* bytes of a partial's element (HX_PART) */
    coll_cross_t *cnt; /* counting mode when non-NULL: barriers are counted, not called */
    hx_loc_t *locs;    /* nranks source locations */
    const void **ptrs; /* nranks source pointers */
    long nbar;         /* barriers so far */
    int st;            /* first barrier failure */
    /* AllGather / ReduceScatter: some rank's in and out overlap other than
     * in the in-place form; conflict_me: this rank's do */
    int conflict_any, conflict_me;
} hx_t;

/* Group of rank r, size of group g, member i of group g. */
static inline int hx_group(const hx_t *x, int r)
{
    return x->g->group_of[r];
}

static inline int hx_size(const hx_t *x, int g)
{
    return x->g->first[g + 1] - x->g->first[g];
}

static inline int hx_member(const hx_t *x, int g, int i)
{
    return x->g->members[x->g->first[g] + i];
}

static inline hx_loc_t hx_loc(int kind, int rank, size_t off)
{
    hx_loc_t l = {kind, rank, off};
    return l;
}

/** dst = src[0] op ... op src[n-1] over elems elements (n <= nranks), the
 *  sources all of one kind as to HX_PART. */
void hx_reduce(hx_t *x, hx_loc_t dst, const hx_loc_t *src, int n, size_t elems);

/** dst = src, elems elements. */
void hx_copy(hx_t *x, hx_loc_t dst, hx_loc_t src, size_t elems);

/** The op's barrier (counted when counting). 0 to go on, else the failure
 *  (kept in x->st): the schedule returns at once. */
int hx_barrier(hx_t *x);

#endif /* COLL_HIER_EXEC_H */
