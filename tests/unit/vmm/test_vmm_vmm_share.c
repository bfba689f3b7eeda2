/*
 * Unit tests (one process) of shareable handles, IPC keys and the broker's
 * local paths: every bad call returns its documented code, export rules
 * (one shareable handle per physical handle, no same-process import), FABRIC
 * handle contents and host check, key format, offer/fetch/withdraw/allow.
 * Importing across processes is tested in tests/mp/test_mp_vmm_*.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "share/vmm_share.h"
#include "zc/status.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"
#include "zt_phys.h"

#define HUGE ((size_t)2 << 20)

static aclrtDrvMemHandle phys_new(size_t size)
{
    aclrtDrvMemHandle h = zt_phys_alloc(0, size);
    assert_non_null(h);
    return h;
}

/* A pid that is certainly not running: a reaped child's. */
static int32_t dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        _exit(0);
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    return (int32_t)pid;
}

static uint64_t token_of(int32_t pid, uint64_t serial)
{
    return ((uint64_t)(uint32_t)pid << VMM_TOKEN_PID_SHIFT) | (serial & VMM_TOKEN_SERIAL_MASK);
}

static void test_export_v1(void **state)
{
    (void)state;
    aclrtDrvMemHandle h = phys_new(HUGE);
    uint64_t sh = 0;
    assert_int_equal(aclrtMemExportToShareableHandle(NULL, ACL_MEM_HANDLE_TYPE_NONE, 0, &sh),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 0, NULL),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemExportToShareableHandle(h, (aclrtMemHandleType)1, 0, &sh),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 2, &sh),
                     ACL_ERROR_INVALID_PARAM);
    int junk;
    assert_int_equal(aclrtMemExportToShareableHandle(&junk, ACL_MEM_HANDLE_TYPE_NONE, 0, &sh),
                     ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(sh, 0);

    assert_int_equal(aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 0, &sh),
                     ACL_SUCCESS);
    assert_int_equal(zccl_broker_token_pid(sh), getpid());
    assert_int_not_equal(sh & VMM_TOKEN_SERIAL_MASK, 0);
    uint64_t sh2 = 0;
    assert_int_equal(aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 0, &sh2),
                     ACL_ERROR_INVALID_PARAM); /* exported twice */
    assert_int_equal(
        aclrtMemExportToShareableHandleV2(h, 0, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, &sh2),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(sh2, 0);

    /* Same-process import is refused; the shareable handle still works for others. */
    aclrtDrvMemHandle imp = NULL;
    assert_int_equal(aclrtMemImportFromShareableHandle(sh, 0, &imp),
                     ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    assert_int_equal(
        aclrtMemImportFromShareableHandleV2(&sh, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, 0, &imp),
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    assert_null(imp);

    /* The offer is local: fetching it dups the same memfd. */
    int fd = -1;
    size_t size = 0;
    assert_int_equal(zccl_broker_fetch(sh, &fd, &size), ZC_OK);
    assert_int_equal(size, HUGE);
    close(fd);

    /* Freeing the handle withdraws its shareable handle. */
    assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
    assert_int_equal(zccl_broker_fetch(sh, &fd, &size), ZC_ERR_NOT_FOUND);
    int32_t pid = 1;
    assert_int_equal(aclrtMemSetPidToShareableHandle(sh, &pid, 1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 0, &sh2),
                     ACL_ERROR_RT_INVALID_HANDLE);
}

static void test_export_v2_fabric(void **state)
{
    (void)state;
    aclrtDrvMemHandle h = phys_new(2 * HUGE);
    aclrtMemFabricHandle fab;
    memset(&fab, 0, sizeof(fab));
    assert_int_equal(
        aclrtMemExportToShareableHandleV2(NULL, 0, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &fab),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(
        aclrtMemExportToShareableHandleV2(h, 0, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, NULL),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemExportToShareableHandleV2(h, 0, (aclrtMemSharedHandleType)0, &fab),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemExportToShareableHandleV2(h, 0, (aclrtMemSharedHandleType)3, &fab),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(
        aclrtMemExportToShareableHandleV2(h, 4, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &fab),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(
        aclrtMemExportToShareableHandleV2(h, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
                                          ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &fab),
        ACL_SUCCESS);
    vmm_fabric_t f;
    memcpy(&f, &fab, sizeof(f));
    assert_int_equal(f.magic, VMM_FABRIC_MAGIC);
    assert_int_equal(f.version, VMM_FABRIC_VERSION);
    assert_int_equal(f.host_id, zc_host_id());
    assert_int_equal(f.size, 2 * HUGE);
    assert_int_equal(zccl_broker_token_pid(f.token), getpid());

    int32_t pid = 12345;
    assert_int_equal(
        aclrtMemSetPidToShareableHandleV2(&fab, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &pid, 1),
        ACL_SUCCESS);
    assert_int_equal(
        aclrtMemSetPidToShareableHandleV2(NULL, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &pid, 1),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemSetPidToShareableHandleV2(&fab, (aclrtMemSharedHandleType)9, &pid, 1),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(
        aclrtMemSetPidToShareableHandleV2(&fab, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, NULL, 1),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(
        aclrtMemSetPidToShareableHandleV2(&fab, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &pid, 0),
        ACL_ERROR_INVALID_PARAM);

    aclrtDrvMemHandle imp = NULL;
    /* Same-process import of a FABRIC handle: refused like DEFAULT. */
    assert_int_equal(
        aclrtMemImportFromShareableHandleV2(&fab, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, 0, &imp),
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    /* A FABRIC handle from another host: a clear error before anything is asked. */
    aclrtMemFabricHandle other = fab;
    f.host_id ^= 0x5a5a5a5a5a5aull;
    memcpy(&other, &f, sizeof(f));
    assert_int_equal(
        aclrtMemImportFromShareableHandleV2(&other, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, 0, &imp),
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    assert_int_equal(
        aclrtMemSetPidToShareableHandleV2(&other, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &pid, 1),
        ACL_ERROR_INVALID_PARAM);
    /* Not a zccl FABRIC handle at all. */
    memset(&other, 0xab, sizeof(other));
    assert_int_equal(
        aclrtMemImportFromShareableHandleV2(&other, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, 0, &imp),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(
        aclrtMemSetPidToShareableHandleV2(&other, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &pid, 1),
        ACL_ERROR_INVALID_PARAM);
    assert_null(imp);
    assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
}

static void test_set_pid_errors(void **state)
{
    (void)state;
    aclrtDrvMemHandle h = phys_new(HUGE);
    uint64_t sh = 0;
    assert_int_equal(aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 0, &sh),
                     ACL_SUCCESS);
    int32_t pids[2] = {100, 200};
    assert_int_equal(aclrtMemSetPidToShareableHandle(sh, NULL, 1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemSetPidToShareableHandle(sh, pids, 0), ACL_ERROR_INVALID_PARAM);
    int32_t bad[2] = {100, -5};
    assert_int_equal(aclrtMemSetPidToShareableHandle(sh, bad, 2), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemSetPidToShareableHandle(0, pids, 2), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemSetPidToShareableHandle(sh ^ 1, pids, 2), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemSetPidToShareableHandle(token_of(dead_pid(), 77), pids, 2),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemSetPidToShareableHandle(sh, pids, 2), ACL_SUCCESS);
    assert_int_equal(aclrtMemSetPidToShareableHandle(sh, pids, 1), ACL_SUCCESS); /* again */
    /* A broker offer that is not a shareable handle (e.g. libhccl's) is not one. */
    int fd = memfd_create("t", MFD_CLOEXEC);
    assert_int_equal(ftruncate(fd, 4096), 0);
    uint64_t tok = 0;
    assert_int_equal(zccl_broker_offer(fd, 4096, 1, &tok), ZC_OK);
    assert_int_equal(aclrtMemSetPidToShareableHandle(tok, pids, 2), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(zccl_broker_withdraw(tok), ZC_OK);
    close(fd);
    assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
}

static void test_import_errors(void **state)
{
    (void)state;
    aclrtDrvMemHandle imp = NULL;
    uint64_t dead = token_of(dead_pid(), 0x123456789ull);
    assert_int_equal(aclrtMemImportFromShareableHandle(dead, 0, NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemImportFromShareableHandle(dead, -1, &imp),
                     ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtMemImportFromShareableHandle(dead, 1 << 20, &imp),
                     ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(aclrtMemImportFromShareableHandle(0, 0, &imp), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtMemImportFromShareableHandle(token_of(5, 0), 0, &imp),
                     ACL_ERROR_INVALID_PARAM); /* no serial: not a token */
    /* The exporter is gone (no broker): an IPC error, quickly. */
    uint64_t t0 = zc_time_ns();
    assert_int_equal(aclrtMemImportFromShareableHandle(dead, 0, &imp), ACL_ERROR_RT_IPC_ERROR);
    assert_true(zc_time_ns() - t0 < 1000000000ull);
    /* pid 1 runs no zccl broker */
    assert_int_equal(aclrtMemImportFromShareableHandle(token_of(1, 99), 0, &imp),
                     ACL_ERROR_RT_IPC_ERROR);

    assert_int_equal(
        aclrtMemImportFromShareableHandleV2(NULL, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, 0, &imp),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(
        aclrtMemImportFromShareableHandleV2(&dead, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, 0, NULL),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(
        aclrtMemImportFromShareableHandleV2(&dead, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, 1, &imp),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(
        aclrtMemImportFromShareableHandleV2(&dead, (aclrtMemSharedHandleType)5, 0, &imp),
        ACL_ERROR_INVALID_PARAM);
    assert_int_equal(
        aclrtMemImportFromShareableHandleV2(&dead, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, 0, &imp),
        ACL_ERROR_RT_IPC_ERROR);
    assert_null(imp);
}

/* ---- IPC keys ----------------------------------------------------------------------- */

static void assert_key_shape(const char *key)
{
    size_t n = strlen(key);
    assert_true(n > 0 && n <= 64);
    for (size_t i = 0; i < n; i++) {
        assert_true(isprint((unsigned char)key[i]));
    }
}

static void test_ipc_export_errors(void **state)
{
    (void)state;
    void *dev = NULL;
    assert_int_equal(aclrtMalloc(&dev, 3 * 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    char key[ACL_IPC_MEM_KEY_LEN];
    char small[64];
    memset(key, 0, sizeof(key));
    assert_int_equal(aclrtIpcMemGetExportKey(NULL, 4096, key, sizeof(key), 0),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemGetExportKey(dev, 4096, NULL, sizeof(key), 0),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemGetExportKey(dev, 0, key, sizeof(key), 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemGetExportKey(dev, 4096, small, sizeof(small), 0),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemGetExportKey(dev, 4096, key, 0, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemGetExportKey(dev, 4096, key, sizeof(key), 2),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemGetExportKey(dev, SIZE_MAX, key, sizeof(key), 0),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemGetExportKey((char *)dev + 4096, 3 * 4096, key, sizeof(key), 0),
                     ACL_ERROR_INVALID_PARAM); /* runs past the block */
    int stack_var = 0;
    assert_int_equal(aclrtIpcMemGetExportKey(&stack_var, 4, key, sizeof(key), 0),
                     ACL_ERROR_INVALID_PARAM); /* not device memory */
    assert_int_equal(key[0], 0);

    assert_int_equal(aclrtIpcMemGetExportKey((char *)dev + 100, 200, key, sizeof(key), 0),
                     ACL_SUCCESS);
    assert_key_shape(key);
    void *imp = NULL;
    assert_int_equal(aclrtIpcMemImportByKey(&imp, key, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    int32_t pid = 4242;
    assert_int_equal(aclrtIpcMemSetImportPid(key, &pid, 1), ACL_SUCCESS);
    assert_int_equal(aclrtIpcMemSetImportPid(key, NULL, 1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemSetImportPid(key, &pid, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemSetImportPid(NULL, &pid, 1), ACL_ERROR_INVALID_PARAM);
    /* An IPC key's token is not a shareable handle. */
    uint64_t tok = strtoull(key + strlen("zccl-ipc:"), NULL, 16);
    assert_int_equal(aclrtMemSetPidToShareableHandle(tok, &pid, 1), ACL_ERROR_INVALID_PARAM);

    /* Two exports of the same bytes are two keys. */
    char key2[100];
    assert_int_equal(aclrtIpcMemGetExportKey((char *)dev + 100, 200, key2, sizeof(key2),
                                             ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION),
                     ACL_SUCCESS);
    assert_key_shape(key2);
    assert_string_not_equal(key, key2);

    assert_int_equal(aclrtIpcMemClose(key), ACL_SUCCESS);
    assert_int_equal(aclrtIpcMemClose(key), ACL_ERROR_INVALID_PARAM); /* closed */
    assert_int_equal(aclrtIpcMemSetImportPid(key, &pid, 1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemClose(key2), ACL_SUCCESS);
    assert_int_equal(aclrtFree(dev), ACL_SUCCESS);
}

static void test_ipc_key_vmm_memory(void **state)
{
    (void)state;
    void *va = NULL;
    assert_int_equal(aclrtReserveMemAddress(&va, 2 * HUGE, 0, NULL, 0), ACL_SUCCESS);
    aclrtDrvMemHandle h = phys_new(HUGE);
    char key[ACL_IPC_MEM_KEY_LEN];
    assert_int_equal(aclrtIpcMemGetExportKey(va, 4096, key, sizeof(key), 0),
                     ACL_ERROR_INVALID_PARAM); /* reserved but not mapped */
    assert_int_equal(aclrtMapMem((char *)va + HUGE, HUGE, 0, h, 0), ACL_SUCCESS);
    assert_int_equal(
        aclrtIpcMemGetExportKey((char *)va + HUGE + 8192, HUGE - 8192, key, sizeof(key), 0),
        ACL_SUCCESS);
    assert_key_shape(key);
    assert_int_equal(aclrtIpcMemGetExportKey((char *)va + HUGE + 8192, HUGE, key, sizeof(key), 0),
                     ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemClose(key), ACL_SUCCESS);
    assert_int_equal(aclrtUnmapMem((char *)va + HUGE), ACL_SUCCESS);
    assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

static void test_ipc_import_close_errors(void **state)
{
    (void)state;
    void *p = NULL;
    char key[ACL_IPC_MEM_KEY_LEN];
    const char *bad[] = {
        "",
        "hello",
        "zccl-ipc:0000000000000001:0000000000000000",
        "zccl-ipc:00000000000000x1:0000000000000000:0000000000001000",
        "zccl-ipc:0000000000000001:0000000000000000:0000000000001000x",
        "ZCCL-IPC:0000000000000001:0000000000000000:0000000000001000",
        "zccl-ipc:000000000000000A:0000000000000000:0000000000001000",
        "zccl-ipc: 00000000000001:0000000000000000:0000000000001000",
        "zccl-ipc:0000000000000001:0000000000000000:0000000000000000", /* size 0 */
        "zccl-ipc:0000000000000001:ffffffffffffffff:0000000000001000", /* wraps */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(aclrtIpcMemImportByKey(&p, bad[i], 0), ACL_ERROR_INVALID_PARAM);
        assert_int_equal(aclrtIpcMemClose(bad[i]), ACL_ERROR_INVALID_PARAM);
        int32_t pid = 3;
        assert_int_equal(aclrtIpcMemSetImportPid(bad[i], &pid, 1), ACL_ERROR_INVALID_PARAM);
    }
    snprintf(key, sizeof(key), "zccl-ipc:%016llx:%016llx:%016llx",
             (unsigned long long)token_of(dead_pid(), 0xabcdef), 0ull, 4096ull);
    assert_int_equal(aclrtIpcMemImportByKey(NULL, key, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemImportByKey(&p, NULL, 0), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemImportByKey(&p, key, 2), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemImportByKey(&p, key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS),
                     ACL_ERROR_RT_IPC_ERROR); /* well formed, the exporter is gone */
    assert_null(p);
    assert_int_equal(aclrtIpcMemClose(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtIpcMemClose(key), ACL_ERROR_INVALID_PARAM); /* never imported */
}

/* ---- broker, local paths ---------------------------------------------------------------- */

static void test_broker_local(void **state)
{
    (void)state;
    int fd = memfd_create("t", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 8192), 0);
    uint64_t t1 = 0;
    uint64_t t2 = 0;
    assert_int_equal(zccl_broker_offer(fd, 8192, 1, NULL), ZC_ERR_PTR);
    assert_int_equal(zccl_broker_offer(-1, 8192, 1, &t1), ZC_ERR_INVAL);
    assert_int_equal(zccl_broker_offer(fd, 0, 1, &t1), ZC_ERR_INVAL);
    assert_int_equal(zccl_broker_offer(1000000, 8192, 1, &t1), ZC_ERR_INVAL); /* not an fd */
    assert_int_equal(zccl_broker_offer(fd, 8192, 1, &t1), ZC_OK);
    assert_int_equal(zccl_broker_offer(fd, 8192, 0, &t2), ZC_OK);
    assert_int_not_equal(t1, t2);
    assert_int_equal(zccl_broker_token_pid(t1), getpid());
    close(fd); /* the broker keeps its own dup */

    int got = -1;
    size_t size = 0;
    assert_int_equal(zccl_broker_fetch(t1, NULL, &size), ZC_ERR_PTR);
    assert_int_equal(zccl_broker_fetch(0, &got, &size), ZC_ERR_INVAL);
    assert_int_equal(zccl_broker_fetch(t1, &got, &size), ZC_OK);
    assert_int_equal(size, 8192);
    int got2 = -1;
    assert_int_equal(zccl_broker_fetch(t1, &got2, &size), ZC_OK);
    char *a = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, got, 0);
    char *b = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, got2, 0);
    assert_true(a != MAP_FAILED && b != MAP_FAILED);
    a[5000] = 77;
    assert_int_equal(b[5000], 77); /* one memfd */
    munmap(a, 8192);
    munmap(b, 8192);
    close(got);
    close(got2);

    int32_t pids[3] = {10, 20, 30};
    assert_int_equal(zccl_broker_allow(t1, pids, 3), ZC_OK);
    assert_int_equal(zccl_broker_allow(t1, NULL, 3), ZC_ERR_PTR);
    int32_t neg = 0;
    assert_int_equal(zccl_broker_allow(t1, &neg, 1), ZC_ERR_INVAL);
    assert_int_equal(zccl_broker_allow(t1 ^ 2, pids, 3), ZC_ERR_NOT_FOUND);
    assert_int_equal(zccl_broker_withdraw(t1), ZC_OK);
    assert_int_equal(zccl_broker_withdraw(t1), ZC_ERR_NOT_FOUND);
    assert_int_equal(zccl_broker_fetch(t1, &got, &size), ZC_ERR_NOT_FOUND);
    assert_int_equal(zccl_broker_allow(t1, pids, 3), ZC_ERR_NOT_FOUND);
    assert_int_equal(zccl_broker_fetch(t2, &got, &size), ZC_OK);
    close(got);
    assert_int_equal(zccl_broker_withdraw(t2), ZC_OK);
    /* Another process's token cannot be withdrawn or extended from here. */
    uint64_t foreign = token_of(dead_pid(), 5);
    assert_int_equal(zccl_broker_withdraw(foreign), ZC_ERR_NOT_FOUND);
    assert_int_equal(zccl_broker_allow(foreign, pids, 1), ZC_ERR_NOT_FOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_export_v1),
        cmocka_unit_test(test_export_v2_fabric),
        cmocka_unit_test(test_set_pid_errors),
        cmocka_unit_test(test_import_errors),
        cmocka_unit_test(test_ipc_export_errors),
        cmocka_unit_test(test_ipc_key_vmm_memory),
        cmocka_unit_test(test_ipc_import_close_errors),
        cmocka_unit_test(test_broker_local),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
