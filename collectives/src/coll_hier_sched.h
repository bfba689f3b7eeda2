/*
 * The hierarchical schedules of one rank (coll_hier_sched.c) and the flat
 * models the cost counter compares them with.
 */
#ifndef COLL_HIER_SCHED_H
#define COLL_HIER_SCHED_H

#include "coll_hier_exec.h"

void hx_allreduce(hx_t *x);
void hx_allgather(hx_t *x);
void hx_reducescatter(hx_t *x);
void hx_broadcast(hx_t *x);
void hx_reduce_root(hx_t *x); /* Reduce */

/** The flat direct algorithm of kind (coll_hier_kind_t), large-message form,
 *  as executor moves (counting only). */
void hx_flat(hx_t *x, int kind);

/** AllGather: does in[q] overlap out[q] other than as slot q (bytes each)? */
int hx_ag_conflict(const coll_args_t *a, int q, size_t bytes);

#endif /* COLL_HIER_SCHED_H */
