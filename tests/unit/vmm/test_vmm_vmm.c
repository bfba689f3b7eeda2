/*
 * Unit tests of the host VMM (vmm_phys.c): granularity, physical handles,
 * reservations, map/unmap/remap, retain, and the exact error code of every
 * bad call (as documented in acl_rt.h). One process; cross-process sharing
 * is covered by tests/mp/test_mp_vmm_*.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "acl/acl.h"
#include "zc/status.h"
#include "zccl/vmm_ext.h"
#include "zt_phys.h"

#define MIB ((size_t)1 << 20)
#define HUGE (2 * MIB)

static aclrtDrvMemHandle phys_new(size_t size)
{
    aclrtDrvMemHandle h = zt_phys_alloc(0, size);
    assert_non_null(h);
    return h;
}

/* 1 if [p, p+n) can be read by this process (no fault), 0 if not. */
static int readable(const void *p, size_t n)
{
    char buf[64];
    struct iovec local = {.iov_base = buf, .iov_len = n < sizeof(buf) ? n : sizeof(buf)};
    struct iovec remote = {.iov_base = (void *)p, .iov_len = local.iov_len};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)local.iov_len;
}

/* 1 if the page at p is still part of some mapping (a reservation counts). */
static int reserved(void *p)
{
    void *q = mmap(p, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (q == MAP_FAILED) {
        return errno == EEXIST;
    }
    munmap(q, 4096);
    return 0;
}

static void test_granularity(void **state)
{
    (void)state;
    size_t g = 0;
    aclrtPhysicalMemProp p = zt_phys_prop(0, ACL_HBM_MEM_HUGE);
    assert_int_equal(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
                     ACL_SUCCESS);
    assert_int_equal(g, HUGE);
    assert_int_equal(
        aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, &g),
        ACL_SUCCESS);
    assert_int_equal(g, HUGE);

    p = zt_phys_prop(0, ACL_MEM_NORMAL);
    assert_int_equal(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
                     ACL_SUCCESS);
    assert_int_equal(g, (size_t)sysconf(_SC_PAGESIZE));
    assert_int_equal(
        aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, &g),
        ACL_SUCCESS);
    assert_int_equal(g, HUGE);

    p = zt_phys_prop(0, ACL_MEM_HUGE1G);
    assert_int_equal(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
                     ACL_SUCCESS);
    assert_int_equal(g, (size_t)1 << 30);

    p = zt_phys_prop(0, ACL_DDR_MEM_HUGE);
    p.location.type = ACL_MEM_LOCATION_TYPE_HOST;
    assert_int_equal(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
                     ACL_SUCCESS);
    assert_int_equal(g, HUGE);
}

static void test_granularity_errors(void **state)
{
    (void)state;
    size_t g = 12345;
    aclrtPhysicalMemProp p = zt_phys_prop(0, ACL_HBM_MEM_HUGE);
    assert_int_equal(
        aclrtMemGetAllocationGranularity(NULL, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(
        aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, NULL),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF, &g),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemGetAllocationGranularity(&p, (aclrtMemGranularityOptions)7, &g),
                     ACL_ERROR_INVALID_PARAM);
    p.memAttr = ACL_DDR_MEM; /* an aclrtGetMemInfo kind, not a page kind */
    assert_int_equal(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
                     ACL_ERROR_INVALID_PARAM);
    p.memAttr = (aclrtMemAttr)999;
    assert_int_equal(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
                     ACL_ERROR_INVALID_PARAM);
    p = zt_phys_prop(0, ACL_DDR_MEM_NORMAL); /* host memory attribute on a device location */
    assert_int_equal(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
                     ACL_ERROR_INVALID_PARAM);
    p = zt_phys_prop(0, ACL_HBM_MEM_HUGE);
    p.location.type = ACL_MEM_LOCATION_TYPE_UNREGISTERED;
    assert_int_equal(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
                     ACL_ERROR_INVALID_PARAM);
    p = zt_phys_prop(0, ACL_HBM_MEM_HUGE);
    p.location.id = 1000000;
    assert_int_equal(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
                     ACL_ERROR_INVALID_PARAM);
    p = zt_phys_prop(0, ACL_HBM_MEM_HUGE);
    p.allocationType = (aclrtMemAllocationType)1;
    assert_int_equal(aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &g),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(g, 12345); /* outputs are set only on success */
}

static void test_malloc_physical_errors(void **state)
{
    (void)state;
    aclrtPhysicalMemProp p = zt_phys_prop(0, ACL_HBM_MEM_HUGE);
    aclrtDrvMemHandle h = NULL;
    assert_int_equal(aclrtMallocPhysical(NULL, HUGE, &p, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMallocPhysical(&h, HUGE, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMallocPhysical(&h, 0, &p, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMallocPhysical(&h, HUGE, &p, 1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMallocPhysical(&h, SIZE_MAX, &p, 0), ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_int_equal(aclrtMallocPhysical(&h, SIZE_MAX / 2, &p, 0), ACL_ERROR_RT_MEMORY_ALLOCATION);
    p.handleType = (aclrtMemHandleType)7;
    assert_int_equal(aclrtMallocPhysical(&h, HUGE, &p, 0), ACL_ERROR_INVALID_PARAM);
    p = zt_phys_prop(0, ACL_HBM_MEM);
    assert_int_equal(aclrtMallocPhysical(&h, HUGE, &p, 0), ACL_ERROR_INVALID_PARAM);
    p = zt_phys_prop(0, ACL_HBM_MEM_HUGE);
    p.location.id = (uint32_t)-1;
    assert_int_equal(aclrtMallocPhysical(&h, HUGE, &p, 0), ACL_ERROR_INVALID_PARAM);
    assert_null(h);

    assert_int_equal(aclrtFreePhysical(NULL), ACL_ERROR_INVALID_PARAM);
    int junk = 0;
    assert_int_equal(aclrtFreePhysical(&junk), ACL_ERROR_RT_INVALID_HANDLE);
}

static void test_malloc_physical_rounds(void **state)
{
    (void)state;
    aclrtDrvMemHandle h = phys_new(1); /* rounded up to the 2 MiB granularity */
    int fd = -1;
    size_t size = 0;
    assert_int_equal(zccl_phys_fd(h, &fd, &size), ZC_OK);
    assert_true(fd >= 0);
    assert_int_equal(size, HUGE);
    assert_int_equal(lseek(fd, 0, SEEK_END), (off_t)HUGE);

    aclrtPhysicalMemProp p = zt_phys_prop(0, ACL_MEM_NORMAL);
    p.location.type = ACL_MEM_LOCATION_TYPE_HOST;
    aclrtDrvMemHandle n = NULL;
    assert_int_equal(aclrtMallocPhysical(&n, 5000, &p, 0), ACL_SUCCESS);
    assert_int_equal(zccl_phys_fd(n, &fd, &size), ZC_OK);
    assert_int_equal(size, 2 * (size_t)sysconf(_SC_PAGESIZE));

    assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
    assert_int_equal(aclrtFreePhysical(h), ACL_ERROR_RT_INVALID_HANDLE); /* double free */
    assert_int_equal(zccl_phys_fd(h, &fd, &size), ZC_ERR_HANDLE);
    assert_int_equal(zccl_phys_fd(n, NULL, &size), ZC_ERR_PTR);
    assert_int_equal(aclrtFreePhysical(n), ACL_SUCCESS);
}

static void test_reserve_errors(void **state)
{
    (void)state;
    void *va = NULL;
    assert_int_equal(aclrtReserveMemAddress(NULL, HUGE, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtReserveMemAddress(&va, 0, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtReserveMemAddress(&va, HUGE, 0, NULL, 2), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtReserveMemAddress(&va, HUGE, 3, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtReserveMemAddress(&va, HUGE, 0, (void *)(uintptr_t)0x1000, 0),
                     ACL_ERROR_INVALID_PARAM); /* expectPtr not aligned to 2 MiB */
    assert_int_equal(aclrtReserveMemAddress(&va, SIZE_MAX, 0, NULL, 0),
                     ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_int_equal(aclrtReserveMemAddress(&va, SIZE_MAX - HUGE, 0, NULL, 0),
                     ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_null(va);

    assert_int_equal(aclrtReleaseMemAddress(NULL), ACL_ERROR_INVALID_PARAM);
    int junk;
    assert_int_equal(aclrtReleaseMemAddress(&junk), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtReserveMemAddress(&va, 4 * HUGE, 0, NULL, 1), ACL_SUCCESS);
    assert_int_equal(aclrtReleaseMemAddress((char *)va + HUGE), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_SUCCESS);
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_ERROR_INVALID_PARAM); /* twice */
}

static void test_reserve_alignment_and_expect(void **state)
{
    (void)state;
    void *va = NULL;
    assert_int_equal(aclrtReserveMemAddress(&va, 12345, 0, NULL, 0), ACL_SUCCESS);
    assert_int_equal((uintptr_t)va % HUGE, 0);
    assert_true(reserved(va));
    assert_false(readable(va, 8)); /* PROT_NONE: nothing behind it */
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_SUCCESS);
    assert_false(reserved(va));

    size_t gib = (size_t)1 << 30;
    assert_int_equal(aclrtReserveMemAddress(&va, HUGE, gib, NULL, 0), ACL_SUCCESS);
    assert_int_equal((uintptr_t)va % gib, 0);
    void *want = va;
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_SUCCESS);

    /* expectPtr is honoured when free, refused when taken. */
    void *got = NULL;
    assert_int_equal(aclrtReserveMemAddress(&got, 2 * HUGE, 0, want, 0), ACL_SUCCESS);
    assert_ptr_equal(got, want);
    void *again = NULL;
    assert_int_equal(aclrtReserveMemAddress(&again, HUGE, 0, want, 0),
                     ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_null(again);
    assert_int_equal(aclrtReleaseMemAddress(got), ACL_SUCCESS);
}

static void test_map_errors(void **state)
{
    (void)state;
    void *va = NULL;
    assert_int_equal(aclrtReserveMemAddress(&va, 4 * HUGE, 0, NULL, 0), ACL_SUCCESS);
    char *b = va;
    aclrtDrvMemHandle h = phys_new(HUGE);
    aclrtDrvMemHandle h2 = phys_new(2 * HUGE);

    assert_int_equal(aclrtMapMem(NULL, HUGE, 0, h, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(b, HUGE, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(b, 0, 0, h, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(b, HUGE, 4096, h, 0), ACL_ERROR_INVALID_PARAM);  /* offset */
    assert_int_equal(aclrtMapMem(b, HUGE, 0, h, 2), ACL_ERROR_INVALID_PARAM);     /* flags */
    assert_int_equal(aclrtMapMem(b, HUGE / 2, 0, h, 0), ACL_ERROR_INVALID_PARAM); /* size */
    assert_int_equal(aclrtMapMem(b, 2 * HUGE, 0, h, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(b, SIZE_MAX, 0, h, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(b + 1, HUGE, 0, h, 0), ACL_ERROR_INVALID_PARAM); /* unaligned */
    /* outside any reservation, and running past the end of this one */
    static char outside[8192] __attribute__((aligned(4096)));
    assert_int_equal(aclrtMapMem(outside, HUGE, 0, h, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(b + 3 * HUGE, 2 * HUGE, 0, h2, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(b + 4 * HUGE, HUGE, 0, h, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(b - HUGE, 2 * HUGE, 0, h2, 0), ACL_ERROR_INVALID_PARAM);
    /* unknown handle */
    int junk;
    assert_int_equal(aclrtMapMem(b, HUGE, 0, &junk, 0), ACL_ERROR_RT_INVALID_HANDLE);

    /* overlaps */
    assert_int_equal(aclrtMapMem(b + HUGE, 2 * HUGE, 0, h2, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(b + HUGE, HUGE, 0, h, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(b + 2 * HUGE, HUGE, 0, h, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(b, 2 * HUGE, 0, h2, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMapMem(b, HUGE, 0, h, 0), ACL_SUCCESS);            /* adjacent is fine */
    assert_int_equal(aclrtMapMem(b + 3 * HUGE, HUGE, 0, h, 1), ACL_SUCCESS); /* flags 1, alias */

    /* release with live mappings */
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_ERROR_INVALID_PARAM);

    /* unmap errors */
    assert_int_equal(aclrtUnmapMem(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtUnmapMem(b + 2 * HUGE), ACL_ERROR_INVALID_PARAM); /* middle */
    assert_int_equal(aclrtUnmapMem(outside), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtUnmapMem(b), ACL_SUCCESS);
    assert_int_equal(aclrtUnmapMem(b), ACL_ERROR_INVALID_PARAM); /* twice */
    assert_int_equal(aclrtUnmapMem(b + HUGE), ACL_SUCCESS);
    assert_int_equal(aclrtUnmapMem(b + 3 * HUGE), ACL_SUCCESS);

    assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(b, HUGE, 0, h, 0), ACL_ERROR_RT_INVALID_HANDLE); /* freed */
    assert_int_equal(aclrtFreePhysical(h2), ACL_SUCCESS);
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

static void test_map_unmap_remap(void **state)
{
    (void)state;
    void *va = NULL;
    assert_int_equal(aclrtReserveMemAddress(&va, 8 * HUGE, 0, NULL, 1), ACL_SUCCESS);
    char *b = va;
    aclrtDrvMemHandle h1 = phys_new(HUGE);
    aclrtDrvMemHandle h2 = phys_new(HUGE);
    assert_int_equal(aclrtMapMem(b, HUGE, 0, h1, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(b + 4 * HUGE, HUGE, 0, h2, 0), ACL_SUCCESS);
    for (size_t i = 0; i < HUGE; i += 4096) {
        b[i] = (char)(i / 4096 + 1);
        b[4 * HUGE + i] = (char)(i / 4096 + 7);
    }
    assert_int_equal(aclrtUnmapMem(b), ACL_SUCCESS);
    assert_false(readable(b, 8));                  /* PROT_NONE again ... */
    assert_true(reserved(b));                      /* ... and still reserved */
    assert_int_equal(b[4 * HUGE + 4096], (char)8); /* the other mapping is untouched */

    /* Remap h1 elsewhere: same memory, bytes kept. Map it twice: aliases. */
    assert_int_equal(aclrtMapMem(b + 2 * HUGE, HUGE, 0, h1, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(b + 6 * HUGE, HUGE, 0, h1, 0), ACL_SUCCESS);
    for (size_t i = 0; i < HUGE; i += 4096) {
        assert_int_equal(b[2 * HUGE + i], (char)(i / 4096 + 1));
    }
    b[2 * HUGE + 100] = 42;
    assert_int_equal(b[6 * HUGE + 100], 42);

    /* Retain gives back the mapped handle; it takes its own reference. */
    aclrtDrvMemHandle r = NULL;
    assert_int_equal(aclrtMemRetainAllocationHandle(b + 2 * HUGE, &r), ACL_SUCCESS);
    assert_ptr_equal(r, h1);
    assert_int_equal(aclrtMemRetainAllocationHandle(b + 4 * HUGE, &r), ACL_SUCCESS);
    assert_ptr_equal(r, h2);
    assert_int_equal(aclrtFreePhysical(h2), ACL_SUCCESS); /* the retain's reference */
    assert_int_equal(aclrtFreePhysical(h2), ACL_SUCCESS); /* the allocation's */
    assert_int_equal(aclrtFreePhysical(h2), ACL_ERROR_RT_INVALID_HANDLE);
    /* Freed while mapped: the memory lives until unmapped. */
    assert_int_equal(b[4 * HUGE + 4096], (char)8);
    b[4 * HUGE] = 99;
    assert_int_equal(b[4 * HUGE], 99);
    /* ... and a retain brings the handle back. */
    assert_int_equal(aclrtMemRetainAllocationHandle(b + 4 * HUGE, &r), ACL_SUCCESS);
    assert_ptr_equal(r, h2);
    int fd;
    size_t size;
    assert_int_equal(zccl_phys_fd(h2, &fd, &size), ZC_OK);
    assert_int_equal(aclrtFreePhysical(h2), ACL_SUCCESS);
    assert_int_equal(aclrtUnmapMem(b + 4 * HUGE), ACL_SUCCESS);
    assert_int_equal(aclrtMemRetainAllocationHandle(b + 4 * HUGE, &r), ACL_ERROR_INVALID_PARAM);

    assert_int_equal(aclrtFreePhysical(h1), ACL_SUCCESS); /* the retain of b + 2 MiB */
    assert_int_equal(aclrtUnmapMem(b + 2 * HUGE), ACL_SUCCESS);
    assert_int_equal(aclrtUnmapMem(b + 6 * HUGE), ACL_SUCCESS);
    assert_int_equal(zccl_phys_fd(h1, &fd, &size), ZC_OK); /* still one reference */
    assert_int_equal(aclrtFreePhysical(h1), ACL_SUCCESS);
    assert_int_equal(zccl_phys_fd(h1, &fd, &size), ZC_ERR_HANDLE);
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

static void test_retain_errors(void **state)
{
    (void)state;
    void *va = NULL;
    aclrtDrvMemHandle r = NULL;
    assert_int_equal(aclrtReserveMemAddress(&va, 2 * HUGE, 0, NULL, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMemRetainAllocationHandle(NULL, &r), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemRetainAllocationHandle(va, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemRetainAllocationHandle(va, &r), ACL_ERROR_INVALID_PARAM);
    aclrtDrvMemHandle h = phys_new(HUGE);
    assert_int_equal(aclrtMapMem(va, HUGE, 0, h, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMemRetainAllocationHandle((char *)va + 4096, &r),
                     ACL_ERROR_INVALID_PARAM); /* not where the mapping starts */
    assert_null(r);
    assert_int_equal(aclrtUnmapMem(va), ACL_SUCCESS);
    assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

/* Many reservations and mappings at once, released in a mixed order. */
static void test_many(void **state)
{
    (void)state;
    enum { N = 16 };
    void *va[N];
    aclrtDrvMemHandle h[N];
    for (int i = 0; i < N; i++) {
        assert_int_equal(aclrtReserveMemAddress(&va[i], 2 * HUGE, 0, NULL, 0), ACL_SUCCESS);
        h[i] = phys_new(HUGE);
        assert_int_equal(aclrtMapMem((char *)va[i] + HUGE, HUGE, 0, h[i], 0), ACL_SUCCESS);
        ((int *)((char *)va[i] + HUGE))[0] = i;
    }
    for (int i = 0; i < N; i += 2) {
        assert_int_equal(aclrtUnmapMem((char *)va[i] + HUGE), ACL_SUCCESS);
        assert_int_equal(aclrtFreePhysical(h[i]), ACL_SUCCESS);
        assert_int_equal(aclrtReleaseMemAddress(va[i]), ACL_SUCCESS);
    }
    for (int i = 1; i < N; i += 2) {
        assert_int_equal(((int *)((char *)va[i] + HUGE))[0], i);
        assert_int_equal(aclrtFreePhysical(h[i]), ACL_SUCCESS);
        assert_int_equal(aclrtUnmapMem((char *)va[i] + HUGE), ACL_SUCCESS);
        assert_int_equal(aclrtReleaseMemAddress(va[i]), ACL_SUCCESS);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_granularity),
        cmocka_unit_test(test_granularity_errors),
        cmocka_unit_test(test_malloc_physical_errors),
        cmocka_unit_test(test_malloc_physical_rounds),
        cmocka_unit_test(test_reserve_errors),
        cmocka_unit_test(test_reserve_alignment_and_expect),
        cmocka_unit_test(test_map_errors),
        cmocka_unit_test(test_map_unmap_remap),
        cmocka_unit_test(test_retain_errors),
        cmocka_unit_test(test_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
