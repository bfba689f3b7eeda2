/*
 * A communicator's levels: its topology as a list, the outermost first.
 *
 * Each level splits the ranks into groups; a group's ranks share what the
 * level offers and each level's groups lie within the groups of the one
 * before. The kinds, in order: host (ranks with the same zc_host_id: shared
 * memory, the zero-copy machinery), package (socket), NUMA node, L3 group.
 * A rank's package, node and L3 come from its place (zccl_topo_place, hwloc
 * in vmm_topo.c), which travels in its bootstrap entry, so every rank builds
 * the same list from the same table. The host level is always there (one
 * group on one host); a level below it is kept only when it splits a group
 * of the level kept before it (one package, one node: dropped), so a comm
 * on one NUMA node has just {host} and runs the flat algorithms.
 *
 * Groups are numbered by their lowest global rank and members keep rank
 * order: "my group at level L" is level[L].group, "group g's members" are
 * members[first[g] .. first[g + 1]), "my index in my group" is
 * index_of[me]. Memory: 4 ints per rank per level.
 *
 * What a schedule moves across each level is counted by collectives'
 * coll_hier_cost (the algorithm over one level, counted across another),
 * for the cost report (benchmarks/topo_cost.c).
 */
#ifndef HCCL_TOPO_H
#define HCCL_TOPO_H

#include <stdatomic.h>
#include <stdint.h>

#include "coll/coll_hier.h"
#include "core/hccl_internal.h"

typedef enum {
    ZH_KIND_HOST = 0,
    ZH_KIND_PACKAGE,
    ZH_KIND_NUMA,
    ZH_KIND_L3,
    ZH_KINDS
} zh_level_kind_t;

typedef struct {
    int kind; /* zh_level_kind_t */
    int ngroups;
    int group;     /* mine */
    int *group_of; /* by global rank */
    int *index_of; /* index in its group, by global rank */
    int *first;    /* group g's members: members[first[g] .. first[g + 1]) */
    int *members;  /* global ranks, by group then rank */
} zh_level_t;

/* The host level is always level 0. */
#define ZH_LEVEL_HOST 0

/* Size classes the algorithm log tells apart: bytes in (2^(k-1), 2^k]. */
#define ZH_SIZE_CLASSES 64

typedef struct zh_levels {
    int nranks;
    int me;
    int n; /* levels kept, host first */
    zh_level_t level[ZH_KINDS];
    /* The level the one-host hierarchical collectives group by (NULL: flat):
     * the innermost NUMA or package level of a comm on one host
     * (zh_levels_hier_pick), and it as collectives' groups. */
    const zh_level_t *hier;
    coll_groups_t hier_groups;
    /* (collective, size class) pairs whose algorithm was logged, a bit per
     * class (zh_levels_log_algo) */
    atomic_uint_fast64_t logged[ZH_OP_MAX];
} zh_levels_t;

static inline int zh_level_size(const zh_level_t *lv, int g)
{
    return lv->first[g + 1] - lv->first[g];
}
static inline int zh_level_member(const zh_level_t *lv, int g, int i)
{
    return lv->members[lv->first[g] + i];
}

/* The level as collectives' groups (coll/coll_hier.h): the same arrays. */
static inline coll_groups_t zh_level_groups(const zh_level_t *lv)
{
    return (coll_groups_t){lv->ngroups, lv->group_of, lv->index_of, lv->first, lv->members};
}

/* hccl_levels.c: build the levels of the n ranks of table (me: my rank);
 * ZC_OK or ZC_ERR_NOMEM (*out NULL). Free with zh_levels_free (NULL ok). */
int zh_levels_build(const zh_boot_entry_t *table, int n, int me, zh_levels_t **out);
void zh_levels_free(zh_levels_t *lv);
/* The level of kind `kind`, NULL when it was dropped. */
const zh_level_t *zh_levels_find(const zh_levels_t *lv, int kind);
const char *zh_level_kind_name(int kind);
/* At INFO (TOPO): rank 0 the levels, one line each; every rank its place
 * and its group and index at each level. */
void zh_levels_log(const zh_levels_t *lv, const zh_boot_entry_t *mine);
/* At INFO (TOPO), once per (collective, size class) on this comm: the
 * algorithm chosen for op kind `kind` of `bytes` per rank ("flat" when by
 * is NULL, else "hier:<by's kind>"), and the path; the line is formatted
 * only when it is logged. */
void zh_levels_log_algo(zh_levels_t *lv, int kind, uint64_t bytes, const zh_level_t *by,
                        const char *path);

#endif /* HCCL_TOPO_H */
