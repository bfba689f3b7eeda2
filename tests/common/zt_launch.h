/*
 * Test rank launchers: N ranks from one root info, as forked processes or as
 * threads of this process. Rank 0 calls HcclGetRootInfo and hands the root
 * info to the others (a shared page for processes, memory for threads), the
 * way MPI_Bcast does in real programs; nothing of the library runs in the
 * parent before the fork.
 *
 * Then what a rank runs: its environment (device, stream, communicator, case
 * arenas) and whole scenarios with the zt_rank_fn signature, so the forked
 * and thread launchers and the MPI tests run the same code. A scenario
 * returns the number of failures it printed.
 */
#ifndef ZT_LAUNCH_H
#define ZT_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "hccl/hccl.h"
#include "zt_phys.h" /* zt_granularity, zt_phys_alloc */

/** Body of one rank: returns 0 on success (non-zero fails the launch). */
typedef int (*zt_rank_fn)(int rank, int nranks, const HcclRootInfo *root, void *arg);

/**
 * Run fn on nranks forked processes; kill them all after timeout_s seconds.
 * Returns 0 when every rank returned 0, else the number of failed ranks
 * (a rank that was killed, crashed or timed out counts as failed).
 */
int zt_launch_procs(int nranks, zt_rank_fn fn, void *arg, int timeout_s);

/**
 * Run fn(arg) in a forked child, beside ranks of zt_launch_procs: a test's
 * helper that must run while the ranks do (feed an outsider, inject a
 * fault). Use it instead of a thread: a rank forked while another thread of
 * the test holds a lock (ASan's allocator, stdio) inherits the lock held and
 * hangs on it. Returns the child's pid, or -1.
 */
int zt_fork_call(int (*fn)(void *), void *arg);

/**
 * Reap a child of zt_fork_call: its exit status, or -1 when it did not exit
 * within timeout_s (then it is killed) or died of a signal.
 */
int zt_fork_reap(int pid, int timeout_s);

/** Same with nranks threads of this process (no timeout: ctest's applies). */
int zt_launch_threads(int nranks, zt_rank_fn fn, void *arg);

/** Most ranks zt_launch_procs forks (threads: 64). */
#define ZT_MAX_PROCS 512

/** Child pids of the running zt_launch_procs (for fault tests), by rank. */
extern int zt_child_pids[ZT_MAX_PROCS];

/**
 * When set, each child of zt_launch_procs calls it with its rank first,
 * before anything else (zt_netns.h: enter the rank's namespace "host");
 * non-zero fails the rank.
 */
extern int (*zt_launch_child_hook)(int rank);

/* ---- a second root info for ranks already launched ------------------------- */

/** A place where rank 0 publishes one more root info (shared across fork). */
typedef struct zt_root_slot zt_root_slot_t;

/** Create a slot in MAP_SHARED memory (before forking); NULL on failure. */
zt_root_slot_t *zt_root_slot_create(void);

/** Release a slot (after every rank is done with it). */
void zt_root_slot_destroy(zt_root_slot_t *slot);

/**
 * Rank 0 calls HcclGetRootInfo and publishes it; the other ranks wait (at
 * most 60 s) and copy it. One use per slot. Returns 0 or -1.
 */
int zt_root_slot_get(zt_root_slot_t *slot, int rank, HcclRootInfo *out);

/* ---- one rank's environment -------------------------------------------------- */

#define ZT_ZC_MAX_BLOCKS 8

/** A reserved range set on a communicator, with blocks of physical memory. */
typedef struct {
    void *va;                              /**< base of the reservation */
    size_t block;                          /**< bytes per block (granularity multiple) */
    int nblocks;                           /**< blocks in the range */
    aclrtDrvMemHandle h[ZT_ZC_MAX_BLOCKS]; /**< physical memory of each block */
    int active[ZT_ZC_MAX_BLOCKS];          /**< block activated on the comm */
    int range_set;                         /**< HcclCommSetMemoryRange done */
} zt_zc_t;

/** A rank's device, stream, communicator and case arenas. */
typedef struct {
    int rank;
    int nranks;
    int device;
    aclrtStream stream;
    HcclComm comm;
    size_t half;          /**< bytes of each arena half (send half, recv half) */
    zt_zc_t zc;           /**< zero-copy arena: block 0 = send half, block 1 = recv half */
    unsigned char *plain; /**< aclrtMalloc arena of 2 * half bytes (buffered path) */
} zt_env_t;

/**
 * aclInit (a repeated init is fine), aclrtSetDevice(rank % device count),
 * aclrtCreateStream and HcclCommInitRootInfo (or ...Config when cfg is not
 * NULL). Returns 0, or -1 after printing which call failed.
 */
int zt_env_open(zt_env_t *env, int rank, int nranks, const HcclRootInfo *root,
                const HcclCommConfig *cfg);

/**
 * Give env both case arenas with halves of at least half_bytes: plain memory
 * from aclrtMalloc and a two-block zero-copy range (collective: every rank
 * calls it, as HcclCommSetMemoryRange is collective). Returns 0 or -1.
 */
int zt_env_arena(zt_env_t *env, size_t half_bytes);

/** Undo zt_env_arena and zt_env_open; returns 0 or -1 (a teardown call failed). */
int zt_env_close(zt_env_t *env);

/**
 * One in-place fp32 SUM AllReduce of count elements x[i] = rank + 1 + i % 7 on
 * env, synchronised. Returns HCCL_SUCCESS, the call's error, or after a failed
 * sync the communicator's async error (HCCL_E_INTERNAL when it has none). The
 * output is not checked: element i should be zt_ramp_sum(nranks, i).
 */
HcclResult zt_ramp_allreduce(zt_env_t *env, float *buf, size_t count);

/** What zt_ramp_allreduce leaves at element i on n ranks. */
float zt_ramp_sum(int n, size_t i);

/** zt_ramp_allreduce with its output checked: 0, or 1 after one line on
 *  stderr naming the rank and the call's error or the first wrong element. */
int zt_ramp_checked(zt_env_t *env, float *buf, size_t count);

/**
 * Reserve nblocks * block bytes (block rounded up to the granularity), map a
 * new physical allocation per block, set the range on comm (collective) and,
 * if activate, activate every block. Returns 0 or -1.
 */
int zt_zc_open(zt_zc_t *z, HcclComm comm, int device, size_t block, int nblocks, int activate);

/** Deactivate, unset, unmap, free and release what zt_zc_open made. Returns 0 or -1. */
int zt_zc_close(zt_zc_t *z, HcclComm comm);

/* ---- scenarios ------------------------------------------------------------------- */

/** The dtype x op x path x placement x count matrix. */
typedef struct {
    int coll;               /**< ZT_ALLREDUCE or ZT_ALLGATHER */
    size_t big_count;       /**< large count run for every dtype (SUM) on both paths; 0: none */
    const int *big_all_ops; /**< dtypes that also run PROD, MAX and MIN at big_count */
    int n_big_all_ops;
    uint64_t seed;
} zt_matrix_t;

/**
 * Every dtype x op (AllReduce) x {zero-copy, buffered} x {in-place,
 * out-of-place} x counts {0, 1, 7, 1000, 4099} at odd offsets (zero-copy ones
 * first, so staged bytes must still be 0 when they are done), big_count, an
 * aligned sweep, fp rounding patterns (AllReduce) and INT128 / fp8 (success or
 * HCCL_E_NOT_SUPPORT). arg: const zt_matrix_t *.
 */
int zt_rank_matrix(int rank, int nranks, const HcclRootInfo *root, void *arg);
int zt_matrix_run(zt_env_t *env, const zt_matrix_t *m);

/**
 * Deactivate, unmap, map different physical memory with different contents at
 * the same address and re-activate (every rank, then rank 0 alone): ops must
 * see the new memory; an op while any rank's buffers are not activated must
 * take the buffered path on every rank. arg: const int * (coll).
 */
int zt_rank_reactivate(int rank, int nranks, const HcclRootInfo *root, void *arg);
int zt_reactivate_run(zt_env_t *env, int coll);

/**
 * The last rank passes another count, dtype (same and other size) or op
 * (AllReduce), zero-copy and buffered: every rank must get HCCL_E_PARA from
 * the call or the sync with its output untouched, and the next agreeing op
 * must work. Nothing to do on one rank. arg: const int * (coll).
 */
int zt_rank_mismatch(int rank, int nranks, const HcclRootInfo *root, void *arg);
int zt_mismatch_run(zt_env_t *env, int coll);

/** arg of zt_rank_two_comms. */
typedef struct {
    int coll;
    zt_root_slot_t *slot; /**< where rank 0 publishes the second root info */
} zt_two_comms_t;

/**
 * A second communicator over the same ranks with reversed rank ids, used
 * alternately with the first (zero-copy, buffered, and ops of both queued on
 * one stream before one sync). arg: zt_two_comms_t *.
 */
int zt_rank_two_comms(int rank, int nranks, const HcclRootInfo *root, void *arg);
int zt_two_comms_run(zt_env_t *env, const HcclRootInfo *root2, int coll);

#endif
