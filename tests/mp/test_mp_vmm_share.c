/*
 * Cross-process sharing through the VMM export/import calls and IPC keys
 * (forked processes; tokens and keys travel over a socketpair).
 *
 * Covered: V1, V2 DEFAULT and V2 FABRIC handles and IPC keys (aclrtMalloc
 * and VMM memory): a trusted importer maps the exporter's memory, sees its
 * bytes, and its writes are seen back by the exporter; an untrusted pid is
 * refused until trusted; with DISABLE_PID_VALIDATION any pid imports; a
 * FABRIC handle claiming another host fails clearly; imported memory stays
 * valid after the exporter freed its handle (or closed its key, or freed
 * its memory) and after the exporter process exited, while new imports then
 * fail. Children never return into cmocka: they report through their exit
 * status and die by alarm() if the parent stops talking to them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "share/vmm_share.h"
#include "zc/sync.h"
#include "zt_fork.h"
#include "zt_phys.h"

#define HUGE ((size_t)2 << 20)

/* ---- helpers ---------------------------------------------------------------------------- */

/* Reserve size bytes and map h there; NULL on failure. */
static void *map_new(aclrtDrvMemHandle h, size_t size)
{
    void *va = NULL;
    if (aclrtReserveMemAddress(&va, size, 0, NULL, 1) != ACL_SUCCESS) {
        return NULL;
    }
    if (aclrtMapMem(va, size, 0, h, 0) != ACL_SUCCESS) {
        aclrtReleaseMemAddress(va);
        return NULL;
    }
    return va;
}

static int map_drop(void *va)
{
    int a = aclrtUnmapMem(va);
    int b = aclrtReleaseMemAddress(va);
    return a == ACL_SUCCESS && b == ACL_SUCCESS ? 0 : -1;
}

static uint32_t pat(uint32_t seed, size_t i)
{
    uint32_t x = seed * 2654435761u + (uint32_t)i * 40503u + 7u;
    return x ^ (x >> 13);
}

static void fill(void *p, size_t bytes, uint32_t seed)
{
    uint32_t *w = p;
    for (size_t i = 0; i < bytes / 4; i++) {
        w[i] = pat(seed, i);
    }
}

static int check(const void *p, size_t bytes, uint32_t seed)
{
    const uint32_t *w = p;
    for (size_t i = 0; i < bytes / 4; i++) {
        if (w[i] != pat(seed, i)) {
            return -1;
        }
    }
    return 0;
}

/* The handle a kid receives, in whichever form the test exports. */
typedef enum { SH_V1, SH_V2_DEFAULT, SH_V2_FABRIC } sh_kind_t;
typedef struct {
    sh_kind_t kind;
    uint64_t token;
    aclrtMemFabricHandle fab;
} sh_msg_t;

static aclError import_sh(const sh_msg_t *m, aclrtDrvMemHandle *h)
{
    switch (m->kind) {
    case SH_V1:
        return aclrtMemImportFromShareableHandle(m->token, 0, h);
    case SH_V2_DEFAULT: {
        uint64_t t = m->token;
        return aclrtMemImportFromShareableHandleV2(&t, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, 0, h);
    }
    default: {
        aclrtMemFabricHandle f = m->fab;
        return aclrtMemImportFromShareableHandleV2(&f, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, 0, h);
    }
    }
}

static aclError export_sh(aclrtDrvMemHandle h, sh_kind_t kind, uint64_t flags, sh_msg_t *m)
{
    memset(m, 0, sizeof(*m));
    m->kind = kind;
    if (kind == SH_V1) {
        return aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, flags, &m->token);
    }
    if (kind == SH_V2_DEFAULT) {
        return aclrtMemExportToShareableHandleV2(h, flags, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT,
                                                 &m->token);
    }
    return aclrtMemExportToShareableHandleV2(h, flags, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &m->fab);
}

static aclError trust(sh_msg_t *m, int32_t pid)
{
    if (m->kind == SH_V1) {
        return aclrtMemSetPidToShareableHandle(m->token, &pid, 1);
    }
    if (m->kind == SH_V2_DEFAULT) {
        return aclrtMemSetPidToShareableHandleV2(&m->token, ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, &pid,
                                                 1);
    }
    return aclrtMemSetPidToShareableHandleV2(&m->fab, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &pid, 1);
}

/* ---- shareable handles ---------------------------------------------------------------- */

/*
 * Importer kid: get the handle, (for FABRIC first try a copy claiming another
 * host), import, map, check the exporter's first half, write the second half
 * with seed+1, report, wait for "bye", clean up.
 */
static int kid_import_rw(int sock, void *arg)
{
    (void)arg;
    sh_msg_t m;
    ZT_KCHECK(zt_msg_get(sock, &m, sizeof(m)) == 0);
    aclrtDrvMemHandle h = NULL;
    if (m.kind == SH_V2_FABRIC) {
        sh_msg_t foreign = m;
        vmm_fabric_t f;
        memcpy(&f, &foreign.fab, sizeof(f));
        f.host_id ^= 0x1ull; /* exported on "another host" */
        memcpy(&foreign.fab, &f, sizeof(f));
        ZT_KCHECK(import_sh(&foreign, &h) == ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        ZT_KCHECK(h == NULL);
    }
    ZT_KCHECK(import_sh(&m, &h) == ACL_SUCCESS);
    char *va = map_new(h, 2 * HUGE);
    ZT_KCHECK(va != NULL);
    ZT_KCHECK(check(va, HUGE, 11) == 0);
    fill(va + HUGE, HUGE, 12);
    char ok = 'k';
    ZT_KCHECK(zt_msg_put(sock, &ok, 1) == 0);
    ZT_KCHECK(zt_msg_get(sock, &ok, 1) == 0);
    ZT_KCHECK(map_drop(va) == 0);
    ZT_KCHECK(aclrtFreePhysical(h) == ACL_SUCCESS);
    return 0;
}

static void share_round_trip(sh_kind_t kind)
{
    aclrtDrvMemHandle h = zt_phys_alloc(0, 2 * HUGE);
    assert_non_null(h);
    char *va = map_new(h, 2 * HUGE);
    assert_non_null(va);
    fill(va, HUGE, 11);
    zt_kid_t k = zt_kid_start(kid_import_rw, NULL);
    sh_msg_t m;
    assert_int_equal(export_sh(h, kind, 0, &m), ACL_SUCCESS);
    assert_int_equal(trust(&m, (int32_t)k.pid), ACL_SUCCESS);
    assert_int_equal(zt_msg_put(k.sock, &m, sizeof(m)), 0);
    char ok = 0;
    assert_int_equal(zt_msg_get(k.sock, &ok, 1), 0);
    assert_int_equal(check(va + HUGE, HUGE, 12), 0); /* the importer's writes */
    assert_int_equal(zt_msg_put(k.sock, &ok, 1), 0);
    assert_int_equal(zt_kid_wait(k), 0);
    assert_int_equal(map_drop(va), 0);
    assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
}

static void test_v1_trusted(void **state)
{
    (void)state;
    share_round_trip(SH_V1);
}

static void test_v2_default_trusted(void **state)
{
    (void)state;
    share_round_trip(SH_V2_DEFAULT);
}

static void test_v2_fabric_trusted(void **state)
{
    (void)state;
    share_round_trip(SH_V2_FABRIC);
}

/* Untrusted importer: refused until the exporter trusts it. */
static int kid_untrusted(int sock, void *arg)
{
    (void)arg;
    sh_msg_t m;
    ZT_KCHECK(zt_msg_get(sock, &m, sizeof(m)) == 0);
    aclrtDrvMemHandle h = NULL;
    ZT_KCHECK(import_sh(&m, &h) == ACL_ERROR_RT_NO_PERMISSION);
    ZT_KCHECK(h == NULL);
    char c = 'r';
    ZT_KCHECK(zt_msg_put(sock, &c, 1) == 0);
    ZT_KCHECK(zt_msg_get(sock, &c, 1) == 0); /* now trusted */
    ZT_KCHECK(import_sh(&m, &h) == ACL_SUCCESS);
    char *va = map_new(h, HUGE);
    ZT_KCHECK(va != NULL);
    ZT_KCHECK(check(va, HUGE, 21) == 0);
    ZT_KCHECK(map_drop(va) == 0);
    ZT_KCHECK(aclrtFreePhysical(h) == ACL_SUCCESS);
    return 0;
}

static void test_untrusted_refused(void **state)
{
    (void)state;
    for (int kind = SH_V1; kind <= SH_V2_FABRIC; kind++) {
        aclrtDrvMemHandle h = zt_phys_alloc(0, HUGE);
        char *va = map_new(h, HUGE);
        assert_non_null(va);
        fill(va, HUGE, 21);
        zt_kid_t k = zt_kid_start(kid_untrusted, NULL);
        sh_msg_t m;
        assert_int_equal(export_sh(h, (sh_kind_t)kind, 0, &m), ACL_SUCCESS);
        assert_int_equal(trust(&m, (int32_t)getpid()), ACL_SUCCESS); /* someone else */
        assert_int_equal(zt_msg_put(k.sock, &m, sizeof(m)), 0);
        char c;
        assert_int_equal(zt_msg_get(k.sock, &c, 1), 0);
        assert_int_equal(trust(&m, (int32_t)k.pid), ACL_SUCCESS);
        assert_int_equal(zt_msg_put(k.sock, &c, 1), 0);
        assert_int_equal(zt_kid_wait(k), 0);
        assert_int_equal(map_drop(va), 0);
        assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
    }
}

/* Any pid imports when the export disabled pid validation. */
static int kid_any(int sock, void *arg)
{
    (void)arg;
    sh_msg_t m;
    ZT_KCHECK(zt_msg_get(sock, &m, sizeof(m)) == 0);
    aclrtDrvMemHandle h = NULL;
    ZT_KCHECK(import_sh(&m, &h) == ACL_SUCCESS);
    char *va = map_new(h, HUGE);
    ZT_KCHECK(va != NULL);
    ZT_KCHECK(check(va, HUGE, 31) == 0);
    ZT_KCHECK(map_drop(va) == 0);
    ZT_KCHECK(aclrtFreePhysical(h) == ACL_SUCCESS);
    return 0;
}

static void test_disable_pid_validation(void **state)
{
    (void)state;
    for (int kind = SH_V1; kind <= SH_V2_FABRIC; kind++) {
        aclrtDrvMemHandle h = zt_phys_alloc(0, HUGE);
        char *va = map_new(h, HUGE);
        assert_non_null(va);
        fill(va, HUGE, 31);
        sh_msg_t m;
        assert_int_equal(
            export_sh(h, (sh_kind_t)kind, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION, &m),
            ACL_SUCCESS);
        zt_kid_t k[3];
        for (int i = 0; i < 3; i++) {
            k[i] = zt_kid_start(kid_any, NULL);
            assert_int_equal(zt_msg_put(k[i].sock, &m, sizeof(m)), 0);
        }
        for (int i = 0; i < 3; i++) {
            assert_int_equal(zt_kid_wait(k[i]), 0);
        }
        assert_int_equal(map_drop(va), 0);
        assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
    }
}

/*
 * Exporter kid: allocate, fill, export to its parent, then on cue free its
 * handle (or, for IPC, close the key and free the memory) and finally exit.
 */
static int kid_export_then_leave(int sock, void *arg)
{
    int ipc = arg != NULL;
    char c;
    int32_t parent = (int32_t)getppid();
    if (!ipc) {
        aclrtDrvMemHandle h = zt_phys_alloc(0, HUGE);
        ZT_KCHECK(h != NULL);
        char *va = map_new(h, HUGE);
        ZT_KCHECK(va != NULL);
        fill(va, HUGE, 41);
        ZT_KCHECK(map_drop(va) == 0);
        sh_msg_t m;
        ZT_KCHECK(export_sh(h, SH_V1, 0, &m) == ACL_SUCCESS);
        ZT_KCHECK(trust(&m, parent) == ACL_SUCCESS);
        ZT_KCHECK(zt_msg_put(sock, &m, sizeof(m)) == 0);
        ZT_KCHECK(zt_msg_get(sock, &c, 1) == 0); /* imported */
        ZT_KCHECK(aclrtFreePhysical(h) == ACL_SUCCESS);
    } else {
        void *dev = NULL;
        ZT_KCHECK(aclrtMalloc(&dev, 4 * 4096, ACL_MEM_MALLOC_HUGE_FIRST) == ACL_SUCCESS);
        fill(dev, 4 * 4096, 41);
        char key[ACL_IPC_MEM_KEY_LEN];
        ZT_KCHECK(aclrtIpcMemGetExportKey(dev, 4 * 4096, key, sizeof(key), 0) == ACL_SUCCESS);
        ZT_KCHECK(aclrtIpcMemSetImportPid(key, &parent, 1) == ACL_SUCCESS);
        ZT_KCHECK(zt_msg_put(sock, key, sizeof(key)) == 0);
        ZT_KCHECK(zt_msg_get(sock, &c, 1) == 0); /* imported */
        ZT_KCHECK(aclrtIpcMemClose(key) == ACL_SUCCESS);
        ZT_KCHECK(aclrtFree(dev) == ACL_SUCCESS);
    }
    ZT_KCHECK(zt_msg_put(sock, &c, 1) == 0); /* freed */
    ZT_KCHECK(zt_msg_get(sock, &c, 1) == 0); /* leave */
    return 0;
}

static void test_import_outlives_exporter(void **state)
{
    (void)state;
    zt_kid_t k = zt_kid_start(kid_export_then_leave, NULL);
    sh_msg_t m;
    assert_int_equal(zt_msg_get(k.sock, &m, sizeof(m)), 0);
    aclrtDrvMemHandle h = NULL;
    assert_int_equal(import_sh(&m, &h), ACL_SUCCESS);
    char *va = map_new(h, HUGE);
    assert_non_null(va);
    assert_int_equal(check(va, HUGE, 41), 0);
    char c = 'i';
    assert_int_equal(zt_msg_put(k.sock, &c, 1), 0);
    assert_int_equal(zt_msg_get(k.sock, &c, 1), 0); /* the exporter freed its handle */
    assert_int_equal(check(va, HUGE, 41), 0);
    aclrtDrvMemHandle again = NULL;
    assert_int_equal(import_sh(&m, &again), ACL_ERROR_RT_IPC_ERROR); /* withdrawn */
    assert_null(again);
    assert_int_equal(zt_msg_put(k.sock, &c, 1), 0);
    assert_int_equal(zt_kid_wait(k), 0); /* the exporter is gone */
    assert_int_equal(check(va, HUGE, 41), 0);
    fill(va, HUGE, 42);
    assert_int_equal(check(va, HUGE, 42), 0);
    /* Free the imported handle while mapped, unmap, map a retained copy: still there. */
    aclrtDrvMemHandle r = NULL;
    assert_int_equal(aclrtMemRetainAllocationHandle(va, &r), ACL_SUCCESS);
    assert_ptr_equal(r, h);
    assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
    assert_int_equal(map_drop(va), 0);
    va = map_new(h, HUGE);
    assert_non_null(va);
    assert_int_equal(check(va, HUGE, 42), 0);
    assert_int_equal(map_drop(va), 0);
    assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
    uint64_t t0 = zc_time_ns();
    assert_int_equal(import_sh(&m, &again), ACL_ERROR_RT_IPC_ERROR); /* owner dead */
    assert_true(zc_time_ns() - t0 < 1000000000ull);
}

/* ---- IPC keys -------------------------------------------------------------------------- */

typedef struct {
    char key[ACL_IPC_MEM_KEY_LEN];
    uint32_t seed;
    uint32_t bytes;
    int expect; /* aclError of the first import */
} key_msg_t;

/* Importer kid for keys: import (maybe refused first), check, write back, close. */
static int kid_key(int sock, void *arg)
{
    (void)arg;
    key_msg_t m;
    ZT_KCHECK(zt_msg_get(sock, &m, sizeof(m)) == 0);
    void *p = NULL;
    char c = 'r';
    if (m.expect != ACL_SUCCESS) {
        ZT_KCHECK(aclrtIpcMemImportByKey(&p, m.key, 0) == m.expect);
        ZT_KCHECK(p == NULL);
        ZT_KCHECK(zt_msg_put(sock, &c, 1) == 0);
        ZT_KCHECK(zt_msg_get(sock, &c, 1) == 0); /* now trusted */
    }
    ZT_KCHECK(aclrtIpcMemImportByKey(&p, m.key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS) ==
              ACL_SUCCESS);
    ZT_KCHECK(p != NULL);
    ZT_KCHECK(check(p, m.bytes, m.seed) == 0);
    void *q = NULL;
    ZT_KCHECK(aclrtIpcMemImportByKey(&q, m.key, 0) == ACL_SUCCESS); /* same key: same address */
    ZT_KCHECK(q == p);
    fill(p, m.bytes, m.seed + 1);
    ZT_KCHECK(aclrtIpcMemClose(m.key) == ACL_SUCCESS);
    ZT_KCHECK(check(q, m.bytes, m.seed + 1) == 0); /* one import left */
    ZT_KCHECK(aclrtIpcMemClose(m.key) == ACL_SUCCESS);
    ZT_KCHECK(aclrtIpcMemClose(m.key) == ACL_ERROR_INVALID_PARAM);
    ZT_KCHECK(zt_msg_put(sock, &c, 1) == 0);
    return 0;
}

/* Export [p, p+bytes) as a key to a kid: trusted, untrusted-then-trusted, or open. */
static void key_round_trip(char *p, size_t bytes, uint32_t seed, int mode)
{
    fill(p, bytes, seed);
    zt_kid_t k = zt_kid_start(kid_key, NULL);
    key_msg_t m;
    memset(&m, 0, sizeof(m));
    m.seed = seed;
    m.bytes = (uint32_t)bytes;
    uint64_t flags = mode == 2 ? ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION : 0;
    assert_int_equal(aclrtIpcMemGetExportKey(p, bytes, m.key, sizeof(m.key), flags), ACL_SUCCESS);
    int32_t kp = (int32_t)k.pid;
    if (mode == 0) {
        assert_int_equal(aclrtIpcMemSetImportPid(m.key, &kp, 1), ACL_SUCCESS);
    }
    m.expect = mode == 1 ? ACL_ERROR_RT_NO_PERMISSION : ACL_SUCCESS;
    assert_int_equal(zt_msg_put(k.sock, &m, sizeof(m)), 0);
    char c;
    if (mode == 1) {
        assert_int_equal(zt_msg_get(k.sock, &c, 1), 0);
        assert_int_equal(aclrtIpcMemSetImportPid(m.key, &kp, 1), ACL_SUCCESS);
        assert_int_equal(zt_msg_put(k.sock, &c, 1), 0);
    }
    assert_int_equal(zt_msg_get(k.sock, &c, 1), 0);
    assert_int_equal(check(p, bytes, seed + 1), 0); /* the importer's writes */
    assert_int_equal(zt_kid_wait(k), 0);
    assert_int_equal(aclrtIpcMemClose(m.key), ACL_SUCCESS);
}

static void test_ipc_key_malloc(void **state)
{
    (void)state;
    char *dev = NULL;
    assert_int_equal(aclrtMalloc((void **)&dev, 64 * 1024, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    key_round_trip(dev, 64 * 1024, 51, 0);
    key_round_trip(dev + 4096 + 100, 10000, 52, 0); /* an interior, unaligned range */
    key_round_trip(dev + 8, 4096, 53, 1);
    key_round_trip(dev + 12, 8192, 54, 2);
    assert_int_equal(aclrtFree(dev), ACL_SUCCESS);
}

static void test_ipc_key_vmm(void **state)
{
    (void)state;
    aclrtDrvMemHandle h = zt_phys_alloc(0, HUGE);
    char *va = map_new(h, HUGE);
    assert_non_null(va);
    key_round_trip(va, HUGE, 61, 0);
    key_round_trip(va + HUGE / 2 + 4, 4000, 62, 1);
    assert_int_equal(map_drop(va), 0);
    assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
}

static void test_ipc_key_outlives_exporter(void **state)
{
    (void)state;
    zt_kid_t k = zt_kid_start(kid_export_then_leave, (void *)1);
    char key[ACL_IPC_MEM_KEY_LEN];
    assert_int_equal(zt_msg_get(k.sock, key, sizeof(key)), 0);
    void *p = NULL;
    assert_int_equal(aclrtIpcMemImportByKey(&p, key, 0), ACL_SUCCESS);
    assert_int_equal(check(p, 4 * 4096, 41), 0);
    char c = 'i';
    assert_int_equal(zt_msg_put(k.sock, &c, 1), 0);
    assert_int_equal(zt_msg_get(k.sock, &c, 1), 0); /* closed and freed by the exporter */
    assert_int_equal(check(p, 4 * 4096, 41), 0);
    assert_int_equal(aclrtIpcMemClose(key), ACL_SUCCESS);
    void *q = NULL;
    assert_int_equal(aclrtIpcMemImportByKey(&q, key, 0), ACL_ERROR_RT_IPC_ERROR); /* withdrawn */
    assert_int_equal(aclrtIpcMemImportByKey(&q, key, 0), ACL_ERROR_RT_IPC_ERROR);
    assert_null(q);
    /* Now keep an import open across the exporter's exit. */
    assert_int_equal(zt_msg_put(k.sock, &c, 1), 0);
    assert_int_equal(zt_kid_wait(k), 0);

    zt_kid_t k2 = zt_kid_start(kid_export_then_leave, (void *)1);
    assert_int_equal(zt_msg_get(k2.sock, key, sizeof(key)), 0);
    assert_int_equal(aclrtIpcMemImportByKey(&p, key, 0), ACL_SUCCESS);
    assert_int_equal(zt_msg_put(k2.sock, &c, 1), 0);
    assert_int_equal(zt_msg_get(k2.sock, &c, 1), 0);
    assert_int_equal(zt_msg_put(k2.sock, &c, 1), 0);
    assert_int_equal(zt_kid_wait(k2), 0); /* exporter exited */
    assert_int_equal(check(p, 4 * 4096, 41), 0);
    fill(p, 4 * 4096, 43);
    assert_int_equal(check(p, 4 * 4096, 43), 0);
    assert_int_equal(aclrtIpcMemClose(key), ACL_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_trusted),
        cmocka_unit_test(test_v2_default_trusted),
        cmocka_unit_test(test_v2_fabric_trusted),
        cmocka_unit_test(test_untrusted_refused),
        cmocka_unit_test(test_disable_pid_validation),
        cmocka_unit_test(test_import_outlives_exporter),
        cmocka_unit_test(test_ipc_key_malloc),
        cmocka_unit_test(test_ipc_key_vmm),
        cmocka_unit_test(test_ipc_key_outlives_exporter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
