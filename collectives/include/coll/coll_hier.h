/*
 * Hierarchical direct collectives: the ranks of one host split into groups
 * (a NUMA node, a package), where reading another group's memory costs more
 * than reading one's own. Each algorithm works within a group first, then
 * across groups among the ranks holding each piece (every group's ranks
 * share the cross-group work, so no leader is a bottleneck), then within
 * the group again. Same contract as coll.h's direct algorithms (every rank
 * calls with the same arguments but its own rank, barrier() equally often
 * on every rank, entry and exit barriers are the caller's), plus:
 *
 *  - groups: one level of the topology, the same on every rank;
 *  - scratch[r]: rank r's scratch region of scratch_bytes bytes, mapped in
 *    every rank's process (like ccl[r]), at least coll_hier_scratch_bytes;
 *    it must not overlap any rank's in/out buffers. Partials live there.
 *    The caller's exit barrier keeps it alive until every peer has read it.
 *
 * Order (deterministic): a reduction is, element by element,
 *     P_g = in[m_g0] op in[m_g1] op ... (group g's members in rank order)
 *     result = P_0 op P_1 op ... op P_{G-1} (groups in group order),
 * each P_g kept in the dtype, except for fp16/bf16, whose P_g stay fp32
 * (for every op) so that, as on the flat path, they accumulate in fp32
 * over all inputs and round once. Every rank gets the same bits on every
 * run; integer ops and MAX/MIN equal the flat result.
 *
 * Barriers per call (count > 0; 0 for count 0 and for argument errors,
 * which every rank detects alike before the first barrier): AllReduce 2,
 * Reduce 1, Broadcast 1, ReduceScatter 1 (+1 when some out[r] overlaps
 * in[r] other than as its own block), AllGather 0 (+1 when some in[r]
 * overlaps out[r] other than as its own slot). A failure only one rank
 * sees (malloc) still joins every barrier, then returns the error.
 *
 * docs/ARCHITECTURE.md §7 and docs/decisions/0033 describe the schedules.
 */
#ifndef COLL_COLL_HIER_H
#define COLL_COLL_HIER_H

#include "coll/coll.h"

#include <stddef.h>
#include <stdint.h>

/* One level of groups over nranks = first[ngroups] ranks (hccl's zh_level_t
 * without "my group"). Groups are numbered by their lowest rank and members
 * listed in rank order, so every rank derives the same numbering. */
typedef struct {
    int ngroups;
    const int *group_of; /* by rank: its group */
    const int *index_of; /* by rank: its index within its group */
    const int *first;    /* ngroups + 1: group g is members[first[g] .. first[g + 1]) */
    const int *members;  /* ranks, by group then rank */
} coll_groups_t;

typedef enum {
    COLL_HIER_ALLREDUCE = 0,
    COLL_HIER_ALLGATHER = 1,     /* count = per-rank send count */
    COLL_HIER_REDUCESCATTER = 2, /* count = recv count */
    COLL_HIER_BROADCAST = 3,
    COLL_HIER_REDUCE = 4,
    COLL_HIER_KINDS = 5,
} coll_hier_kind_t;

typedef struct {
    const coll_groups_t *groups;
    void *const *scratch; /* scratch[r] of every rank r */
    size_t scratch_bytes; /* of each scratch region (the same on every rank) */
} coll_hier_t;

/** Checks groups for nranks ranks: counts, a partition listed in rank order
 *  with group_of / index_of agreeing, groups numbered by lowest rank.
 *  ZC_OK, ZC_ERR_PTR or ZC_ERR_INVAL (logged, naming the field). */
int coll_hier_check_groups(const coll_groups_t *g, int nranks);

/**
 * Bytes of scratch each rank needs for an op of `count` elements of dtype
 * (with stride S = the first of nranks 64-byte-line slices of count, and
 * B = count elements, each of a partial's size: 4 bytes for fp16/bf16, else
 * the dtype's): AllReduce and Reduce ceil(nranks / Lmin) x S, where Lmin is
 * the smallest group's size; ReduceScatter max over groups of
 * (ceil((nranks - L) / L) + 1) x B; AllGather B of dtype; Broadcast 0.
 * ZC_OK, or ZC_ERR_INVAL for a bad kind, dtype, groups or overflow (logged).
 */
int coll_hier_scratch_bytes(int kind, const coll_groups_t *g, size_t count, int dtype,
                            size_t *bytes);

/** Minimum op data per rank (count x dtype size, x nranks for AllGather and
 *  ReduceScatter) for the hierarchical algorithms: below it the flat (and
 *  inline) paths stay, their barriers cheaper than the traffic saved. */
#define COLL_HIER_MIN_BYTES ((size_t)256 << 10)

/**
 * 1 when the hierarchical algorithm of kind should replace the flat one for
 * an op whose count x dtype size is `bytes`: more than one group, some group
 * of two ranks or more (one-rank groups cross as much as flat), and op data
 * (bytes, x nranks for AllGather and ReduceScatter) at least
 * COLL_HIER_MIN_BYTES. Every rank gets the same answer. 0 for bad groups.
 */
int coll_hier_worth(const coll_groups_t *g, int kind, size_t bytes);

/** Bytes that cross a group boundary: read from, or written to, a buffer of a
 *  rank in another group than the rank doing it, summed over all ranks. */
typedef struct {
    uint64_t read;
    uint64_t written;
} coll_cross_t;

typedef struct {
    coll_cross_t hier;  /* the hierarchical schedule, counted by running it */
    coll_cross_t flat;  /* the flat direct algorithm's large-message form */
    long hier_barriers; /* per rank (the same on every rank) */
} coll_hier_cost_t;

/**
 * Counts, without moving data, what an op of kind (count elements of dtype,
 * root for Broadcast / Reduce, out of place) moves across the boundaries of
 * `across` (NULL: g itself): the hierarchical schedule over g is run for
 * every rank in counting mode by the same code that moves the data; flat
 * models coll_allreduce.c's reduce-scatter-write, AllGather's pull (push
 * writes the same bytes that pull reads), ReduceScatter's direct reduce,
 * Broadcast's pull and Reduce's sliced form. `across` is any grouping of
 * the same ranks: a coarser level (the algorithm by NUMA node, the bytes
 * across packages), a finer one, or one rank per group (every byte moved
 * between ranks). ZC_OK, ZC_ERR_INVAL / ZC_ERR_PTR (logged) or ZC_ERR_NOMEM.
 */
int coll_hier_cost(int kind, const coll_groups_t *g, const coll_groups_t *across, int root,
                   size_t count, int dtype, coll_hier_cost_t *cost);

int coll_hier_allreduce(const coll_args_t *a, const coll_hier_t *h);
int coll_hier_allgather(const coll_args_t *a, const coll_hier_t *h);
int coll_hier_reducescatter(const coll_args_t *a, const coll_hier_t *h);
int coll_hier_broadcast(const coll_args_t *a, const coll_hier_t *h);
int coll_hier_reduce(const coll_args_t *a, const coll_hier_t *h);

#endif /* COLL_COLL_HIER_H */
