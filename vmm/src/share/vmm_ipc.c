/*
 * IPC memory keys (aclrtIpcMem*).
 *
 * Protocol: the exporter finds the memfd behind devPtr (an aclrtMalloc block
 * through vmm_mem_lookup, or a VMM mapping), offers it to its broker and
 * writes the key
 *     "zccl-ipc:<token>:<offset>:<size>"   (16 lowercase hex digits each)
 * a printable NUL-terminated string of 59 characters, so a 65-byte key buffer
 * (ACL_IPC_MEM_KEY_LEN) always holds it. The token names the exporter's pid
 * and its broker offer; offset and size name the bytes inside the memfd.
 * aclrtIpcMemSetImportPid puts pids on the offer's allow list (unless the key
 * was exported with DISABLE_PID_VALIDATION). An importer fetches the fd
 * through the exporter's broker, maps the page-aligned range MAP_SHARED and
 * returns the address of the key's first byte.
 *
 * What an importer gets: the broker offer records the exported {offset,
 * size}; an importer asks for the range its key names, and the exporter's
 * broker hands out the fd only when that is exactly the exported range (a key
 * edited to reach more of the allocation is refused there, logged on both
 * sides, ACL_ERROR_INVALID_PARAM for the importer); zccl maps only the pages
 * the range touches.
 * The residual, which no host can close without copying: the fd passed is the
 * whole memfd of the allocation (a memfd cannot be cut to a sub-range), so an
 * importer on the allow list that asks for the exact range and then mmaps the
 * fd itself can read all of that one allocation (never another one); and page
 * granularity shows the rest of the first and last page of an unaligned
 * range. Export a whole, page-aligned allocation to share nothing else.
 *
 * aclrtFree of memory with live export keys withdraws their offers (later
 * imports fail with ACL_ERROR_RT_IPC_ERROR; the exporter logs it once);
 * aclrtIpcMemClose of such a key afterwards still succeeds.
 *
 * aclrtIpcMemClose(key): in an importer, drop one import (the same key
 * imported twice in one process gives the same address and needs two
 * closes; the last one unmaps); in the exporter, withdraw the offer, so later
 * imports fail while existing ones keep their memory (they hold the memfd
 * through their mappings). The exporter may free its memory afterwards.
 *
 * Error codes (acl_rt.h): NULL or bad arguments, len < 65, unknown flag bits,
 * memory that is not device memory, a malformed key, a key this process did
 * not export (SetImportPid) or neither imported nor exported (Close), a range
 * past the exporter's memory -> ACL_ERROR_INVALID_PARAM; an importer not on
 * the allow list -> ACL_ERROR_RT_NO_PERMISSION; a key of this same process
 * -> ACL_ERROR_RT_FEATURE_NOT_SUPPORT; the exporter gone, not knowing the key
 * or not answering -> ACL_ERROR_RT_IPC_ERROR; mmap failing ->
 * ACL_ERROR_RT_MEMORY_ALLOCATION.
 */
#include "core/vmm_internal.h"
#include "mem/vmm_registry.h"
#include "share/vmm_share.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zc/export.h"
#include "zc/log.h"

#define VMM_IPC_KEY_FMT "zccl-ipc:%016llx:%016llx:%016llx"
#define VMM_IPC_KEY_CHARS 59

typedef struct vmm_ipc_export vmm_ipc_export_t;
struct vmm_ipc_export {
    vmm_ipc_export_t *next;
    uint64_t token;
    uintptr_t ptr; /* devPtr exported */
    int freed;     /* its memory was freed: the offer is withdrawn already */
};

typedef struct vmm_ipc_import vmm_ipc_import_t;
struct vmm_ipc_import {
    vmm_ipc_import_t *next;
    char key[VMM_IPC_KEY_CHARS + 1];
    void *base;    /* start of the page-aligned mapping */
    size_t maplen; /* its length */
    void *ptr;     /* the address handed out */
    unsigned refs;
};

/* Both lists are guarded by the registry lock (vmm_lock). */
static vmm_ipc_export_t *vmm_ipc_exports;
static vmm_ipc_import_t *vmm_ipc_imports;

void vmm_ipc_fork_child(void)
{
    /* The broker offers behind our exported keys belonged to the parent;
     * imports are inherited mappings and stay. */
    while (vmm_ipc_exports != NULL) {
        vmm_ipc_export_t *e = vmm_ipc_exports;
        vmm_ipc_exports = e->next;
        free(e);
    }
}

/* Parse a key; only the exact canonical spelling is accepted. */
static int vmm_ipc_parse(const char *key, uint64_t *token, uint64_t *off, uint64_t *size)
{
    if (strnlen(key, VMM_IPC_KEY_CHARS + 1) != VMM_IPC_KEY_CHARS) {
        return -1;
    }
    unsigned long long t;
    unsigned long long o;
    unsigned long long s;
    if (sscanf(key, "zccl-ipc:%16llx:%16llx:%16llx", &t, &o, &s) != 3) {
        return -1;
    }
    char canon[VMM_IPC_KEY_CHARS + 1];
    snprintf(canon, sizeof(canon), VMM_IPC_KEY_FMT, t, o, s);
    if (strcmp(canon, key) != 0 || s == 0 || o > UINT64_MAX - s) {
        return -1;
    }
    *token = t;
    *off = o;
    *size = s;
    return 0;
}

/* Parse key for `what`, logging a malformed one. */
static aclError vmm_ipc_key_check(const char *key, const char *what, uint64_t *token, uint64_t *off,
                                  uint64_t *size)
{
    if (key == NULL) {
        ZC_WARN(ZC_SUB_VMM, "%s: key is NULL", what);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (vmm_ipc_parse(key, token, off, size) != 0) {
        ZC_WARN(ZC_SUB_VMM, "%s: key \"%.*s\" is not a zccl IPC key", what,
                (int)ACL_IPC_MEM_KEY_LEN, key);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

/* A new fd of the memfd behind [devPtr, devPtr+size) and devPtr's offset in it. */
static aclError vmm_ipc_find_memory(void *devPtr, size_t size, int *fd, size_t *off)
{
    const char *what = "aclrtIpcMemGetExportKey";
    size_t blk = 0;
    int st = vmm_mem_lookup(devPtr, fd, off, &blk);
    if (st == ZC_OK) {
        if (*off > blk || size > blk - *off) {
            ZC_WARN(ZC_SUB_VMM,
                    "%s: size %zu at devPtr %p runs past its aclrtMalloc block "
                    "(%zu bytes left)",
                    what, size, devPtr, *off > blk ? 0 : blk - *off);
            close(*fd);
            return ACL_ERROR_INVALID_PARAM;
        }
        return ACL_SUCCESS;
    }
    if (st != ZC_ERR_NOT_FOUND) {
        return vmm_status_to_acl(st);
    }
    size_t avail = 0;
    int mfd = -1;
    vmm_lock();
    int found = vmm_map_lookup(devPtr, &mfd, off, &avail) == 0;
    *fd = found ? fcntl(mfd, F_DUPFD_CLOEXEC, 0) : -1;
    vmm_unlock();
    if (!found) {
        ZC_WARN(ZC_SUB_VMM, "%s: devPtr %p is neither aclrtMalloc memory nor mapped VMM memory",
                what, devPtr);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (*fd < 0) {
        ZC_WARN(ZC_SUB_VMM, "%s: dup failed (errno %d)", what, errno);
        return ACL_ERROR_RT_INTERNAL_ERROR;
    }
    if (size > avail) {
        ZC_WARN(ZC_SUB_VMM, "%s: size %zu at devPtr %p runs past its VMM mapping (%zu bytes left)",
                what, size, devPtr, avail);
        close(*fd);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtIpcMemGetExportKey(void *devPtr, size_t size, char *key, size_t len,
                                           uint64_t flags)
{
    const char *what = "aclrtIpcMemGetExportKey";
    if (devPtr == NULL || key == NULL) {
        ZC_WARN(ZC_SUB_VMM, "%s: devPtr %p or key %p is NULL", what, devPtr, (void *)key);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (size == 0) {
        ZC_WARN(ZC_SUB_VMM, "%s: size is 0", what);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (len < ACL_IPC_MEM_KEY_LEN) {
        ZC_WARN(ZC_SUB_VMM, "%s: len %zu is under %u", what, len, ACL_IPC_MEM_KEY_LEN);
        return ACL_ERROR_INVALID_PARAM;
    }
    if ((flags & ~(uint64_t)ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION) != 0) {
        ZC_WARN(ZC_SUB_VMM, "%s: flags 0x%llx has unknown bits", what, (unsigned long long)flags);
        return ACL_ERROR_INVALID_PARAM;
    }
    int fd = -1;
    size_t off = 0;
    aclError err = vmm_ipc_find_memory(devPtr, size, &fd, &off);
    if (err != ACL_SUCCESS) {
        return err;
    }
    struct stat stbuf;
    if (fstat(fd, &stbuf) != 0 || stbuf.st_size <= 0) {
        ZC_WARN(ZC_SUB_VMM, "%s: fstat of the memory behind %p failed (errno %d)", what, devPtr,
                errno);
        close(fd);
        return ACL_ERROR_RT_INTERNAL_ERROR;
    }
    vmm_ipc_export_t *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        ZC_WARN(ZC_SUB_VMM, "%s: out of memory", what);
        close(fd);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    int validate = (flags & ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION) == 0;
    int st = vmm_broker_offer_range(fd, (size_t)stbuf.st_size, off, size, validate, &e->token);
    close(fd); /* the broker keeps its own dup */
    if (st != ZC_OK) {
        free(e);
        return vmm_status_to_acl(st);
    }
    snprintf(key, len, VMM_IPC_KEY_FMT, (unsigned long long)e->token, (unsigned long long)off,
             (unsigned long long)size);
    e->ptr = (uintptr_t)devPtr;
    vmm_lock();
    e->next = vmm_ipc_exports;
    vmm_ipc_exports = e;
    vmm_unlock();
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtIpcMemSetImportPid(const char *key, int32_t *pid, size_t num)
{
    const char *what = "aclrtIpcMemSetImportPid";
    uint64_t token;
    uint64_t off;
    uint64_t size;
    aclError err = vmm_ipc_key_check(key, what, &token, &off, &size);
    if (err != ACL_SUCCESS) {
        return err;
    }
    if (pid == NULL || num == 0) {
        ZC_WARN(ZC_SUB_VMM, "%s: pid %p or num %zu is NULL/0", what, (void *)pid, num);
        return ACL_ERROR_INVALID_PARAM;
    }
    for (size_t i = 0; i < num; i++) {
        if (pid[i] <= 0) {
            ZC_WARN(ZC_SUB_VMM, "%s: pid[%zu] = %d is not a pid", what, i, (int)pid[i]);
            return ACL_ERROR_INVALID_PARAM;
        }
    }
    vmm_lock();
    vmm_ipc_export_t *e = vmm_ipc_exports;
    while (e != NULL && e->token != token) {
        e = e->next;
    }
    if (e == NULL || e->freed) {
        ZC_WARN(ZC_SUB_VMM,
                "%s: key %s was not exported by this process (or was closed, or "
                "its memory freed)",
                what, key);
        err = ACL_ERROR_INVALID_PARAM;
    } else {
        err = vmm_status_to_acl(zccl_broker_allow(token, pid, num));
    }
    vmm_unlock();
    return err;
}

/* Fetch and map the bytes a key names. */
static aclError vmm_ipc_map(const char *key, uint64_t token, uint64_t off, uint64_t size,
                            void **base, size_t *maplen, void **ptr)
{
    const char *what = "aclrtIpcMemImportByKey";
    int fd = -1;
    size_t fsize = 0;
    /* The exporter's broker hands the fd only for exactly the exported range. */
    int st = vmm_broker_fetch_range(token, off, size, &fd, &fsize);
    if (st != ZC_OK) {
        if (st == ZC_ERR_INVAL) {
            return ACL_ERROR_INVALID_PARAM; /* another range than exported (logged) */
        }
        if (st == ZC_ERR_PERM || st == ZC_ERR_PTR || st == ZC_ERR_NOMEM || st == ZC_ERR_SYS) {
            return vmm_status_to_acl(st);
        }
        return ACL_ERROR_RT_IPC_ERROR; /* gone, unknown or silent exporter */
    }
    if (off > fsize || size > fsize - off) {
        ZC_WARN(ZC_SUB_VMM, "%s: key %s names bytes past the exporter's %zu bytes", what, key,
                fsize);
        close(fd);
        return ACL_ERROR_INVALID_PARAM;
    }
    long pg = sysconf(_SC_PAGESIZE);
    size_t page = pg > 0 ? (size_t)pg : 4096;
    size_t map_off = (size_t)off & ~(page - 1);
    size_t delta = (size_t)off - map_off;
    size_t len = (delta + (size_t)size + page - 1) & ~(page - 1);
    void *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)map_off);
    int err = errno;
    close(fd); /* the mapping keeps the memory */
    if (b == MAP_FAILED) {
        ZC_WARN(ZC_SUB_VMM, "%s: mmap of %zu bytes for key %s failed (errno %d)", what, len, key,
                err);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    *base = b;
    *maplen = len;
    *ptr = (char *)b + delta;
    return ACL_SUCCESS;
}

/* An import of key already in this process. Registry lock held. */
static vmm_ipc_import_t *vmm_ipc_import_find(const char *key, vmm_ipc_import_t ***prevp)
{
    for (vmm_ipc_import_t **pp = &vmm_ipc_imports; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->key, key) == 0) {
            if (prevp != NULL) {
                *prevp = pp;
            }
            return *pp;
        }
    }
    return NULL;
}

ZC_EXPORT aclError aclrtIpcMemImportByKey(void **devPtr, const char *key, uint64_t flags)
{
    const char *what = "aclrtIpcMemImportByKey";
    if (devPtr == NULL) {
        ZC_WARN(ZC_SUB_VMM, "%s: devPtr is NULL", what);
        return ACL_ERROR_INVALID_PARAM;
    }
    uint64_t token;
    uint64_t off;
    uint64_t size;
    aclError err = vmm_ipc_key_check(key, what, &token, &off, &size);
    if (err != ACL_SUCCESS) {
        return err;
    }
    /* Peer access needs no enabling on a host, so the flag changes nothing. */
    if ((flags & ~(uint64_t)ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS) != 0) {
        ZC_WARN(ZC_SUB_VMM, "%s: flags 0x%llx has unknown bits", what, (unsigned long long)flags);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (vmm_token_is_mine(token)) {
        ZC_WARN(ZC_SUB_VMM,
                "%s: key %s was exported by this process: same-process import is "
                "not supported (use the address)",
                what, key);
        return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    }
    vmm_lock();
    vmm_ipc_import_t *have = vmm_ipc_import_find(key, NULL);
    if (have != NULL) {
        have->refs++;
        *devPtr = have->ptr;
    }
    vmm_unlock();
    if (have != NULL) {
        return ACL_SUCCESS;
    }

    vmm_ipc_import_t *imp = calloc(1, sizeof(*imp));
    if (imp == NULL) {
        ZC_WARN(ZC_SUB_VMM, "%s: out of memory", what);
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    /* Fetch without the lock: the broker may take seconds to answer. */
    err = vmm_ipc_map(key, token, off, size, &imp->base, &imp->maplen, &imp->ptr);
    if (err != ACL_SUCCESS) {
        free(imp);
        return err;
    }
    snprintf(imp->key, sizeof(imp->key), "%s", key);
    imp->refs = 1;
    vmm_lock();
    have = vmm_ipc_import_find(key, NULL);
    if (have != NULL) {
        have->refs++; /* another thread imported it meanwhile: share its mapping */
        *devPtr = have->ptr;
    } else {
        imp->next = vmm_ipc_imports;
        vmm_ipc_imports = imp;
        *devPtr = imp->ptr;
    }
    vmm_unlock();
    if (have != NULL) {
        munmap(imp->base, imp->maplen);
        free(imp);
    }
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclrtIpcMemClose(const char *key)
{
    const char *what = "aclrtIpcMemClose";
    uint64_t token;
    uint64_t off;
    uint64_t size;
    aclError err = vmm_ipc_key_check(key, what, &token, &off, &size);
    if (err != ACL_SUCCESS) {
        return err;
    }
    vmm_ipc_import_t *gone_imp = NULL;
    vmm_ipc_export_t *gone_exp = NULL;
    vmm_lock();
    vmm_ipc_import_t **ipp = NULL;
    vmm_ipc_import_t *imp = vmm_ipc_import_find(key, &ipp);
    if (imp != NULL) {
        if (--imp->refs == 0) {
            *ipp = imp->next;
            gone_imp = imp;
        }
    } else {
        for (vmm_ipc_export_t **pp = &vmm_ipc_exports; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->token == token) {
                gone_exp = *pp;
                *pp = gone_exp->next;
                break;
            }
        }
        if (gone_exp == NULL) {
            err = ACL_ERROR_INVALID_PARAM;
        }
    }
    vmm_unlock();
    if (gone_imp != NULL) {
        munmap(gone_imp->base, gone_imp->maplen);
        free(gone_imp);
    }
    if (gone_exp != NULL) {
        if (!gone_exp->freed) {
            (void)zccl_broker_withdraw(gone_exp->token);
        }
        free(gone_exp);
    }
    if (err != ACL_SUCCESS) {
        ZC_WARN(ZC_SUB_VMM, "%s: key %s is neither imported nor exported by this process", what,
                key);
    }
    return err;
}

void vmm_ipc_mem_freed(uintptr_t base, size_t size)
{
    uint64_t gone[16];
    size_t n = 0;
    size_t more = 0;
    do {
        n = 0;
        more = 0;
        vmm_lock();
        for (vmm_ipc_export_t *e = vmm_ipc_exports; e != NULL; e = e->next) {
            if (!e->freed && e->ptr >= base && e->ptr - base < size) {
                if (n < sizeof(gone) / sizeof(gone[0])) {
                    e->freed = 1;
                    gone[n++] = e->token;
                } else {
                    more++;
                }
            }
        }
        vmm_unlock();
        for (size_t i = 0; i < n; i++) {
            (void)zccl_broker_withdraw(gone[i]);
            ZC_WARN(ZC_SUB_VMM,
                    "aclrtFree: memory at 0x%lx is freed with IPC key token 0x%016llx still "
                    "exported: key withdrawn (later imports fail)",
                    (unsigned long)base, (unsigned long long)gone[i]);
        }
    } while (more > 0);
}
