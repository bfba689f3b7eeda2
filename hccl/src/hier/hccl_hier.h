/*
 * The tier across hosts: a communicator whose ranks lie on several hosts.
 *
 * Levels. The comm's levels (topo/hccl_topo.h, built at init from the
 * bootstrap table and the places hwloc gives each rank) are the list this
 * tier walks, the outermost first: level 0, the host, splits the ranks by
 * zc_host_id (boot id and network namespace); a group is the ranks of one
 * host, which share memory and run the zero-copy machinery among
 * themselves through the local comm. The levels below it (package, NUMA
 * node, L3 group, where they split a host) follow in the same list; the
 * algorithms here only ask a level for "my group", "group g's members" and
 * "my index in my group", and use the host level only.
 *
 * Groups are numbered by their lowest global rank and members keep global
 * rank order, so every rank derives the same numbering from the bootstrap
 * table. Reductions combine host partials in host order, and each host
 * partial is its local ranks' in local rank order: the order is fixed, so
 * every rank gets bitwise identical results on every run.
 *
 * Ops. A collective is numbered when issued (caller thread) and runs as a
 * stream task once its predecessor on this comm finished here; a task runs
 * its local steps on the local comm (zh_op_run_now) and its inter-host
 * steps on UCX (hccl_net.h), one op at a time (run lock). A failure breaks
 * the comm and the local comm (so local peers fail at once, not at their
 * timeout); later ops fail fast.
 *
 * Memory per rank: O(nranks) words for the tables below and one UCX
 * endpoint per rank on another host (UCX's own cost, a few KiB each with
 * tcp), plus the local comm's O(local ranks) control state and a scratch
 * buffer as large as the largest inter-host phase so far.
 */
#ifndef HCCL_HIER_H
#define HCCL_HIER_H

#include <pthread.h>
#include <stdatomic.h>

#include "core/hccl_internal.h"
#include "hier/hccl_net.h"
#include "topo/hccl_topo.h"

typedef struct zh_hier {
    zh_comm_t *local;        /* my host's ranks, the zero-copy machinery (not registered) */
    const zh_level_t *level; /* the comm's levels (c->levels), host first */
    zh_net_t *net;
    uint8_t *remote;    /* by global rank: on another host */
    uint32_t *send_seq; /* point-to-point messages issued, by global peer */
    uint32_t *recv_seq;
    atomic_uint issue_seq; /* collectives issued (caller thread) */
    atomic_uint done;      /* collectives finished here */
    pthread_mutex_t run;   /* one op of this comm at a time */
    void *scratch;
    size_t scratch_bytes;
    size_t chunk;                   /* bytes per pipelined inter-host message */
    atomic_uint_fast64_t net_bytes; /* bytes this rank sent to other hosts */
    atomic_uint_fast64_t net_ops;
} zh_hier_t;

/* The host level: my host's size, my index on it, member i of host h. */
static inline int zh_host_size(const zh_hier_t *h, int g)
{
    return h->level[ZH_LEVEL_HOST].first[g + 1] - h->level[ZH_LEVEL_HOST].first[g];
}
static inline int zh_host_member(const zh_hier_t *h, int g, int i)
{
    return h->level[ZH_LEVEL_HOST].members[h->level[ZH_LEVEL_HOST].first[g] + i];
}

/* One running op, as the algorithms see it. */
typedef struct {
    zh_comm_t *c;
    zh_hier_t *h;
    const zh_op_t *op;
    uint32_t seq;
    size_t sz;  /* element size */
    int rs_raw; /* ReduceScatter: some rank's recv overlaps its send elsewhere (agreement) */
} zh_hop_t;

#define ZH_LV(x) (&(x)->h->level[ZH_LEVEL_HOST])

/* A growable list of transfer requests (hccl_hier_step.c). */
typedef struct {
    zh_net_req_t *r;
    int n;
    int cap;
} zh_hier_reqs_t;

static inline char *zh_hier_at(const void *base, uint64_t elems, size_t sz)
{
    return (char *)(uintptr_t)base + elems * sz;
}

/* Does [a, +na) overlap [b, +nb)? */
static inline int zh_hier_overlap(const void *a, size_t na, const void *b, size_t nb)
{
    return na > 0 && nb > 0 && (const char *)a < (const char *)b + nb &&
           (const char *)b < (const char *)a + na;
}

/* hccl_hier_step.c: a new slot of q (NULL when out of memory); post a send
 * (counted in net_bytes) or a receive of op x, tag step `step`, onto q;
 * wait for all of q (cancelling it when st is an error) and free it. */
zh_net_req_t *zh_hier_reqs_add(zh_hier_reqs_t *q);
int zh_hier_post(zh_hop_t *x, zh_hier_reqs_t *q, int send, int peer, uint32_t step, void *buf,
                 size_t bytes);
int zh_hier_reqs_finish(zh_hop_t *x, zh_hier_reqs_t *q, int st);
/* Each block crosses to each other host once (AllGather) and each host
 * partial to its rank once (ReduceScatter): host g lists the ranks of the
 * other hosts (hosts in order, members in rank order), and its local rank i
 * serves the entries p with p mod (g's ranks) == i. zh_hier_pos: rank s's
 * place in host g's list; zh_hier_list: my host's list (n - my host's ranks
 * entries), returns its length. */
int zh_hier_pos(zh_hop_t *x, int g, int s);
int zh_hier_list(zh_hop_t *x, int *list);

/* hccl_hier.c */
void *zh_hier_scratch(zh_hier_t *h, size_t bytes);
/* A local rank that failed meanwhile timed out waiting for another host: an
 * op that failed here because of it (st ZC_ERR_REMOTE) timed out too, rather
 * than "a peer failed". Returns st, or ZC_ERR_TIMEOUT then. */
int zh_hier_cause(zh_comm_t *l, int st);
int zh_hier_wait(zh_hop_t *x, zh_net_req_t *r, int n);
int zh_hier_local(zh_hop_t *x, const zh_op_t *op);

/* hccl_hier_agree.c: ZC_OK when every rank passed the same descriptor,
 * ZC_ERR_INVAL (on every rank) when not, or a transport error. */
int zh_hier_agree(zh_hop_t *x);

/* hccl_hier_copy.c: AllGather(V); Scatter and AlltoAll(V). */
int zh_hier_allgather(zh_hop_t *x);
int zh_hier_copy_op(zh_hop_t *x);

/* hccl_hier_coll.c: the algorithms; each returns ZC_OK or an error. */
int zh_hier_run(zh_hop_t *x);
int zh_hier_p2p(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n, const uint32_t *seqs);

#endif /* HCCL_HIER_H */
