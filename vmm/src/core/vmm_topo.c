/*
 * The host's topology: every hwloc call of zccl (design in vmm_topo.h).
 *
 * A rank's place is (NUMA node, package, L3 group), hwloc logical indices,
 * found by the first of these rules that answers:
 *  - bound: the thread's CPU binding (hwloc_get_cpubind; on a topology that
 *    is not this machine's, only the set zccl_topo_set_binding gave) has
 *    CPUs in exactly one NUMA node;
 *  - memory: the pages of the memory the caller names lie on one NUMA node
 *    (hwloc_get_area_memlocation; this machine's topology only);
 *  - device: the node of the current device (device d on node d mod
 *    #nodes, the mapping ZCCL_DEVICES' devices get);
 *  - none: no topology, or no device: every index -1.
 * The package and L3 group are those holding the binding (bound) or the
 * node's CPUs (other rules); -1 when no single one does. The rule is logged
 * at INFO (TOPO), so a place is never guessed silently.
 */
#define _GNU_SOURCE
#include "core/vmm_topo.h"

#include "zc/export.h"
#include "zc/log.h"
#include "zc/status.h"
#include "zccl/vmm_ext.h"

#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t vmm_topo_once = PTHREAD_ONCE_INIT;
static hwloc_topology_t vmm_topo; /* NULL when loading failed */
static int vmm_topo_here;         /* the topology is this machine's */

/* The test hook's binding (zccl_topo_set_binding), guarded by the mutex. */
static pthread_mutex_t vmm_topo_mu = PTHREAD_MUTEX_INITIALIZER;
static hwloc_bitmap_t vmm_topo_fake;

static void vmm_topo_load(void)
{
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0) {
        ZC_WARN(ZC_SUB_INIT, "hwloc topology init failed: no cores or NUMA nodes known");
        return;
    }
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        ZC_WARN(ZC_SUB_INIT, "hwloc topology load failed: no cores or NUMA nodes known");
        return;
    }
    vmm_topo = t;
    vmm_topo_here = hwloc_topology_is_thissystem(t);
    ZC_INFO(ZC_SUB_TOPO, "topology: %d packages, %d NUMA nodes, %d L3 caches, %d cores%s",
            hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE),
            hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE),
            hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_L3CACHE),
            hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE),
            vmm_topo_here ? "" : " (not this machine's: HWLOC_SYNTHETIC or HWLOC_XMLFILE)");
}

static hwloc_topology_t vmm_topo_get(void)
{
    pthread_once(&vmm_topo_once, vmm_topo_load);
    return vmm_topo;
}

int vmm_topo_cores(void)
{
    hwloc_topology_t t = vmm_topo_get();
    int n = t != NULL ? hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) : 0;
    return n > 0 ? n : 0;
}

int vmm_topo_numa_count(void)
{
    hwloc_topology_t t = vmm_topo_get();
    int n = t != NULL ? hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE) : 0;
    return n > 0 ? n : 0;
}

int vmm_topo_numa(int i, int *os_index, cpu_set_t *cpus)
{
    hwloc_topology_t t = vmm_topo_get();
    hwloc_obj_t obj = t != NULL ? hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)i) : NULL;
    int have = 0;
    *os_index = obj != NULL ? (int)obj->os_index : -1;
    CPU_ZERO(cpus);
    if (obj == NULL || obj->cpuset == NULL || !vmm_topo_here) {
        return 0;
    }
    int cpu;
    hwloc_bitmap_foreach_begin(cpu, obj->cpuset)
    {
        if (cpu >= 0 && cpu < CPU_SETSIZE) {
            CPU_SET(cpu, cpus);
            have = 1;
        }
    }
    hwloc_bitmap_foreach_end();
    return have;
}

int vmm_topo_device_node(int dev)
{
    int n = vmm_topo_numa_count();
    return dev >= 0 && n > 0 ? dev % n : -1;
}

/* ---- places -------------------------------------------------------------------------- */

/* obj or its nearest ancestor of type `type`, NULL when none. */
static hwloc_obj_t vmm_topo_up(hwloc_obj_t obj, hwloc_obj_type_t type)
{
    while (obj != NULL && obj->type != type) {
        obj = obj->parent;
    }
    return obj;
}

/* Fill out from NUMA node `node` and the CPUs `set` the rank runs on. */
static void vmm_topo_fill(hwloc_topology_t t, hwloc_obj_t node, hwloc_const_bitmap_t set, int rule,
                          zccl_place_t *out)
{
    hwloc_obj_t cover = hwloc_get_obj_covering_cpuset(t, set);
    hwloc_obj_t pkg = vmm_topo_up(cover, HWLOC_OBJ_PACKAGE);
    if (pkg == NULL) {
        pkg = vmm_topo_up(node->parent, HWLOC_OBJ_PACKAGE);
    }
    hwloc_obj_t l3 = vmm_topo_up(cover, HWLOC_OBJ_L3CACHE);
    out->numa = (int32_t)node->logical_index;
    out->package = pkg != NULL ? (int32_t)pkg->logical_index : -1;
    out->l3 = l3 != NULL ? (int32_t)l3->logical_index : -1;
    out->rule = rule;
}

/* The NUMA node of the CPUs `set`: NULL when they meet a node they do not
 * all lie in (the binding spans nodes) or none. Every node that holds all
 * of them qualifies, and the one with the fewest CPUs wins (lowest index on
 * a tie): a memory-only node (HBM, CXL) has its parent's CPUs, so the DDR
 * node of a package and its HBM node tie, and a node under the machine
 * loses to the package's own. */
static hwloc_obj_t vmm_topo_node_of(hwloc_topology_t t, hwloc_const_bitmap_t set)
{
    hwloc_obj_t found = NULL;
    int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t obj = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)i);
        if (obj->cpuset == NULL || !hwloc_bitmap_intersects(obj->cpuset, set)) {
            continue;
        }
        if (!hwloc_bitmap_isincluded(set, obj->cpuset)) {
            return NULL;
        }
        if (found == NULL ||
            hwloc_bitmap_weight(obj->cpuset) < hwloc_bitmap_weight(found->cpuset)) {
            found = obj;
        }
    }
    return found;
}

/* The binding to use: the test hook's, else the thread's (this machine's
 * topology only). 0 when it is known and non-empty. */
static int vmm_topo_binding(hwloc_topology_t t, hwloc_bitmap_t set)
{
    pthread_mutex_lock(&vmm_topo_mu);
    int fake = vmm_topo_fake != NULL;
    if (fake) {
        hwloc_bitmap_copy(set, vmm_topo_fake);
    }
    pthread_mutex_unlock(&vmm_topo_mu);
    if (!fake && (!vmm_topo_here || hwloc_get_cpubind(t, set, HWLOC_CPUBIND_THREAD) != 0)) {
        return -1;
    }
    return hwloc_bitmap_iszero(set) ? -1 : 0;
}

/* The node holding all of [mem, +len), NULL when unknown or several. */
static hwloc_obj_t vmm_topo_mem_node(hwloc_topology_t t, const void *mem, size_t len)
{
    if (!vmm_topo_here || mem == NULL || len == 0) {
        return NULL;
    }
    hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
    hwloc_obj_t node = NULL;
    if (nodes != NULL &&
        hwloc_get_area_memlocation(t, mem, len, nodes, HWLOC_MEMBIND_BYNODESET) == 0 &&
        hwloc_bitmap_weight(nodes) == 1) {
        node = hwloc_get_numanode_obj_by_os_index(t, (unsigned)hwloc_bitmap_first(nodes));
    }
    hwloc_bitmap_free(nodes);
    return node;
}

static const char *const vmm_topo_rules[] = {"bound", "memory", "device", "none"};

const char *zccl_topo_rule_name(int rule)
{
    return rule >= 0 && rule <= ZCCL_PLACE_NONE ? vmm_topo_rules[rule] : "?";
}

/* Place by the binding, then memory, then device; 0 or ZC_ERR_NOMEM. */
static int vmm_topo_place_in(hwloc_topology_t t, const void *mem, size_t len, int dev,
                             zccl_place_t *out, char *why, size_t why_len)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set == NULL) {
        return ZC_ERR_NOMEM;
    }
    int bound = vmm_topo_binding(t, set) == 0;
    hwloc_obj_t node = bound ? vmm_topo_node_of(t, set) : NULL;
    char cpus[64] = "";
    if (bound) {
        hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), set);
    }
    if (node != NULL) {
        vmm_topo_fill(t, node, set, ZCCL_PLACE_BOUND, out);
        snprintf(why, why_len, "CPUs %s, all in this NUMA node", cpus);
    } else if ((node = vmm_topo_mem_node(t, mem, len)) != NULL) {
        vmm_topo_fill(t, node, node->cpuset, ZCCL_PLACE_MEMORY, out);
        snprintf(why, why_len, "%s%s, memory at %p on NUMA node P#%u",
                 bound ? "CPUs " : "not bound", cpus, mem, node->os_index);
    } else if (vmm_topo_device_node(dev) >= 0) {
        node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)vmm_topo_device_node(dev));
        vmm_topo_fill(t, node, node->cpuset, ZCCL_PLACE_DEVICE, out);
        snprintf(why, why_len, "%s%s, memory's node unknown: device %d's node (d mod %d nodes)",
                 bound ? "CPUs " : "not bound", cpus, dev, vmm_topo_numa_count());
    } else {
        snprintf(why, why_len, "no NUMA node known and no device");
    }
    hwloc_bitmap_free(set);
    return ZC_OK;
}

ZC_EXPORT int zccl_topo_place(const void *mem, size_t len, int dev, zccl_place_t *out)
{
    *out = (zccl_place_t){-1, -1, -1, ZCCL_PLACE_NONE};
    hwloc_topology_t t = vmm_topo_get();
    char why[160] = "no topology";
    int st = t != NULL ? vmm_topo_place_in(t, mem, len, dev, out, why, sizeof(why)) : ZC_OK;
    if (st != ZC_OK) {
        ZC_WARN(ZC_SUB_TOPO, "placing this rank: out of memory");
        return st;
    }
    ZC_INFO(ZC_SUB_TOPO, "place: NUMA node %d, package %d, L3 group %d (rule %s: %s)", out->numa,
            out->package, out->l3, zccl_topo_rule_name(out->rule), why);
    return ZC_OK;
}

ZC_EXPORT int zccl_topo_core_place(int core, zccl_place_t *out)
{
    *out = (zccl_place_t){-1, -1, -1, ZCCL_PLACE_NONE};
    hwloc_topology_t t = vmm_topo_get();
    hwloc_obj_t obj =
        t != NULL && core >= 0 ? hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, (unsigned)core) : NULL;
    if (obj == NULL) {
        ZC_WARN(ZC_SUB_TOPO, "zccl_topo_core_place: core %d is not one of the topology's %d", core,
                vmm_topo_cores());
        return ZC_ERR_INVAL;
    }
    hwloc_obj_t node = vmm_topo_node_of(t, obj->cpuset);
    if (node == NULL) {
        ZC_WARN(ZC_SUB_TOPO, "zccl_topo_core_place: core %d lies in no one NUMA node", core);
        return ZC_ERR_INVAL;
    }
    vmm_topo_fill(t, node, obj->cpuset, ZCCL_PLACE_BOUND, out);
    return ZC_OK;
}

ZC_EXPORT int zccl_topo_cores(void)
{
    return vmm_topo_cores();
}

ZC_EXPORT int zccl_topo_set_binding(const char *cpus)
{
    hwloc_bitmap_t set = NULL;
    if (cpus != NULL) {
        set = hwloc_bitmap_alloc();
        if (set == NULL) {
            return ZC_ERR_NOMEM;
        }
        if (hwloc_bitmap_list_sscanf(set, cpus) != 0 || hwloc_bitmap_iszero(set)) {
            ZC_WARN(ZC_SUB_TOPO, "zccl_topo_set_binding: cpus \"%s\" is not a CPU list", cpus);
            hwloc_bitmap_free(set);
            return ZC_ERR_INVAL;
        }
    }
    pthread_mutex_lock(&vmm_topo_mu);
    hwloc_bitmap_free(vmm_topo_fake);
    vmm_topo_fake = set;
    pthread_mutex_unlock(&vmm_topo_mu);
    return ZC_OK;
}
