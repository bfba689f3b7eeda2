/*
 * fork() and the memory registry with its broker.
 *
 * Around fork() the registry lock (mem/vmm_registry.c) and then the broker
 * lock (share/vmm_broker.c) are taken, so the child inherits neither
 * half-changed. After it, the parent releases both; the child first drops
 * the parent's broker socket and offers (none of them are its own), then,
 * the registry lock still held, forgets its exported IPC keys (their offers
 * were the parent's) and its handles' offer tokens, and releases the
 * registry. This file sits above both, so neither of them has to call the
 * other for it.
 */
#include <pthread.h>

#include "mem/vmm_registry.h"
#include "share/vmm_share.h"

static void vmm_fork_prepare(void)
{
    vmm_fork_prepare_registry();
    vmm_broker_fork_prepare();
}

static void vmm_fork_parent(void)
{
    vmm_broker_fork_parent();
    vmm_fork_parent_registry();
}

static void vmm_fork_child(void)
{
    vmm_broker_fork_child();
    vmm_ipc_fork_child();
    vmm_fork_child_registry();
}

/* Registered at load time, so no fork can slip in before the handlers exist. */
__attribute__((constructor)) static void vmm_fork_register(void)
{
    (void)pthread_atfork(vmm_fork_prepare, vmm_fork_parent, vmm_fork_child);
}
