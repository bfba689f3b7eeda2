/*
 * Waiting for a stream's `done` count: the adaptive spin budget, then
 * yields, then futex sleeps, and the wake of the sleepers whose target was
 * reached. Below the worker and the producers, which both wait. See
 * vmm_stream.h.
 */
#include "stream/vmm_stream.h"

#include "zc/export.h"
#include "zc/sync.h"

#include <unistd.h>

atomic_int vmm_nworkers; /* counted by the workers, read by the spin cap */

/* A spin of b ns, cut short when this process has as many stream workers
 * as the host has cores (a spinner would take the core of the thread it
 * waits for). */
static unsigned vmm_spin_cap(unsigned b)
{
    static atomic_long vmm_ncpu;
    long ncpu = atomic_load_explicit(&vmm_ncpu, memory_order_relaxed);
    if (ncpu == 0) {
        ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        atomic_store_explicit(&vmm_ncpu, ncpu, memory_order_relaxed);
    }
    if (ncpu > 0 && atomic_load_explicit(&vmm_nworkers, memory_order_relaxed) >= ncpu) {
        b = ZC_MIN(b, VMM_SPIN_MIN_NS * 4);
    }
    return b;
}

unsigned vmm_spin_budget(vmm_stream_t *s)
{
    return vmm_spin_cap(atomic_load_explicit(&s->spin, memory_order_relaxed));
}

unsigned vmm_idle_budget(void)
{
    return vmm_spin_cap(VMM_IDLE_SPIN_NS);
}

/* Grow the budget after a spin that succeeded. After one that slept, the
 * wait took waited_ns: when that fits the longest spin, spin that long next
 * time (the work waited for takes about as long each time: an op of one
 * size in a loop), else shrink (a wait behind much queued work, or one
 * whose work could not run meanwhile). */
static void vmm_spin_learn(vmm_stream_t *s, int success, uint64_t waited_ns)
{
    unsigned b = atomic_load_explicit(&s->spin, memory_order_relaxed);
    if (success) {
        b = ZC_MIN(b * 2, VMM_SPIN_MAX_NS);
    } else if (waited_ns <= VMM_SPIN_MAX_NS) {
        b = (unsigned)ZC_MAX(waited_ns + waited_ns / 4, (uint64_t)VMM_SPIN_MIN_NS);
        b = ZC_MIN(b, VMM_SPIN_MAX_NS);
    } else {
        b = ZC_MAX(b / 2, VMM_SPIN_MIN_NS);
    }
    atomic_store_explicit(&s->spin, b, memory_order_relaxed);
}

int vmm_reached(vmm_stream_t *s, uint64_t target)
{
    return atomic_load_explicit(&s->done, memory_order_acquire) >= target;
}

/* Wake sleepers whose target `done` has reached. */
void vmm_stream_wake_done(vmm_stream_t *s, uint64_t done)
{
    uint64_t w = atomic_load_explicit(&s->want, memory_order_seq_cst);
    while (done >= w) {
        if (atomic_compare_exchange_weak_explicit(&s->want, &w, UINT64_MAX, memory_order_seq_cst,
                                                  memory_order_seq_cst)) {
            zc_futex_wake_private(&s->done32, INT32_MAX);
            break;
        }
    }
}

/* The end of a wait that went past its spin (t0: its start; 0 when it
 * did not spin, which teaches nothing). Returns rc. */
static int vmm_wait_slept(vmm_stream_t *s, uint64_t t0, int rc)
{
    if (t0 != 0) {
        vmm_spin_learn(s, 0, rc == 0 ? zc_time_ns() - t0 : UINT64_MAX);
    }
    return rc;
}

/* Wait until done >= target: spin (unless sleep_now), yield, then futex
 * sleeps. deadline_ns 0 = forever. Returns 0, or -1 at the deadline. */
int vmm_stream_wait_done(vmm_stream_t *s, uint64_t target, uint64_t deadline_ns, int sleep_now)
{
    sleep_now = sleep_now || zc_yield_is_off(); /* a spin would burn the slice of a busy core */
    uint64_t t0 = sleep_now ? 0 : zc_time_ns();
    uint64_t budget = sleep_now ? 0 : vmm_spin_budget(s);
    /* Busy polls for the first VMM_PAUSE_NS of the budget, polls that
     * yield the core for the rest (the thread waited for may need it). */
    uint64_t until = t0 + ZC_MIN(budget, VMM_PAUSE_NS);
    for (unsigned i = 1; budget != 0; i++) {
        if (vmm_reached(s, target)) {
            vmm_spin_learn(s, 1, 0);
            return 0;
        }
        zc_cpu_relax();
        if (i % 32 == 0 && zc_time_ns() > until) {
            break;
        }
    }
    until = t0 + budget;
    for (unsigned i = 0; budget != 0 && (i < VMM_YIELDS || zc_time_ns() < until); i++) {
        if (vmm_reached(s, target)) {
            if (zc_time_ns() >= until) {
                return vmm_wait_slept(s, t0, 0); /* past the budget: learn its length */
            }
            vmm_spin_learn(s, 1, 0);
            return 0;
        }
        if (!zc_yield()) {
            break;
        }
    }
    for (;;) {
        unsigned d32 = atomic_load_explicit(&s->done32, memory_order_seq_cst);
        if (vmm_reached(s, target)) {
            return vmm_wait_slept(s, t0, 0);
        }
        uint64_t w = atomic_load_explicit(&s->want, memory_order_seq_cst);
        while (target < w &&
               !atomic_compare_exchange_weak_explicit(&s->want, &w, target, memory_order_seq_cst,
                                                      memory_order_seq_cst)) {
        }
        if (atomic_load_explicit(&s->done, memory_order_seq_cst) >= target) {
            return vmm_wait_slept(s, t0, 0);
        }
        uint64_t slice = VMM_SLICE_NS;
        if (deadline_ns != 0) {
            uint64_t now = zc_time_ns();
            if (now >= deadline_ns) {
                return vmm_wait_slept(s, t0, -1);
            }
            slice = ZC_MIN(slice, deadline_ns - now);
        }
        (void)zc_futex_wait_private(&s->done32, d32, slice);
    }
}
