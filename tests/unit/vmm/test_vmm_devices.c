/*
 * The default device count (ZCCL_DEVICES unset): max(8, cores hwloc
 * reports), so the 8-device samples of CANN run on any host: 8 threads each
 * set device t and run work on a stream of it; device d is placed like
 * device d mod #NUMA nodes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <hwloc.h>
#include <pthread.h>
#include <stdlib.h>

#include "acl/acl.h"
#include "zccl/vmm_ext.h"

static int task_mark(void *arg)
{
    *(int *)arg = 1;
    return 0;
}

static void *device_thread(void *arg)
{
    int dev = *(int *)arg;
    int mark = -1;
    aclrtStream s = NULL;
    if (aclrtSetDevice(dev) != ACL_SUCCESS || aclrtCreateStream(&s) != ACL_SUCCESS ||
        zccl_stream_device(s) != dev ||
        zccl_stream_enqueue(s, task_mark, &mark, NULL) != ACL_SUCCESS ||
        aclrtSynchronizeStream(s) != ACL_SUCCESS || aclrtDestroyStream(s) != ACL_SUCCESS ||
        aclrtResetDevice(dev) != ACL_SUCCESS) {
        *(int *)arg = -1;
        return NULL;
    }
    *(int *)arg = mark == 1 && zccl_current_device() == -1 ? dev + 100 : -2; /* reset: none */
    return NULL;
}

static void test_default_count(void **state)
{
    (void)state;
    hwloc_topology_t topo;
    assert_int_equal(hwloc_topology_init(&topo), 0);
    assert_int_equal(hwloc_topology_load(topo), 0);
    int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    int numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    hwloc_topology_destroy(topo);
    uint32_t n = 0;
    assert_int_equal(aclrtGetDeviceCount(&n), ACL_SUCCESS);
    assert_int_equal(n, cores > 8 ? cores : 8);
    for (int d = 0; numa > 0 && d < (int)n; d++) {
        assert_int_equal(zccl_device_numa(d), zccl_device_numa(d % numa));
    }
}

static void test_eight_threads(void **state)
{
    (void)state;
    pthread_t th[8];
    int dev[8];
    for (int t = 0; t < 8; t++) {
        dev[t] = t;
        assert_int_equal(pthread_create(&th[t], NULL, device_thread, &dev[t]), 0);
    }
    for (int t = 0; t < 8; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(dev[t], t + 100); /* the task ran on a stream of device t */
    }
}

int main(void)
{
    unsetenv("ZCCL_DEVICES");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_count),
        cmocka_unit_test(test_eight_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
