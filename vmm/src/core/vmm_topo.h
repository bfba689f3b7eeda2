/*
 * The host's topology (vmm_topo.c): the one place zccl calls hwloc.
 *
 * The topology is loaded once per process, the first time anything asks,
 * and kept: hwloc itself reads HWLOC_SYNTHETIC / HWLOC_XMLFILE (a synthetic
 * or exported topology instead of this machine's), and nothing here sets a
 * source of its own. What the device table needs (cores, NUMA nodes and
 * their cpusets, the node of a device) is here; so is a rank's place
 * (zccl_topo_place in zccl/vmm_ext.h), which the communicators exchange.
 */
#ifndef VMM_TOPO_H
#define VMM_TOPO_H

#include <sched.h>

/** Cores of the topology; 0 when it could not be loaded. */
int vmm_topo_cores(void);

/** NUMA nodes of the topology; 0 when it could not be loaded. */
int vmm_topo_numa_count(void);

/** NUMA node i (hwloc's logical order): its OS index (-1 unknown) and, when
 *  the topology is this machine's (not synthetic or exported), its cpus.
 *  Returns 1 when cpus holds a non-empty set, else 0. */
int vmm_topo_numa(int i, int *os_index, cpu_set_t *cpus);

/** The NUMA node (logical index) device dev belongs to: dev mod #nodes;
 *  -1 when dev < 0 or no node is known. */
int vmm_topo_device_node(int dev);

#endif /* VMM_TOPO_H */
