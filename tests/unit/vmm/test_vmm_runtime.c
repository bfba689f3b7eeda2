/*
 * ACL runtime basics: aclInit/aclFinalize, devices (count, set/get/reset per
 * thread), SoC name, saturation mode, bare tgid, peer access, run mode, the
 * libhccl device helpers, and a forked child starting clean.
 *
 * Every bad call checks the exact aclError and that exactly one log line was
 * written for it (the log goes to a per-process file set before the library
 * reads its configuration; tests/common/zt_logcount.h). ZCCL_DEVICES=3 makes
 * the device count exact.
 * Only exported symbols are reachable through the shared library, so the
 * one internal unit checked here (the status mapping) is compiled in.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "acl/acl.h"
#include "zccl/vmm_ext.h"
#include "zt_logcount.h"

/* The status mapping is internal (hidden in the library): compile it in. */
#include "core/vmm_status.c"

#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- tests --------------------------------------------------------------------------- */

static void test_init_finalize(void **state)
{
    (void)state;
    /* As CANN's runtime: finalize before any aclInit succeeds (a tool that
     * prints its usage and finalizes exits 0); only a repeat is refused. */
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    assert_int_equal(aclInit(NULL), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
    ZT_EXPECT_ERR(aclInit(""), ACL_ERROR_REPEAT_INITIALIZE);
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);

    ZT_EXPECT_ERR(aclInit("/nonexistent-dir/acl.json"), ACL_ERROR_INVALID_FILE);
    char cfg[] = "/tmp/zt-acl-cfg-XXXXXX";
    int fd = mkstemp(cfg);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "{}", 2), 2);
    close(fd);
    assert_int_equal(aclInit(cfg), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclInit(cfg), ACL_ERROR_REPEAT_INITIALIZE);
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
    unlink(cfg);
}

static void test_device_count(void **state)
{
    (void)state;
    uint32_t n = 0;
    ZT_EXPECT_ERR(aclrtGetDeviceCount(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtGetDeviceCount(&n), ACL_SUCCESS);
    assert_int_equal(n, 3); /* ZCCL_DEVICES=3 */
}

static int body_no_device(void)
{
    int32_t d = 77;
    long m = zt_lg_mark();
    if (aclrtGetDevice(&d) != ACL_ERROR_RT_CONTEXT_NULL || d != 77 || zt_lg_lines_since(m) != 1) {
        return 1;
    }
    if (zccl_current_device() != -1) {
        return 2;
    }
    if (aclrtSetDevice(2) != ACL_SUCCESS || aclrtGetDevice(&d) != ACL_SUCCESS || d != 2) {
        return 3;
    }
    if (zccl_current_device() != 2) {
        return 4;
    }
    return aclrtResetDevice(2) == ACL_SUCCESS ? 0 : 5;
}

static void test_set_get_reset(void **state)
{
    (void)state;
    int32_t d = -5;
    ZT_EXPECT_ERR(aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
    ZT_EXPECT_ERR(aclrtSetDevice(3), ACL_ERROR_RT_INVALID_DEVICEID);
    ZT_EXPECT_ERR(aclrtSetDevice(INT32_MAX), ACL_ERROR_RT_INVALID_DEVICEID);
    ZT_EXPECT_ERR(aclrtResetDevice(3), ACL_ERROR_RT_INVALID_DEVICEID);
    ZT_EXPECT_ERR(aclrtResetDevice(-7), ACL_ERROR_RT_INVALID_DEVICEID);
    ZT_EXPECT_ERR(aclrtResetDeviceForce(99), ACL_ERROR_RT_INVALID_DEVICEID);

    assert_int_equal(aclrtSetDevice(1), ACL_SUCCESS);
    assert_int_equal(aclrtGetDevice(&d), ACL_SUCCESS);
    assert_int_equal(d, 1);
    /* The current device is per thread: a new thread has none, and its choice
     * does not change ours. */
    assert_int_equal(zt_in_fresh_thread(body_no_device), 0);
    assert_int_equal(aclrtGetDevice(&d), ACL_SUCCESS);
    assert_int_equal(d, 1);

    /* Two uses of device 1: the first reset releases the thread's current device. */
    assert_int_equal(aclrtSetDevice(1), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(1), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclrtGetDevice(&d), ACL_ERROR_RT_CONTEXT_NULL);
    assert_int_equal(aclrtResetDevice(1), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS); /* never set: fine */
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    assert_int_equal(aclrtResetDeviceForce(0), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclrtGetDevice(&d), ACL_ERROR_RT_CONTEXT_NULL);
}

static void test_soc_runmode_satmode_tgid(void **state)
{
    (void)state;
    const char *soc = aclrtGetSocName();
    assert_non_null(soc);
    assert_string_equal(soc, "zccl-host");

    aclrtRunMode rm = ACL_DEVICE;
    ZT_EXPECT_ERR(aclrtGetRunMode(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtGetRunMode(&rm), ACL_SUCCESS);
    assert_int_equal(rm, ACL_HOST);

    aclrtFloatOverflowMode m = ACL_RT_OVERFLOW_MODE_UNDEF;
    assert_int_equal(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_INFNAN), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION),
                  ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    ZT_EXPECT_ERR(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_UNDEF), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtSetDeviceSatMode((aclrtFloatOverflowMode)77), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtGetDeviceSatMode(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtGetDeviceSatMode(&m), ACL_SUCCESS);
    assert_int_equal(m, ACL_RT_OVERFLOW_MODE_INFNAN);

    int32_t pid = 0;
    ZT_EXPECT_ERR(aclrtDeviceGetBareTgid(NULL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDeviceGetBareTgid(&pid), ACL_SUCCESS);
    assert_int_equal(pid, getpid());
}

static int body_peer_no_device(void)
{
    long m = zt_lg_mark();
    if (aclrtDeviceEnablePeerAccess(1, 0) != ACL_ERROR_RT_CONTEXT_NULL ||
        zt_lg_lines_since(m) != 1) {
        return 1;
    }
    m = zt_lg_mark();
    if (aclrtDeviceDisablePeerAccess(1) != ACL_ERROR_RT_CONTEXT_NULL || zt_lg_lines_since(m) != 1) {
        return 2;
    }
    return 0;
}

static void test_peer_access(void **state)
{
    (void)state;
    int32_t can = -1;
    ZT_EXPECT_ERR(aclrtDeviceCanAccessPeer(NULL, 0, 1), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtDeviceCanAccessPeer(&can, 3, 1), ACL_ERROR_RT_INVALID_DEVICEID);
    ZT_EXPECT_ERR(aclrtDeviceCanAccessPeer(&can, 0, -1), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(can, -1);
    assert_int_equal(aclrtDeviceCanAccessPeer(&can, 0, 2), ACL_SUCCESS);
    assert_int_equal(can, 1);
    assert_int_equal(aclrtDeviceCanAccessPeer(&can, 2, 2), ACL_SUCCESS);
    assert_int_equal(can, 0);

    assert_int_equal(zt_in_fresh_thread(body_peer_no_device), 0);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclrtDeviceEnablePeerAccess(1, 1), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtDeviceEnablePeerAccess(0, 0), ACL_ERROR_INVALID_PARAM);
    ZT_EXPECT_ERR(aclrtDeviceEnablePeerAccess(3, 0), ACL_ERROR_RT_INVALID_DEVICEID);
    ZT_EXPECT_ERR(aclrtDeviceDisablePeerAccess(-1), ACL_ERROR_RT_INVALID_DEVICEID);
    ZT_EXPECT_ERR(aclrtDeviceDisablePeerAccess(1), ACL_ERROR_INVALID_PARAM); /* not enabled */
    assert_int_equal(aclrtDeviceEnablePeerAccess(1, 0), ACL_SUCCESS);
    assert_int_equal(aclrtDeviceEnablePeerAccess(1, 0), ACL_SUCCESS);
    assert_int_equal(aclrtDeviceEnablePeerAccess(2, 0), ACL_SUCCESS);
    assert_int_equal(aclrtDeviceDisablePeerAccess(1), ACL_SUCCESS);
    ZT_EXPECT_ERR(aclrtDeviceDisablePeerAccess(1), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(aclrtDeviceDisablePeerAccess(2), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(0), ACL_SUCCESS);
}

/* Device d sits on NUMA node (d mod #NUMA) as hwloc numbers them. */
static void test_device_numa(void **state)
{
    (void)state;
    hwloc_topology_t topo;
    assert_int_equal(hwloc_topology_init(&topo), 0);
    assert_int_equal(hwloc_topology_load(topo), 0);
    int nn = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    for (int d = 0; d < 3; d++) {
        int want = -1;
        if (nn > 0) {
            want =
                (int)hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)(d % nn))->os_index;
        }
        assert_int_equal(zccl_device_numa(d), want);
    }
    hwloc_topology_destroy(topo);
    assert_int_equal(zccl_device_numa(-1), -1);
    assert_int_equal(zccl_device_numa(3), -1);
}

static void test_status_mapping(void **state)
{
    (void)state;
    assert_int_equal(vmm_status_to_acl(ZC_OK), ACL_SUCCESS);
    assert_int_equal(vmm_status_to_acl(ZC_ERR_INVAL), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(vmm_status_to_acl(ZC_ERR_PTR), ACL_ERROR_INVALID_PARAM);
    assert_int_equal(vmm_status_to_acl(ZC_ERR_NOMEM), ACL_ERROR_RT_MEMORY_ALLOCATION);
    assert_int_equal(vmm_status_to_acl(ZC_ERR_HANDLE), ACL_ERROR_RT_INVALID_HANDLE);
    assert_int_equal(vmm_status_to_acl(ZC_ERR_DEVICE), ACL_ERROR_RT_INVALID_DEVICEID);
    assert_int_equal(vmm_status_to_acl(ZC_ERR_PERM), ACL_ERROR_RT_NO_PERMISSION);
    assert_int_equal(vmm_status_to_acl(ZC_ERR_NOT_SUPPORT), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    assert_int_equal(vmm_status_to_acl(ZC_ERR_UNALIGNED), ACL_ERROR_RT_ADDR_UNALIGNED);
    assert_int_equal(vmm_status_to_acl(ZC_ERR_TIMEOUT), ACL_ERROR_RT_WAIT_TIMEOUT);
    assert_int_equal(vmm_status_to_acl(ZC_ERR_REMOTE), ACL_ERROR_RT_IPC_ERROR);
    assert_int_equal(vmm_status_to_acl(ZC_ERR_OVERLIMIT), ACL_ERROR_RT_OVER_LIMIT);
    assert_int_equal(vmm_status_to_acl(ZC_ERR_REPEAT), ACL_ERROR_REPEAT_INITIALIZE);
    assert_int_equal(vmm_status_to_acl(ZC_ERR_INTERNAL), ACL_ERROR_RT_INTERNAL_ERROR);
    assert_int_equal(vmm_status_to_acl(-999), ACL_ERROR_RT_INTERNAL_ERROR);
}

/* A forked child starts clean: it may aclInit although the parent did. */
static void test_fork_child_clean(void **state)
{
    (void)state;
    assert_int_equal(aclInit(NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSetDevice(1), ACL_SUCCESS);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int32_t d = -1;
        int bad = 0;
        bad |= aclInit(NULL) != ACL_SUCCESS;
        bad |= (aclInit(NULL) != ACL_ERROR_REPEAT_INITIALIZE) << 1;
        bad |= (aclrtGetDevice(&d) != ACL_SUCCESS || d != 1) << 2;
        bad |= (aclFinalize() != ACL_SUCCESS) << 3;
        _exit(bad);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    ZT_EXPECT_ERR(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
    assert_int_equal(aclFinalize(), ACL_SUCCESS);
    assert_int_equal(aclrtResetDevice(1), ACL_SUCCESS);
}

int main(void)
{
    zt_lg_open("runtime");
    setenv("ZCCL_DEVICES", "3", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_finalize),  cmocka_unit_test(test_device_count),
        cmocka_unit_test(test_set_get_reset),  cmocka_unit_test(test_soc_runmode_satmode_tgid),
        cmocka_unit_test(test_peer_access),    cmocka_unit_test(test_device_numa),
        cmocka_unit_test(test_status_mapping), cmocka_unit_test(test_fork_child_clean),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    zt_lg_close();
    return rc;
}
