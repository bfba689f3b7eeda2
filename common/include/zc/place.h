/*
 * Where the calling thread runs: the CPU it is on now, and a fence that keeps
 * it off one CPU while it sleeps. hccl's waits fence a sleeping rank off the
 * CPU of the peer that will wake it (hccl_ctrl.c, zh_comm_sleep).
 */
#ifndef ZC_PLACE_H
#define ZC_PLACE_H

#include <stdint.h>

/** The CPU the calling thread runs on (it may move at any time), or -1 when
 *  the kernel does not say. */
int zc_cpu_now(void);

/** The calling thread's affinity mask while a fence is up (1,024 CPUs). */
typedef struct {
    uint64_t saved[16];
    int up;
} zc_cpu_fence_t;

/**
 * Keep the calling thread off CPU `cpu` until zc_cpu_fence_lift: its
 * affinity mask loses that CPU (it moves at once if it runs there). Nothing
 * changes when the mask does not hold `cpu`, holds nothing else, or the
 * kernel refuses (a mask of more CPUs than the fence holds). Returns 1 when
 * the fence went up.
 */
int zc_cpu_fence_up(zc_cpu_fence_t *f, int cpu);

/** Give the thread back the mask zc_cpu_fence_up found (nothing when no
 *  fence went up). */
void zc_cpu_fence_lift(zc_cpu_fence_t *f);

#endif /* ZC_PLACE_H */
