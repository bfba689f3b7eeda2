/*
 * Releasing a communicator of one host: its symmetric windows, its place in
 * the process's memory table and its peers' windows, CCL buffers,
 * point-to-point channels and control segment, then the struct. Its own file
 * because both a comm's free (hccl_comm.c) and the tier across hosts, which
 * frees its local comm (hccl_hier.c), use it, and the comm's init uses that
 * tier: here it sits below both.
 */
#include "core/hccl_internal.h"

#include <pthread.h>
#include <stdlib.h>

void zh_comm_release(zh_comm_t *c)
{
    /* A comm refused before its tables were made (too many ranks on one
     * host, out of memory) has no peers to release. Written only then: an
     * attached comm's count is read by other threads (activation offers
     * blocks to every attached comm's peers) until zh_mem_detach below
     * takes it out of the table. */
    if (c->peers == NULL) {
        c->nranks = 0;
    }
    zh_symwin_release(c);
    zh_mem_detach(c);
    zh_mem_release_all(c);
    zh_ccl_release(c);
    zh_p2p_release(c);
    zh_ctrl_destroy(c);
    zh_comm_tables_free(c);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
