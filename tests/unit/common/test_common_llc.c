/*
 * The last-level cache's size from sysfs (common/zc_llc.c), read from trees
 * the test writes: the highest-level data or unified cache wins, sizes in
 * the kernel's forms, missing or malformed entries skipped (0 = unknown).
 * The CPUs sharing that cache and the cap per CPU (a VM's report of its
 * host's whole cache). And the window it sets (coll_nt_min_for_llc): half the cache, floored at
 * 1 MiB, 16 MiB when unknown.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coll/coll.h"
#include "zc/llc.h"

static char llc_root[256];

static void llc_mkdirs(const char *path)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            (void)mkdir(buf, 0755);
            *p = '/';
        }
    }
    (void)mkdir(buf, 0755);
}

/* cpuN/cache/indexK with the given files (NULL: the file is absent). */
static void llc_index(int cpu, int k, const char *level, const char *type, const char *size)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/cpu%d/cache/index%d", llc_root, cpu, k);
    llc_mkdirs(dir);
    const char *names[3] = {"level", "type", "size"};
    const char *vals[3] = {level, type, size};
    for (int i = 0; i < 3; i++) {
        if (vals[i] == NULL) {
            continue;
        }
        char path[600];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "%s\n", vals[i]);
        fclose(f);
    }
}

static int llc_setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    snprintf(llc_root, sizeof(llc_root), "%s/zt-llc-XXXXXX", tmp);
    return mkdtemp(llc_root) == NULL ? -1 : 0;
}

static int llc_teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", llc_root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_typical_tree(void **state)
{
    (void)state;
    llc_index(0, 0, "1", "Data", "32K");
    llc_index(0, 1, "1", "Instruction", "32K");
    llc_index(0, 2, "2", "Unified", "512K");
    llc_index(0, 3, "3", "Unified", "32768K");
    assert_int_equal(zc_llc_bytes_at(llc_root, 0), (uint64_t)32 << 20);
}

static void test_forms_and_gaps(void **state)
{
    (void)state;
    /* Indexes need not be dense; "M" and plain bytes are sizes too. */
    llc_index(1, 0, "1", "Data", "49152");
    llc_index(1, 2, "2", "Unified", "2M");
    assert_int_equal(zc_llc_bytes_at(llc_root, 1), (uint64_t)2 << 20);
    /* A higher level that is an instruction cache or malformed is skipped. */
    llc_index(1, 3, "3", "Instruction", "64M");
    llc_index(1, 4, "3", "Unified", "12Q");
    llc_index(1, 5, "4", "Unified", "-1K");
    llc_index(1, 6, "x", "Unified", "8M");
    llc_index(1, 7, "3", "Unified", NULL);
    assert_int_equal(zc_llc_bytes_at(llc_root, 1), (uint64_t)2 << 20);
    /* Two caches of the top level: the larger. */
    llc_index(1, 8, "3", "Unified", "16M");
    llc_index(1, 9, "3", "Data", "24M");
    assert_int_equal(zc_llc_bytes_at(llc_root, 1), (uint64_t)24 << 20);
}

static void test_unknown(void **state)
{
    (void)state;
    assert_int_equal(zc_llc_bytes_at(llc_root, 7), 0); /* no such CPU */
    assert_int_equal(zc_llc_bytes_at("/nonexistent-zccl", 0), 0);
    llc_index(2, 0, "1", "Data", "");
    llc_index(2, 1, "2", "Unified", "K");
    llc_index(2, 2, "2", "Unified", "99999999999999999999K");
    assert_int_equal(zc_llc_bytes_at(llc_root, 2), 0);
    /* This machine's answer is whatever its kernel says, but never garbage:
     * 0 or a size a cache can have. */
    uint64_t here = zc_llc_bytes();
    assert_true(here == 0 || (here >= 4096 && here <= ((uint64_t)1 << 40)));
}

/* Writes cpuN/cache/indexK/shared_cpu_list. */
static void llc_shared(int cpu, int k, const char *list)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/cpu%d/cache/index%d/shared_cpu_list", llc_root, cpu, k);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", list);
    fclose(f);
}

static void test_sharing_and_cap(void **state)
{
    (void)state;
    /* The CPUs sharing the top cache, not a lower one's. */
    llc_index(3, 0, "2", "Unified", "2M");
    llc_index(3, 1, "3", "Unified", "491520K");
    llc_shared(3, 0, "3");
    assert_int_equal(zc_llc_cpus_at(llc_root, 3), 0); /* the L3 lists none yet */
    llc_shared(3, 1, "0-1");
    assert_int_equal(zc_llc_cpus_at(llc_root, 3), 2);
    llc_shared(3, 1, "0-3,8,10-11");
    assert_int_equal(zc_llc_cpus_at(llc_root, 3), 7);
    const char *bad[] = {"", "x", "3-1", "1,,2", "0-", "-1", "1 2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        llc_shared(3, 1, bad[i]);
        assert_int_equal(zc_llc_cpus_at(llc_root, 3), 0);
    }
    assert_int_equal(zc_llc_cpus_at(llc_root, 7), 0); /* no such CPU */
    /* A 2-CPU guest told of a 480 MiB cache counts on 24 MiB; a real
     * 32 MiB cache of 8 cores (16 threads) or 96 MiB of 8 is kept. */
    assert_int_equal(zc_llc_cap((uint64_t)480 << 20, 2), (uint64_t)24 << 20);
    assert_int_equal(zc_llc_cap((uint64_t)32 << 20, 16), (uint64_t)32 << 20);
    assert_int_equal(zc_llc_cap((uint64_t)96 << 20, 8), (uint64_t)96 << 20);
    assert_int_equal(zc_llc_cap((uint64_t)97 << 20, 8), (uint64_t)96 << 20);
    assert_int_equal(zc_llc_cap((uint64_t)480 << 20, 0), (uint64_t)480 << 20);
    assert_int_equal(zc_llc_cap(0, 2), 0);
    /* This machine: the capped size never exceeds the reported one. */
    assert_true(zc_llc_bytes() <= zc_llc_reported_bytes());
}

static void test_nt_min(void **state)
{
    (void)state;
    assert_int_equal(coll_nt_min_for_llc((uint64_t)32 << 20), (size_t)16 << 20);
    assert_int_equal(coll_nt_min_for_llc((uint64_t)96 << 20), (size_t)48 << 20);
    assert_int_equal(coll_nt_min_for_llc((uint64_t)1 << 20), (size_t)1 << 20);
    assert_int_equal(coll_nt_min_for_llc(512 << 10), (size_t)1 << 20);
    assert_int_equal(coll_nt_min_for_llc(0), (size_t)16 << 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_typical_tree), cmocka_unit_test(test_forms_and_gaps),
        cmocka_unit_test(test_unknown),      cmocka_unit_test(test_sharing_and_cap),
        cmocka_unit_test(test_nt_min),
    };
    return cmocka_run_group_tests(tests, llc_setup, llc_teardown);
}
