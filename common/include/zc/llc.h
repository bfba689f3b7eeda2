/*
 * The size of the last-level cache, as the kernel reports it in sysfs
 * (cpuN/cache/indexK/{level,type,size}). Used to size the window of op data
 * the store-kind model takes the cache to keep (collectives/coll_nt.c).
 */
#ifndef ZC_LLC_H
#define ZC_LLC_H

#include <stdint.h>

/** Bytes of the highest-level data or unified cache of the CPU the first
 *  caller ran on (CPU 0 when that is unknown), read once per process; 0 when
 *  sysfs does not say. */
uint64_t zc_llc_bytes(void);

/** The same for CPU `cpu` under a sysfs CPU directory `root` (normally
 *  "/sys/devices/system/cpu"; tests point it at a tree of their own). */
uint64_t zc_llc_bytes_at(const char *root, int cpu);

#endif /* ZC_LLC_H */
