/*
 * The size of the last-level cache, as the kernel reports it in sysfs
 * (cpuN/cache/indexK/{level,type,size,shared_cpu_list}). Used to size the window of op data
 * the store-kind model takes the cache to keep (collectives/coll_nt.c).
 */
#ifndef ZC_LLC_H
#define ZC_LLC_H

#include <stdint.h>

/** The most last-level cache one CPU is taken to have: 12 MiB, the largest
 *  share per core of any many-core x86 part (AMD's 3D V-Cache, 96 MiB for 8
 *  cores). */
#define ZC_LLC_PER_CPU_MAX ((uint64_t)12 << 20)

/** Bytes of the highest-level data or unified cache of the CPU the first
 *  caller ran on (CPU 0 when that is unknown), capped by zc_llc_cap for the
 *  CPUs sharing it, read once per process; 0 when sysfs does not say. */
uint64_t zc_llc_bytes(void);

/** The same before the cap: what the kernel reports (for logs). */
uint64_t zc_llc_reported_bytes(void);

/** `bytes` capped at `cpus` x ZC_LLC_PER_CPU_MAX (unchanged when cpus <= 0,
 *  unknown). */
uint64_t zc_llc_cap(uint64_t bytes, int cpus);

/** CPUs sharing the cache zc_llc_bytes_at finds (its shared_cpu_list);
 *  0 when unknown or malformed. */
int zc_llc_cpus_at(const char *root, int cpu);

/** The same for CPU `cpu` under a sysfs CPU directory `root` (normally
 *  "/sys/devices/system/cpu"; tests point it at a tree of their own). */
uint64_t zc_llc_bytes_at(const char *root, int cpu);

#endif /* ZC_LLC_H */
