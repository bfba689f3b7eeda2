/*
 * The bottom layer of libhccl, which every other file may use and which uses
 * none of them: the mapping of internal status codes to HcclResult (the only
 * one), the names of the collectives, and the registry of live
 * communicators with handle lookup.
 *
 * Handles. An HcclComm is not the communicator's address but a registry slot
 * and a generation (zh_handle_make): a handle stays dead after its comm was
 * destroyed however many comms come after it, and a bogus or stale one gets
 * HCCL_E_PARA and a log line instead of a crash or another comm's ops.
 *
 * Fork. The registry remembers the pid that created each comm; in a forked
 * child every call on an inherited comm (HcclCommDestroy included) returns
 * HCCL_E_NOT_SUPPORT with one line naming both pids, and touches nothing the
 * parent's peers can see. The parent's comm is unaffected.
 */
#include "core/hccl_internal.h"

#include <stdatomic.h>
#include <sys/types.h>
#include <unistd.h>

#include "zc/log.h"

HcclResult zh_result(int st)
{
    switch (st) {
    case ZC_OK:
        return HCCL_SUCCESS;
    case ZC_ERR_INVAL:
    case ZC_ERR_HANDLE:
    case ZC_ERR_UNALIGNED:
    case ZC_ERR_DEVICE:
    case ZC_ERR_PERM:
        return HCCL_E_PARA;
    case ZC_ERR_PTR:
        return HCCL_E_PTR;
    case ZC_ERR_NOMEM:
        return HCCL_E_MEMORY;
    case ZC_ERR_SYS:
        return HCCL_E_SYSCALL;
    case ZC_ERR_TIMEOUT:
        return HCCL_E_TIMEOUT;
    case ZC_ERR_REMOTE:
        return HCCL_E_REMOTE;
    case ZC_ERR_NOT_SUPPORT:
        return HCCL_E_NOT_SUPPORT;
    case ZC_ERR_NOT_FOUND:
        return HCCL_E_NOT_FOUND;
    case ZC_ERR_UNAVAIL:
    case ZC_ERR_OVERLIMIT:
        return HCCL_E_UNAVAIL;
    case ZC_ERR_AGAIN:
        return HCCL_E_AGAIN;
    case ZC_ERR_IO:
        return HCCL_E_TCP_TRANSFER;
    case ZC_ERR_CONNECT:
        return HCCL_E_TCP_CONNECT;
    default:
        return HCCL_E_INTERNAL;
    }
}

static const char *const zh_op_names[ZH_OP_MAX] = {
    "?",          "Barrier",       "AllReduce",      "AllGather",
    "AllGatherV", "ReduceScatter", "ReduceScatterV", "Broadcast",
    "Reduce",     "Scatter",       "AlltoAll",       "AlltoAllV",
};

const char *zh_op_name(int kind)
{
    return kind > 0 && kind < ZH_OP_MAX ? zh_op_names[kind] : "?";
}

#define ZH_MAX_COMMS 1024

/* Handle = tag | generation << 10 | slot. The tag makes the value a
 * non-canonical address (dereferencing it faults at once); the generation,
 * bumped each time a slot is taken, means a value is never handed out twice. */
#define ZH_HANDLE_TAG (0xc5ull << 56)
#define ZH_HANDLE_SLOT_BITS 10
#define ZH_HANDLE_GEN_MAX ((1ull << (56 - ZH_HANDLE_SLOT_BITS)) - 1)
_Static_assert(ZH_MAX_COMMS <= (1 << ZH_HANDLE_SLOT_BITS), "slot index fits the handle");

/* Written under the registry lock; zh_comm_get reads a slot without it:
 * a slot's comm is stored (release) after its gen and pid, and read
 * (acquire) before them, so a reader that finds the handle's gen after
 * a non-NULL comm has that handle's comm. */
typedef struct {
    _Atomic(zh_comm_t *) comm; /* NULL: free */
    atomic_uint_fast64_t gen;  /* of the handle given out for this slot last */
    atomic_int pid;            /* process that created the comm */
} zh_slot_t;

static pthread_mutex_t zh_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static zh_slot_t zh_registry[ZH_MAX_COMMS];
static pthread_once_t zh_fork_once = PTHREAD_ONCE_INIT;
static atomic_int zh_self_pid; /* this process's pid, refreshed in a forked child */

static void zh_fork_prepare(void)
{
    pthread_mutex_lock(&zh_registry_lock);
}

static void zh_fork_parent(void)
{
    pthread_mutex_unlock(&zh_registry_lock);
}

static void zh_fork_child(void)
{
    /* The parent's communicators stay in the table so that using one here
     * is reported as such (zh_comm_get), never run. */
    atomic_store_explicit(&zh_self_pid, (int)getpid(), memory_order_relaxed);
    pthread_mutex_unlock(&zh_registry_lock);
}

static void zh_fork_register(void)
{
    atomic_store_explicit(&zh_self_pid, (int)getpid(), memory_order_relaxed);
    (void)pthread_atfork(zh_fork_prepare, zh_fork_parent, zh_fork_child);
}

void zh_registry_init(void)
{
    pthread_once(&zh_fork_once, zh_fork_register);
}

static HcclComm zh_handle_make(size_t slot, uint64_t gen)
{
    return (HcclComm)(uintptr_t)(ZH_HANDLE_TAG | gen << ZH_HANDLE_SLOT_BITS | slot);
}

/* Slot of a handle whose generation is current, or -1 (lock-free: see zh_slot_t). */
static ssize_t zh_handle_slot(HcclComm comm)
{
    uint64_t v = (uint64_t)(uintptr_t)comm;
    size_t slot = (size_t)(v & ((1u << ZH_HANDLE_SLOT_BITS) - 1));
    uint64_t gen = (v & ~ZH_HANDLE_TAG) >> ZH_HANDLE_SLOT_BITS;
    if ((v & (0xffull << 56)) != ZH_HANDLE_TAG || slot >= ZH_MAX_COMMS ||
        atomic_load_explicit(&zh_registry[slot].comm, memory_order_acquire) == NULL ||
        atomic_load_explicit(&zh_registry[slot].gen, memory_order_relaxed) != gen) {
        return -1;
    }
    return (ssize_t)slot;
}

int zh_registry_add(zh_comm_t *c, HcclComm *out)
{
    pthread_mutex_lock(&zh_registry_lock);
    for (size_t i = 0; i < ZH_MAX_COMMS; i++) {
        zh_slot_t *s = &zh_registry[i];
        uint64_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
        if (atomic_load_explicit(&s->comm, memory_order_relaxed) == NULL &&
            gen < ZH_HANDLE_GEN_MAX) {
            atomic_store_explicit(&s->gen, gen + 1, memory_order_relaxed);
            atomic_store_explicit(&s->pid, (int)getpid(), memory_order_relaxed);
            atomic_store_explicit(&s->comm, c, memory_order_release);
            *out = zh_handle_make(i, gen + 1);
            pthread_mutex_unlock(&zh_registry_lock);
            return ZC_OK;
        }
    }
    pthread_mutex_unlock(&zh_registry_lock);
    ZC_WARN(ZC_SUB_COMM, "more than %d live communicators in one process", ZH_MAX_COMMS);
    return ZC_ERR_OVERLIMIT;
}

void zh_registry_remove(zh_comm_t *c)
{
    pthread_mutex_lock(&zh_registry_lock);
    for (int i = 0; i < ZH_MAX_COMMS; i++) {
        if (atomic_load_explicit(&zh_registry[i].comm, memory_order_relaxed) == c) {
            atomic_store_explicit(&zh_registry[i].comm, NULL, memory_order_release);
        }
    }
    pthread_mutex_unlock(&zh_registry_lock);
}

zh_comm_t *zh_comm_lookup(HcclComm comm)
{
    zh_comm_t *found = NULL;
    pthread_mutex_lock(&zh_registry_lock);
    ssize_t i = zh_handle_slot(comm);
    if (i >= 0 && atomic_load_explicit(&zh_registry[i].pid, memory_order_relaxed) ==
                      atomic_load_explicit(&zh_self_pid, memory_order_relaxed)) {
        found = atomic_load_explicit(&zh_registry[i].comm, memory_order_relaxed);
    }
    pthread_mutex_unlock(&zh_registry_lock);
    return found;
}

HcclComm zh_comm_handle(const zh_comm_t *c)
{
    HcclComm h = NULL;
    pthread_mutex_lock(&zh_registry_lock);
    for (size_t i = 0; i < ZH_MAX_COMMS && h == NULL; i++) {
        if (atomic_load_explicit(&zh_registry[i].comm, memory_order_relaxed) == c) {
            h = zh_handle_make(i, atomic_load_explicit(&zh_registry[i].gen, memory_order_relaxed));
        }
    }
    pthread_mutex_unlock(&zh_registry_lock);
    return h;
}

/* A comm that spans hosts keeps its memory ranges and shared machinery in its
 * host comm; here so that the layers below the tier may ask. */
zh_comm_t *zh_comm_inner(zh_comm_t *c)
{
    return c->hier != NULL ? c->host_comm : c;
}

HcclResult zh_comm_get(HcclComm comm, const char *fn, zh_comm_t **out)
{
    if (comm == NULL) {
        ZC_WARN(ZC_SUB_COMM, "%s: comm is NULL", fn);
        return HCCL_E_PTR;
    }
    /* No lock: one acquire load per op (see zh_slot_t). A destroy racing
     * with a call on the same comm is the caller's misuse, locked or not. */
    ssize_t i = zh_handle_slot(comm);
    zh_comm_t *c = i >= 0 ? atomic_load_explicit(&zh_registry[i].comm, memory_order_acquire) : NULL;
    int pid = i >= 0 ? atomic_load_explicit(&zh_registry[i].pid, memory_order_relaxed) : 0;
    if (c != NULL && atomic_load_explicit(&zh_registry[i].gen, memory_order_relaxed) !=
                         ((uint64_t)(uintptr_t)comm & ~ZH_HANDLE_TAG) >> ZH_HANDLE_SLOT_BITS) {
        c = NULL; /* the slot was taken again between the two looks */
    }
    int self = atomic_load_explicit(&zh_self_pid, memory_order_relaxed);
    if (c == NULL) {
        ZC_WARN(ZC_SUB_COMM, "%s: comm %p is not a live communicator", fn, comm);
        return HCCL_E_PARA;
    }
    if (pid != self) {
        /* A forked child shares the parent's control segments and peers'
         * mappings: running anything would pair with the parent's peers. */
        ZC_WARN(ZC_SUB_COMM,
                "%s: communicator %s created by pid %d used in pid %d (a "
                "communicator does not survive fork)",
                fn, c->name, pid, self);
        return HCCL_E_NOT_SUPPORT;
    }
    *out = c;
    return HCCL_SUCCESS;
}
