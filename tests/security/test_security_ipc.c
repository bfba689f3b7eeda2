/*
 * IPC keys hand out only what was exported (label security).
 *
 * The parent allocates a 64 KB aclrtMalloc block with a known pattern and
 * exports the 1000 bytes at offset 4196 to a trusted importer (on the allow
 * list). The importer edits the key's offset and size fields (the whole
 * allocation, one byte more, 100 bytes earlier, offset 0 with the right
 * size): every edited key must be refused with ACL_ERROR_INVALID_PARAM (by
 * the exporter's broker: no fd is handed out), and so must a plain broker
 * fetch of the key's token that bypasses the IPC calls; the exact key imports, shows the exported
 * bytes, and is mapped over the one page the range touches (checked in /proc/self/maps). Then the
 * exporter frees the block without closing the key: a new import must fail with
 * ACL_ERROR_RT_IPC_ERROR, the importer's earlier mapping keeps its bytes,
 * SetImportPid on the key is refused, and aclrtIpcMemClose still succeeds.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "zc/status.h"
#include "zccl/vmm_ext.h"
#include "zs_common.h"

#define ZS_BLOCK 65536
#define ZS_OFF 4196
#define ZS_SIZE 1000

static unsigned char zs_pattern(size_t i)
{
    return (unsigned char)((i * 7u) ^ 0x5c);
}

/* The key with its offset and size fields replaced. */
static void zs_key_edit(const char *key, unsigned long long off, unsigned long long size, char *out)
{
    unsigned long long t = 0;
    unsigned long long o = 0;
    unsigned long long s = 0;
    (void)sscanf(key, "zccl-ipc:%16llx:%16llx:%16llx", &t, &o, &s);
    snprintf(out, ACL_IPC_MEM_KEY_LEN, "zccl-ipc:%016llx:%016llx:%016llx", t, off, size);
}

/* Length of the mapping that starts at the page of p (from /proc/self/maps). */
static size_t zs_map_len(const void *p)
{
    uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095;
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    size_t len = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo = 0;
        unsigned long hi = 0;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo == page) {
            len = hi - lo;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return len;
}

typedef struct {
    int32_t edited[4]; /* codes of the four edited keys */
    int32_t raw_fetch; /* a plain broker fetch of the key's token (the whole fd) */
    int32_t exact;
    int32_t content_ok;
    int64_t map_len;
    int32_t after_free;
    int32_t kept_ok; /* the earlier mapping still shows the bytes after the free */
} zs_ipc_report_t;

static int zs_importer_kid(int sock, void *arg)
{
    (void)arg;
    char key[ACL_IPC_MEM_KEY_LEN];
    ZT_KCHECK(zt_msg_get(sock, key, sizeof(key)) == 0);
    ZT_KCHECK(aclInit(NULL) == ACL_SUCCESS && aclrtSetDevice(0) == ACL_SUCCESS);
    zs_ipc_report_t rep;
    memset(&rep, 0, sizeof(rep));
    const unsigned long long edits[4][2] = {
        {0, ZS_BLOCK}, {ZS_OFF, ZS_SIZE + 1}, {ZS_OFF - 100, ZS_SIZE}, {0, ZS_SIZE}};
    for (int i = 0; i < 4; i++) {
        char bad[ACL_IPC_MEM_KEY_LEN];
        zs_key_edit(key, edits[i][0], edits[i][1], bad);
        void *p = NULL;
        rep.edited[i] = (int32_t)aclrtIpcMemImportByKey(&p, bad, 0);
    }
    /* Bypassing the library: ask the broker for the whole fd of the token. */
    unsigned long long token = 0;
    ZT_KCHECK(sscanf(key, "zccl-ipc:%16llx:", &token) == 1);
    int rfd = -1;
    size_t rsize = 0;
    rep.raw_fetch = zccl_broker_fetch(token, &rfd, &rsize);
    ZT_KCHECK(rfd == -1);
    unsigned char *p = NULL;
    rep.exact = (int32_t)aclrtIpcMemImportByKey((void **)&p, key, 0);
    if (rep.exact == ACL_SUCCESS) {
        rep.content_ok = 1;
        for (size_t i = 0; i < ZS_SIZE; i++) {
            rep.content_ok &= p[i] == zs_pattern(ZS_OFF + i);
        }
        rep.map_len = (int64_t)zs_map_len(p);
    }
    ZT_KCHECK(zt_msg_put(sock, &rep, sizeof(rep)) == 0);
    char freed;
    ZT_KCHECK(zt_msg_get(sock, &freed, 1) == 0); /* the exporter freed the block */
    rep.kept_ok = rep.exact == ACL_SUCCESS;
    for (size_t i = 0; rep.kept_ok && i < ZS_SIZE; i++) {
        rep.kept_ok &= p[i] == zs_pattern(ZS_OFF + i);
    }
    /* Drop our import (a second one would share it), then ask again. */
    if (rep.exact == ACL_SUCCESS) {
        ZT_KCHECK(aclrtIpcMemClose(key) == ACL_SUCCESS);
    }
    void *q = NULL;
    rep.after_free = (int32_t)aclrtIpcMemImportByKey(&q, key, 0);
    ZT_KCHECK(zt_msg_put(sock, &rep, sizeof(rep)) == 0);
    return 0;
}

static void test_ipc_range_and_free(void **state)
{
    (void)state;
    zt_kid_t k = zt_kid_start(zs_importer_kid, NULL);
    assert_int_equal(aclInit(NULL), ACL_SUCCESS);
    assert_int_equal(aclrtSetDevice(0), ACL_SUCCESS);
    unsigned char *blk = NULL;
    assert_int_equal(aclrtMalloc((void **)&blk, ZS_BLOCK, ACL_MEM_MALLOC_HUGE_FIRST), 0);
    for (size_t i = 0; i < ZS_BLOCK; i++) {
        blk[i] = zs_pattern(i);
    }
    char key[ACL_IPC_MEM_KEY_LEN];
    assert_int_equal(aclrtIpcMemGetExportKey(blk + ZS_OFF, ZS_SIZE, key, sizeof(key), 0),
                     ACL_SUCCESS);
    int32_t pid = k.pid;
    assert_int_equal(aclrtIpcMemSetImportPid(key, &pid, 1), ACL_SUCCESS);
    assert_int_equal(zt_msg_put(k.sock, key, sizeof(key)), 0);
    zs_ipc_report_t r1;
    zs_ipc_report_t r2;
    assert_int_equal(zt_msg_get(k.sock, &r1, sizeof(r1)), 0);
    /* Freed before aclrtIpcMemClose: the key is withdrawn. */
    assert_int_equal(aclrtFree(blk), ACL_SUCCESS);
    assert_int_equal(zt_msg_put(k.sock, "f", 1), 0);
    assert_int_equal(zt_msg_get(k.sock, &r2, sizeof(r2)), 0);
    assert_int_equal(zt_kid_wait(k), 0);
    aclError setpid = aclrtIpcMemSetImportPid(key, &pid, 1);
    aclError close_rc = aclrtIpcMemClose(key);
    printf("ipc: exported %d bytes at offset %d of a %d-byte block; edited keys -> %d %d %d %d; "
           "plain broker fetch of its token -> %d; "
           "exact key -> %d (content %s, mapped %lld bytes); after aclrtFree: import -> %d, "
           "earlier mapping %s, SetImportPid -> %d, Close -> %d\n",
           ZS_SIZE, ZS_OFF, ZS_BLOCK, r1.edited[0], r1.edited[1], r1.edited[2], r1.edited[3],
           r1.raw_fetch, r1.exact, r1.content_ok ? "ok" : "WRONG", (long long)r1.map_len,
           r2.after_free, r2.kept_ok ? "intact" : "WRONG", (int)setpid, (int)close_rc);
    fflush(stdout);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(r1.edited[i], ACL_ERROR_INVALID_PARAM);
    }
    assert_int_equal(r1.raw_fetch, ZC_ERR_INVAL);
    assert_int_equal(r1.exact, ACL_SUCCESS);
    assert_int_equal(r1.content_ok, 1);
    assert_int_equal(r1.map_len, 4096); /* [4196, 5196) lies in one page */
    assert_int_equal(r2.after_free, ACL_ERROR_RT_IPC_ERROR);
    assert_int_equal(r2.kept_ok, 1);
    assert_int_equal(setpid, ACL_ERROR_INVALID_PARAM);
    assert_int_equal(close_rc, ACL_SUCCESS);
    assert_int_equal(aclrtIpcMemClose(key), ACL_ERROR_INVALID_PARAM); /* closed now */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipc_range_and_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
