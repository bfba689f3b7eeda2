/*
 * ACL memory: aclrtMalloc/Free (memfd-backed, shared mappings),
 * aclrtMallocHost/FreeHost, aclrtMemcpy[Async], aclrtMemset[Async] and
 * aclrtGetMemInfo: results, and the exact aclError plus exactly one log line
 * for every bad input (NULL pointers, size 0, absurd sizes, destMax < count,
 * bad kinds/policies/attrs, foreign pointers, bogus streams).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "acl/acl.h"
#include "zt_logcount.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- aclrtMalloc / aclrtFree ---------------------------------------------------------- */

static void test_malloc_bad_input(void **state)
{
    (void)state;
    void *p = (void *)0x1;
    ZT_EXPECT_ERR(aclrtMalloc(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMalloc(&p, 64, (aclrtMemMallocPolicy)8), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMalloc(&p, 64, (aclrtMemMallocPolicy)0x2000), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMalloc(&p, 64, ACL_MEM_ACCESS_USER_SPACE_READONLY),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    ZT_EXPECT_ERR(aclrtMalloc(&p, SIZE_MAX, ACL_MEM_MALLOC_HUGE_FIRST),
                  ACL_ERROR_RT_MEMORY_ALLOCATION);
    ZT_EXPECT_ERR(aclrtMalloc(&p, SIZE_MAX / 2, ACL_MEM_MALLOC_NORMAL_ONLY),
                  ACL_ERROR_RT_MEMORY_ALLOCATION);
    ZT_EXPECT_ERR(aclrtMalloc(&p, (size_t)1 << 62, ACL_MEM_MALLOC_NORMAL_ONLY),
                  ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_ptr_equal(p, (void *)0x1); /* outputs are set only on success */
}

static void test_malloc_free(void **state)
{
    (void)state;
    long page = sysconf(_SC_PAGESIZE);
    const aclrtMemMallocPolicy pols[] = {
        ACL_MEM_MALLOC_HUGE_FIRST,
        ACL_MEM_MALLOC_HUGE_ONLY,
        ACL_MEM_MALLOC_NORMAL_ONLY,
        ACL_MEM_MALLOC_HUGE_FIRST_P2P,
        ACL_MEM_MALLOC_HUGE_ONLY_P2P,
        ACL_MEM_MALLOC_NORMAL_ONLY_P2P,
        ACL_MEM_MALLOC_HUGE1G_ONLY,
        ACL_MEM_MALLOC_HUGE1G_ONLY_P2P,
        (aclrtMemMallocPolicy)(ACL_MEM_MALLOC_HUGE_FIRST | ACL_MEM_TYPE_HIGH_BAND_WIDTH),
        (aclrtMemMallocPolicy)(ACL_MEM_MALLOC_NORMAL_ONLY | ACL_MEM_TYPE_LOW_BAND_WIDTH),
    };
    for (size_t i = 0; i < sizeof(pols) / sizeof(pols[0]); i++) {
        void *p = NULL;
        size_t sz = 1 + i * 3000;
        assert_int_equal(aclrtMalloc(&p, sz, pols[i]), ACL_SUCCESS);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % (uintptr_t)page, 0);
        memset(p, (int)i + 1, sz);
        assert_int_equal(((unsigned char *)p)[sz - 1], i + 1);
        assert_int_equal(aclrtFree(p), ACL_SUCCESS);
    }
}

/* aclrtMalloc memory is a shared memfd mapping: a forked child's writes are seen. */
static void test_malloc_is_shared(void **state)
{
    (void)state;
    int *p = NULL;
    assert_int_equal(aclrtMalloc((void **)&p, 4096, ACL_MEM_MALLOC_NORMAL_ONLY), ACL_SUCCESS);
    p[0] = 1;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        p[0] = 42;
        _exit(aclrtFree(p) == ACL_SUCCESS ? 0 : 1); /* the child's table knows it too */
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(p[0], 42);
    assert_int_equal(aclrtFree(p), ACL_SUCCESS);
}

static void test_free_bad_input(void **state)
{
    (void)state;
    char local[16];
    void *p = NULL, *h = NULL;
    assert_int_equal(aclrtMalloc(&p, 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtMallocHost(&h, 100), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclrtFree(NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtFree(local), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtFree((char *)p + 1), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtFree(h), ACL_ERROR_INVALID_PARAM);     /* host memory */
    ZT_EXPECT_ERR(aclrtFreeHost(p), ACL_ERROR_INVALID_PARAM); /* device memory */
    ZT_EXPECT_ERR(aclrtFreeHost(NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtFreeHost(local), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtFree(p), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclrtFree(p), ACL_ERROR_INVALID_PARAM); /* double free */
    assert_int_equal(aclrtFreeHost(h), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclrtFreeHost(h), ACL_ERROR_INVALID_PARAM);
}

static void test_malloc_host(void **state)
{
    (void)state;
    void *h = (void *)0x1;
    ZT_EXPECT_ERR(aclrtMallocHost(NULL, 8), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMallocHost(&h, 0), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMallocHost(&h, SIZE_MAX), ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_ptr_equal(h, (void *)0x1);
    void *many[64];
    for (int i = 0; i < 64; i++) {
        assert_int_equal(aclrtMallocHost(&many[i], (size_t)(i + 1) * 37), ACL_SUCCESS);
        assert_int_equal((uintptr_t)many[i] % 64, 0);
        memset(many[i], i, (size_t)(i + 1) * 37);
    }
    for (int i = 63; i >= 0; i -= 2) {
        assert_int_equal(aclrtFreeHost(many[i]), ACL_SUCCESS);
    }
    for (int i = 0; i < 64; i += 2) {
        assert_int_equal(((unsigned char *)many[i])[0], i);
        assert_int_equal(aclrtFreeHost(many[i]), ACL_SUCCESS);
    }
}

/* ---- copies and fills ------------------------------------------------------------------ */

static void test_memcpy(void **state)
{
    (void)state;
    char src[64], dst[64];
    for (int i = 0; i < 64; i++) {
        src[i] = (char)i;
    }
    memset(dst, 0, sizeof(dst));
    ZT_EXPECT_ERR(aclrtMemcpy(dst, 16, src, 17, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMemcpy(NULL, 16, src, 16, ACL_MEMCPY_HOST_TO_DEVICE),
                  ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMemcpy(dst, 16, NULL, 16, ACL_MEMCPY_DEVICE_TO_HOST),
                  ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMemcpy(dst, 16, src, 16, (aclrtMemcpyKind)-1), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMemcpy(dst, 16, src, 16, (aclrtMemcpyKind)8), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMemcpy(dst, 0, src, SIZE_MAX, ACL_MEMCPY_DEFAULT), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(dst[0], 0); /* nothing copied by a refused call */
    assert_int_equal(aclrtMemcpy(NULL, 0, NULL, 0, ACL_MEMCPY_DEFAULT), ACL_SUCCESS);

    void *d = NULL;
    assert_int_equal(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    assert_int_equal(aclrtMemcpy(d, 64, src, 64, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    assert_int_equal(aclrtMemcpy(dst, 64, d, 64, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    assert_memory_equal(dst, src, 64);
    /* Overlapping copy inside one buffer behaves like memmove. */
    assert_int_equal(aclrtMemcpy((char *)d + 1, 63, d, 32, ACL_MEMCPY_DEVICE_TO_DEVICE),
                     ACL_SUCCESS);
    assert_int_equal(((char *)d)[1], 0);
    assert_int_equal(((char *)d)[32], 31);
    assert_int_equal(aclrtFree(d), ACL_SUCCESS);
}

static void test_memset(void **state)
{
    (void)state;
    unsigned char buf[32];
    memset(buf, 0, sizeof(buf));
    ZT_EXPECT_ERR(aclrtMemset(buf, 8, 1, 9), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMemset(NULL, 8, 1, 8), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(buf[0], 0);
    assert_int_equal(aclrtMemset(NULL, 0, 1, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMemset(buf, sizeof(buf), 0x1AB, 16), ACL_SUCCESS);
    assert_int_equal(buf[0], 0xAB);
    assert_int_equal(buf[15], 0xAB);
    assert_int_equal(buf[16], 0);
}

static int body_async_no_device(void)
{
    char a[8] = {0}, b[8] = {0};
    long m = zt_lg_mark();
    if (aclrtMemcpyAsync(a, 8, b, 8, ACL_MEMCPY_DEFAULT, NULL) != ACL_ERROR_RT_CONTEXT_NULL ||
        zt_lg_lines_since(m) != 1) {
        return 1;
    }
    m = zt_lg_mark();
    if (aclrtMemsetAsync(a, 8, 0, 8, NULL) != ACL_ERROR_RT_CONTEXT_NULL ||
        zt_lg_lines_since(m) != 1) {
        return 2;
    }
    return 0;
}

static void test_async_copies(void **state)
{
    (void)state;
    char src[4096], dst[4096];
    for (int i = 0; i < 4096; i++) {
        src[i] = (char)(i * 7);
    }
    memset(dst, 0, sizeof(dst));
    assert_int_equal(zt_in_fresh_thread(body_async_no_device), 0);

    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    aclrtStream s = NULL;
    assert_int_equal(aclrtCreateStream(&s), ACL_SUCCESS);
    int bogus = 0;
    ZT_EXPECT_ERR(aclrtMemcpyAsync(dst, 8, src, 8, ACL_MEMCPY_DEFAULT, &bogus),
                  ACL_ERROR_RT_INVALID_HANDLE);
    ZT_EXPECT_ERR(aclrtMemcpyAsync(dst, 8, src, 9, ACL_MEMCPY_DEFAULT, s), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMemcpyAsync(dst, 8, src, 8, (aclrtMemcpyKind)99, s),
                  ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMemcpyAsync(NULL, 8, src, 8, ACL_MEMCPY_DEFAULT, s),
                  ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMemsetAsync(dst, 8, 0, 9, s), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMemsetAsync(NULL, 8, 0, 8, s), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtMemsetAsync(dst, 8, 0, 8, &bogus), ACL_ERROR_RT_INVALID_HANDLE);

    /* In stream order: fill, then copy over half, then fill a quarter. */
    assert_int_equal(aclrtMemsetAsync(dst, 4096, 0x5A, 4096, s), ACL_SUCCESS);
    assert_int_equal(aclrtMemcpyAsync(dst, 4096, src, 2048, ACL_MEMCPY_HOST_TO_DEVICE, s),
                     ACL_SUCCESS);
    assert_int_equal(aclrtMemsetAsync(dst, 4096, 0x11, 1024, s), ACL_SUCCESS);
    assert_int_equal(aclrtMemcpyAsync(NULL, 0, NULL, 0, ACL_MEMCPY_DEFAULT, s), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(s), ACL_SUCCESS);
    assert_int_equal((unsigned char)dst[0], 0x11);
    assert_int_equal((unsigned char)dst[1023], 0x11);
    assert_memory_equal(dst + 1024, src + 1024, 1024);
    assert_int_equal((unsigned char)dst[2048], 0x5A);
    assert_int_equal((unsigned char)dst[4095], 0x5A);

    /* The NULL stream is the current device's default stream. */
    memset(dst, 0, sizeof(dst));
    assert_int_equal(aclrtMemcpyAsync(dst, 4096, src, 4096, ACL_MEMCPY_DEFAULT, NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSynchronizeStream(NULL), ACL_SUCCESS);
    assert_memory_equal(dst, src, 4096);

    assert_int_equal(aclrtDestroyStream(s), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclrtMemcpyAsync(dst, 8, src, 8, ACL_MEMCPY_DEFAULT, s),
                  ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

static void test_mem_info(void **state)
{
    (void)state;
    size_t fr = 0, tot = 0;
    ZT_EXPECT_ERR(aclrtGetMemInfo(ACL_HBM_MEM, NULL, &tot), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtGetMemInfo(ACL_HBM_MEM, &fr, NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtGetMemInfo((aclrtMemAttr)99, &fr, &tot), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtGetMemInfo((aclrtMemAttr)-1, &fr, &tot), ACL_ERROR_INVALID_PARAM);
    for (int a = ACL_DDR_MEM; a <= ACL_MEM_P2P_HUGE1G; a++) {
        assert_int_equal(aclrtGetMemInfo((aclrtMemAttr)a, &fr, &tot), ACL_SUCCESS);
        assert_true(tot > 0);
        assert_true(fr <= tot);
    }
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    /* Same order of magnitude as the kernel's own count (within 10%). */
    double sys = (double)pages * (double)psz;
    assert_true((double)tot > 0.9 * sys && (double)tot < 1.1 * sys);
}

int main(void)
{
    zt_lg_open("mem");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malloc_bad_input), cmocka_unit_test(test_malloc_free),
        cmocka_unit_test(test_malloc_is_shared), cmocka_unit_test(test_free_bad_input),
        cmocka_unit_test(test_malloc_host),      cmocka_unit_test(test_memcpy),
        cmocka_unit_test(test_memset),           cmocka_unit_test(test_async_copies),
        cmocka_unit_test(test_mem_info),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zt_lg_close();
    return rc;
}
