/*
 * Logical devices: the device table, the per-thread current
 * device, device use counts, peer access, and NUMA placement.
 *
 * The table is built once per process (pthread_once) from the config and
 * the topology (vmm_topo.c): the count is ZCCL_DEVICES when non-zero, else
 * max(VMM_MIN_DEVICES, cores hwloc reports). Devices are logical, so the default never has fewer
 * than the 8 of the server CANN's samples are written for (`mpirun -np 8`
 * with one device per rank, or 8 threads of one process, each calling
 * aclrtSetDevice(rank)) and those run unchanged on a 2-core host; a larger
 * host gets one device per core. Device d belongs to NUMA node (d mod #NUMA);
 * its physical memory prefers that node (mbind, best effort) and its stream
 * workers run on that node's cpuset (best effort; only when the topology is
 * this machine's, not HWLOC_SYNTHETIC's or HWLOC_XMLFILE's).
 *
 * The current device is thread-local, as in ACL. aclrtSetDevice counts uses
 * of a device process-wide; aclrtResetDevice drops one and, at the last,
 * runs the function registered for it (vmm_device_on_reset: init/ registers
 * the draining and destroying of the device's default stream) and forgets
 * the device's peer pairs.
 */
#define _GNU_SOURCE
#include "core/vmm_internal.h"
#include "core/vmm_topo.h"

#include "zc/config.h"
#include "zc/export.h"
#include "zc/log.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define VMM_MPOL_PREFERRED 1 /* linux/mempolicy.h, kept local: no libnuma dependency */
#define VMM_MAX_NUMA 1024
#define VMM_MIN_DEVICES 8 /* an 8-device server, what CANN's samples assume */

typedef struct {
    int os_index;    /* NUMA node number the kernel knows, -1 if unknown */
    int have_cpuset; /* cpus holds a non-empty set */
    cpu_set_t cpus;
} vmm_numa_t;

static pthread_once_t vmm_dev_once = PTHREAD_ONCE_INIT;
static int vmm_ndev = 1;
static int vmm_nnuma = 0;
static vmm_numa_t *vmm_numas; /* vmm_nnuma entries */
static atomic_int *vmm_uses;  /* per device aclrtSetDevice count */
static _Thread_local int vmm_cur_dev = -1;

static void (*vmm_reset_fn)(int dev); /* set at load time, before any call */

/* Peer access pairs (dev << 32 | peer), guarded by vmm_dev_mu. */
static pthread_mutex_t vmm_dev_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *vmm_peers;
static size_t vmm_npeers, vmm_peers_cap;

static void vmm_device_table_build(void)
{
    const zc_config_t *cfg = zc_config();
    int cores = vmm_topo_cores();
    vmm_nnuma = ZC_MIN(vmm_topo_numa_count(), VMM_MAX_NUMA);
    if (cores <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cores = n > 0 ? (int)n : 1;
    }
    vmm_ndev = cfg->devices != 0 ? (int)cfg->devices : ZC_MAX(VMM_MIN_DEVICES, cores);
    if (vmm_nnuma > 0) {
        vmm_numas = calloc((size_t)vmm_nnuma, sizeof(*vmm_numas));
    }
    if (vmm_numas == NULL) {
        vmm_nnuma = 0;
    }
    for (int i = 0; i < vmm_nnuma; i++) {
        vmm_numas[i].have_cpuset = vmm_topo_numa(i, &vmm_numas[i].os_index, &vmm_numas[i].cpus);
    }
    vmm_uses = calloc((size_t)vmm_ndev, sizeof(*vmm_uses));
    if (vmm_uses == NULL) {
        ZC_ERROR(ZC_SUB_INIT, "device table: out of memory for %d devices, using 1", vmm_ndev);
        static atomic_int one_use;
        vmm_uses = &one_use;
        vmm_ndev = 1;
    }
    ZC_INFO(ZC_SUB_INIT, "%d devices (%s), %d NUMA nodes", vmm_ndev,
            cfg->devices != 0 ? "ZCCL_DEVICES" : "max(8, cores)", vmm_nnuma);
}

int vmm_device_count(void)
{
    pthread_once(&vmm_dev_once, vmm_device_table_build);
    return vmm_ndev;
}

int vmm_device_valid(int dev)
{
    return dev >= 0 && dev < vmm_device_count();
}

static const vmm_numa_t *vmm_device_node(int dev)
{
    if (!vmm_device_valid(dev) || vmm_nnuma == 0) {
        return NULL;
    }
    int i = vmm_topo_device_node(dev);
    return i >= 0 && i < vmm_nnuma ? &vmm_numas[i] : NULL;
}

int vmm_device_numa(int dev)
{
    const vmm_numa_t *nm = vmm_device_node(dev);
    return nm != NULL ? nm->os_index : -1;
}

int vmm_device_current(void)
{
    return vmm_cur_dev;
}

zc_status_t vmm_device_bind_thread(int dev)
{
    const vmm_numa_t *nm = vmm_device_node(dev);
    if (nm == NULL || !nm->have_cpuset) {
        return ZC_OK;
    }
    int rc = pthread_setaffinity_np(pthread_self(), sizeof(nm->cpus), &nm->cpus);
    if (rc != 0) {
        ZC_DEBUG(ZC_SUB_STREAM, "binding a worker of device %d to NUMA node %d failed: %s", dev,
                 nm->os_index, strerror(rc));
        return ZC_ERR_SYS;
    }
    return ZC_OK;
}

zc_status_t vmm_numa_place(void *addr, size_t len, int numa)
{
    (void)vmm_device_count();
    if (numa < 0 || vmm_nnuma <= 1 || numa >= VMM_MAX_NUMA || addr == NULL || len == 0) {
        return ZC_OK;
    }
    unsigned long mask[VMM_MAX_NUMA / (8 * sizeof(unsigned long))];
    memset(mask, 0, sizeof(mask));
    mask[(size_t)numa / (8 * sizeof(unsigned long))] |= 1ul << ((size_t)numa % (8 * sizeof(long)));
    long r = syscall(SYS_mbind, addr, len, VMM_MPOL_PREFERRED, mask,
                     (unsigned long)VMM_MAX_NUMA + 1, 0u);
    if (r != 0) {
        ZC_DEBUG(ZC_SUB_MEM, "mbind(%p, %zu, node %d) failed: %s", addr, len, numa,
                 strerror(errno));
        return ZC_ERR_SYS;
    }
    return ZC_OK;
}

/* ---- public API ------------------------------------------------------------------ */

ZC_EXPORT const char *aclrtGetSocName(void)
{
    return "zccl-host";
}

ZC_EXPORT aclError aclrtGetDeviceCount(uint32_t *count)
{
    if (count == NULL) {
        ZC_WARN(ZC_SUB_INIT, "aclrtGetDeviceCount: count is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    *count = (uint32_t)vmm_device_count();
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtSetDevice(int32_t deviceId)
{
    if (!vmm_device_valid(deviceId)) {
        ZC_WARN(ZC_SUB_INIT, "aclrtSetDevice: deviceId %d out of range [0, %d)", (int)deviceId,
                vmm_device_count());
        return ACL_ERROR_RT_INVALID_DEVICEID;
    }
    atomic_fetch_add_explicit(&vmm_uses[deviceId], 1, memory_order_relaxed);
    vmm_cur_dev = deviceId;
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtGetDevice(int32_t *deviceId)
{
    if (deviceId == NULL) {
        ZC_WARN(ZC_SUB_INIT, "aclrtGetDevice: deviceId is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (vmm_cur_dev < 0) {
        ZC_WARN(ZC_SUB_INIT, "aclrtGetDevice: this thread has no current device "
                             "(call aclrtSetDevice first)");
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    *deviceId = vmm_cur_dev;
    return ACL_SUCCESS;
}

/* Forget peer pairs that involve dev (its last use is gone). */
static void vmm_device_peers_forget(int dev)
{
    pthread_mutex_lock(&vmm_dev_mu);
    size_t j = 0;
    for (size_t i = 0; i < vmm_npeers; i++) {
        if ((int)(vmm_peers[i] >> 32) != dev) {
            vmm_peers[j++] = vmm_peers[i];
        }
    }
    vmm_npeers = j;
    pthread_mutex_unlock(&vmm_dev_mu);
}

void vmm_device_on_reset(void (*fn)(int dev))
{
    vmm_reset_fn = fn;
}

static aclError vmm_device_reset(int32_t deviceId, int force, const char *what)
{
    if (!vmm_device_valid(deviceId)) {
        ZC_WARN(ZC_SUB_INIT, "%s: deviceId %d out of range [0, %d)", what, (int)deviceId,
                vmm_device_count());
        return ACL_ERROR_RT_INVALID_DEVICEID;
    }
    int old = atomic_load_explicit(&vmm_uses[deviceId], memory_order_relaxed);
    int last = 0;
    while (old > 0) {
        int want = force ? 0 : old - 1;
        if (atomic_compare_exchange_weak_explicit(&vmm_uses[deviceId], &old, want,
                                                  memory_order_acq_rel, memory_order_relaxed)) {
            last = want == 0;
            break;
        }
    }
    if (last) {
        if (vmm_reset_fn != NULL) {
            vmm_reset_fn(deviceId);
        }
        vmm_device_peers_forget(deviceId);
    }
    if (vmm_cur_dev == deviceId) {
        vmm_cur_dev = -1;
    }
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtResetDevice(int32_t deviceId)
{
    return vmm_device_reset(deviceId, 0, "aclrtResetDevice");
}

ZC_EXPORT aclError aclrtResetDeviceForce(int32_t deviceId)
{
    return vmm_device_reset(deviceId, 1, "aclrtResetDeviceForce");
}

ZC_EXPORT aclError aclrtGetRunMode(aclrtRunMode *runMode)
{
    if (runMode == NULL) {
        ZC_WARN(ZC_SUB_INIT, "aclrtGetRunMode: runMode is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    *runMode = ACL_HOST;
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode)
{
    if (mode == ACL_RT_OVERFLOW_MODE_INFNAN) {
        return ACL_SUCCESS;
    }
    if (mode == ACL_RT_OVERFLOW_MODE_SATURATION) {
        ZC_WARN(ZC_SUB_INIT,
                "aclrtSetDeviceSatMode: mode %d (saturation) is not available: "
                "host arithmetic is IEEE inf/nan",
                (int)mode);
        return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    }
    ZC_WARN(ZC_SUB_INIT, "aclrtSetDeviceSatMode: mode %d is not a valid mode", (int)mode);
    return ACL_ERROR_INVALID_PARAM;
}

ZC_EXPORT aclError aclrtGetDeviceSatMode(aclrtFloatOverflowMode *mode)
{
    if (mode == NULL) {
        ZC_WARN(ZC_SUB_INIT, "aclrtGetDeviceSatMode: mode is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    *mode = ACL_RT_OVERFLOW_MODE_INFNAN;
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtDeviceGetBareTgid(int32_t *pid)
{
    if (pid == NULL) {
        ZC_WARN(ZC_SUB_INIT, "aclrtDeviceGetBareTgid: pid is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    *pid = (int32_t)getpid();
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtDeviceCanAccessPeer(int32_t *canAccessPeer, int32_t deviceId,
                                            int32_t peerDeviceId)
{
    if (canAccessPeer == NULL) {
        ZC_WARN(ZC_SUB_INIT, "aclrtDeviceCanAccessPeer: canAccessPeer is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (!vmm_device_valid(deviceId) || !vmm_device_valid(peerDeviceId)) {
        ZC_WARN(ZC_SUB_INIT,
                "aclrtDeviceCanAccessPeer: deviceId %d / peerDeviceId %d: out of "
                "range [0, %d)",
                (int)deviceId, (int)peerDeviceId, vmm_device_count());
        return ACL_ERROR_RT_INVALID_DEVICEID;
    }
    *canAccessPeer = deviceId != peerDeviceId ? 1 : 0;
    return ACL_SUCCESS;
}

/* Checks shared by enable/disable: a current device and a valid, different peer. */
static aclError vmm_peer_check(int32_t peer, const char *what)
{
    if (vmm_cur_dev < 0) {
        ZC_WARN(ZC_SUB_INIT, "%s: this thread has no current device", what);
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    if (!vmm_device_valid(peer)) {
        ZC_WARN(ZC_SUB_INIT, "%s: peerDeviceId %d out of range [0, %d)", what, (int)peer,
                vmm_device_count());
        return ACL_ERROR_RT_INVALID_DEVICEID;
    }
    if (peer == vmm_cur_dev) {
        ZC_WARN(ZC_SUB_INIT, "%s: peerDeviceId %d is the current device", what, (int)peer);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

static ssize_t vmm_peer_find(uint64_t key)
{
    for (size_t i = 0; i < vmm_npeers; i++) {
        if (vmm_peers[i] == key) {
            return (ssize_t)i;
        }
    }
    return -1;
}

ZC_EXPORT aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags)
{
    if (flags != 0) {
        ZC_WARN(ZC_SUB_INIT, "aclrtDeviceEnablePeerAccess: flags 0x%x must be 0", flags);
        return ACL_ERROR_INVALID_PARAM;
    }
    aclError rc = vmm_peer_check(peerDeviceId, "aclrtDeviceEnablePeerAccess");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    uint64_t key = ((uint64_t)(uint32_t)vmm_cur_dev << 32) | (uint32_t)peerDeviceId;
    pthread_mutex_lock(&vmm_dev_mu);
    if (vmm_peer_find(key) < 0) {
        if (vmm_npeers == vmm_peers_cap) {
            size_t cap = vmm_peers_cap != 0 ? 2 * vmm_peers_cap : 16;
            uint64_t *p = realloc(vmm_peers, cap * sizeof(*p));
            if (p == NULL) {
                pthread_mutex_unlock(&vmm_dev_mu);
                ZC_WARN(ZC_SUB_INIT, "aclrtDeviceEnablePeerAccess: out of memory");
                return ACL_ERROR_RT_MEMORY_ALLOCATION;
            }
            vmm_peers = p;
            vmm_peers_cap = cap;
        }
        vmm_peers[vmm_npeers++] = key;
    }
    pthread_mutex_unlock(&vmm_dev_mu);
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId)
{
    aclError rc = vmm_peer_check(peerDeviceId, "aclrtDeviceDisablePeerAccess");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    uint64_t key = ((uint64_t)(uint32_t)vmm_cur_dev << 32) | (uint32_t)peerDeviceId;
    pthread_mutex_lock(&vmm_dev_mu);
    ssize_t i = vmm_peer_find(key);
    if (i >= 0) {
        vmm_peers[i] = vmm_peers[--vmm_npeers];
    }
    pthread_mutex_unlock(&vmm_dev_mu);
    if (i < 0) {
        ZC_WARN(ZC_SUB_INIT,
                "aclrtDeviceDisablePeerAccess: access from device %d to %d was "
                "not enabled",
                vmm_cur_dev, (int)peerDeviceId);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

/* ---- libhccl interface (vmm_ext.h) ------------------------------------------------ */

ZC_EXPORT int zccl_current_device(void)
{
    return vmm_cur_dev;
}

ZC_EXPORT int zccl_device_numa(int dev)
{
    return vmm_device_numa(dev);
}

/* ---- fork ---------------------------------------------------------------------- */

void vmm_device_atfork_prepare(void)
{
    pthread_mutex_lock(&vmm_dev_mu);
}

void vmm_device_atfork_parent(void)
{
    pthread_mutex_unlock(&vmm_dev_mu);
}

void vmm_device_atfork_child(void)
{
    pthread_mutex_unlock(&vmm_dev_mu);
    /* The child has no streams yet: its device uses start from zero. The forking
     * thread keeps its current device, as its thread-local state is copied. */
    vmm_npeers = 0;
    if (vmm_uses != NULL) {
        for (int d = 0; d < vmm_ndev; d++) {
            atomic_store_explicit(&vmm_uses[d], 0, memory_order_relaxed);
        }
    }
}
