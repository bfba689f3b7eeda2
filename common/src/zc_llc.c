/*
 * The last-level cache's size from sysfs: of the caches listed for one CPU
 * (index0, index1, ...), the data or unified cache of the highest level.
 * Sizes read "32768K" (the kernel's form), "32M" or plain bytes. Anything
 * unreadable or malformed is skipped, so the answer is 0 (unknown) rather
 * than a wrong size.
 *
 * The size a rank counts on is capped at ZC_LLC_PER_CPU_MAX per CPU that
 * shares the cache (its shared_cpu_list). A virtual machine reports its
 * host's whole cache (a 2-vCPU guest was told of a 480 MiB L3), of which
 * its CPUs hold a share only; no CPU on sale has more than the cap per
 * CPU except parts with few cores on a very large cache, where the cap
 * under-counts and the store-kind trial around the cap corrects it.
 */
#define _GNU_SOURCE
#include "zc/llc.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZC_LLC_MAX_INDEX 16

/* First line of root/cpuN/cache/indexK/name into buf, without its newline;
 * 0, or -1 when it cannot be read. */
static int zc_llc_read(const char *root, int cpu, int index, const char *name, char *buf, size_t n)
{
    char path[512];
    int len = snprintf(path, sizeof(path), "%s/cpu%d/cache/index%d/%s", root, cpu, index, name);
    if (len < 0 || (size_t)len >= sizeof(path)) {
        return -1;
    }
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    char *got = fgets(buf, (int)n, f);
    fclose(f);
    if (got == NULL) {
        return -1;
    }
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* "32768K", "32M", "1G" or "4096" in bytes; 0 when malformed. */
static uint64_t zc_llc_parse_size(const char *s)
{
    char *end = NULL;
    if (*s < '0' || *s > '9') {
        return 0;
    }
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    switch (*end) {
    case '\0':
        break;
    case 'K':
        shift = 10;
        end++;
        break;
    case 'M':
        shift = 20;
        end++;
        break;
    case 'G':
        shift = 30;
        end++;
        break;
    default:
        return 0;
    }
    if (*end != '\0' || v > (UINT64_MAX >> shift)) {
        return 0;
    }
    return (uint64_t)v << shift;
}

/* The index of the highest-level data or unified cache of `cpu` (its size
 * in *bytes), or -1 when there is none. */
static int zc_llc_top_index(const char *root, int cpu, uint64_t *bytes)
{
    int top = -1;
    uint64_t best = 0;
    long best_level = 0;
    for (int k = 0; k < ZC_LLC_MAX_INDEX; k++) {
        char level[32], type[32], size[32];
        if (zc_llc_read(root, cpu, k, "level", level, sizeof(level)) != 0 ||
            zc_llc_read(root, cpu, k, "type", type, sizeof(type)) != 0 ||
            zc_llc_read(root, cpu, k, "size", size, sizeof(size)) != 0) {
            continue; /* indexes need not be dense */
        }
        long lv = strtol(level, NULL, 10);
        uint64_t sz = zc_llc_parse_size(size);
        if (strcmp(type, "Instruction") == 0 || lv <= 0 || sz == 0) {
            continue;
        }
        if (lv > best_level || (lv == best_level && sz > best)) {
            best_level = lv;
            best = sz;
            top = k;
        }
    }
    *bytes = best;
    return top;
}

uint64_t zc_llc_bytes_at(const char *root, int cpu)
{
    uint64_t bytes = 0;
    (void)zc_llc_top_index(root, cpu, &bytes);
    return bytes;
}

/* CPUs in a list such as "0-3,8,10-11"; 0 when malformed. */
static int zc_llc_count_cpus(const char *s)
{
    int n = 0;
    while (*s != '\0') {
        char *end = NULL;
        long lo = strtol(s, &end, 10);
        long hi = lo;
        if (end == s || lo < 0) {
            return 0;
        }
        if (*end == '-') {
            s = end + 1;
            hi = strtol(s, &end, 10);
            if (end == s || hi < lo) {
                return 0;
            }
        }
        n += (int)(hi - lo + 1);
        if (*end == ',') {
            end++;
        } else if (*end != '\0') {
            return 0;
        }
        s = end;
    }
    return n;
}

int zc_llc_cpus_at(const char *root, int cpu)
{
    uint64_t bytes = 0;
    int k = zc_llc_top_index(root, cpu, &bytes);
    char list[4096];
    if (k < 0 || zc_llc_read(root, cpu, k, "shared_cpu_list", list, sizeof(list)) != 0) {
        return 0;
    }
    return zc_llc_count_cpus(list);
}

uint64_t zc_llc_cap(uint64_t bytes, int cpus)
{
    if (cpus <= 0 || bytes / (uint64_t)cpus <= ZC_LLC_PER_CPU_MAX) {
        return bytes;
    }
    return (uint64_t)cpus * ZC_LLC_PER_CPU_MAX;
}

static pthread_once_t zc_llc_once = PTHREAD_ONCE_INIT;
static uint64_t zc_llc_reported_cached;
static uint64_t zc_llc_cached;

static void zc_llc_load(void)
{
    const char *root = "/sys/devices/system/cpu";
    int cpu = sched_getcpu();
    cpu = cpu >= 0 ? cpu : 0;
    zc_llc_reported_cached = zc_llc_bytes_at(root, cpu);
    zc_llc_cached = zc_llc_cap(zc_llc_reported_cached, zc_llc_cpus_at(root, cpu));
}

uint64_t zc_llc_bytes(void)
{
    pthread_once(&zc_llc_once, zc_llc_load); /* every comm init asks; sysfs is read once */
    return zc_llc_cached;
}

uint64_t zc_llc_reported_bytes(void)
{
    pthread_once(&zc_llc_once, zc_llc_load);
    return zc_llc_reported_cached;
}
