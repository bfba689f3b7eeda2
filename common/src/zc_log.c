/*
 * Log sink. The level, subsystem mask and file are taken from the config
 * table once; each line is formatted into a local buffer and written with a
 * single write(2), so lines from several threads and processes never mix.
 */
#define _GNU_SOURCE
#include "zc/log.h"

#include "zc/config.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_once_t zc_log_once = PTHREAD_ONCE_INIT;
static zc_log_level_t zc_log_lvl = ZC_LOG_WARN;
static unsigned zc_log_mask = ZC_SUB_ALL;
static int zc_log_fd = 2;
static char zc_log_host[64] = "?";
static _Thread_local int zc_log_rank = -1;

static const struct {
    const char *name;
    unsigned bit;
} zc_log_subsys_names[] = {
    {"INIT", ZC_SUB_INIT},     {"VMM", ZC_SUB_VMM},   {"MEM", ZC_SUB_MEM},
    {"STREAM", ZC_SUB_STREAM}, {"BROKER", ZC_SUB_BROKER}, {"BOOT", ZC_SUB_BOOT},
    {"COMM", ZC_SUB_COMM},     {"COLL", ZC_SUB_COLL}, {"ZCOPY", ZC_SUB_ZCOPY},
    {"TEST", ZC_SUB_TEST},     {"ALL", ZC_SUB_ALL},
};

static unsigned zc_log_parse_mask(const char *s)
{
    int invert = 0;
    unsigned mask = 0;
    char buf[256];
    if (s[0] == '^') {
        invert = 1;
        s++;
    }
    snprintf(buf, sizeof(buf), "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        for (size_t i = 0; i < sizeof(zc_log_subsys_names) / sizeof(zc_log_subsys_names[0]);
             i++) {
            if (strcasecmp(tok, zc_log_subsys_names[i].name) == 0) {
                mask |= zc_log_subsys_names[i].bit;
            }
        }
    }
    if (mask == 0 && !invert) {
        mask = ZC_SUB_ALL;
    }
    return invert ? ~mask : mask;
}

static void zc_log_init(void)
{
    const zc_config_t *cfg = zc_config();
    const char *lv = cfg->log_level;
    if (strcasecmp(lv, "error") == 0) {
        zc_log_lvl = ZC_LOG_ERROR;
    } else if (strcasecmp(lv, "info") == 0) {
        zc_log_lvl = ZC_LOG_INFO;
    } else if (strcasecmp(lv, "debug") == 0 || strcasecmp(lv, "trace") == 0) {
        zc_log_lvl = ZC_LOG_DEBUG;
    } else if (strcasecmp(lv, "none") == 0 || strcasecmp(lv, "off") == 0) {
        zc_log_lvl = ZC_LOG_NONE;
    } else {
        zc_log_lvl = ZC_LOG_WARN;
    }
    zc_log_mask = zc_log_parse_mask(cfg->log_subsys);
    if (gethostname(zc_log_host, sizeof(zc_log_host)) != 0) {
        snprintf(zc_log_host, sizeof(zc_log_host), "?");
    }
    zc_log_host[sizeof(zc_log_host) - 1] = '\0';
    if (cfg->log_file[0] != '\0') {
        char path[512];
        size_t o = 0;
        for (const char *p = cfg->log_file; *p != '\0' && o + 32 < sizeof(path); p++) {
            if (p[0] == '%' && p[1] == 'h') {
                o += (size_t)snprintf(path + o, sizeof(path) - o, "%s", zc_log_host);
                p++;
            } else if (p[0] == '%' && p[1] == 'p') {
                o += (size_t)snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());
                p++;
            } else {
                path[o++] = *p;
            }
        }
        path[o] = '\0';
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            zc_log_fd = fd;
        }
    }
}

zc_log_level_t zc_log_level(void)
{
    pthread_once(&zc_log_once, zc_log_init);
    return zc_log_lvl;
}

int zc_log_enabled(zc_log_level_t level, unsigned subsys)
{
    pthread_once(&zc_log_once, zc_log_init);
    return level <= zc_log_lvl && (level == ZC_LOG_ERROR || (subsys & zc_log_mask) != 0);
}

void zc_log_set_rank(int rank) { zc_log_rank = rank; }
int zc_log_get_rank(void) { return zc_log_rank; }

void zc_log_emit(zc_log_level_t level, unsigned subsys, const char *file, int line,
                 const char *fmt, ...)
{
    static const char *const names[] = {"NONE", "ERROR", "WARN", "INFO", "DEBUG"};
    (void)subsys;
    char buf[1024];
    const char *base = strrchr(file, '/');
    base = base != NULL ? base + 1 : file;
    char rank[16];
    if (zc_log_rank >= 0) {
        snprintf(rank, sizeof(rank), "%d", zc_log_rank);
    } else {
        snprintf(rank, sizeof(rank), "-");
    }
    int n = snprintf(buf, sizeof(buf), "%s:%d:%ld [%s] zccl %s %s:%d ", zc_log_host,
                     (int)getpid(), (long)syscall(SYS_gettid), rank, names[level], base, line);
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
