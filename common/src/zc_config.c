/*
 * The environment table of zc/config.h, read once per process.
 *
 * Loading: defaults, then each set variable parsed by its kind and checked
 * against its range (a bad one keeps the default and is remembered), then
 * the logger is put in service with the log settings just loaded, and only
 * then are the warnings printed: one per bad value, one per unknown ZCCL_
 * name. Nothing in here logs before zc_log_setup, so a warning can never
 * wait on the one-time init that raised it.
 */
#define _GNU_SOURCE
#include "zc/config.h"

#include "zc/export.h"
#include "zc/log.h"

#include <arpa/inet.h>
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
#define ZC_CFG_ENTRY(name, type, field, def, mn, mx, help)                                         \
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

/* Decimal digits only (no sign, blanks, hex or octal), without overflow, in mn..mx. */
static int zc_cfg_parse_uint(const char *s, uint64_t mn, uint64_t mx, uint64_t *out)
{
    uint64_t v = 0;
    if (s[0] == '\0') {
        return -1;
    }
    for (const char *p = s; *p != '\0'; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) {
            return -1;
        }
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v < mn || v > mx) {
        return -1;
    }
    *out = v;
    return 0;
}

/* Is text a valid value of a string kind? */
static int zc_cfg_text_ok(const zc_cfg_entry_t *e, const char *text)
{
    size_t len = strlen(text);
    zc_log_level_t lv;
    unsigned mask;
    struct in_addr a;
    if (len > ZC_CFG_STR_MAX) {
        return 0;
    }
    switch (e->type) {
    case ZC_CFG_STR:
    case ZC_CFG_SECRET:
        return len >= e->min && len <= e->max;
    case ZC_CFG_IPV4:
        return len == 0 || inet_pton(AF_INET, text, &a) == 1;
    case ZC_CFG_LEVEL:
        return zc_log_parse_level(text, &lv) == 0;
    case ZC_CFG_SUBSYS:
        return zc_log_parse_subsys(text, &mask) == 0;
    default:
        return 0;
    }
}

/* Store one value; -1 when the text is not a valid value (the caller warns). */
static int zc_cfg_store(const zc_cfg_entry_t *e, const char *text)
{
    char *field = (char *)&zc_cfg + e->offset;
    switch (e->type) {
    case ZC_CFG_UINT:
        return zc_cfg_parse_uint(text, e->min, e->max, (uint64_t *)(void *)field);
    case ZC_CFG_BOOL:
        return zc_cfg_parse_bool(text, (int *)(void *)field);
    default:
        if (!zc_cfg_text_ok(e, text)) {
            return -1;
        }
        memcpy(field, text, strlen(text) + 1);
        return 0;
    }
}

/* What values an entry takes, in words (warnings and the README's table). */
static void zc_cfg_range(const zc_cfg_entry_t *e, char *buf, size_t n)
{
    switch (e->type) {
    case ZC_CFG_UINT:
        snprintf(buf, n, "%llu..%llu", (unsigned long long)e->min, (unsigned long long)e->max);
        break;
    case ZC_CFG_BOOL:
        snprintf(buf, n, "true/false, 1/0, yes/no, on/off");
        break;
    case ZC_CFG_STR:
        snprintf(buf, n, "text of at most %llu bytes", (unsigned long long)e->max);
        break;
    case ZC_CFG_SECRET:
        snprintf(buf, n, "text of at most %llu bytes (never printed)", (unsigned long long)e->max);
        break;
    case ZC_CFG_IPV4:
        snprintf(buf, n, "a dotted IPv4 address");
        break;
    case ZC_CFG_LEVEL:
        snprintf(buf, n, "%s", ZC_LOG_LEVEL_NAMES);
        break;
    case ZC_CFG_SUBSYS:
        snprintf(buf, n, "comma list of %s; leading ^ inverts", ZC_LOG_SUBSYS_NAMES);
        break;
    }
}

static void zc_cfg_warn_bad(const zc_cfg_entry_t *e, const char *value)
{
    char range[160];
    zc_cfg_range(e, range, sizeof(range));
    if (e->type == ZC_CFG_SECRET) {
        value = "(not shown)";
    }
    ZC_WARN(ZC_SUB_INIT,
            "environment %s=\"%.64s%s\" is invalid (valid: %s); using the default "
            "\"%s\"",
            e->name, value, strlen(value) > 64 ? "..." : "", range, e->def);
}

/* Edit distance of a and the first blen bytes of b (names are short). */
static size_t zc_cfg_distance(const char *a, const char *b, size_t blen)
{
    size_t alen = strlen(a);
    size_t row[64];
    if (alen >= 64 || blen >= 64) {
        return 64;
    }
    for (size_t j = 0; j <= blen; j++) {
        row[j] = j;
    }
    for (size_t i = 1; i <= alen; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= blen; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            row[j] = best;
            diag = up;
        }
    }
    return row[blen];
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
        const char *near = NULL;
        size_t best = 4; /* suggest names at most 3 edits away */
        for (size_t i = 0; i < ZC_CFG_N && best > 0; i++) {
            size_t d = zc_cfg_distance(zc_cfg_entries[i].name, kv, len);
            if (d < best) {
                best = d;
                near = zc_cfg_entries[i].name;
            }
        }
        if (best > 0) {
            ZC_WARN(ZC_SUB_INIT, "environment variable %.*s is not a zccl setting; ignored%s%s%s",
                    (int)(len > 64 ? 64 : len), kv, near != NULL ? " (did you mean " : "",
                    near != NULL ? near : "", near != NULL ? "?)" : "");
        }
    }
}

/* Once per process (common is compiled once, into libascendcl, so this is the
 * process's one table): parse the environment, set up the log, then warn
 * about bad and unknown variables. */
static void zc_cfg_init(void)
{
    const char *bad[ZC_CFG_N];
    for (size_t i = 0; i < ZC_CFG_N; i++) {
        const zc_cfg_entry_t *e = &zc_cfg_entries[i];
        const char *v = getenv(e->name);
        bad[i] = NULL;
        (void)zc_cfg_store(e, e->def); /* defaults always parse */
        if (v != NULL && v[0] != '\0' && zc_cfg_store(e, v) != 0) {
            (void)zc_cfg_store(e, e->def);
            bad[i] = v;
        }
    }
    zc_log_level_t level = ZC_LOG_WARN;
    unsigned mask = ZC_SUB_ALL;
    (void)zc_log_parse_level(zc_cfg.log_level, &level);
    (void)zc_log_parse_subsys(zc_cfg.log_subsys, &mask);
    int file_err = zc_log_setup(level, mask, zc_cfg.log_file);
    if (file_err != 0) {
        ZC_WARN(ZC_SUB_INIT,
                "environment ZCCL_LOG_FILE=\"%.64s\" cannot be opened (%s); logging "
                "to stderr",
                zc_cfg.log_file, strerror(file_err));
    }
    for (size_t i = 0; i < ZC_CFG_N; i++) {
        if (bad[i] != NULL) {
            zc_cfg_warn_bad(&zc_cfg_entries[i], bad[i]);
        }
    }
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
    case ZC_CFG_SECRET:
        snprintf(buf, n, "%s", field[0] != '\0' ? "(set)" : "");
        break;
    default:
        snprintf(buf, n, "%s", field);
        break;
    }
}

void zc_config_print(FILE *out, int markdown)
{
    if (markdown) {
        fprintf(out, "| variable | default | valid values | meaning |\n|---|---|---|---|\n");
        for (size_t i = 0; i < ZC_CFG_N; i++) {
            const zc_cfg_entry_t *e = &zc_cfg_entries[i];
            char range[160];
            zc_cfg_range(e, range, sizeof(range));
            fprintf(out, "| `%s` | `%s` | %s | %s |\n", e->name, e->def[0] ? e->def : "(empty)",
                    range, e->help);
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
