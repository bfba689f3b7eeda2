/*
 * Declarations shared inside libascendcl (vmm/src); not installed.
 *
 * Ownership: vmm_status.c (status mapping), vmm_device.c (device table,
 * per-thread current device, NUMA placement), vmm_mem.c (aclrtMalloc table),
 * vmm_stream*.c (stream workers and registry; vmm_stream.h; the graph capture
 * hooks in vmm_stream_capture.c), vmm_event.c (events), vmm_mdl.c (graph
 * capture), vmm_init.c (aclInit/aclFinalize, the fork handlers, and the
 * registrations through which a lower file reaches a higher one). The
 * VMM/IPC files may use everything here read-only.
 *
 * Status vocabulary: helpers that wrap system calls return zc_status_t and are
 * mapped at the API edge with vmm_status_to_acl(); stream and event helpers
 * return aclError directly because their failures are ACL-specific (no
 * current device, a handle that is not live, a sync timeout).
 *
 * Fork: a forked child starts clean. Stream worker threads do not exist in
 * the child, so every stream and event handle of the parent becomes invalid
 * there (ACL_ERROR_RT_INVALID_HANDLE), default streams are recreated on first
 * use, device use counts and aclInit state are reset. aclrtMalloc blocks stay
 * mapped and in the table (the mappings are inherited) so aclrtFree works.
 */
#ifndef ZCCL_VMM_INTERNAL_H
#define ZCCL_VMM_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "acl/acl_rt.h"
#include "zc/status.h"
#include "zccl/vmm_ext.h"

/* ---- status mapping (vmm_status.c) ------------------------------------------ */

/** The aclError for an internal zc_status_t (ZC_OK -> ACL_SUCCESS). The one place
 *  the mapping lives. */
aclError vmm_status_to_acl(int zc_status);

/* ---- devices (vmm_device.c) ------------------------------------------------------ */

/** Number of logical devices (>= 1); builds the device table on first call. */
int vmm_device_count(void);

/** 1 if dev is a valid device id, else 0. */
int vmm_device_valid(int dev);

/** NUMA node (OS index) device dev's memory is placed on; -1 if unknown or bad dev. */
int vmm_device_numa(int dev);

/** Bind the calling thread to device dev's NUMA node cpuset. Best effort: returns
 *  ZC_OK or ZC_ERR_SYS, logs at debug level only, never fatal. */
zc_status_t vmm_device_bind_thread(int dev);

/**
 * Prefer NUMA node numa for the pages of [addr, addr+len) (mbind
 * MPOL_PREFERRED, no libnuma). Best effort: a no-op on a single-node host or
 * numa < 0; returns ZC_OK or ZC_ERR_SYS (logged at debug level).
 */
zc_status_t vmm_numa_place(void *addr, size_t len, int numa);

/** The calling thread's current device, or -1. */
int vmm_device_current(void);

/** Have fn(dev) run when the last use of device dev is reset (aclrtResetDevice[Force]),
 *  before its peer pairs are forgotten. One function, registered at load time (init). */
void vmm_device_on_reset(void (*fn)(int dev));

/* ---- memory (vmm_mem.c) ------------------------------------------------------------ */

/**
 * Find the aclrtMalloc block containing ptr. On success *fd is a NEW
 * descriptor (a dup of the block's memfd, O_CLOEXEC) that the caller must
 * close, *offset is ptr's offset in the block and *size the block's mapped
 * size. Returns ZC_OK, ZC_ERR_PTR (NULL ptr or out-pointer) or
 * ZC_ERR_NOT_FOUND (ptr is not inside an aclrtMalloc block); ZC_ERR_SYS if
 * dup fails. Logs nothing on ZC_ERR_NOT_FOUND (callers decide).
 */
int vmm_mem_lookup(const void *ptr, int *fd, size_t *offset, size_t *size);

/** Have fn(base, size) run when aclrtFree gives back the block [base, base+size),
 *  before it is unmapped. One function, registered at load time (init). */
void vmm_mem_on_free(void (*fn)(uintptr_t base, size_t size));

/* ---- streams (vmm_stream*.c) ------------------------------------------------------- */

typedef struct vmm_stream vmm_stream_t;

/**
 * Resolve a handle to a referenced stream: NULL means the calling thread's
 * current device's default stream (created on first use). Release with
 * vmm_stream_put. Returns ACL_SUCCESS, ACL_ERROR_RT_CONTEXT_NULL (NULL and no
 * current device) or ACL_ERROR_RT_INVALID_HANDLE (not a live stream); logs the
 * failure naming `what` (the API function).
 */
aclError vmm_stream_get(aclrtStream handle, const char *what, vmm_stream_t **out);

/** Drop a reference taken by vmm_stream_get. */
void vmm_stream_put(vmm_stream_t *s);

/** Enqueue fn(arg) on s; dtor(arg) runs after it (or instead, if dropped).
 *  On failure nothing is enqueued and dtor is NOT called. */
aclError vmm_stream_push(vmm_stream_t *s, zccl_task_fn fn, void *arg, void (*dtor)(void *));

/** 1 when work may run on the caller's thread in place of a task of s:
 *  nothing queued or running (pending event waits included). The one place
 *  that decision is made (a capturing stream must answer 0 here). */
int vmm_stream_idle(vmm_stream_t *s);

/** Non-zero once s is being force-destroyed: blocking tasks should give up. */
int vmm_stream_aborting(const vmm_stream_t *s);

/** vmm_stream_push, counting the task as the calling thread's queued work until it
 *  finished (or was dropped); the work a free waits for. Same contract otherwise. */
aclError vmm_stream_push_tracked(vmm_stream_t *s, zccl_task_fn fn, void *arg, void (*dtor)(void *));

/** Wait until every task the calling thread queued with vmm_stream_push_tracked (on any
 *  stream) has finished: the frees' implicit synchronisation. ACL_ERROR_RT_STREAM_CONTEXT
 *  (logged, nothing waited for) when called from a stream task.
 *  Not every stream's work: with threads as ranks, another rank thread's queued op may
 *  wait for the freeing thread's next op, so waiting for it would deadlock; and a rank's
 *  own op completing already means its peers are done with its buffers. */
aclError vmm_stream_drain_mine(const char *what);

/** Wake every blocked event wait so it re-checks its stream and event (vmm_event.c). */
void vmm_event_wake_all(void);

/** Is fn one of the event tasks (record / reset / wait)? (vmm_event.c) */
int vmm_event_is_task(zccl_task_fn fn);

/** Drain and destroy every default stream (aclFinalize), or only dev's (dev >= 0: a
 *  device reset, through vmm_device_on_reset). */
void vmm_stream_drop_defaults(int dev);

/* ---- graph capture hooks (vmm_stream_capture.c) ------------------------------------- */

/* zccl_capture_count (vmm_ext.h) counts the streams capturing now; streams call
 * these hooks only while it is non-zero, so they cost one relaxed load of it
 * when no stream captures. Graph capture (vmm_mdl.c) supplies them. */
typedef struct {
    /** Is s capturing into a model? */
    int (*on)(const vmm_stream_t *s);
    /** If s is capturing, keep the task in its model (or refuse it) and return 1
     *  with *rc the push's result (on an error the caller still owns arg); else 0. */
    int (*push)(vmm_stream_t *s, zccl_task_fn fn, void *arg, void (*dtor)(void *), aclError *rc);
    /** s is being destroyed: a capture on it is invalidated. */
    void (*gone)(const vmm_stream_t *s);
} vmm_capture_hooks_t;

/** Install the hooks every stream calls from then on (init, at load time). */
void vmm_capture_install(const vmm_capture_hooks_t *hooks);

/** Graph capture's hooks (vmm_mdl.c). */
extern const vmm_capture_hooks_t vmm_mdl_capture_hooks;

/** Fork child: no capture survives (streams do not). (vmm_mdl.c) */
void vmm_mdl_atfork_child(void);

/* ---- profiling (vmm_prof.c) ---------------------------------------------------------- */

/** What a copy task keeps for its trace record. */
typedef struct {
    uint64_t t_enq; /* 0: not recording when issued */
    aclrtStream stream;
    int dev;
} vmm_prof_copy_t;

/** At issue: stamp p when copies are being recorded (one relaxed load otherwise). */
void vmm_prof_copy_issue(vmm_prof_copy_t *p, aclrtStream stream);

/** At the end of a copy that started at t0 (recording was on): record it. */
void vmm_prof_copy(const vmm_prof_copy_t *p, int is_copy, size_t bytes, uint64_t t0);

/* ---- fork handlers (each module; called from vmm_init.c in this order) ------------ */

void vmm_device_atfork_prepare(void);
void vmm_device_atfork_parent(void);
void vmm_device_atfork_child(void);
void vmm_stream_atfork_prepare(void);
void vmm_stream_atfork_parent(void);
void vmm_stream_atfork_child(void);
void vmm_event_atfork_prepare(void);
void vmm_event_atfork_parent(void);
void vmm_event_atfork_child(void);
void vmm_mem_atfork_prepare(void);
void vmm_mem_atfork_parent(void);
void vmm_mem_atfork_child(void);

/* ---- time ------------------------------------------------------------------------- */

/** Absolute CLOCK_MONOTONIC deadline timeout_ms from now (timeout_ms >= 0). */
struct timespec;
void vmm_deadline(struct timespec *ts, int64_t timeout_ms);

#endif /* ZCCL_VMM_INTERNAL_H */
