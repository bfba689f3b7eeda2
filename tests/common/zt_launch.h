/*
 * Test rank launchers: N ranks from one root info, as forked processes or as
 * threads of this process. Rank 0 calls HcclGetRootInfo and hands the root
 * info to the others (a shared page for processes, memory for threads), the
 * way MPI_Bcast does in real programs; nothing of the library runs in the
 * parent before the fork.
 */
#ifndef ZT_LAUNCH_H
#define ZT_LAUNCH_H

#include "hccl/hccl.h"

/** Body of one rank: returns 0 on success (non-zero fails the launch). */
typedef int (*zt_rank_fn)(int rank, int nranks, const HcclRootInfo *root, void *arg);

/**
 * Run fn on nranks forked processes; kill them all after timeout_s seconds.
 * Returns 0 when every rank returned 0, else the number of failed ranks
 * (a rank that was killed, crashed or timed out counts as failed).
 */
int zt_launch_procs(int nranks, zt_rank_fn fn, void *arg, int timeout_s);

/** Same with nranks threads of this process (no timeout: ctest's applies). */
int zt_launch_threads(int nranks, zt_rank_fn fn, void *arg);

/** Child pids of the running zt_launch_procs (for fault tests), by rank. */
extern int zt_child_pids[64];

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
    void *va;                               /**< base of the reservation */
    size_t block;                           /**< bytes per block (granularity multiple) */
    int nblocks;                            /**< blocks in the range */
    aclrtDrvMemHandle h[ZT_ZC_MAX_BLOCKS];  /**< physical memory of each block */
    int active[ZT_ZC_MAX_BLOCKS];           /**< block activated on the comm */
    int range_set;                          /**< HcclCommSetMemoryRange done */
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

/** Allocation granularity of physical memory on device. */
size_t zt_granularity(int device);

/**
 * Reserve nblocks * block bytes (block rounded up to the granularity), map a
 * new physical allocation per block, set the range on comm (collective) and,
 * if activate, activate every block. Returns 0 or -1.
 */
int zt_zc_open(zt_zc_t *z, HcclComm comm, int device, size_t block, int nblocks, int activate);

/** Deactivate, unset, unmap, free and release what zt_zc_open made. Returns 0 or -1. */
int zt_zc_close(zt_zc_t *z, HcclComm comm);

/** Physical allocation of bytes on device (granularity multiple); NULL on failure. */
aclrtDrvMemHandle zt_phys_alloc(int device, size_t bytes);

#endif
