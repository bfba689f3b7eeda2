/*
 * libhccl internals: the communicator, its control segment and the op path.
 *
 * Protocol:
 *  - Every rank owns a control segment (a memfd offered through the vmm
 *    broker at init; every peer maps it read/write). It starts with a version
 *    word, holds only offsets and values (never pointers), and keeps each hot
 *    flag on its own cache line with a single writer: the owning rank.
 *  - bar: the owner's barrier counter. A barrier is "bump my counter to k,
 *    wait until every peer's counter is >= k". An op needs no entry barrier:
 *    every rank publishes its descriptor and post line and waits for every
 *    peer's post of that op (hccl_op.h); the algorithm (staged algorithms
 *    add barriers of their own) and the exit barrier follow, except for the
 *    small ops that finish from the post slots. Every rank makes the same
 *    number of barrier calls per op, so counters stay equal between ops;
 *    they compare wrap-safe.
 *  - ctrl: a second counter for control-plane collectives (SetMemoryRange,
 *    CCL buffer creation) run on the caller's thread, so they never mix
 *    with barriers of ops running on stream workers.
 *  - error: set by a rank whose op failed (the HcclResult); a peer waiting
 *    fails at once instead of waiting out the timeout: with HCCL_E_PARA if
 *    the flag says so (a misuse), with HCCL_E_TIMEOUT if the flag says so and
 *    the rank it waits for is itself not failed (it is late for both), else
 *    with HCCL_E_REMOTE.
 *  - closed: set when the owner destroys its communicator; a peer waiting
 *    for that rank fails at once with HCCL_E_REMOTE (it will never come).
 *  - issued, p2p[q].issued_send / issued_recv: how many collectives, and
 *    sends to / receives from q, the owner's caller issued; peers read them
 *    only to tell a send/recv against a collective from a slow peer.
 *  - post[seq & 1]: op seq's post line. Ops of a comm are numbered at issue
 *    (caller thread) and run one at a time in that order (hccl_op_task.c), so
 *    the two slots never hold ops that overlap.
 *  - ranges/blocks: the owner's SetMemoryRange ranges and activated blocks,
 *    each with a generation; peers map a block into their shadow window of
 *    that range and re-map when the generation changes, so memory that was
 *    deactivated can never be read through a stale mapping.
 * Waiting spins ZCCL_SPIN_ITERS polls, then sleeps on the flag's futex in
 * slices, checking the peer's liveness (pidfd) and the exec timeout.
 */
#ifndef HCCL_INTERNAL_H
#define HCCL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/coll.h"
#include "hccl/hccl.h"
#include "zc/export.h"
#include "zc/status.h"

#define ZH_CTRL_VERSION 6u
/* Ranks a communicator may have across hosts; a host's share of them is
 * bounded by ZCCL_MAX_LOCAL_RANKS (at most this many), checked at init. */
#define ZH_MAX_COMM_RANKS 1024
#define ZH_MAX_RANGES 8
#define ZH_MAX_BLOCKS 256 /* per process: 512 MiB of 2 MiB segments */
#define ZH_NAME_MAX 128

/* One flag per cache line: value (futex word) and a count of sleepers so the
 * writer only makes the wake syscall when somebody sleeps. */
typedef struct {
    _Alignas(ZC_CACHELINE) atomic_uint value;
    atomic_uint sleepers;
    char pad[ZC_CACHELINE - 2 * sizeof(atomic_uint)];
} zh_flag_t;
_Static_assert(sizeof(zh_flag_t) == ZC_CACHELINE, "flag is one cache line");

/* Has counter v reached target? (wrap-safe: counters only grow) */
static inline int zh_reached(uint32_t v, uint32_t target)
{
    return (int32_t)(v - target) >= 0;
}

typedef enum {
    ZH_OP_BARRIER = 1,
    ZH_OP_ALLREDUCE,
    ZH_OP_ALLGATHER,
    ZH_OP_ALLGATHERV,
    ZH_OP_REDUCESCATTER,
    ZH_OP_REDUCESCATTERV,
    ZH_OP_BROADCAST,
    ZH_OP_REDUCE,
    ZH_OP_SCATTER,
    ZH_OP_ALLTOALL,
    ZH_OP_ALLTOALLV,
    ZH_OP_MAX
} zh_op_kind_t;

/* The V collectives' per-rank arrays, by their index in zh_op_t.v and zh_desc_t.v. */
enum { ZH_V_SEND_COUNTS, ZH_V_SEND_DISPLS, ZH_V_RECV_COUNTS, ZH_V_RECV_DISPLS, ZH_V_ARRAYS };

/* What peers need of my op beyond its post line (which holds the fields ranks
 * agree on): my buffers, which they translate, and my V arrays (rank-local
 * arguments). Nothing here is a pointer valid in another process. */
typedef struct {
    uint64_t send_va;
    uint64_t recv_va;
    uint64_t send_bytes; /* extent of the send buffer this op touches */
    uint64_t recv_bytes;
    uint64_t posted_ns; /* when a large op was posted (CLOCK_MONOTONIC); 0: not stamped */
    uint64_t pull; /* AllGather: what my post says of its form, COLL_FORM_* bits (zh_op_post) */
    /* the V collectives' arrays follow the fixed part (zh_ctrl_v) */
} zh_desc_t;

/* The line every op starts with: its first two words are a flag (value =
 * seq of the op posted in this slot, sleepers) so waits treat it as one; the
 * rest is what ranks must agree on and, for a small AllReduce / AllGather on
 * activated memory, the data itself: up to ZH_POST_DATA bytes in this line,
 * up to ZH_INLINE_MAX in the slot's inline area. Such an op costs one
 * transfer of the data per peer and no exit barrier (the slot is reused two
 * ops later, when every peer has provably read it). Past 512 bytes the
 * copies into and out of the slot cost more than the barrier saved
 * (decision 0006). */
#define ZH_POST_DATA 24
#define ZH_INLINE_MAX 512
typedef struct {
    _Alignas(ZC_CACHELINE) atomic_uint value;
    atomic_uint sleepers;
    uint8_t kind;
    uint8_t dtype;
    uint8_t redop;
    uint8_t zc_ok;
    int32_t root;
    uint64_t count;
    uint8_t data[ZH_POST_DATA];
} zh_post_t;
_Static_assert(sizeof(zh_post_t) == ZC_CACHELINE, "post slot is one cache line");
_Static_assert(offsetof(zh_post_t, value) == offsetof(zh_flag_t, value) &&
                   offsetof(zh_post_t, sleepers) == offsetof(zh_flag_t, sleepers),
               "a post slot starts like a flag");

/* The state of an entry of the ranges and blocks tables (zh_entry_state_t,
 * stored as uint32_t: the tables are read by peers from the control segment). */
typedef enum {
    ZH_ENTRY_FREE = 0, /* the slot holds nothing */
    ZH_ENTRY_LIVE = 1, /* a range is set, a block is active */
} zh_entry_state_t;

typedef struct {
    uint32_t gen;   /* bumped at every set/unset; 0 = never used */
    uint32_t state; /* zh_entry_state_t */
    uint64_t base;
    uint64_t size;
} zh_range_t;

typedef struct {
    uint32_t gen;   /* bumped at every activate/deactivate */
    uint32_t state; /* zh_entry_state_t */
    uint32_t range; /* index into ranges */
    uint32_t pad;
    uint64_t va;
    uint64_t size;
    uint64_t token; /* broker token of the physical memory */
} zh_block_t;

/* Point-to-point channel with one peer, in my control segment. The send side
 * (post, chunk, sdesc) is about what I send to that peer; the receive side
 * (ready, ack, done, rdesc) about what I receive from it. Counters only grow:
 * post/ready/done count messages, chunk/ack count staged chunks. */
typedef struct {
    uint32_t seq;
    int32_t dtype;
    uint32_t zc; /* my buffer lies wholly in activated memory */
    int32_t pad;
    uint64_t count;
    uint64_t va;
    uint64_t bytes;
} zh_p2p_desc_t;

typedef struct {
    zh_flag_t post;
    zh_flag_t chunk;
    zh_flag_t ready;
    zh_flag_t ack;
    zh_flag_t done;
    _Alignas(ZC_CACHELINE) zh_p2p_desc_t sdesc;
    /* by seq & 1: the receiver may post its next receive while the sender
     * still reads the current one */
    _Alignas(ZC_CACHELINE) zh_p2p_desc_t rdesc[2];
    /* receiver's verdict (HcclResult) of message seq, at [seq & 3]: rdesc may
     * already describe the next message when the sender looks */
    _Alignas(ZC_CACHELINE) int32_t verdict[4];
    /* sends to / receives from that peer my caller issued so far */
    atomic_uint issued_send;
    atomic_uint issued_recv;
} zh_p2p_t;

/* The fixed part of a control segment. The per-rank parts follow it at
 * offsets every rank computes alike from the communicator's rank count
 * (zh_ctrl_layout_t): the V arrays of both descriptors, then one
 * point-to-point channel per rank. */
typedef struct {
    uint32_t version;
    uint32_t rank;
    uint32_t nranks; /* the rank count its layout was computed from */
    zh_flag_t bar;
    zh_flag_t ctrl;
    zh_flag_t error;   /* non-zero: a HcclResult this rank failed with */
    zh_flag_t table;   /* seqlock over ranges/blocks (odd = being written) */
    zh_flag_t closed;  /* 1 once the owner destroyed its communicator */
    zh_flag_t issued;  /* collectives my caller issued so far */
    zh_post_t post[2]; /* by seq & 1 */
    _Alignas(ZC_CACHELINE) uint8_t idata[2][ZH_INLINE_MAX]; /* inline data, by seq & 1 */
    uint64_t ccl_token;                                     /* CCL buffer offer, 0 until created */
    uint64_t ccl_bytes;
    zh_desc_t desc[2]; /* by seq & 1 */
    zh_range_t ranges[ZH_MAX_RANGES];
    zh_block_t blocks[ZH_MAX_BLOCKS];
    uint64_t p2p_token; /* staging buffer for buffered sends, 0 until created */
    uint64_t p2p_part;  /* bytes of it reserved for each peer */
    /* root infos of sub-communicators this rank roots (HcclCreateSubCommConfig) */
    struct {
        zh_flag_t ready; /* bumped after id and info are written */
        uint64_t id;
        HcclRootInfo info;
    } sub[4];
    uint32_t sub_next;
    /* control-plane agreement (symmetric windows): values every rank
     * publishes between two ctrl barriers */
    uint64_t agree[4];
    /* store-kind trial verdicts, by trial slot (coll_reuse_t.verdict_out):
     * every rank takes the majority */
    _Atomic uint64_t verdict[COLL_TRIAL_SLOTS];
    /* the CPU my caller's thread last posted an op from, -1 unknown: a
     * peer that sleeps waiting for me keeps off it (zh_comm_sleep) */
    atomic_int cpu;
} zh_ctrl_t;

/* Where the per-rank parts of a control segment lie, from its rank count
 * (zh_ctrl_layout): slots ranks per array; v_off: 2 descriptors x ZH_V_ARRAYS
 * arrays x slots words; p2p_off: slots channels; bytes: the whole segment,
 * whole pages. A peer's segment must be exactly `bytes` long. */
typedef struct {
    uint32_t slots;
    size_t v_off;
    size_t p2p_off;
    size_t bytes;
} zh_ctrl_layout_t;

/* Attempts a wait skips after misses: 1, 2, 4 ... up to a bound, ended by a
 * hit (zh_skips_take, zh_skips_note in hccl_op.c). */
typedef struct {
    uint32_t skip;    /* attempts still to skip */
    uint32_t backoff; /* the skip after the next miss */
} zh_skips_t;

/* One peer as this rank sees it. */
typedef struct {
    int32_t pid;
    int pidfd;     /* liveness; -1 for same-process peers */
    int same_proc; /* addresses are valid as they are */
    uint64_t ctrl_token;
    zh_ctrl_t *ctrl; /* the peer's control segment, mapped here */
    void *ccl;       /* the peer's CCL buffer, mapped here (lazily) */
    size_t ccl_map;  /* bytes of it mapped here (never the peer's word for it) */
    void *p2p_buf;   /* the peer's send staging buffer, mapped here (lazily) */
    size_t p2p_buf_bytes;
    uint32_t send_seq;    /* sends to this peer issued (caller thread) */
    uint32_t recv_seq;    /* receives from this peer issued (caller thread) */
    atomic_uint send_fin; /* sends to this peer finished here, in issue order */
    atomic_uint recv_fin; /* receives from this peer finished here */
    uint32_t send_chunks; /* chunks I staged for this peer */
    uint32_t recv_chunks; /* chunks I consumed from this peer */
    /* shadow windows: one reservation per peer range, by range index */
    void *win[ZH_MAX_RANGES];
    uint32_t win_gen[ZH_MAX_RANGES];
    uint64_t win_size[ZH_MAX_RANGES];
    /* which block generation is mapped in the window, by block index, and
     * where (so a stale mapping can be removed after the peer changed it) */
    uint32_t map_gen[ZH_MAX_BLOCKS];
    uint32_t map_range[ZH_MAX_BLOCKS];
    uint64_t map_va[ZH_MAX_BLOCKS];
    uint64_t map_size[ZH_MAX_BLOCKS];
    uint32_t table_seen; /* peer's table seqlock value last swept */
    uint32_t last_block; /* block index the last translation hit */
} zh_peer_t;

/* Scratch of the op path (hccl_op_path.c), nranks entries per array: ops of
 * a comm run one at a time (hccl_op.h), so they share one and allocate
 * nothing. */
typedef struct {
    const zh_post_t **post;          /* the op's post line of every rank */
    const zh_desc_t **desc;          /* its descriptor of every rank */
    const void **in;                 /* translated send buffers; the inline path's sources */
    void **out;                      /* translated receive buffers */
    void **ccl;                      /* CCL buffers */
    const uint64_t **v[ZH_V_ARRAYS]; /* every rank's V arrays */
    uint64_t *each;                  /* every rank's count (ReduceScatterV) */
} zh_op_scratch_t;

/* The largest send or receive buffer of an op that may run whole on the
 * caller's thread while the host has cores to spare (zh_op_caller_ok). */
#define ZH_CALLER_MAX (64u << 10)

typedef struct zh_comm {
    int rank;
    int nranks;
    int device;
    char name[ZH_NAME_MAX];

    /* settings in force for this comm (env table, overridden by config) */
    uint64_t buffsize;        /* bytes */
    uint64_t exec_timeout_ns; /* 0 = never */
    uint32_t spin_iters;
    int oversub;         /* more ranks than online cores: waits yield at once, and sleep sooner */
    int fast_post;       /* not oversub and this process can be fenced by sleepers
                          * (zc_fence_peers_ready): zh_barrier posts without a full fence */
    uint64_t caller_max; /* largest buffer of an op the caller's thread may run whole */
    int hier_on;         /* ZCCL_HIER allows the hierarchical collectives */
    coll_tuning_t tune;
    coll_reuse_t reuse; /* recent large direct ops, for their store kind; the op's thread */

    /* Tables by rank, nranks entries each, allocated once when the comm's
     * ranks on this host are known (zh_comm_tables), NULL before. */
    const _Atomic uint64_t **verdicts; /* every rank's ctrl->verdict (reuse) */
    zh_peer_t *peers;
    int32_t *peer_pids;  /* pids of every other rank (broker allow lists) */
    int32_t *xproc_pids; /* of those, the ones in other processes */
    size_t npeer_pids;
    size_t nxproc_pids;
    zh_op_scratch_t scratch;

    zh_ctrl_layout_t lay; /* of every control segment of this comm */
    int ctrl_fd;
    uint64_t ctrl_token;
    zh_ctrl_t *ctrl; /* mine */

    /* Issue side (the caller's thread): collectives are numbered here, in
     * issue order, whatever stream carries them. `issuing` is held for the
     * length of an issue call: a second thread that overlaps it is refused
     * (zh_issue_enter); `issuer` is the thread that issued last. */
    atomic_uint issue_seq;
    atomic_int issuing;
    uintptr_t issuer;
    zh_skips_t inline_skips; /* caller-thread attempts to skip (peers were late) */
    zh_skips_t spin_skips;   /* posts waits to sleep without a spin (busy core, spins missed) */
    int spread;              /* ZCCL_SPREAD, and not oversubscribed: zh_comm_sleep fences */
    int cpu;                 /* the CPU I last published in ctrl->cpu */

    /* Exec side: collectives finished here (op seq may start once it is
     * seq - 1); a futex word, its waiters counted for the wake. bar_count is
     * touched only by the op that is running, so ops never overlap on it. */
    _Alignas(64) atomic_uint exec_done;
    atomic_uint exec_sleepers;
    uint32_t bar_count;
    atomic_uint waiting_seq; /* the op whose posts the running op waits for (0: none) */

    /* control plane (caller thread), serialised */
    pthread_mutex_t lock;
    uint32_t ctrl_count;
    int ranges_linked;    /* the first (collective) SetMemoryRange is done */
    int mem_attached;     /* sees the process's ranges and blocks (hccl_memrange.c) */
    uint64_t symwin_max;  /* bytes of symmetric heap per rank (hcclSymWinMaxMemSizePerRank) */
    uint64_t symwin_used; /* heap bytes handed out to windows so far */
    int ccl_fd;
    void *ccl_local;
    size_t ccl_local_bytes; /* its size, and my offer's token: kept here, as peers */
    uint64_t ccl_offer;     /* can write the copies in my control segment */
    size_t ccl_bytes;       /* min over ranks, once created */
    int p2p_fd;             /* my send staging buffer (buffered Send), lazily */
    void *p2p_local;
    size_t p2p_bytes;
    uint64_t p2p_offer; /* its token (my copy, as for the CCL buffer) */

    atomic_int async_error; /* first HcclResult an op failed with */
    atomic_int inflight;    /* tasks queued on streams, not yet finished */
    atomic_uint_fast64_t staged_bytes;
    atomic_uint_fast64_t zc_ops;
    atomic_uint_fast64_t buf_ops;
    atomic_uint_fast64_t inline_bytes; /* bytes carried in post slots (small ops) */
    atomic_uint_fast64_t inline_ops;   /* of zc_ops, those that ran inline */
    atomic_uint_fast64_t caller_ops;   /* ops finished on the caller's thread */
    atomic_uint_fast64_t hier_ops;     /* of zc_ops, those that ran hierarchically */

    /* Set when the comm spans hosts (hccl_hier.c): then rank and nranks are
     * the global ones, this struct's control segment, peers and memory are
     * unused, and ops run on hier's local comm and transport. */
    struct zh_hier *hier;
    /* With hier: the tier's comm of my host's ranks, which holds the memory
     * ranges and shared machinery (zh_comm_inner); NULL until it is made. */
    struct zh_comm *host_comm;
    /* A local comm of one that spans hosts: the rank each peer's control
     * segment names (its global rank), by local rank; NULL otherwise. */
    const int *ctrl_ranks;
    /* The levels (topo/hccl_topo.h), built at init from the bootstrap table. */
    struct zh_levels *levels;
} zh_comm_t;

/* hccl_handle.c, the bottom layer: status mapping (the only place zc_status_t
 * becomes HcclResult), op names, the registry of live communicators. */
HcclResult zh_result(int zc_status);
const char *zh_op_name(int kind);
/* Resolve an API handle for fn: NULL is HCCL_E_PTR, one that is not a live
 * communicator HCCL_E_PARA, one inherited from the parent of a forked child
 * HCCL_E_NOT_SUPPORT (each logged). */
HcclResult zh_comm_get(HcclComm comm, const char *fn, zh_comm_t **out);
/* The comm for a handle (NULL when it is not live in this process). */
zh_comm_t *zh_comm_lookup(HcclComm comm);
/* The handle given out for a live c (NULL when c is not in the registry). */
HcclComm zh_comm_handle(const zh_comm_t *c);
/* Before the first comm: the registry's fork handlers. */
void zh_registry_init(void);
/* Enter c (its handle in *out; ZC_ERR_OVERLIMIT, logged, when full) / remove it. */
int zh_registry_add(zh_comm_t *c, HcclComm *out);
void zh_registry_remove(zh_comm_t *c);

/* In an exported function: declare var and resolve comm into it, or return. */
#define ZH_COMM_OR_RETURN(var, comm)                                                               \
    zh_comm_t *var = NULL;                                                                         \
    ZH_CHECK_RESULT(zh_comm_get((comm), __func__, &var))

#define ZH_CHECK_RESULT(expr)                                                                      \
    do {                                                                                           \
        HcclResult zh_r_ = (expr);                                                                 \
        if (zh_r_ != HCCL_SUCCESS) {                                                               \
            return zh_r_;                                                                          \
        }                                                                                          \
    } while (0)

/* Bootstrap: a rank's entry in the table every rank gets at init. */
typedef struct {
    int32_t pid;
    int32_t device;
    uint64_t host_id;
    uint64_t ctrl_token;
    /* Its place on its host (zccl_topo_place): hwloc logical indices of its
     * NUMA node, package and L3 group (-1 unknown), and the rule used. */
    int32_t numa;
    int32_t package;
    int32_t l3;
    int32_t place_rule;
    /* Settings every rank must share (ZH_ENTRY_*): the comm takes their
     * agreement (zh_comm_agree), so ranks set differently cannot run
     * different schedules. */
    uint32_t flags;
    uint32_t pad;
} zh_boot_entry_t;
#define ZH_ENTRY_HIER 1u /* ZCCL_HIER allows the hierarchical collectives */

/* hccl_boot_root.c: HcclGetRootInfo (the root listener) */
int zh_boot_root_create(HcclRootInfo *info);
/* hccl_boot.c: rank bootstrap */
/* Exchange {my entry} for the table of every rank's entry; phase 2 reports
 * my local status and returns ZC_ERR_REMOTE when the root or a peer died
 * during init, else my local status when it failed, else the worst status
 * of all ranks. Codes: hccl_boot.c's header. */
typedef struct zh_boot zh_boot_t;
int zh_boot_join(const HcclRootInfo *info, uint32_t nranks, uint32_t rank,
                 const zh_boot_entry_t *mine, uint64_t timeout_ns, zh_boot_t **boot,
                 zh_boot_entry_t *table);
/* addr/addr_len: my transport address for peers on other hosts (NULL/0 when
 * the comm lies on one host); *all (malloc'ed, the caller frees) receives
 * nranks 32-bit lengths and the addresses when some rank sent one. */
int zh_boot_finish(zh_boot_t *boot, int my_status, const void *addr, uint32_t addr_len,
                   uint8_t **all, size_t *all_len);

/* hccl_ctrl.c: control segment, flags, barriers */
/* The layout of a control segment of a communicator of nranks ranks (the
 * global count for one that spans hosts: every rank computes the same). */
zh_ctrl_layout_t zh_ctrl_layout(uint32_t nranks);
/* Rank q's point-to-point channel in segment s, and V array i of its
 * descriptor slot (slot = seq & 1). */
static inline zh_p2p_t *zh_ctrl_p2p(const zh_comm_t *c, const zh_ctrl_t *s, int q)
{
    return (zh_p2p_t *)(void *)((char *)(uintptr_t)s + c->lay.p2p_off) + q;
}
static inline uint64_t *zh_ctrl_v(const zh_comm_t *c, const zh_ctrl_t *s, unsigned slot, int i)
{
    return (uint64_t *)(void *)((char *)(uintptr_t)s + c->lay.v_off) +
           ((size_t)slot * ZH_V_ARRAYS + (size_t)i) * c->lay.slots;
}
/* Refuse n ranks of c on one host above ZCCL_MAX_LOCAL_RANKS (ZC_ERR_INVAL,
 * logged with both values). */
int zh_ctrl_check_local(const zh_comm_t *c, int n);
/* Allocate c's tables by rank and its op scratch for c->nranks ranks (once,
 * at init); zh_comm_tables_free in zh_comm_release. */
int zh_comm_tables(zh_comm_t *c);
void zh_comm_tables_free(zh_comm_t *c);
int zh_ctrl_create(zh_comm_t *c);
int zh_ctrl_attach_peers(zh_comm_t *c, const zh_boot_entry_t *table);
void zh_ctrl_destroy(zh_comm_t *c);
void zh_flag_post(zh_flag_t *f, uint32_t value);
/* Sleep until f reaches target, counted in its sleepers so that its post
 * wakes me, or at most ns (spurious wakes allowed: the caller looks again);
 * fence: its writer may post without a full fence (zc_fence_peers first). */
void zh_flag_sleep(zh_flag_t *f, uint32_t target, uint64_t ns, int fence);
/* The same for a wait of c for peer's flag: fenced off the peer's CPU while
 * yields are off (hccl_ctrl.c). */
void zh_comm_sleep(zh_comm_t *c, int peer, zh_flag_t *f, uint32_t target, uint64_t ns);
int zh_wait_peers(zh_comm_t *c, size_t flag_offset, uint32_t target);
int zh_barrier(zh_comm_t *c);
int zh_ctrl_barrier(zh_comm_t *c);
/* Break c: every later op fails at once, peers' waits fail; st is the internal
 * status that broke it (the first one is kept, as its HcclResult). */
void zh_comm_fail(zh_comm_t *c, int st);
void zh_table_begin(zh_comm_t *c);
void zh_table_end(zh_comm_t *c);

/* hccl_memwin.c: peers' blocks in my windows: map, translate, unmap */
int zh_mem_translate(zh_comm_t *c, int peer, uint64_t va, uint64_t bytes, void **out);
void zh_mem_sweep_peers(zh_comm_t *c);
/* Unmap every window (comm free, after zh_mem_detach). */
void zh_mem_release_all(zh_comm_t *c);

/* hccl_memrange.c: zero-copy ranges, activation */
int zh_mem_set_range(zh_comm_t *c, void *base, size_t size, size_t align, uint64_t flags);
int zh_mem_unset_range(zh_comm_t *c, void *base);
int zh_mem_activate(zh_comm_t *c, void *va, size_t size, size_t offset, void *handle,
                    uint64_t flags);
int zh_mem_deactivate(zh_comm_t *c, void *va);
int zh_mem_local_covers(zh_comm_t *c, uint64_t va, uint64_t bytes);
/* Join / leave the process's table of ranges and blocks (comm init / free). */
int zh_mem_attach(zh_comm_t *c);
void zh_mem_detach(zh_comm_t *c);
/* Does a set range hold [va, +size)? */
int zh_mem_range_covers(const void *va, size_t size);
/* The active block holding ptr: its start, size and physical handle. */
int zh_mem_block_find(const void *ptr, void **va, size_t *size, aclrtDrvMemHandle *handle);

/* hccl_symwin.c: symmetric windows */
void zh_symwin_release(zh_comm_t *c);

/* hccl_ranktable.c: rank-table init */
HcclResult zh_ranktable_init(const char *path, uint32_t rank, const HcclCommConfig *cfg,
                             HcclComm *out);

/* hccl_ccl.c: the buffered path's CCL buffers */
/* A buffer of mine the peers map: a memfd (fd), mapped here (map), offered
 * through the broker to every peer's pid (token). */
typedef struct {
    int fd;
    void *map;
    uint64_t token;
} zh_offered_t;
/* Create, map and offer a what ("zccl-ccl", ...) buffer of sz bytes; ZC_OK,
 * or a status logged in one line with nothing left behind. */
int zh_offer_buffer(zh_comm_t *c, const char *what, size_t sz, zh_offered_t *out);
int zh_ccl_ensure(zh_comm_t *c);
void zh_ccl_release(zh_comm_t *c);

/* hccl_op*.c (hccl_op.h): descriptors, agreement, path choice, dispatch */
typedef struct {
    zh_op_kind_t kind;
    int dtype;
    int redop;
    int root;
    uint64_t count;
    const void *send;
    void *recv;
    uint64_t send_bytes;
    uint64_t recv_bytes;
    const uint64_t *v[ZH_V_ARRAYS]; /* ZH_V_*: rank-local arrays (nranks each) or NULL */
} zh_op_t;

/* Check op's extents and issue it on stream (not capturing: see hccl_capture.h). */
HcclResult zh_op_submit(zh_comm_t *c, const zh_op_t *op, aclrtStream stream);
/* Run op on c now on this thread, numbered now (the hierarchical tier's
 * local steps; hccl_hier*.c). */
HcclResult zh_op_run_now(zh_comm_t *c, const zh_op_t *op);
/* The fields of op that every rank must pass alike (the ones the one-host
 * agreement compares: kind, dtype, then reduce op, root and count where the
 * collective has them; 0 where it has not), in a fixed layout. */
#define ZH_OP_KEY_WORDS 5
void zh_op_key(const zh_op_t *op, uint64_t key[ZH_OP_KEY_WORDS]);

/* hccl_op.c: the issue window. Enter before numbering ops on c (refuses a
 * second thread with HCCL_E_PARA, logged, and breaks the comm); leave after. */
HcclResult zh_issue_enter(zh_comm_t *c, const char *fn);
void zh_issue_leave(zh_comm_t *c);
/* Refuse a buffer extent that is not mapped memory (HCCL_E_PARA, logged). */
HcclResult zh_check_extent(zh_comm_t *c, const char *fn, const char *what, const void *p,
                           uint64_t bytes);
/* hccl_ctrl.c: one "zccl diag:" line per rank that has not reached op seq. */
void zh_diag_report(zh_comm_t *c, uint32_t seq, const char *why);

/* hccl_p2p.c: Send/Recv/BatchSendRecv. Check a batch (local arguments, logged),
 * and issue a checked one on stream (not capturing: see hccl_capture.h). */
HcclResult zh_p2p_check(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n);
HcclResult zh_p2p_start(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n,
                        aclrtStream stream);
void zh_p2p_release(zh_comm_t *c);
/* Run items on c now on this thread (the hierarchical tier's local items). */
HcclResult zh_p2p_run_now(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n);

/* hccl_ctrl.c: abort checks shared by the waits: error flags, the
 * send/recv-against-collective picture, the exec timeout. A peer that left
 * is not among them, see zh_peer_gone. */
int zh_wait_check(zh_comm_t *c, int peer, uint64_t start);
/* Has peer exited or destroyed its communicator? (no log) Whatever it wrote
 * before is visible once this says so: a waiter that sees it gone looks at
 * its flags once more, and only if they still lack the value fails with
 * zh_peer_left (logs why, ZC_ERR_REMOTE), since a peer with no duty left
 * may leave. */
int zh_peer_gone(zh_comm_t *c, int peer);
int zh_peer_left(zh_comm_t *c, int peer);
/* After a grace period of waiting: is the wait for peer a certain deadlock
 * between a point-to-point op and a collective? (logs, breaks the comm with
 * HCCL_E_PARA and returns ZC_ERR_INVAL if so) */
int zh_mix_check(zh_comm_t *c, int peer, uint64_t start, int send, uint32_t p2p_seq);

/* hccl_comm.c: free a comm that was never registered or was removed. */
void zh_comm_free(zh_comm_t *c);
/* hccl_comm_release.c: release a comm of one host (zh_comm_free of a comm
 * that does not span hosts). */
void zh_comm_release(zh_comm_t *c);
/* hccl_handle.c: the comm whose memory ranges and shared machinery serve c:
 * c itself, or its local comm when c spans hosts. */
zh_comm_t *zh_comm_inner(zh_comm_t *c);

/* hccl_hier.c: the tier across hosts (hccl_hier.h) */
int zh_hier_setup(zh_comm_t *c, const zh_boot_entry_t *table, const void **addr, size_t *len);
int zh_hier_connect(zh_comm_t *c, const uint8_t key[16], const uint8_t *all, size_t all_len);
void zh_hier_destroy(zh_comm_t *c);
uint64_t zh_hier_net_bytes(zh_comm_t *c);
const void *zh_hier_net_address(zh_comm_t *c, size_t *len);
uint64_t zh_hier_net_dropped(zh_comm_t *c);
int zh_hier_hosts(zh_comm_t *c);
HcclResult zh_hier_submit(zh_comm_t *c, const zh_op_t *op, aclrtStream stream);
HcclResult zh_hier_p2p_submit(zh_comm_t *c, const HcclSendRecvItem *items, uint32_t n,
                              aclrtStream stream);

/* hccl_comm.c: communicator lifecycle */
HcclResult zh_comm_init(uint32_t nranks, const HcclRootInfo *info, uint32_t rank,
                        const HcclCommConfig *cfg, HcclComm *out);
HcclResult zh_comm_destroy(zh_comm_t *c);
/* Wait until the comm's queued ops are done (the lifetime rule of Deactivate,
 * Unset and Destroy); HCCL_E_NOT_SUPPORT (logged) from a stream task while ops
 * are queued, as it cannot wait for them there. */
HcclResult zh_comm_quiesce(zh_comm_t *c, const char *fn);

#endif /* HCCL_INTERNAL_H */
