/*
 * Log sink. The level, subsystem mask and file come from the config table:
 * the config loader hands them over (zc_log_setup) before it prints any
 * warning of its own, so the logger never waits for the finished config and
 * loading never waits for the logger. A log call made before that asks for
 * the config, which runs the loader. Each line is formatted into a local
 * buffer and written with a single write(2), so lines from several threads
 * and processes never mix.
 */
#define _GNU_SOURCE
#include "zc/log.h"

#include "zc/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_int zc_log_ready; /* 1 once zc_log_setup stored the settings below */
static zc_log_level_t zc_log_lvl = ZC_LOG_WARN;
static unsigned zc_log_mask = ZC_SUB_ALL;
static int zc_log_fd = 2;
static char zc_log_host[64] = "?";
static _Thread_local int zc_log_rank = -1;
/* The process's rank: ZC_LOG_RANK_UNSET, the one rank seen so far, or
 * ZC_LOG_RANK_MANY once two different ranks were set in this process. */
#define ZC_LOG_RANK_UNSET (-1)
#define ZC_LOG_RANK_MANY (-2)
static atomic_int zc_log_proc_rank = ZC_LOG_RANK_UNSET;

static const struct {
    const char *name;
    unsigned bit;
} zc_log_subsys_names[] = {
    {"INIT", ZC_SUB_INIT},     {"VMM", ZC_SUB_VMM},       {"MEM", ZC_SUB_MEM},
    {"STREAM", ZC_SUB_STREAM}, {"BROKER", ZC_SUB_BROKER}, {"BOOT", ZC_SUB_BOOT},
    {"COMM", ZC_SUB_COMM},     {"COLL", ZC_SUB_COLL},     {"ZCOPY", ZC_SUB_ZCOPY},
    {"TEST", ZC_SUB_TEST},     {"TOPO", ZC_SUB_TOPO},     {"ALL", ZC_SUB_ALL},
};

static const char *const zc_log_level_names[] = {"none", "error", "warn", "info", "debug"};

int zc_log_parse_level(const char *s, zc_log_level_t *out)
{
    for (int i = 0; i < (int)(sizeof(zc_log_level_names) / sizeof(zc_log_level_names[0])); i++) {
        if (strcasecmp(s, zc_log_level_names[i]) == 0) {
            *out = (zc_log_level_t)i;
            return 0;
        }
    }
    return -1;
}

int zc_log_parse_subsys(const char *s, unsigned *out)
{
    int invert = s[0] == '^';
    unsigned mask = 0;
    char buf[256];
    if (snprintf(buf, sizeof(buf), "%s", s + invert) >= (int)sizeof(buf)) {
        return -1;
    }
    int ntok = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save), ntok++) {
        unsigned bit = 0;
        for (size_t i = 0; i < sizeof(zc_log_subsys_names) / sizeof(zc_log_subsys_names[0]); i++) {
            if (strcasecmp(tok, zc_log_subsys_names[i].name) == 0) {
                bit = zc_log_subsys_names[i].bit;
            }
        }
        if (bit == 0) {
            return -1;
        }
        mask |= bit;
    }
    if (ntok == 0) {
        return -1;
    }
    *out = invert ? ~mask : mask;
    return 0;
}

/* Expand %h and %p of the ZCCL_LOG_FILE pattern into path; -1 when it does not fit. */
static int zc_log_path(const char *pattern, char *path, size_t n)
{
    size_t o = 0;
    for (const char *p = pattern; *p != '\0'; p++) {
        int w = 0;
        if (p[0] == '%' && p[1] == 'h') {
            w = snprintf(path + o, n - o, "%s", zc_log_host);
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            w = snprintf(path + o, n - o, "%d", (int)getpid());
            p++;
        } else {
            w = snprintf(path + o, n - o, "%c", *p);
        }
        if (w < 0 || (size_t)w >= n - o) {
            return -1;
        }
        o += (size_t)w;
    }
    return 0;
}

int zc_log_setup(zc_log_level_t level, unsigned mask, const char *file)
{
    if (atomic_load_explicit(&zc_log_ready, memory_order_acquire)) {
        return 0;
    }
    zc_log_lvl = level;
    zc_log_mask = mask;
    if (gethostname(zc_log_host, sizeof(zc_log_host)) != 0) {
        snprintf(zc_log_host, sizeof(zc_log_host), "?");
    }
    zc_log_host[sizeof(zc_log_host) - 1] = '\0';
    int err = 0;
    char path[512] = "";
    if (file != NULL && file[0] != '\0') {
        int fd = -1;
        if (zc_log_path(file, path, sizeof(path)) != 0) {
            err = ENAMETOOLONG;
        } else if ((fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0) {
            err = errno;
        } else {
            zc_log_fd = fd;
        }
    }
    atomic_store_explicit(&zc_log_ready, 1, memory_order_release);
    return err;
}

static void zc_log_wait_ready(void)
{
    if (!atomic_load_explicit(&zc_log_ready, memory_order_acquire)) {
        (void)zc_config(); /* its loader calls zc_log_setup before it logs anything */
    }
}

int zc_log_enabled(zc_log_level_t level, unsigned subsys)
{
    zc_log_wait_ready();
    return level <= zc_log_lvl && (level == ZC_LOG_ERROR || (subsys & zc_log_mask) != 0);
}

void zc_log_set_rank(int rank)
{
    zc_log_rank = rank;
    if (rank < 0) {
        return;
    }
    int seen = ZC_LOG_RANK_UNSET;
    if (!atomic_compare_exchange_strong_explicit(&zc_log_proc_rank, &seen, rank,
                                                 memory_order_relaxed, memory_order_relaxed) &&
        seen != rank) {
        atomic_store_explicit(&zc_log_proc_rank, ZC_LOG_RANK_MANY, memory_order_relaxed);
    }
}

int zc_log_get_rank(void)
{
    return zc_log_rank;
}

void zc_log_emit(zc_log_level_t level, unsigned subsys, const char *file, int line, const char *fmt,
                 ...)
{
    static const char *const names[] = {"NONE", "ERROR", "WARN", "INFO", "DEBUG"};
    (void)subsys;
    char buf[1024];
    const char *base = strrchr(file, '/');
    base = base != NULL ? base + 1 : file;
    char rank[16];
    int r = zc_log_rank >= 0 ? zc_log_rank
                             : atomic_load_explicit(&zc_log_proc_rank, memory_order_relaxed);
    if (r >= 0) {
        snprintf(rank, sizeof(rank), "%d", r);
    } else {
        snprintf(rank, sizeof(rank), "-");
    }
    int n = snprintf(buf, sizeof(buf), "%s:%d:%ld [%s] zccl %s %s:%d ", zc_log_host, (int)getpid(),
                     (long)syscall(SYS_gettid), rank, names[level], base, line);
    if (n < 0) {
        return;
    }
    if ((size_t)n < sizeof(buf)) {
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
        va_end(ap);
        if (m > 0) {
            n += m;
        }
    }
    if ((size_t)n >= sizeof(buf) - 1) {
        n = (int)sizeof(buf) - 2;
    }
    buf[n++] = '\n';
    ssize_t w = write(zc_log_fd, buf, (size_t)n);
    (void)w;
}
