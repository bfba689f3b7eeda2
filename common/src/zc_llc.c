/*
 * The last-level cache's size from sysfs: of the caches listed for one CPU
 * (index0, index1, ...), the data or unified cache of the highest level.
 * Sizes read "32768K" (the kernel's form), "32M" or plain bytes. Anything
 * unreadable or malformed is skipped, so the answer is 0 (unknown) rather
 * than a wrong size.
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

uint64_t zc_llc_bytes_at(const char *root, int cpu)
{
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
        uint64_t bytes = zc_llc_parse_size(size);
        if (strcmp(type, "Instruction") == 0 || lv <= 0 || bytes == 0) {
            continue;
        }
        if (lv > best_level || (lv == best_level && bytes > best)) {
            best_level = lv;
            best = bytes;
        }
    }
    return best;
}

static pthread_once_t zc_llc_once = PTHREAD_ONCE_INIT;
static uint64_t zc_llc_cached;

static void zc_llc_load(void)
{
    int cpu = sched_getcpu();
    zc_llc_cached = zc_llc_bytes_at("/sys/devices/system/cpu", cpu >= 0 ? cpu : 0);
}

uint64_t zc_llc_bytes(void)
{
    pthread_once(&zc_llc_once, zc_llc_load); /* every comm init asks; sysfs is read once */
    return zc_llc_cached;
}
