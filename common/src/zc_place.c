/* The calling thread's CPU, and a fence off one CPU (zc/place.h). */
#define _GNU_SOURCE
#include "zc/place.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

#include "zc/log.h"

_Static_assert(sizeof(((zc_cpu_fence_t *)0)->saved) == sizeof(cpu_set_t),
               "a fence holds one cpu_set_t");

int zc_cpu_now(void)
{
    return sched_getcpu(); /* glibc reads it from the thread's rseq area: no syscall */
}

int zc_cpu_fence_up(zc_cpu_fence_t *f, int cpu)
{
    f->up = 0;
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
        return 0;
    }
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof(mask), &mask) != 0 || !CPU_ISSET(cpu, &mask) ||
        CPU_COUNT(&mask) < 2) {
        return 0;
    }
    memcpy(f->saved, &mask, sizeof(mask));
    CPU_CLR(cpu, &mask);
    if (sched_setaffinity(0, sizeof(mask), &mask) != 0) {
        return 0;
    }
    f->up = 1;
    return 1;
}

void zc_cpu_fence_lift(zc_cpu_fence_t *f)
{
    if (!f->up) {
        return;
    }
    f->up = 0;
    cpu_set_t mask;
    memcpy(&mask, f->saved, sizeof(mask));
    if (sched_setaffinity(0, sizeof(mask), &mask) != 0) {
        ZC_WARN(ZC_SUB_COMM, "cannot give the thread back its CPU affinity: %s", strerror(errno));
    }
}
