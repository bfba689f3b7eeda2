/*
 * Issuers: each thread's count of the tracked tasks it queued that have not
 * finished, which its frees wait for (vmm_stream_drain_mine). Below the
 * worker, which counts a tracked task done, and the task interface, which
 * counts it queued. See vmm_stream.h.
 */
#include "stream/vmm_stream.h"

#include "zc/sync.h"

#include <pthread.h>
#include <stdlib.h>

/* Tasks a thread queued that have not finished (pending), shared by those
 * tasks and the thread (refs), so a thread may exit with work queued. */
typedef struct vmm_issuer {
    atomic_uint pending;
    atomic_uint draining; /* the thread sleeps in a drain: wake it at 0 */
    atomic_int refs;
} vmm_issuer_t;

/* One of w's tasks is over; the last one wakes a draining thread (no
 * syscall per task otherwise). */
static void vmm_issuer_dec(vmm_issuer_t *w)
{
    if (atomic_fetch_sub_explicit(&w->pending, 1, memory_order_seq_cst) == 1 &&
        atomic_load_explicit(&w->draining, memory_order_seq_cst) != 0) {
        zc_futex_wake(&w->pending, INT32_MAX);
    }
}

static pthread_once_t vmm_issuer_once = PTHREAD_ONCE_INIT;
static pthread_key_t vmm_issuer_key;
static _Thread_local vmm_issuer_t *vmm_issuer_self;

static void vmm_issuer_put(void *p)
{
    vmm_issuer_t *w = p;
    if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) == 1) {
        free(w);
    }
}

static void vmm_issuer_key_make(void)
{
    (void)pthread_key_create(&vmm_issuer_key, vmm_issuer_put);
}

/* The calling thread's issuer record, with one more pending task and
 * reference for it; NULL when it cannot be made (a committed claim then runs
 * untracked, a tracked push fails). */
vmm_issuer_t *vmm_issuer_mine(void)
{
    if (vmm_issuer_self == NULL) {
        pthread_once(&vmm_issuer_once, vmm_issuer_key_make);
        vmm_issuer_t *w = calloc(1, sizeof(*w));
        if (w == NULL) {
            return NULL;
        }
        atomic_init(&w->refs, 1);
        (void)pthread_setspecific(vmm_issuer_key, w);
        vmm_issuer_self = w;
    }
    atomic_fetch_add_explicit(&vmm_issuer_self->refs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&vmm_issuer_self->pending, 1, memory_order_relaxed);
    return vmm_issuer_self;
}

/* A tracked task finished or was dropped. */
void vmm_issuer_done(vmm_issuer_t *w)
{
    vmm_issuer_dec(w);
    vmm_issuer_put(w);
}

/* Wait until every task the calling thread queued tracked has finished. */
void vmm_issuer_drain(void)
{
    vmm_issuer_t *w = vmm_issuer_self;
    if (w == NULL) {
        return;
    }
    /* draining is raised before pending is read again (both seq_cst), so
     * the task that takes pending to 0 either is seen here or sees it. */
    atomic_fetch_add_explicit(&w->draining, 1, memory_order_seq_cst);
    for (unsigned v; (v = atomic_load_explicit(&w->pending, memory_order_seq_cst)) != 0;) {
        (void)zc_futex_wait(&w->pending, v, 0);
    }
    atomic_fetch_sub_explicit(&w->draining, 1, memory_order_seq_cst);
}

void vmm_issuer_forget(void)
{
    vmm_issuer_self = NULL;
}
