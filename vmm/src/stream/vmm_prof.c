/*
 * The op recorder (zccl/prof_ext.h): one buffer of fixed-size records per
 * process, filled by whichever thread finishes an op.
 *
 * A writer counts itself in (`writers`), re-checks the mask (a stop may have
 * cleared it since the caller's cheap check), reserves slot `head++` and
 * copies its record; the slot's `ready` flag (release) tells the reader the
 * copy is complete. zccl_prof_end clears the mask and waits until `writers`
 * is zero: both sides use sequentially consistent operations on `writers`
 * and the mask, so a writer either sees the cleared mask or is seen by the
 * stop. The buffer is never reused while a writer may hold a slot of it.
 * Copies run their hook here too (vmm_mem.c), stamped with the copy's
 * stream, so the trace shows them beside the collectives.
 */
#include "core/vmm_internal.h"

#include "zc/export.h"
#include "zc/log.h"
#include "zc/sync.h"
#include "zccl/prof_ext.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    atomic_uint ready;
    zccl_prof_rec_t rec;
} vmm_prof_slot_t;

ZC_EXPORT atomic_uint zccl_prof_mask;

static pthread_mutex_t vmm_prof_mu = PTHREAD_MUTEX_INITIALIZER; /* begin / end / take */
static vmm_prof_slot_t *vmm_prof_buf;
static size_t vmm_prof_cap;
static atomic_size_t vmm_prof_head;
static atomic_int vmm_prof_writers;
static int vmm_prof_running;

ZC_EXPORT void zccl_prof_record(const zccl_prof_rec_t *r, unsigned what)
{
    atomic_fetch_add_explicit(&vmm_prof_writers, 1, memory_order_seq_cst);
    if ((atomic_load_explicit(&zccl_prof_mask, memory_order_seq_cst) & what) != 0) {
        size_t i = atomic_fetch_add_explicit(&vmm_prof_head, 1, memory_order_relaxed);
        if (i < vmm_prof_cap) {
            vmm_prof_buf[i].rec = *r;
            atomic_store_explicit(&vmm_prof_buf[i].ready, 1, memory_order_release);
        }
    }
    atomic_fetch_sub_explicit(&vmm_prof_writers, 1, memory_order_seq_cst);
}

ZC_EXPORT int zccl_prof_begin(unsigned what, size_t capacity)
{
    pthread_mutex_lock(&vmm_prof_mu);
    if (vmm_prof_running) {
        pthread_mutex_unlock(&vmm_prof_mu);
        ZC_WARN(ZC_SUB_INIT, "profiling: already recording");
        return -1;
    }
    free(vmm_prof_buf); /* records of an earlier run nobody took */
    vmm_prof_buf = calloc(capacity, sizeof(*vmm_prof_buf));
    if (vmm_prof_buf == NULL) {
        vmm_prof_cap = 0;
        pthread_mutex_unlock(&vmm_prof_mu);
        ZC_WARN(ZC_SUB_INIT, "profiling: no memory for %zu records", capacity);
        return -1;
    }
    vmm_prof_cap = capacity;
    atomic_store_explicit(&vmm_prof_head, 0, memory_order_relaxed);
    vmm_prof_running = 1;
    atomic_store_explicit(&zccl_prof_mask, what, memory_order_seq_cst);
    pthread_mutex_unlock(&vmm_prof_mu);
    return 0;
}

ZC_EXPORT void zccl_prof_end(void)
{
    pthread_mutex_lock(&vmm_prof_mu);
    atomic_store_explicit(&zccl_prof_mask, 0, memory_order_seq_cst);
    while (atomic_load_explicit(&vmm_prof_writers, memory_order_seq_cst) != 0) {
        zc_cpu_relax();
    }
    vmm_prof_running = 0;
    pthread_mutex_unlock(&vmm_prof_mu);
}

ZC_EXPORT size_t zccl_prof_take(zccl_prof_rec_t **recs, uint64_t *dropped)
{
    pthread_mutex_lock(&vmm_prof_mu);
    size_t head = atomic_load_explicit(&vmm_prof_head, memory_order_relaxed);
    size_t avail = ZC_MIN(head, vmm_prof_cap);
    size_t n = 0;
    zccl_prof_rec_t *out = NULL;
    if (!vmm_prof_running && vmm_prof_buf != NULL) {
        out = malloc((avail != 0 ? avail : 1) * sizeof(*out));
        for (size_t i = 0; out != NULL && i < avail; i++) {
            if (atomic_load_explicit(&vmm_prof_buf[i].ready, memory_order_acquire)) {
                out[n++] = vmm_prof_buf[i].rec;
            }
        }
        free(vmm_prof_buf);
        vmm_prof_buf = NULL;
        vmm_prof_cap = 0;
        atomic_store_explicit(&vmm_prof_head, 0, memory_order_relaxed);
    }
    pthread_mutex_unlock(&vmm_prof_mu);
    if (dropped != NULL) {
        *dropped = out != NULL ? (uint64_t)(head - avail) : 0;
    }
    *recs = out;
    return n;
}

/* ---- stream copies (vmm_mem.c) ------------------------------------------------------- */

void vmm_prof_copy_issue(vmm_prof_copy_t *p, aclrtStream stream)
{
    p->t_enq = 0;
    p->stream = stream;
    p->dev = -1;
    if (zccl_prof_on(ZCCL_PROF_COPY)) {
        p->t_enq = zc_time_ns();
        p->dev = zccl_stream_device(stream);
    }
}

void vmm_prof_copy(const vmm_prof_copy_t *p, int is_copy, size_t bytes, uint64_t t0)
{
    zccl_prof_rec_t r = {
        .t_enq = p->t_enq != 0 ? p->t_enq : t0,
        .t_start = t0,
        .t_end = zc_time_ns(),
        .count = bytes,
        .send_bytes = bytes,
        .recv_bytes = bytes,
        .stream = (uint64_t)(uintptr_t)p->stream,
        .rank = -1,
        .nranks = 0,
        .device = p->dev >= 0 ? p->dev : vmm_device_current(),
        .dtype = -1,
        .peer = -1,
        .path = ZCCL_PROF_PATH_COPY,
        .result = 0,
    };
    snprintf(r.op, sizeof(r.op), "%s", is_copy ? "aclrtMemcpyAsync" : "aclrtMemsetAsync");
    zccl_prof_record(&r, ZCCL_PROF_COPY);
}
