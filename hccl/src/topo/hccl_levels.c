/*
 * The levels of a communicator from its bootstrap table, their log, and
 * the log of the algorithm each collective takes (design in hccl_topo.h).
 *
 * A rank's key at level kind k is the first k + 1 of (host id, package,
 * NUMA node, L3 group) of its entry; two ranks share a group at level k
 * when their keys are equal, so every level refines the one before. A
 * level is kept when it has more groups than the last level kept.
 */
#include "topo/hccl_topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zc/log.h"
#include "zccl/vmm_ext.h"

static const char *const zh_kind_names[ZH_KINDS] = {"host", "package", "numa", "l3"};

const char *zh_level_kind_name(int kind)
{
    return kind >= 0 && kind < ZH_KINDS ? zh_kind_names[kind] : "?";
}

/* Do ranks a and b share a group at level kind `kind`? */
static int zh_same_group(const zh_boot_entry_t *a, const zh_boot_entry_t *b, int kind)
{
    return a->host_id == b->host_id && (kind < ZH_KIND_PACKAGE || a->package == b->package) &&
           (kind < ZH_KIND_NUMA || a->numa == b->numa) && (kind < ZH_KIND_L3 || a->l3 == b->l3);
}

static void zh_level_free(zh_level_t *lv)
{
    free(lv->group_of);
    free(lv->index_of);
    free(lv->first);
    free(lv->members);
    memset(lv, 0, sizeof(*lv));
}

/* Level kind `kind` of the n ranks of table; ZC_OK or ZC_ERR_NOMEM. Ranks
 * are compared with the first rank of each group found so far (lead[g]). */
static int zh_level_build(zh_level_t *lv, int kind, const zh_boot_entry_t *table, int n, int me)
{
    lv->kind = kind;
    lv->group_of = calloc((size_t)n, sizeof(int));
    lv->index_of = calloc((size_t)n, sizeof(int));
    lv->first = calloc((size_t)n + 1, sizeof(int));
    lv->members = calloc((size_t)n, sizeof(int));
    int *count = calloc((size_t)n, sizeof(int));
    int *lead = calloc((size_t)n, sizeof(int));
    int st = ZC_ERR_NOMEM;
    if (lv->group_of != NULL && lv->index_of != NULL && lv->first != NULL && lv->members != NULL &&
        count != NULL && lead != NULL) {
        int ng = 0;
        for (int r = 0; r < n; r++) {
            int g = 0;
            while (g < ng && !zh_same_group(&table[lead[g]], &table[r], kind)) {
                g++;
            }
            if (g == ng) {
                lead[ng++] = r;
            }
            lv->group_of[r] = g;
            lv->index_of[r] = count[g]++;
        }
        for (int g = 0; g < ng; g++) {
            lv->first[g + 1] = lv->first[g] + count[g];
        }
        for (int r = 0; r < n; r++) {
            lv->members[lv->first[lv->group_of[r]] + lv->index_of[r]] = r;
        }
        lv->ngroups = ng;
        lv->group = lv->group_of[me];
        st = ZC_OK;
    }
    free(count);
    free(lead);
    return st;
}

void zh_levels_free(zh_levels_t *lv)
{
    if (lv == NULL) {
        return;
    }
    for (int i = 0; i < lv->n; i++) {
        zh_level_free(&lv->level[i]);
    }
    free(lv);
}

/* The level hierarchical collectives group by: on one host, the innermost
 * NUMA or package level (a NUMA node's ranks share its memory; crossing
 * nodes is what costs). Not L3: an L3 group's ranks share a cache but not
 * a memory, and ranks of different L3 groups on one node read the same
 * memory, so grouping by L3 saves cache traffic the extra barrier and
 * scratch pass do not pay for. Derived from the levels alone: the same
 * on every rank. */
static void zh_levels_hier_pick(zh_levels_t *lv)
{
    lv->hier = NULL;
    if (lv->level[ZH_LEVEL_HOST].ngroups != 1) {
        return; /* across hosts: the tier's local comms group */
    }
    for (int i = 1; i < lv->n; i++) {
        int kind = lv->level[i].kind;
        if (kind == ZH_KIND_NUMA || kind == ZH_KIND_PACKAGE) {
            lv->hier = &lv->level[i];
        }
    }
    if (lv->hier != NULL) {
        lv->hier_groups = zh_level_groups(lv->hier);
    }
}

int zh_levels_build(const zh_boot_entry_t *table, int n, int me, zh_levels_t **out)
{
    *out = NULL;
    zh_levels_t *lv = calloc(1, sizeof(*lv));
    if (lv == NULL) {
        return ZC_ERR_NOMEM;
    }
    lv->nranks = n;
    lv->me = me;
    for (int kind = ZH_KIND_HOST; kind < ZH_KINDS; kind++) {
        zh_level_t *l = &lv->level[lv->n];
        if (zh_level_build(l, kind, table, n, me) != ZC_OK) {
            zh_level_free(l);
            zh_levels_free(lv);
            return ZC_ERR_NOMEM;
        }
        if (lv->n > 0 && l->ngroups == lv->level[lv->n - 1].ngroups) {
            zh_level_free(l); /* splits nothing */
        } else {
            lv->n++;
        }
    }
    zh_levels_hier_pick(lv);
    *out = lv;
    return ZC_OK;
}

const zh_level_t *zh_levels_find(const zh_levels_t *lv, int kind)
{
    for (int i = 0; lv != NULL && i < lv->n; i++) {
        if (lv->level[i].kind == kind) {
            return &lv->level[i];
        }
    }
    return NULL;
}

/* ---- log ----------------------------------------------------------------------------- */

/* Append a group's members to buf as rank ranges ("0-3,8"); "..." when it
 * does not fit. */
static void zh_level_group_str(const zh_level_t *lv, int g, char *buf, size_t len, size_t *at)
{
    int m = zh_level_size(lv, g);
    for (int i = 0; i < m && *at < len; i++) {
        int r = zh_level_member(lv, g, i);
        int j = i;
        while (j + 1 < m && zh_level_member(lv, g, j + 1) == zh_level_member(lv, g, j) + 1) {
            j++;
        }
        int k = j > i ? snprintf(buf + *at, len - *at, "%s%d-%d", i > 0 ? "," : "", r,
                                 zh_level_member(lv, g, j))
                      : snprintf(buf + *at, len - *at, "%s%d", i > 0 ? "," : "", r);
        *at += k > 0 ? (size_t)k : 0;
        i = j;
    }
}

static void zh_level_log(const zh_level_t *lv, int idx)
{
    char buf[768];
    size_t at = 0;
    for (int g = 0; g < lv->ngroups && at < sizeof(buf); g++) {
        int k = snprintf(buf + at, sizeof(buf) - at, "%s{", g > 0 ? " " : "");
        at += k > 0 ? (size_t)k : 0;
        zh_level_group_str(lv, g, buf, sizeof(buf), &at);
        if (at < sizeof(buf)) {
            k = snprintf(buf + at, sizeof(buf) - at, "}");
            at += k > 0 ? (size_t)k : 0;
        }
    }
    if (at >= sizeof(buf)) {
        memcpy(buf + sizeof(buf) - 4, "...", 4);
    }
    ZC_INFO(ZC_SUB_TOPO, "level %d %s: %d groups, members %s", idx, zh_level_kind_name(lv->kind),
            lv->ngroups, buf);
}

void zh_levels_log(const zh_levels_t *lv, const zh_boot_entry_t *mine)
{
    if (lv->me == 0) {
        ZC_INFO(ZC_SUB_TOPO, "%d ranks, %d levels (%s)", lv->nranks, lv->n,
                lv->n == 1 ? "one group below the host: flat" : "hierarchical");
        for (int i = 0; i < lv->n; i++) {
            zh_level_log(&lv->level[i], i);
        }
    }
    char buf[256];
    size_t at = 0;
    for (int i = 0; i < lv->n && at < sizeof(buf); i++) {
        const zh_level_t *l = &lv->level[i];
        int k = snprintf(buf + at, sizeof(buf) - at, "%s%s %d [%d of %d]", i > 0 ? ", " : "",
                         zh_level_kind_name(l->kind), l->group, l->index_of[lv->me],
                         zh_level_size(l, l->group));
        at += k > 0 ? (size_t)k : 0;
    }
    ZC_INFO(ZC_SUB_TOPO, "rank %d: NUMA node %d, package %d, L3 group %d (%s); groups: %s", lv->me,
            mine->numa, mine->package, mine->l3, zccl_topo_rule_name(mine->place_rule), buf);
}
