/*
 * The memory registry of libascendcl: physical handles, address
 * reservations and the mappings between them. vmm_registry.c owns its lock,
 * its lists and the lookups that the VMM (vmm_phys.c), export (vmm_export.c)
 * and IPC (vmm_ipc.c) files share; vmm_phys.c makes and changes the objects.
 *
 * Objects and who owns them:
 *  - A physical handle (vmm_phys_t) owns one memfd. aclrtMallocPhysical and
 *    the import calls create it with one user reference; Retain adds one and
 *    FreePhysical drops one. Each aclrtMapMem of it holds a map reference.
 *    The fd is closed and the handle forgotten when both counts are zero; the
 *    broker offer of its shareable handle is withdrawn when the user count
 *    reaches zero (new imports fail, existing imports keep their memory).
 *  - A reservation (vmm_resv_t) is a PROT_NONE range of address space; the
 *    mappings inside it (vmm_map_t) each hold a map reference of a handle.
 *  - Broker offers (a dup of an fd each) live in share/vmm_broker.c.
 * Locking: one registry mutex (vmm_lock) guards handles, reservations,
 * mappings and the IPC key tables (vmm_ipc.c); the broker has its own mutex,
 * always taken after the registry mutex, never before. Both are taken around
 * fork() (init/vmm_fork.c registers the handlers), so a forked child finds
 * them free.
 */
#ifndef VMM_REGISTRY_H
#define VMM_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base.h"

typedef struct vmm_phys vmm_phys_t;
struct vmm_phys {
    vmm_phys_t *next;
    int fd;             /* the memfd; owned */
    size_t size;        /* bytes, a multiple of the granularity */
    int dev;            /* device id whose memory it is, -1 for host memory */
    int numa;           /* NUMA node its pages prefer, -1 for none */
    unsigned refs;      /* user references (alloc/import 1, +1 per retain) */
    unsigned maps;      /* live aclrtMapMem mappings */
    uint64_t token;     /* broker offer of its shareable handle, 0 if none */
    uint64_t src_token; /* shareable handle it was imported from, 0 if local */
};

typedef struct vmm_map vmm_map_t;
struct vmm_map {
    vmm_map_t *next;
    uintptr_t va;
    size_t size;
    vmm_phys_t *phys;
};

typedef struct vmm_resv vmm_resv_t;
struct vmm_resv {
    vmm_resv_t *next;
    uintptr_t base;
    size_t size;
    vmm_map_t *maps;
};

/* Every handle and every reservation. Registry lock held. */
extern vmm_phys_t *vmm_phys_list;
extern vmm_resv_t *vmm_resv_list;

void vmm_lock(void);
void vmm_unlock(void);

/* The registry's fork steps (init/vmm_fork.c): prepare takes the lock, parent
 * releases it, child forgets the handles' offer tokens and releases it. */
void vmm_fork_prepare_registry(void);
void vmm_fork_parent_registry(void);
void vmm_fork_child_registry(void);

/** The live handle h (user references > 0) or NULL. Registry lock held. */
vmm_phys_t *vmm_phys_find(aclrtDrvMemHandle h);

/** The live handle whose shareable handle is token, or NULL. Registry lock held. */
vmm_phys_t *vmm_phys_find_token(uint64_t token);

/**
 * The VMM mapping that contains ptr: its handle's fd (owned by the handle),
 * the offset of ptr in that fd and the bytes of the mapping from ptr on.
 * Registry lock held. @return 0 when found, -1 otherwise.
 */
int vmm_map_lookup(const void *ptr, int *fd, size_t *offset, size_t *avail);

/**
 * Wrap fd (ownership passes to the handle, also on failure) of size bytes in a
 * new handle with one user reference. Registry lock NOT held. (vmm_phys.c)
 * @return ACL_SUCCESS or ACL_ERROR_RT_MEMORY_ALLOCATION.
 */
aclError vmm_phys_wrap(int fd, size_t size, int dev, int numa, uint64_t src_token,
                       aclrtDrvMemHandle *out);

/**
 * Have fn(token) run, registry lock held, when a handle's last user reference
 * goes (aclrtFreePhysical); token is its shareable handle, 0 if it has none.
 * One function, registered at load time (init). (vmm_phys.c)
 */
void vmm_phys_on_release(void (*fn)(uint64_t token));

#endif /* VMM_REGISTRY_H */
