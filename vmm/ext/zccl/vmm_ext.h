/*
 * libascendcl's internal interface for libhccl (not installed, not public).
 *
 * Protocol of the broker: every process that offers an fd runs
 * one broker thread serving the abstract Unix socket
 * "\0zccl-broker-<pid>-<nonce>", nonce being 20 random bits (5 hex digits)
 * drawn when the broker starts. An offer is named by a 64-bit token =
 * (owner pid << 42) | (nonce << 22) | 22-bit random serial, so a token names
 * its owner's socket and the name cannot be bound in advance by anyone who
 * has no token. A fetcher connects to the owner's socket, sends the token,
 * and the broker, which drops clients of another uid at accept (SO_PEERCRED),
 * checks the pid against the offer's allow list unless validation is off
 * before passing a dup of the fd with SCM_RIGHTS. Fetching a token of one's
 * own process dups the fd locally.
 * Withdrawing an offer closes only the broker's dup: fds already fetched and
 * their mappings stay valid (memfd reference counting frees the memory when
 * the last mapping and fd are gone).
 *
 * All functions return zc_status_t values (0 = ZC_OK, negative = error) and
 * log one line where an error is first seen.
 */
#ifndef ZCCL_VMM_EXT_H
#define ZCCL_VMM_EXT_H

#include <stddef.h>
#include <stdint.h>

#include "acl/acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- streams ---------------------------------------------------------- */

/** A task run on a stream worker; returns 0 or an error code (aclError or
 *  HcclResult value as int). The first non-zero result becomes the stream's
 *  error, returned (and cleared) by aclrtSynchronizeStream. */
typedef int (*zccl_task_fn)(void *arg);

/**
 * Enqueue fn(arg) on stream (NULL = the calling thread's current device's
 * default stream); it runs in FIFO order with the stream's other work. dtor,
 * if not NULL, is called with arg after fn ran (or when the stream is
 * destroyed before it ran). Returns ACL_SUCCESS or an aclError; on an error
 * nothing was queued, dtor is not called and the caller still owns arg.
 */
__attribute__((visibility("default"))) aclError
zccl_stream_enqueue(aclrtStream stream, zccl_task_fn fn, void *arg, void (*dtor)(void *));

/** Non-zero when the calling thread is the worker of a stream (running one of its tasks). */
__attribute__((visibility("default"))) int zccl_stream_in_task(void);

/** Bytes of a reserved task's payload area (16-byte aligned). */
#define ZCCL_TASK_PAYLOAD 192

/** A reserved slot of a stream's task ring (zccl_task_reserve). */
typedef struct {
    void *stream;  /**< the stream (referenced until commit / finish) */
    uint64_t pos;  /**< position in the stream's order */
    void *payload; /**< ZCCL_TASK_PAYLOAD bytes, the caller's until commit / finish */
    int idle;      /**< nothing was queued or running: the caller may run the task itself */
} zccl_task_t;

/**
 * Reserve the next slot of stream's ring (waiting for room when it is full).
 * Work enqueued later by any thread runs after this slot. With want_idle,
 * t->idle says whether the stream had no queued or running work; then the
 * caller may run the task on its own thread and end with zccl_task_finish.
 * In every case it may end with zccl_task_commit, which hands fn(payload)
 * to the worker. One of the two must follow, soon: the stream stalls at the
 * slot until then. Returns ACL_SUCCESS or an aclError (nothing reserved).
 */
__attribute__((visibility("default"))) aclError zccl_task_reserve(aclrtStream stream, int want_idle,
                                                                  zccl_task_t *t);

/** Queue the reserved slot as the task fn(t->payload), dtor(t->payload) after. */
__attribute__((visibility("default"))) void zccl_task_commit(zccl_task_t *t, zccl_task_fn fn,
                                                             void (*dtor)(void *));

/** End an idle reservation whose work the caller ran itself; rc (0 or an
 *  error) becomes the stream's error as a task's result would. */
__attribute__((visibility("default"))) void zccl_task_finish(zccl_task_t *t, int rc);

/** Device id of a stream (NULL = current device default stream); -1 if bogus. */
__attribute__((visibility("default"))) int zccl_stream_device(aclrtStream stream);

/** The calling thread's current device, or -1 when none was set. */
__attribute__((visibility("default"))) int zccl_current_device(void);

/** NUMA node memory of device dev is placed on (-1 unknown). */
__attribute__((visibility("default"))) int zccl_device_numa(int dev);

/* ---- topology (vmm_topo.c, the one place hwloc is called) --------------- */

/** How a rank's place was found (vmm_topo.c's header). */
typedef enum {
    ZCCL_PLACE_BOUND = 0, /**< its CPU binding lies in one NUMA node */
    ZCCL_PLACE_MEMORY,    /**< not so: where its memory lies */
    ZCCL_PLACE_DEVICE,    /**< nor that: its device's node (d mod #nodes) */
    ZCCL_PLACE_NONE,      /**< no topology or no device: every index -1 */
} zccl_place_rule_t;

/** A rank's place on its host: hwloc logical indices, -1 unknown. */
typedef struct {
    int32_t numa;    /**< NUMA node */
    int32_t package; /**< package (socket) */
    int32_t l3;      /**< L3 cache: -1 when no one L3 holds the rank's CPUs */
    int32_t rule;    /**< zccl_place_rule_t */
} zccl_place_t;

/** This thread's place: by its binding, else by where [mem, +len) lies, else
 *  by device dev's node (vmm_topo.c). Logs the rule at INFO (TOPO). Returns
 *  ZC_OK (an unknown place is all -1 with rule NONE) or ZC_ERR_NOMEM. */
__attribute__((visibility("default"))) int zccl_topo_place(const void *mem, size_t len, int dev,
                                                           zccl_place_t *out);

/** The place of core `core` (hwloc logical index), as if bound to it:
 *  ZC_OK, or ZC_ERR_INVAL (logged) when there is no such core. */
__attribute__((visibility("default"))) int zccl_topo_core_place(int core, zccl_place_t *out);

/** Cores of the topology (0 when it could not be loaded). */
__attribute__((visibility("default"))) int zccl_topo_cores(void);

/** A rule's name: "bound", "memory", "device", "none". */
__attribute__((visibility("default"))) const char *zccl_topo_rule_name(int rule);

/** Test hook: take `cpus`, a CPU list ("0-3,8", OS indices of the loaded
 *  topology), as this process's binding from now on; NULL: the real binding
 *  again. A synthetic or exported topology's CPUs are not this machine's, so
 *  tests bind ranks this way. ZC_OK, ZC_ERR_INVAL (logged) or ZC_ERR_NOMEM. */
__attribute__((visibility("default"))) int zccl_topo_set_binding(const char *cpus);

/* ---- graph capture (aclmdlRI, vmm_mdl.c) -------------------------------- */

/** zccl_stream_capturing as a call (it checks zccl_capture_count first). */
__attribute__((visibility("default"))) int zccl_stream_capturing_lookup(aclrtStream stream);

#ifndef __cplusplus
#include <stdatomic.h>

/** Streams of this process capturing now (read by zccl_stream_capturing). */
extern __attribute__((visibility("default"))) atomic_int zccl_capture_count;

/**
 * Whether work issued on stream (NULL = current device's default stream)
 * is being captured into a model instead of run: one relaxed load (no call)
 * when no stream of the process captures. Work for a capturing stream must
 * never run on the caller's thread: it goes to zccl_stream_enqueue (captured
 * there) or to zccl_stream_capture_add.
 */
static inline int zccl_stream_capturing(aclrtStream stream)
{
    return atomic_load_explicit(&zccl_capture_count, memory_order_relaxed) != 0 &&
           zccl_stream_capturing_lookup(stream);
}
#else
static inline int zccl_stream_capturing(aclrtStream stream)
{
    return zccl_stream_capturing_lookup(stream);
}
#endif

/** Re-issue one captured node on target; returns ACL_SUCCESS or an aclError. */
typedef aclError (*zccl_replay_fn)(void *arg, aclrtStream target);

/**
 * Add a node to the model capturing on stream: every aclmdlRIExecuteAsync of
 * the model calls replay(arg, target) on its caller's thread, in node order;
 * release(arg) runs when the model is destroyed. Returns ACL_SUCCESS, or
 * ACL_ERROR_RT_STREAM_NOT_CAPTURED when the stream is not capturing (or an
 * allocation error); on an error the caller still owns arg.
 */
__attribute__((visibility("default"))) aclError zccl_stream_capture_add(aclrtStream stream,
                                                                        zccl_replay_fn replay,
                                                                        void *arg,
                                                                        void (*release)(void *));

/* ---- physical memory ---------------------------------------------------- */

/**
 * The memfd behind a physical handle (owned by the handle: do not close) and
 * its size. Returns ZC_OK or ZC_ERR_HANDLE for an unknown handle.
 */
__attribute__((visibility("default"))) int zccl_phys_fd(aclrtDrvMemHandle handle, int *fd,
                                                        size_t *size);

/** What the runtime has at a virtual address (zccl_vmm_query). */
typedef struct {
    uintptr_t resv_base; /**< reservation holding the address */
    size_t resv_size;
    uintptr_t map_va; /**< mapping holding the address (0: none) */
    size_t map_size;
    aclrtDrvMemHandle handle; /**< physical handle of that mapping (NULL: none) */
} zccl_vmm_info_t;

/**
 * Look up va in the reservation and mapping tables (aclrtReserveMemAddress,
 * aclrtMapMem). Mappings always map a whole handle from its offset 0, so the
 * handle offset of va is va - map_va. Returns ZC_OK, or ZC_ERR_NOT_FOUND when
 * va lies in no reservation (nothing logged: callers decide what it means).
 */
__attribute__((visibility("default"))) int zccl_vmm_query(const void *va, zccl_vmm_info_t *out);

/* ---- broker ------------------------------------------------------------- */

/** Offer fd (dup'ed; the caller keeps its own) of size bytes. validate_pid=0
 *  lets any process of the same uid fetch it. Starts the broker on first use. */
__attribute__((visibility("default"))) int zccl_broker_offer(int fd, size_t size, int validate_pid,
                                                             uint64_t *token);

/** Add pids to an offer's allow list. */
__attribute__((visibility("default"))) int zccl_broker_allow(uint64_t token, const int32_t *pids,
                                                             size_t npids);

/** Remove an offer (idempotent errors: ZC_ERR_NOT_FOUND for an unknown token). */
__attribute__((visibility("default"))) int zccl_broker_withdraw(uint64_t token);

/** Fetch the fd behind token from its owner (a new fd the caller closes). */
__attribute__((visibility("default"))) int zccl_broker_fetch(uint64_t token, int *fd, size_t *size);

/** Owner pid named by a token. */
static inline int32_t zccl_broker_token_pid(uint64_t token)
{
    return (int32_t)(token >> 42);
}

/** The random part of the owner's broker socket name named by a token. */
static inline uint32_t zccl_broker_token_nonce(uint64_t token)
{
    return (uint32_t)(token >> 22) & ((UINT32_C(1) << 20) - 1);
}

#ifdef __cplusplus
}
#endif

#endif /* ZCCL_VMM_EXT_H */
