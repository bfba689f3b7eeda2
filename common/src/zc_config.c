/*
 * The environment table of zc/config.h, read once per process.
 * Values out of range or unparsable keep the default and log a warning.
 */
#define _GNU_SOURCE
#include "zc/config.h"

#include "zc/log.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern char **environ;

static zc_config_t zc_cfg;
static pthread_once_t zc_cfg_once = PTHREAD_ONCE_INIT;

typedef struct {
    const char *name;
    zc_cfg_type_t type;
    size_t offset;
    const char *def;
    uint64_t min;
    uint64_t max;
    const char *help;
} zc_cfg_entry_t;

static const zc_cfg_entry_t zc_cfg_entries[] = {
#define ZC_CFG_ENTRY(name, type, field, def, mn, mx, help)                                     \
    {#name, type, offsetof(zc_config_t, field), def, (uint64_t)(mn), (uint64_t)(mx), help},
    ZC_CONFIG_TABLE(ZC_CFG_ENTRY)
#undef ZC_CFG_ENTRY
};

#define ZC_CFG_N (sizeof(zc_cfg_entries) / sizeof(zc_cfg_entries[0]))

static int zc_cfg_parse_bool(const char *s, int *out)
{
    if (strcmp(s, "1") == 0 || strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0 ||
        strcasecmp(s, "on") == 0) {
        *out = 1;
        return 0;
    }
    if (strcmp(s, "0") == 0 || strcasecmp(s, "false") == 0 || strcasecmp(s, "no") == 0 ||
        strcasecmp(s, "off") == 0) {
        *out = 0;
        return 0;
    }
    return -1;
}

static int zc_cfg_parse_uint(const char *s, uint64_t mn, uint64_t mx, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    if (s[0] == '-' || s[0] == '\0') {
        return -1;
    }
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || v < mn || v > mx) {
        return -1;
    }
    *out = v;
    return 0;
}

/* Store one value; returns -1 when the text does not parse (the caller warns). */
static int zc_cfg_store(const zc_cfg_entry_t *e, const char *text)
{
    char *field = (char *)&zc_cfg + e->offset;
    switch (e->type) {
    case ZC_CFG_UINT:
        return zc_cfg_parse_uint(text, e->min, e->max, (uint64_t *)(void *)field);
    case ZC_CFG_BOOL:
        return zc_cfg_parse_bool(text, (int *)(void *)field);
    case ZC_CFG_STR: {
        size_t len = strlen(text);
        if (len >= sizeof(zc_cfg.if_ip)) {
            return -1;
        }
        memcpy(field, text, len + 1);
        return 0;
    }
    }
    return -1;
}

static void zc_cfg_load(void)
{
    /* Defaults first: they always parse. Warnings are deferred until the
     * whole table (including the log settings) is in place. */
    const char *bad[ZC_CFG_N];
    size_t nbad = 0;
    for (size_t i = 0; i < ZC_CFG_N; i++) {
        (void)zc_cfg_store(&zc_cfg_entries[i], zc_cfg_entries[i].def);
    }
    for (size_t i = 0; i < ZC_CFG_N; i++) {
        const char *v = getenv(zc_cfg_entries[i].name);
        if (v != NULL && zc_cfg_store(&zc_cfg_entries[i], v) != 0) {
            (void)zc_cfg_store(&zc_cfg_entries[i], zc_cfg_entries[i].def);
            bad[nbad++] = zc_cfg_entries[i].name;
        }
    }
    for (size_t i = 0; i < nbad; i++) {
        const zc_cfg_entry_t *e = NULL;
        for (size_t j = 0; j < ZC_CFG_N; j++) {
            if (strcmp(zc_cfg_entries[j].name, bad[i]) == 0) {
                e = &zc_cfg_entries[j];
            }
        }
        ZC_WARN(ZC_SUB_INIT, "environment %s=\"%s\" is invalid (range %llu..%llu); using %s",
                bad[i], getenv(bad[i]), (unsigned long long)e->min, (unsigned long long)e->max,
                e->def);
    }
}

static void zc_cfg_check_unknown(void)
{
    for (char **env = environ; env != NULL && *env != NULL; env++) {
        const char *kv = *env;
        if (strncmp(kv, "ZCCL_", 5) != 0) {
            continue;
        }
        const char *eq = strchr(kv, '=');
        size_t len = eq != NULL ? (size_t)(eq - kv) : strlen(kv);
        int known = 0;
        for (size_t i = 0; i < ZC_CFG_N; i++) {
            if (strlen(zc_cfg_entries[i].name) == len &&
                strncmp(zc_cfg_entries[i].name, kv, len) == 0) {
                known = 1;
            }
        }
        if (!known) {
            ZC_WARN(ZC_SUB_INIT, "environment variable %.*s is not a zccl setting (misspelt?)",
                    (int)len, kv);
        }
    }
}

static void zc_cfg_init(void)
{
    zc_cfg_load();
    zc_cfg_check_unknown();
    if (zc_cfg.print_config) {
        zc_config_print(stderr, 0);
    }
}

const zc_config_t *zc_config(void)
{
    pthread_once(&zc_cfg_once, zc_cfg_init);
    return &zc_cfg;
}

static void zc_cfg_value(const zc_cfg_entry_t *e, const zc_config_t *cfg, char *buf, size_t n)
{
    const char *field = (const char *)cfg + e->offset;
    switch (e->type) {
    case ZC_CFG_UINT:
        snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)(const void *)field);
        break;
    case ZC_CFG_BOOL:
        snprintf(buf, n, "%s", *(const int *)(const void *)field ? "true" : "false");
        break;
    case ZC_CFG_STR:
        snprintf(buf, n, "%s", field);
        break;
    }
}

void zc_config_print(FILE *out, int markdown)
{
    if (markdown) {
        fprintf(out, "| variable | default | meaning |\n|---|---|---|\n");
        for (size_t i = 0; i < ZC_CFG_N; i++) {
            const zc_cfg_entry_t *e = &zc_cfg_entries[i];
            fprintf(out, "| `%s` | `%s` | %s |\n", e->name, e->def[0] ? e->def : "(empty)",
                    e->help);
        }
        return;
    }
    const zc_config_t *cfg = &zc_cfg;
    fprintf(out, "zccl configuration:\n");
    for (size_t i = 0; i < ZC_CFG_N; i++) {
        char val[300];
        zc_cfg_value(&zc_cfg_entries[i], cfg, val, sizeof(val));
        fprintf(out, "  %-24s = %-12s  # %s\n", zc_cfg_entries[i].name, val,
                zc_cfg_entries[i].help);
    }
}
