/*
 * "Device" and host memory: aclrtMalloc/Free, aclrtMallocHost/FreeHost,
 * aclrtMemcpy[Async], aclrtMemset[Async], aclrtGetMemInfo.
 *
 * aclrtMalloc memory is an anonymous memfd (page-rounded) mapped MAP_SHARED,
 * so the VMM/IPC layer can hand the same physical pages to another process
 * (aclrtIpcMemGetExportKey finds the fd with vmm_mem_lookup). Its pages
 * prefer the current device's NUMA node (mbind, best effort) and huge-page
 * policies ask for transparent huge pages (madvise, best effort). The fd stays
 * open for the block's lifetime, so the soft RLIMIT_NOFILE is raised to the
 * hard limit once (many programs allocate more blocks than 1024).
 *
 * Every block (device or host) is kept in one table sorted by address, so a
 * pointer that did not come from the matching allocator is refused, and an
 * interior pointer can be resolved for IPC.
 *
 * Frees are ordered after queued work, in the spirit of CANN's rule (and of
 * cudaFree's implicit synchronisation): aclrtFree / aclrtFreeHost first wait
 * until every task the calling thread queued before the call (on any stream)
 * has run, so a queued copy or collective never touches memory that was given
 * back. Called from a stream task (which cannot wait for the streams) they
 * fail with ACL_ERROR_RT_STREAM_CONTEXT and free nothing. Why the calling
 * thread's work and not every stream's: see vmm_stream_drain_mine.
 */
#define _GNU_SOURCE
#include "core/vmm_internal.h"

#include "zc/export.h"
#include "zc/log.h"
#include "zc/sync.h"
#include "zccl/prof_ext.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <unistd.h>

typedef struct {
    uintptr_t base;
    size_t size; /* mapped bytes (device) or requested bytes (host) */
    int fd;      /* memfd of a device block, -1 for host memory */
} vmm_block_t;

static pthread_mutex_t vmm_mem_mu = PTHREAD_MUTEX_INITIALIZER;
static vmm_block_t *vmm_blocks;
static size_t vmm_nblocks, vmm_blocks_cap;
static pthread_once_t vmm_nofile_once = PTHREAD_ONCE_INIT;
static void (*vmm_free_fn)(uintptr_t base, size_t size); /* set at load time, before any call */

void vmm_mem_on_free(void (*fn)(uintptr_t base, size_t size))
{
    vmm_free_fn = fn;
}

static void vmm_nofile_raise(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            ZC_DEBUG(ZC_SUB_MEM, "raising RLIMIT_NOFILE failed: %s", strerror(errno));
        }
    }
}

/* Index of the first block with base > p (callers hold vmm_mem_mu). */
static size_t vmm_block_upper(uintptr_t p)
{
    size_t lo = 0, hi = vmm_nblocks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (vmm_blocks[mid].base <= p) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static zc_status_t vmm_block_add(uintptr_t base, size_t size, int fd)
{
    pthread_mutex_lock(&vmm_mem_mu);
    if (vmm_nblocks == vmm_blocks_cap) {
        size_t cap = vmm_blocks_cap != 0 ? 2 * vmm_blocks_cap : 64;
        vmm_block_t *b = realloc(vmm_blocks, cap * sizeof(*b));
        if (b == NULL) {
            pthread_mutex_unlock(&vmm_mem_mu);
            return ZC_ERR_NOMEM;
        }
        vmm_blocks = b;
        vmm_blocks_cap = cap;
    }
    size_t i = vmm_block_upper(base);
    memmove(&vmm_blocks[i + 1], &vmm_blocks[i], (vmm_nblocks - i) * sizeof(*vmm_blocks));
    vmm_blocks[i] = (vmm_block_t){.base = base, .size = size, .fd = fd};
    vmm_nblocks++;
    pthread_mutex_unlock(&vmm_mem_mu);
    return ZC_OK;
}

/* Remove the block starting exactly at base whose kind matches (device: fd >= 0). */
static int vmm_block_take(uintptr_t base, int device, vmm_block_t *out)
{
    int found = 0;
    pthread_mutex_lock(&vmm_mem_mu);
    size_t i = vmm_block_upper(base);
    if (i > 0 && vmm_blocks[i - 1].base == base && (vmm_blocks[i - 1].fd >= 0) == device) {
        *out = vmm_blocks[i - 1];
        memmove(&vmm_blocks[i - 1], &vmm_blocks[i], (vmm_nblocks - i) * sizeof(*vmm_blocks));
        vmm_nblocks--;
        found = 1;
    }
    pthread_mutex_unlock(&vmm_mem_mu);
    return found;
}

int vmm_mem_lookup(const void *ptr, int *fd, size_t *offset, size_t *size)
{
    if (ptr == NULL || fd == NULL || offset == NULL || size == NULL) {
        return ZC_ERR_PTR;
    }
    uintptr_t p = (uintptr_t)ptr;
    int rc = ZC_ERR_NOT_FOUND;
    pthread_mutex_lock(&vmm_mem_mu);
    size_t i = vmm_block_upper(p);
    if (i > 0) {
        const vmm_block_t *b = &vmm_blocks[i - 1];
        if (b->fd >= 0 && p - b->base < b->size) {
            int nfd = fcntl(b->fd, F_DUPFD_CLOEXEC, 0);
            if (nfd < 0) {
                ZC_WARN(ZC_SUB_MEM, "vmm_mem_lookup: dup of the memfd of block %p failed: %s",
                        (void *)b->base, strerror(errno));
                rc = ZC_ERR_SYS;
            } else {
                *fd = nfd;
                *offset = p - b->base;
                *size = b->size;
                rc = ZC_OK;
            }
        }
    }
    pthread_mutex_unlock(&vmm_mem_mu);
    return rc;
}

/* ---- device memory --------------------------------------------------------------------- */

static int vmm_policy_valid(uint32_t policy, int *huge)
{
    const uint32_t bw = ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH;
    uint32_t page = policy & ~(bw | (uint32_t)ACL_MEM_ACCESS_USER_SPACE_READONLY);
    if (page > ACL_MEM_MALLOC_HUGE1G_ONLY_P2P) {
        return 0;
    }
    *huge = page != ACL_MEM_MALLOC_NORMAL_ONLY && page != ACL_MEM_MALLOC_NORMAL_ONLY_P2P;
    return 1;
}

ZC_EXPORT aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    int huge = 0;
    if (devPtr == NULL) {
        ZC_WARN(ZC_SUB_MEM, "aclrtMalloc: devPtr is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (size == 0) {
        ZC_WARN(ZC_SUB_MEM, "aclrtMalloc: size is 0");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (!vmm_policy_valid((uint32_t)policy, &huge)) {
        ZC_WARN(ZC_SUB_MEM, "aclrtMalloc: policy 0x%x is not an aclrtMemMallocPolicy",
                (unsigned)policy);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (((uint32_t)policy & ACL_MEM_ACCESS_USER_SPACE_READONLY) != 0) {
        ZC_WARN(ZC_SUB_MEM,
                "aclrtMalloc: policy 0x%x asks for memory the host cannot write; "
                "not supported (host and device memory are the same)",
                (unsigned)policy);
        return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (size > SIZE_MAX / 2 - page) {
        ZC_WARN(ZC_SUB_MEM, "aclrtMalloc: size %zu is beyond any address space", size);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    size_t len = ZC_ALIGN_UP(size, page);
    pthread_once(&vmm_nofile_once, vmm_nofile_raise);
    int fd = memfd_create("zccl-malloc", MFD_CLOEXEC);
    if (fd < 0) {
        ZC_WARN(ZC_SUB_MEM, "aclrtMalloc: memfd_create for %zu bytes failed: %s", size,
                strerror(errno));
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    if (ftruncate(fd, (off_t)len) != 0) {
        ZC_WARN(ZC_SUB_MEM, "aclrtMalloc: sizing the memfd to %zu bytes failed: %s", len,
                strerror(errno));
        close(fd);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        ZC_WARN(ZC_SUB_MEM, "aclrtMalloc: mapping %zu bytes failed: %s", len, strerror(errno));
        close(fd);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    if (huge) {
        (void)madvise(p, len, MADV_HUGEPAGE); /* a hint; shmem THP may be off */
    }
    (void)vmm_numa_place(p, len, vmm_device_numa(vmm_device_current()));
    if (vmm_block_add((uintptr_t)p, len, fd) != ZC_OK) {
        ZC_WARN(ZC_SUB_MEM, "aclrtMalloc: out of memory for the allocation table");
        munmap(p, len);
        close(fd);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *devPtr = p;
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtFree(void *devPtr)
{
    vmm_block_t b;
    if (devPtr == NULL) {
        ZC_WARN(ZC_SUB_MEM, "aclrtFree: devPtr is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    aclError rc = vmm_stream_drain_mine("aclrtFree");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (!vmm_block_take((uintptr_t)devPtr, 1, &b)) {
        ZC_WARN(ZC_SUB_MEM, "aclrtFree: %p is not the start of an aclrtMalloc block", devPtr);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (vmm_free_fn != NULL) {
        vmm_free_fn(b.base, b.size); /* its IPC keys die with it (share/) */
    }
    munmap((void *)b.base, b.size);
    close(b.fd);
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtMallocHost(void **hostPtr, size_t size)
{
    if (hostPtr == NULL) {
        ZC_WARN(ZC_SUB_MEM, "aclrtMallocHost: hostPtr is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (size == 0) {
        ZC_WARN(ZC_SUB_MEM, "aclrtMallocHost: size is 0");
        return ACL_ERROR_INVALID_PARAM;
    }
    void *p = NULL;
    int rc = size > SIZE_MAX / 2 ? ENOMEM : posix_memalign(&p, ZC_CACHELINE, size);
    if (rc != 0) {
        ZC_WARN(ZC_SUB_MEM, "aclrtMallocHost: %zu bytes: %s", size, strerror(rc));
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    if (vmm_block_add((uintptr_t)p, size, -1) != ZC_OK) {
        ZC_WARN(ZC_SUB_MEM, "aclrtMallocHost: out of memory for the allocation table");
        free(p);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *hostPtr = p;
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtFreeHost(void *hostPtr)
{
    vmm_block_t b;
    if (hostPtr == NULL) {
        ZC_WARN(ZC_SUB_MEM, "aclrtFreeHost: hostPtr is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    aclError rc = vmm_stream_drain_mine("aclrtFreeHost");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (!vmm_block_take((uintptr_t)hostPtr, 0, &b)) {
        ZC_WARN(ZC_SUB_MEM, "aclrtFreeHost: %p did not come from aclrtMallocHost", hostPtr);
        return ACL_ERROR_INVALID_PARAM;
    }
    free(hostPtr);
    return ACL_SUCCESS;
}

/* ---- copies and fills --------------------------------------------------------------- */

static aclError vmm_copy_check(void *dst, size_t destMax, const void *src, size_t count,
                               aclrtMemcpyKind kind, const char *what)
{
    if ((int)kind < (int)ACL_MEMCPY_HOST_TO_HOST ||
        (int)kind > (int)ACL_MEMCPY_INTER_DEVICE_TO_DEVICE) {
        ZC_WARN(ZC_SUB_MEM, "%s: kind %d is not an aclrtMemcpyKind", what, (int)kind);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (count > destMax) {
        ZC_WARN(ZC_SUB_MEM, "%s: count %zu exceeds destMax %zu", what, count, destMax);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (count > 0 && (dst == NULL || src == NULL)) {
        ZC_WARN(ZC_SUB_MEM, "%s: %s is NULL (count %zu)", what, dst == NULL ? "dst" : "src", count);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

static aclError vmm_set_check(void *devPtr, size_t maxCount, size_t count, const char *what)
{
    if (count > maxCount) {
        ZC_WARN(ZC_SUB_MEM, "%s: count %zu exceeds maxCount %zu", what, count, maxCount);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (count > 0 && devPtr == NULL) {
        ZC_WARN(ZC_SUB_MEM, "%s: devPtr is NULL (count %zu)", what, count);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                               aclrtMemcpyKind kind)
{
    aclError rc = vmm_copy_check(dst, destMax, src, count, kind, "aclrtMemcpy");
    if (rc == ACL_SUCCESS && count > 0) {
        memmove(dst, src, count);
    }
    return rc;
}

ZC_EXPORT aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)
{
    aclError rc = vmm_set_check(devPtr, maxCount, count, "aclrtMemset");
    if (rc == ACL_SUCCESS && count > 0) {
        memset(devPtr, (unsigned char)value, count);
    }
    return rc;
}

typedef struct {
    void *dst;
    const void *src; /* NULL: fill with value */
    size_t count;
    int value;
    vmm_prof_copy_t prof;
} vmm_copy_task_t;

static int vmm_copy_task(void *p)
{
    vmm_copy_task_t *t = p;
    uint64_t t0 = zccl_prof_on(ZCCL_PROF_COPY) ? zc_time_ns() : 0;
    if (t->count == 0) {
        /* nothing to move */
    } else if (t->src != NULL) {
        memmove(t->dst, t->src, t->count);
    } else {
        memset(t->dst, (unsigned char)t->value, t->count);
    }
    if (t0 != 0) {
        vmm_prof_copy(&t->prof, t->src != NULL, t->count, t0);
    }
    return 0;
}

static aclError vmm_copy_enqueue(void *dst, const void *src, size_t count, int value,
                                 aclrtStream stream, const char *what)
{
    vmm_stream_t *s;
    aclError rc = vmm_stream_get(stream, what, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    vmm_copy_task_t *t = malloc(sizeof(*t));
    if (t == NULL) {
        ZC_WARN(ZC_SUB_MEM, "%s: out of memory", what);
        rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
    } else {
        *t = (vmm_copy_task_t){.dst = dst, .src = src, .count = count, .value = value};
        vmm_prof_copy_issue(&t->prof, stream);
        rc = vmm_stream_push_tracked(s, vmm_copy_task, t, free);
        if (rc != ACL_SUCCESS) {
            free(t);
        }
    }
    vmm_stream_put(s);
    return rc;
}

ZC_EXPORT aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                                    aclrtMemcpyKind kind, aclrtStream stream)
{
    aclError rc = vmm_copy_check(dst, destMax, src, count, kind, "aclrtMemcpyAsync");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* A zero-byte copy still goes through the stream: it orders like any task. */
    return vmm_copy_enqueue(dst, src, count, 0, stream, "aclrtMemcpyAsync");
}

ZC_EXPORT aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
                                    aclrtStream stream)
{
    aclError rc = vmm_set_check(devPtr, maxCount, count, "aclrtMemsetAsync");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return vmm_copy_enqueue(devPtr, NULL, count, (int)value, stream, "aclrtMemsetAsync");
}

/* ---- memory info ---------------------------------------------------------------------- */

/* MemAvailable and MemTotal in bytes from /proc/meminfo; sysinfo as a fallback. */
static int vmm_meminfo(size_t *avail, size_t *total)
{
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long a = 0, t = 0;
    int got = 0;
    if (f != NULL) {
        char line[256];
        while (fgets(line, sizeof(line), f) != NULL) {
            got += sscanf(line, "MemTotal: %llu kB", &t) == 1;
            got += sscanf(line, "MemAvailable: %llu kB", &a) == 1;
        }
        fclose(f);
    }
    if (got == 2) {
        *avail = (size_t)a * 1024u;
        *total = (size_t)t * 1024u;
        return 0;
    }
    struct sysinfo si;
    if (sysinfo(&si) != 0) {
        return -1;
    }
    *avail = (size_t)(si.freeram + si.bufferram) * si.mem_unit;
    *total = (size_t)si.totalram * si.mem_unit;
    return 0;
}

ZC_EXPORT aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total)
{
    if (free == NULL || total == NULL) {
        ZC_WARN(ZC_SUB_MEM, "aclrtGetMemInfo: %s is NULL", free == NULL ? "free" : "total");
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((int)attr < (int)ACL_DDR_MEM || (int)attr > (int)ACL_MEM_P2P_HUGE1G) {
        ZC_WARN(ZC_SUB_MEM, "aclrtGetMemInfo: attr %d is not an aclrtMemAttr", (int)attr);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (vmm_meminfo(free, total) != 0) {
        ZC_WARN(ZC_SUB_MEM, "aclrtGetMemInfo: reading the system memory size failed: %s",
                strerror(errno));
        return ACL_ERROR_RT_INTERNAL_ERROR;
    }
    return ACL_SUCCESS;
}

/* ---- fork ---------------------------------------------------------------------------- */

void vmm_mem_atfork_prepare(void)
{
    pthread_mutex_lock(&vmm_mem_mu);
}

void vmm_mem_atfork_parent(void)
{
    pthread_mutex_unlock(&vmm_mem_mu);
}

void vmm_mem_atfork_child(void)
{
    /* The mappings and fds are inherited, so the table stays valid in the child. */
    pthread_mutex_unlock(&vmm_mem_mu);
}
