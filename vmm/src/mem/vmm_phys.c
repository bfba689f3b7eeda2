/*
 * VMM on the host: physical memory, address reservations and the
 * mappings between them.
 *
 *  - aclrtMallocPhysical: an anonymous memfd (MFD_CLOEXEC) of the size rounded
 *    up to the minimum granularity of its properties. Pages come on first
 *    touch and prefer the device's NUMA node (mbind on the first mapping sets
 *    the shared policy of the memfd). Transparent huge pages are asked for
 *    with madvise on each mapping; hugetlbfs is never needed.
 *  - Granularity: huge-page attributes 2 MiB (minimum and recommended),
 *    1G attributes 1 GiB, normal attributes the page size (recommended 2 MiB).
 *  - aclrtReserveMemAddress: a PROT_NONE MAP_NORESERVE anonymous private
 *    mapping aligned to `alignment` (0 = 2 MiB), at expectPtr when one is
 *    given and free (MAP_FIXED_NOREPLACE), else it fails.
 *  - aclrtMapMem: maps the memfd MAP_SHARED|MAP_FIXED over part of a
 *    reservation; aclrtUnmapMem puts a PROT_NONE NORESERVE mapping back, so
 *    the address range stays reserved.
 *  - Handles carry user references (Malloc/Import 1, Retain +1, Free -1) and
 *    map references; see vmm_registry.h for when the fd and the broker offer
 *    go. The registry's lock, lists and shared lookups are vmm_registry.c's.
 *    Freeing a handle that is still mapped is allowed (as with CUDA's
 *    cuMemRelease): the memory lives until the last unmap.
 *
 * Lifetimes: aclrtUnmapMem, aclrtFreePhysical and aclrtReleaseMemAddress first
 * wait until the work the calling thread queued before the call has run (as
 * aclrtFree, vmm_mem.c), so a queued op never reads or writes memory that is
 * gone; from a stream task, which cannot wait, they fail with
 * ACL_ERROR_RT_STREAM_CONTEXT and change nothing.
 *
 * Error codes (as documented in acl_rt.h): a NULL, zero, or otherwise wrong
 * argument, including an address outside any reservation, an overlap, a
 * size unlike the handle's, a non-zero offset, nothing mapped at an address,
 * or a reservation released while mapped -> ACL_ERROR_INVALID_PARAM; a handle
 * that is not live -> ACL_ERROR_RT_INVALID_HANDLE; an absurd size, exhausted
 * memory or address space, or an expectPtr range already in use ->
 * ACL_ERROR_RT_MEMORY_ALLOCATION. Each failure logs one line naming the
 * argument and its value.
 */
#include "core/vmm_internal.h"
#include "mem/vmm_registry.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zc/export.h"
#include "zc/log.h"

#define VMM_HUGE_SIZE ((size_t)2 << 20)
#define VMM_HUGE1G_SIZE ((size_t)1 << 30)
#define VMM_DEFAULT_ALIGN VMM_HUGE_SIZE

static void (*vmm_release_fn)(uint64_t token); /* set at load time, before any call */

void vmm_phys_on_release(void (*fn)(uint64_t token))
{
    vmm_release_fn = fn;
}

static size_t vmm_page_size(void)
{
    long v = sysconf(_SC_PAGESIZE); /* cheap: read from the auxiliary vector */
    return v > 0 ? (size_t)v : 4096;
}

/* Round x up to a multiple of a (a power of two); 0 on overflow. */
static size_t vmm_round_up(size_t x, size_t a)
{
    if (x > SIZE_MAX - (a - 1)) {
        return 0;
    }
    return (x + a - 1) & ~(a - 1);
}

/* ---- properties and granularity ---------------------------------------------------- */

typedef struct {
    size_t min;
    size_t rec;
    int dev;
    int numa;
} vmm_prop_info_t;

/* Check prop; fill its granularities and placement. Logs as `what`. */
static aclError vmm_prop_check(const aclrtPhysicalMemProp *prop, vmm_prop_info_t *info,
                               const char *what)
{
    if (prop->handleType != ACL_MEM_HANDLE_TYPE_NONE &&
        prop->handleType != ACL_MEM_HANDLE_TYPE_POSIX) {
        ZC_WARN(ZC_SUB_VMM, "%s: prop->handleType %d is not NONE or POSIX", what,
                (int)prop->handleType);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (prop->allocationType != ACL_MEM_ALLOCATION_TYPE_PINNED) {
        ZC_WARN(ZC_SUB_VMM, "%s: prop->allocationType %d is not PINNED", what,
                (int)prop->allocationType);
        return ACL_ERROR_INVALID_PARAM;
    }
    int ddr_only = 0;
    switch (prop->memAttr) {
    case ACL_DDR_MEM_HUGE:
    case ACL_DDR_MEM_P2P_HUGE:
        ddr_only = 1;
        /* fall through */
    case ACL_HBM_MEM_HUGE:
    case ACL_HBM_MEM_NORMAL: /* CANN backs HBM "normal" memory with huge pages too */
    case ACL_HBM_MEM_P2P_HUGE:
    case ACL_MEM_HUGE:
    case ACL_MEM_P2P_HUGE:
        info->min = VMM_HUGE_SIZE;
        info->rec = VMM_HUGE_SIZE;
        break;
    case ACL_DDR_MEM_NORMAL:
    case ACL_DDR_MEM_P2P_NORMAL:
        ddr_only = 1;
        /* fall through */
    case ACL_HBM_MEM_P2P_NORMAL:
    case ACL_MEM_NORMAL:
    case ACL_MEM_P2P_NORMAL:
        info->min = vmm_page_size();
        info->rec = VMM_HUGE_SIZE;
        break;
    case ACL_HBM_MEM_HUGE1G:
    case ACL_HBM_MEM_P2P_HUGE1G:
    case ACL_MEM_HUGE1G:
    case ACL_MEM_P2P_HUGE1G:
        info->min = VMM_HUGE1G_SIZE;
        info->rec = VMM_HUGE1G_SIZE;
        break;
    default:
        ZC_WARN(ZC_SUB_VMM, "%s: prop->memAttr %d is not a physical memory attribute", what,
                (int)prop->memAttr);
        return ACL_ERROR_INVALID_PARAM;
    }
    switch (prop->location.type) {
    case ACL_MEM_LOCATION_TYPE_DEVICE:
        if (ddr_only) {
            ZC_WARN(ZC_SUB_VMM, "%s: prop->memAttr %d is host (DDR) memory, location is a device",
                    what, (int)prop->memAttr);
            return ACL_ERROR_INVALID_PARAM;
        }
        if (prop->location.id > INT32_MAX || !vmm_device_valid((int)prop->location.id)) {
            ZC_WARN(ZC_SUB_VMM, "%s: prop->location.id %u is not a device (count %d)", what,
                    prop->location.id, vmm_device_count());
            return ACL_ERROR_INVALID_PARAM;
        }
        info->dev = (int)prop->location.id;
        info->numa = vmm_device_numa(info->dev);
        break;
    case ACL_MEM_LOCATION_TYPE_HOST:
    case ACL_MEM_LOCATION_TYPE_MANAGED:
        info->dev = -1;
        info->numa = -1;
        break;
    case ACL_MEM_LOCATION_TYPE_HOST_NUMA:
        info->dev = -1;
        info->numa = prop->location.id > INT32_MAX ? -1 : (int)prop->location.id;
        break;
    default:
        ZC_WARN(ZC_SUB_VMM, "%s: prop->location.type %d is not supported", what,
                (int)prop->location.type);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop,
                                                    aclrtMemGranularityOptions option,
                                                    size_t *granularity)
{
    if (prop == NULL || granularity == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMemGetAllocationGranularity: prop %p or granularity %p is NULL",
                (void *)prop, (void *)granularity);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (option != ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM &&
        option != ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
        ZC_WARN(ZC_SUB_VMM,
                "aclrtMemGetAllocationGranularity: option %d is not MINIMUM or "
                "RECOMMENDED",
                (int)option);
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_prop_info_t info;
    aclError err = vmm_prop_check(prop, &info, "aclrtMemGetAllocationGranularity");
    if (err != ACL_SUCCESS) {
        return err;
    }
    *granularity = option == ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM ? info.min : info.rec;
    return ACL_SUCCESS;
}

/* ---- physical handles ---------------------------------------------------------------- */

aclError vmm_phys_wrap(int fd, size_t size, int dev, int numa, uint64_t src_token,
                       aclrtDrvMemHandle *out)
{
    vmm_phys_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        ZC_WARN(ZC_SUB_VMM, "out of memory for a physical handle of %zu bytes", size);
        close(fd);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    p->fd = fd;
    p->size = size;
    p->dev = dev;
    p->numa = numa;
    p->refs = 1;
    p->src_token = src_token;
    vmm_lock();
    p->next = vmm_phys_list;
    vmm_phys_list = p;
    vmm_unlock();
    *out = p;
    return ACL_SUCCESS;
}

/* Forget p and close its fd once nothing refers to it. Registry lock held. */
static void vmm_phys_maybe_destroy(vmm_phys_t *p)
{
    if (p->refs > 0 || p->maps > 0) {
        return;
    }
    for (vmm_phys_t **pp = &vmm_phys_list; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    close(p->fd);
    free(p);
}

ZC_EXPORT aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size,
                                       const aclrtPhysicalMemProp *prop, uint64_t flags)
{
    if (handle == NULL || prop == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMallocPhysical: handle %p or prop %p is NULL", (void *)handle,
                (const void *)prop);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (size == 0) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMallocPhysical: size is 0");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (flags != 0) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMallocPhysical: flags 0x%llx must be 0",
                (unsigned long long)flags);
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_prop_info_t info;
    aclError err = vmm_prop_check(prop, &info, "aclrtMallocPhysical");
    if (err != ACL_SUCCESS) {
        return err;
    }
    size_t bytes = vmm_round_up(size, info.min);
    long pages = sysconf(_SC_PHYS_PAGES);
    size_t ram = pages > 0 ? (size_t)pages * vmm_page_size() : SIZE_MAX;
    if (bytes == 0 || bytes > ram) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMallocPhysical: size %zu exceeds this host's memory (%zu bytes)",
                size, ram);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    int fd = memfd_create("zccl-phys", MFD_CLOEXEC);
    if (fd < 0) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMallocPhysical: memfd_create failed (errno %d)", errno);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    if (ftruncate(fd, (off_t)bytes) != 0) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMallocPhysical: ftruncate to size %zu failed (errno %d)", bytes,
                errno);
        close(fd);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    aclrtDrvMemHandle h;
    err = vmm_phys_wrap(fd, bytes, info.dev, info.numa, 0, &h);
    if (err != ACL_SUCCESS) {
        return err;
    }
    ZC_DEBUG(ZC_SUB_VMM, "aclrtMallocPhysical: %zu bytes on device %d -> %p", bytes, info.dev, h);
    *handle = h;
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtFreePhysical(aclrtDrvMemHandle handle)
{
    if (handle == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtFreePhysical: handle is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    aclError drained = vmm_stream_drain_mine("aclrtFreePhysical");
    if (drained != ACL_SUCCESS) {
        return drained;
    }
    vmm_lock();
    vmm_phys_t *p = vmm_phys_find(handle);
    if (p == NULL) {
        vmm_unlock();
        ZC_WARN(ZC_SUB_VMM, "aclrtFreePhysical: handle %p is not a live physical handle", handle);
        return ACL_ERROR_RT_INVALID_HANDLE;
    }
    p->refs--;
    if (p->refs == 0) {
        /* The shareable handle dies with the handle (share/ withdraws it). */
        if (vmm_release_fn != NULL) {
            vmm_release_fn(p->token);
        }
        p->token = 0;
        vmm_phys_maybe_destroy(p);
    }
    vmm_unlock();
    return ACL_SUCCESS;
}

ZC_EXPORT int zccl_phys_fd(aclrtDrvMemHandle handle, int *fd, size_t *size)
{
    if (fd == NULL || size == NULL) {
        ZC_WARN(ZC_SUB_VMM, "zccl_phys_fd: fd %p or size %p is NULL", (void *)fd, (void *)size);
        return ZC_ERR_PTR;
    }
    vmm_lock();
    vmm_phys_t *p = vmm_phys_find(handle);
    if (p != NULL) {
        *fd = p->fd;
        *size = p->size;
    }
    vmm_unlock();
    if (p == NULL) {
        ZC_WARN(ZC_SUB_VMM, "zccl_phys_fd: handle %p is not a live physical handle", handle);
        return ZC_ERR_HANDLE;
    }
    return ZC_OK;
}

/* ---- reservations ---------------------------------------------------------------------- */

ZC_EXPORT aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment,
                                          void *expectPtr, uint64_t flags)
{
    if (virPtr == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtReserveMemAddress: virPtr is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (size == 0) {
        ZC_WARN(ZC_SUB_VMM, "aclrtReserveMemAddress: size is 0");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (flags > 1) {
        ZC_WARN(ZC_SUB_VMM, "aclrtReserveMemAddress: flags 0x%llx is not 0 or 1",
                (unsigned long long)flags);
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((alignment & (alignment - 1)) != 0) {
        ZC_WARN(ZC_SUB_VMM, "aclrtReserveMemAddress: alignment %zu is not a power of two",
                alignment);
        return ACL_ERROR_INVALID_PARAM;
    }
    size_t align = alignment == 0 ? VMM_DEFAULT_ALIGN : ZC_MAX(alignment, vmm_page_size());
    if (expectPtr != NULL && (uintptr_t)expectPtr % align != 0) {
        ZC_WARN(ZC_SUB_VMM, "aclrtReserveMemAddress: expectPtr %p is not aligned to %zu", expectPtr,
                align);
        return ACL_ERROR_INVALID_PARAM;
    }
    size_t len = vmm_round_up(size, vmm_page_size());
    size_t total = expectPtr != NULL ? len : len + align;
    if (len == 0 || total < len) {
        ZC_WARN(ZC_SUB_VMM, "aclrtReserveMemAddress: size %zu exceeds the address space", size);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    vmm_resv_t *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtReserveMemAddress: out of memory");
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    int mflags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (expectPtr != NULL) {
        mflags |= MAP_FIXED_NOREPLACE;
    }
    void *p = mmap(expectPtr, total, PROT_NONE, mflags, -1, 0);
    if (p == MAP_FAILED || (expectPtr != NULL && p != expectPtr)) {
        int err = errno;
        if (p != MAP_FAILED) {
            munmap(p, total); /* an old kernel took the hint as a hint */
        }
        free(r);
        if (expectPtr != NULL) {
            ZC_WARN(ZC_SUB_VMM, "aclrtReserveMemAddress: expectPtr %p + %zu is not free (errno %d)",
                    expectPtr, len, err);
        } else {
            ZC_WARN(ZC_SUB_VMM, "aclrtReserveMemAddress: no %zu bytes of address space (errno %d)",
                    size, err);
        }
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    uintptr_t base = (uintptr_t)p;
    if (expectPtr == NULL) {
        /* Over-reserved by align bytes: trim both ends to an aligned range. */
        uintptr_t aligned = (base + align - 1) & ~(uintptr_t)(align - 1);
        if (aligned > base) {
            munmap(p, aligned - base);
        }
        size_t tail = (base + total) - (aligned + len);
        if (tail > 0) {
            munmap((void *)(aligned + len), tail);
        }
        base = aligned;
    }
    r->base = base;
    r->size = len;
    vmm_lock();
    r->next = vmm_resv_list;
    vmm_resv_list = r;
    vmm_unlock();
    *virPtr = (void *)base;
    ZC_DEBUG(ZC_SUB_VMM, "aclrtReserveMemAddress: %zu bytes at %p", len, *virPtr);
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtReleaseMemAddress(void *virPtr)
{
    if (virPtr == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtReleaseMemAddress: virPtr is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    aclError drained = vmm_stream_drain_mine("aclrtReleaseMemAddress");
    if (drained != ACL_SUCCESS) {
        return drained;
    }
    vmm_lock();
    vmm_resv_t **pp = &vmm_resv_list;
    while (*pp != NULL && (*pp)->base != (uintptr_t)virPtr) {
        pp = &(*pp)->next;
    }
    vmm_resv_t *r = *pp;
    if (r == NULL || r->maps != NULL) {
        vmm_unlock();
        if (r == NULL) {
            ZC_WARN(ZC_SUB_VMM, "aclrtReleaseMemAddress: virPtr %p is not a reservation", virPtr);
        } else {
            ZC_WARN(ZC_SUB_VMM,
                    "aclrtReleaseMemAddress: virPtr %p still has mappings (unmap "
                    "first)",
                    virPtr);
        }
        return ACL_ERROR_INVALID_PARAM;
    }
    *pp = r->next;
    vmm_unlock();
    munmap((void *)r->base, r->size);
    free(r);
    return ACL_SUCCESS;
}

/* ---- mappings ----------------------------------------------------------------------------- */

/* The reservation holding [va, va+size), or NULL. Registry lock held. */
static vmm_resv_t *vmm_resv_find(uintptr_t va, size_t size)
{
    for (vmm_resv_t *r = vmm_resv_list; r != NULL; r = r->next) {
        if (va >= r->base && va - r->base <= r->size && size <= r->size - (va - r->base)) {
            return r;
        }
    }
    return NULL;
}

/* The mapping starting exactly at va; *prevp gets its link. Registry lock held. */
static vmm_map_t *vmm_map_find_start(uintptr_t va, vmm_resv_t **rp, vmm_map_t ***prevp)
{
    for (vmm_resv_t *r = vmm_resv_list; r != NULL; r = r->next) {
        if (va < r->base || va - r->base >= r->size) {
            continue;
        }
        for (vmm_map_t **pp = &r->maps; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->va == va) {
                *rp = r;
                *prevp = pp;
                return *pp;
            }
        }
    }
    return NULL;
}

ZC_EXPORT int zccl_vmm_query(const void *va, zccl_vmm_info_t *out)
{
    uintptr_t a = (uintptr_t)va;
    int st = ZC_ERR_NOT_FOUND;
    memset(out, 0, sizeof(*out));
    vmm_lock();
    for (vmm_resv_t *r = vmm_resv_list; r != NULL && st != ZC_OK; r = r->next) {
        if (a < r->base || a - r->base >= r->size) {
            continue;
        }
        out->resv_base = r->base;
        out->resv_size = r->size;
        for (vmm_map_t *m = r->maps; m != NULL; m = m->next) {
            if (a >= m->va && a - m->va < m->size) {
                out->map_va = m->va;
                out->map_size = m->size;
                out->handle = m->phys;
                break;
            }
        }
        st = ZC_OK;
    }
    vmm_unlock();
    return st;
}

ZC_EXPORT aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                               uint64_t flags)
{
    if (virPtr == NULL || handle == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMapMem: virPtr %p or handle %p is NULL", virPtr, handle);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (size == 0) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMapMem: size is 0");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (offset != 0) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMapMem: offset %zu must be 0", offset);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (flags > 1) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMapMem: flags 0x%llx is not 0 or 1", (unsigned long long)flags);
        return ACL_ERROR_INVALID_PARAM;
    }
    uintptr_t va = (uintptr_t)virPtr;
    if (va % vmm_page_size() != 0) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMapMem: virPtr %p is not page aligned", virPtr);
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_map_t *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMapMem: out of memory");
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    aclError err = ACL_SUCCESS;
    int numa = -1;
    vmm_lock();
    vmm_phys_t *p = vmm_phys_find(handle);
    vmm_resv_t *r = NULL;
    if (p == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMapMem: handle %p is not a live physical handle", handle);
        err = ACL_ERROR_RT_INVALID_HANDLE;
        goto out;
    }
    if (size != p->size) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMapMem: size %zu differs from the handle's size %zu", size,
                p->size);
        err = ACL_ERROR_INVALID_PARAM;
        goto out;
    }
    r = vmm_resv_find(va, size);
    if (r == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMapMem: [%p, +%zu) is not inside one reservation", virPtr, size);
        err = ACL_ERROR_INVALID_PARAM;
        goto out;
    }
    for (vmm_map_t *o = r->maps; o != NULL; o = o->next) {
        if (va < o->va + o->size && o->va < va + size) {
            ZC_WARN(ZC_SUB_VMM, "aclrtMapMem: [%p, +%zu) overlaps the mapping at %p (+%zu)", virPtr,
                    size, (void *)o->va, o->size);
            err = ACL_ERROR_INVALID_PARAM;
            goto out;
        }
    }
    void *got = mmap(virPtr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, p->fd, 0);
    if (got == MAP_FAILED) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMapMem: mmap of %zu bytes at %p failed (errno %d)", size, virPtr,
                errno);
        err = ACL_ERROR_RT_MEMORY_ALLOCATION;
        goto out;
    }
    if (size % VMM_HUGE_SIZE == 0 && va % VMM_HUGE_SIZE == 0) {
        (void)madvise(virPtr, size, MADV_HUGEPAGE); /* best effort: THP may be off */
    }
    numa = p->numa;
    m->va = va;
    m->size = size;
    m->phys = p;
    m->next = r->maps;
    r->maps = m;
    p->maps++;
    m = NULL;
out:
    vmm_unlock();
    free(m);
    if (err == ACL_SUCCESS) {
        /* Outside the registry lock: the device module takes its own locks. */
        (void)vmm_numa_place(virPtr, size, numa);
    }
    return err;
}

ZC_EXPORT aclError aclrtUnmapMem(void *virPtr)
{
    if (virPtr == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtUnmapMem: virPtr is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    aclError drained = vmm_stream_drain_mine("aclrtUnmapMem");
    if (drained != ACL_SUCCESS) {
        return drained;
    }
    vmm_lock();
    vmm_resv_t *r;
    vmm_map_t **pp;
    vmm_map_t *m = vmm_map_find_start((uintptr_t)virPtr, &r, &pp);
    if (m == NULL) {
        vmm_unlock();
        ZC_WARN(ZC_SUB_VMM, "aclrtUnmapMem: no mapping starts at virPtr %p", virPtr);
        return ACL_ERROR_INVALID_PARAM;
    }
    /* Replace, never munmap: the range must stay reserved for its owner. */
    void *got = mmap(virPtr, m->size, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (got == MAP_FAILED) {
        vmm_unlock();
        ZC_WARN(ZC_SUB_VMM, "aclrtUnmapMem: remapping %zu bytes at %p PROT_NONE failed (errno %d)",
                m->size, virPtr, errno);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *pp = m->next;
    vmm_phys_t *p = m->phys;
    p->maps--;
    vmm_phys_maybe_destroy(p);
    vmm_unlock();
    free(m);
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtMemRetainAllocationHandle(void *virPtr, aclrtDrvMemHandle *handle)
{
    if (virPtr == NULL || handle == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMemRetainAllocationHandle: virPtr %p or handle %p is NULL",
                virPtr, (void *)handle);
        return ACL_ERROR_INVALID_PARAM;
    }
    vmm_lock();
    vmm_resv_t *r;
    vmm_map_t **pp;
    vmm_map_t *m = vmm_map_find_start((uintptr_t)virPtr, &r, &pp);
    if (m != NULL) {
        /* A handle freed while mapped comes back to life with this reference. */
        m->phys->refs++;
        *handle = m->phys;
    }
    vmm_unlock();
    if (m == NULL) {
        ZC_WARN(ZC_SUB_VMM, "aclrtMemRetainAllocationHandle: no mapping starts at virPtr %p",
                virPtr);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}
