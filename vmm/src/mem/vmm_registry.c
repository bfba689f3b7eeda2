/*
 * The memory registry: its lock, its lists of handles and reservations, the
 * lookups the VMM, export and IPC files share, and its fork steps. See
 * vmm_registry.h.
 */
#include "mem/vmm_registry.h"

#include <pthread.h>

static pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;
vmm_phys_t *vmm_phys_list;
vmm_resv_t *vmm_resv_list;

void vmm_lock(void)
{
    pthread_mutex_lock(&vmm_mu);
}

void vmm_unlock(void)
{
    pthread_mutex_unlock(&vmm_mu);
}

void vmm_fork_prepare_registry(void)
{
    pthread_mutex_lock(&vmm_mu);
}

void vmm_fork_parent_registry(void)
{
    pthread_mutex_unlock(&vmm_mu);
}

void vmm_fork_child_registry(void)
{
    /* Handles, reservations and mappings are inherited and stay valid; the
     * broker offers of their shareable handles belonged to the parent. */
    for (vmm_phys_t *p = vmm_phys_list; p != NULL; p = p->next) {
        p->token = 0;
    }
    pthread_mutex_unlock(&vmm_mu);
}

vmm_phys_t *vmm_phys_find(aclrtDrvMemHandle h)
{
    for (vmm_phys_t *p = vmm_phys_list; p != NULL; p = p->next) {
        if ((void *)p == h) {
            return p->refs > 0 ? p : NULL;
        }
    }
    return NULL;
}

vmm_phys_t *vmm_phys_find_token(uint64_t token)
{
    for (vmm_phys_t *p = vmm_phys_list; p != NULL; p = p->next) {
        if (p->refs > 0 && token != 0 && p->token == token) {
            return p;
        }
    }
    return NULL;
}

int vmm_map_lookup(const void *ptr, int *fd, size_t *offset, size_t *avail)
{
    uintptr_t a = (uintptr_t)ptr;
    for (vmm_resv_t *r = vmm_resv_list; r != NULL; r = r->next) {
        for (vmm_map_t *m = r->maps; m != NULL; m = m->next) {
            if (a >= m->va && a - m->va < m->size) {
                *fd = m->phys->fd;
                *offset = a - m->va;
                *avail = m->size - (a - m->va);
                return 0;
            }
        }
    }
    return -1;
}
