/*
 * The environment table under bad values: the matrix over every variable of
 * the table (unparsable, negative, zero, huge, one past the maximum), run
 * through the zccl_config tool in a child each. Each case must finish in well
 * under a second (one slower run is run again, as a loaded 2-core box can
 * starve a short child; a hang is slow twice, and killed after 5 s), print
 * exactly the expected number of stderr lines (one
 * warning for a bad value, none for a good one) and show the expected value
 * in force (the default for a bad value). The test's own list of variables
 * must cover the tool's: a variable added to the table without a row here
 * fails the test.
 *
 * Then the orders in which a program's first library call can reach the
 * config (the logger first, aclInit, HcclGetRootInfo) with bad values set:
 * each must return at once with one warning per bad value. These used to
 * hang forever (the warning's log call waited on the one-time config init
 * that raised it).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "hccl/hccl.h"
#include "zc/config.h"
#include "zc/log.h"
#include "zc/sync.h"

#ifndef ZT_ZCCL_CONFIG
#error "ZT_ZCCL_CONFIG (path of the zccl_config tool) must be defined by the build"
#endif

/* A case must be done this fast (a loaded 2-core box included); one taking
 * ZT_KILL_MS is treated as hung. */
#define ZT_FAST_MS 1000
#define ZT_KILL_MS 5000

#define ZT_HUGE "18446744073709551616" /* 2^64: overflows every integer */
#define ZT_OUT_MAX 16384

/* One variable: its default as printed, and the value printed for each of
 * "abc", "-1", "0" (NULL: that value is invalid, the default stays). The
 * huge and past-maximum cases are always invalid. */
typedef struct {
    const char *name;
    const char *def;
    const char *ok_abc;
    const char *ok_neg;
    const char *ok_zero;
    const char *past_max; /* max + 1 for integers, NULL otherwise */
} zt_var_t;

static const zt_var_t zt_vars[] = {
    {"HCCL_BUFFSIZE", "200", NULL, NULL, NULL, "65537"},
    {"HCCL_CONNECT_TIMEOUT", "120", NULL, NULL, NULL, "86401"},
    {"HCCL_EXEC_TIMEOUT", "1836", NULL, NULL, "0", "2147484"},
    {"HCCL_IF_IP", "", NULL, NULL, NULL, NULL},
    {"HCCL_SOCKET_IFNAME", "", "abc", "-1", "0", NULL},
    {"ZCCL_RANKTABLE_PORT", "60001", NULL, NULL, NULL, "65536"},
    {"ZCCL_JOB_SECRET", "", "(set)", "(set)", "(set)", NULL}, /* never printed */
    {"HCCL_DETERMINISTIC", "true", NULL, NULL, "false", NULL},
    {"HCCL_WHITELIST_DISABLE", "true", NULL, NULL, "false", NULL},
    {"ZCCL_DEVICES", "0", NULL, NULL, "0", "4097"},
    {"ZCCL_LOG_LEVEL", "warn", NULL, NULL, NULL, NULL},
    {"ZCCL_LOG_SUBSYS", "ALL", NULL, NULL, NULL, NULL},
    {"ZCCL_LOG_FILE", "", "abc", "-1", "0", NULL},
    {"ZCCL_PRINT_CONFIG", "false", NULL, NULL, "false", NULL},
    {"ZCCL_PRINT_STATS", "false", NULL, NULL, "false", NULL},
    {"ZCCL_SPIN_ITERS", "2000", NULL, NULL, "0", "100000001"},
    {"ZCCL_CALLER_MAX", "0", NULL, NULL, "0", "1099511627777"},
    {"ZCCL_SPREAD", "true", NULL, NULL, "false", NULL},
    {"ZCCL_MAX_LOCAL_RANKS", "1024", NULL, NULL, NULL, "1025"},
    {"ZCCL_ONESHOT_MAX", "16384", NULL, NULL, "0", "1073741825"},
    {"ZCCL_AG_PULL_MIN", "0", NULL, NULL, "0", "1073741825"},
    {"ZCCL_NT_MIN", "0", NULL, NULL, "0", "4294967296"},
    {"ZCCL_HIER", "auto", "abc", "-1", "0", NULL}, /* a comm warns at init */
    {"ZCCL_NET_CHUNK", "1048576", NULL, NULL, NULL, "1073741825"},
    {"ZCCL_KERNEL", "auto", "abc", "-1", "0", NULL}, /* the kernel picker warns later */
};
#define ZT_NVARS (sizeof(zt_vars) / sizeof(zt_vars[0]))

typedef struct {
    char out[ZT_OUT_MAX];
    char err[ZT_OUT_MAX];
    int err_lines;
    int status;
    double ms;
} zt_run_t;

static char zt_dir[64]; /* the children's working directory (ZCCL_LOG_FILE=abc lands there) */
static double zt_worst_ms;
static double zt_total_ms;
static int zt_retries; /* cases run again after one slow run */
static int zt_cases;

static void zt_read_file(const char *path, char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        size_t got = fread(buf, 1, n - 1, f);
        buf[got] = '\0';
        fclose(f);
    }
}

static int zt_count_lines(const char *s)
{
    int n = 0;
    for (; *s != '\0'; s++) {
        n += *s == '\n';
    }
    return n;
}

/* Child side: a clean environment (no ZCCL_ / HCCL_ variable but the case's),
 * stdout and stderr into files, then body. */
typedef void (*zt_body_fn)(void *arg);

static void zt_child_setup(const char *const *env, const char *out, const char *err)
{
    for (char **e = environ; e != NULL && *e != NULL;) {
        if (strncmp(*e, "ZCCL_", 5) == 0 || strncmp(*e, "HCCL_", 5) == 0) {
            char name[128];
            size_t len = strcspn(*e, "=");
            snprintf(name, sizeof(name), "%.*s", (int)len, *e);
            unsetenv(name);
            continue; /* environ shifted: look at the same slot again */
        }
        e++;
    }
    for (int i = 0; env[i] != NULL; i += 2) {
        setenv(env[i], env[i + 1], 1);
    }
    int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0 || chdir(zt_dir) != 0) {
        _exit(120);
    }
}

/* Run body (or, with body NULL, the zccl_config tool) in a child with env
 * (NULL-terminated name, value pairs); kill it after ZT_KILL_MS. */
static void zt_run(const char *const *env, zt_body_fn body, void *arg, zt_run_t *r)
{
    char out[128], err[128];
    snprintf(out, sizeof(out), "%s/out", zt_dir);
    snprintf(err, sizeof(err), "%s/err", zt_dir);
    uint64_t t0 = zc_time_ns();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        zt_child_setup(env, out, err);
        if (body == NULL) {
            execl(ZT_ZCCL_CONFIG, "zccl_config", (char *)NULL);
            _exit(121);
        }
        body(arg);
        _exit(0);
    }
    int status = 0;
    for (;;) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            break;
        }
        if (zc_time_ns() - t0 > (uint64_t)ZT_KILL_MS * 1000000ull) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        usleep(500);
    }
    r->ms = (double)(zc_time_ns() - t0) / 1e6;
    r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    zt_read_file(out, r->out, sizeof(r->out));
    zt_read_file(err, r->err, sizeof(r->err));
    r->err_lines = zt_count_lines(r->err);
    zt_worst_ms = r->ms > zt_worst_ms ? r->ms : zt_worst_ms;
    zt_total_ms += r->ms;
    zt_cases++;
}

/* The value zccl_config printed for name ("  NAME = value  # help"). */
static int zt_value_of(const char *out, const char *name, char *val, size_t n)
{
    char key[80];
    snprintf(key, sizeof(key), "  %s ", name);
    const char *p = strstr(out, key);
    if (p == NULL) {
        return -1;
    }
    p = strstr(p, "= ");
    const char *end = p != NULL ? strstr(p, "  # ") : NULL;
    if (end == NULL) {
        return -1;
    }
    p += 2;
    while (end > p && end[-1] == ' ') {
        end--;
    }
    snprintf(val, n, "%.*s", (int)(end - p), p);
    return 0;
}

/* One case: name=value must finish fast, log want_lines lines and leave want in force. */
static void zt_case(const char *name, const char *value, int want_lines, const char *want)
{
    const char *env[] = {name, value, NULL};
    zt_run_t r;
    char got[512];
    zt_run(env, NULL, NULL, &r);
    if (r.ms >= ZT_FAST_MS) {
        /* A loaded 2-core box can starve one short child; a hang is slow twice. */
        zt_retries++;
        zt_run(env, NULL, NULL, &r);
    }
    if (r.status != 0 || r.ms >= ZT_FAST_MS || r.err_lines != want_lines ||
        zt_value_of(r.out, name, got, sizeof(got)) != 0 || strcmp(got, want) != 0) {
        fail_msg("%s=\"%.40s\": exit %d after %.1f ms, %d stderr lines (want %d), value \"%s\" "
                 "(want \"%s\"); stderr:\n%s",
                 name, value, r.status, r.ms, r.err_lines, want_lines, got, want, r.err);
    }
    if (want_lines == 1 && (strstr(r.err, name) == NULL || strstr(r.err, " WARN ") == NULL)) {
        fail_msg("%s=\"%.40s\": the warning does not name the variable: %s", name, value, r.err);
    }
}

static void test_matrix(void **state)
{
    (void)state;
    char long_text[301];
    memset(long_text, 'x', 300);
    long_text[300] = '\0';
    for (size_t i = 0; i < ZT_NVARS; i++) {
        const zt_var_t *v = &zt_vars[i];
        const char *vals[3] = {"abc", "-1", "0"};
        const char *oks[3] = {v->ok_abc, v->ok_neg, v->ok_zero};
        for (int k = 0; k < 3; k++) {
            zt_case(v->name, vals[k], oks[k] == NULL, oks[k] != NULL ? oks[k] : v->def);
        }
        /* A secret is printed as "(set)", whatever it is. */
        int secret = v->ok_abc != NULL && strcmp(v->ok_abc, "(set)") == 0;
        zt_case(v->name, ZT_HUGE "0", v->ok_abc != NULL ? 0 : 1,
                secret              ? "(set)"
                : v->ok_abc != NULL ? ZT_HUGE "0"
                                    : v->def);
        zt_case(v->name, long_text, 1, v->def);
        if (v->past_max != NULL) {
            zt_case(v->name, v->past_max, 1, v->def);
        }
    }
    /* The cases of the report, and an empty value (the default, silently). */
    zt_case("HCCL_BUFFSIZE", "100000", 1, "200");
    zt_case("HCCL_BUFFSIZE", "010", 0, "10");
    zt_case("HCCL_BUFFSIZE", "0x10", 1, "200");
    zt_case("HCCL_BUFFSIZE", " 5", 1, "200");
    zt_case("HCCL_DETERMINISTIC", "maybe", 1, "true");
    zt_case("HCCL_EXEC_TIMEOUT", "", 0, "1836");
    zt_case("HCCL_IF_IP", "127.0.0.1", 0, "127.0.0.1");
    zt_case("ZCCL_LOG_FILE", "/nonexistent-dir/zccl.log", 1, "/nonexistent-dir/zccl.log");
    zt_case("ZCCL_LOG_SUBSYS", "^COLL,BOOT", 0, "^COLL,BOOT");
    zt_case("ZCCL_LOG_SUBSYS", "COLL,,", 0, "COLL,,");
    zt_case("ZCCL_LOG_LEVEL", "DEBUG", 0, "DEBUG");
    print_message("bad-environment matrix: %d runs over %d variables, mean %.1f ms, slowest "
                  "%.1f ms, %d slow runs retried\n",
                  zt_cases, (int)ZT_NVARS, zt_total_ms / zt_cases, zt_worst_ms, zt_retries);
}

/* Misspelt ZCCL_ names: one warning each, with the nearest name when there is one. */
static void test_unknown_names(void **state)
{
    (void)state;
    const char *env1[] = {"ZCCL_LOGLEVEL", "debug", NULL};
    zt_run_t r;
    zt_run(env1, NULL, NULL, &r);
    assert_int_equal(r.status, 0);
    assert_true(r.ms < ZT_FAST_MS);
    assert_int_equal(r.err_lines, 1);
    assert_non_null(strstr(r.err, "ZCCL_LOGLEVEL"));
    assert_non_null(strstr(r.err, "did you mean ZCCL_LOG_LEVEL?"));
    const char *env2[] = {"ZCCL_QQQQQQQQQQQQQQQQQQ", "1", "ZCCL_NT_MN", "5", NULL};
    zt_run(env2, NULL, NULL, &r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.err_lines, 2);
    assert_non_null(strstr(r.err, "ZCCL_QQQQQQQQQQQQQQQQQQ is not a zccl setting; ignored\n"));
    assert_non_null(strstr(r.err, "did you mean ZCCL_NT_MIN?"));
    /* Two bad values and one bad name: three lines, both defaults in force. */
    const char *env3[] = {
        "HCCL_BUFFSIZE", "0", "HCCL_CONNECT_TIMEOUT", "abc", "ZCCL_LOGLEVL", "x", NULL};
    zt_run(env3, NULL, NULL, &r);
    char v[64];
    assert_int_equal(r.err_lines, 3);
    assert_int_equal(zt_value_of(r.out, "HCCL_BUFFSIZE", v, sizeof(v)), 0);
    assert_string_equal(v, "200");
    assert_int_equal(zt_value_of(r.out, "HCCL_CONNECT_TIMEOUT", v, sizeof(v)), 0);
    assert_string_equal(v, "120");
}

/* Every variable the tool prints has a row in zt_vars (and the other way round). */
static void test_table_covered(void **state)
{
    (void)state;
    const char *env[] = {NULL};
    zt_run_t r;
    zt_run(env, NULL, NULL, &r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.err_lines, 0);
    int listed = 0;
    for (const char *p = r.out; (p = strstr(p, "\n  ")) != NULL; p++) {
        char name[64];
        assert_int_equal(sscanf(p + 3, "%63s", name), 1);
        int found = 0;
        for (size_t i = 0; i < ZT_NVARS; i++) {
            found |= strcmp(zt_vars[i].name, name) == 0;
        }
        if (!found) {
            fail_msg("%s is in the config table but not in this test's matrix", name);
        }
        char v[300];
        assert_int_equal(zt_value_of(r.out, name, v, sizeof(v)), 0);
        listed++;
    }
    assert_int_equal(listed, (int)ZT_NVARS);
}

/* ---- first library calls other than zc_config ---------------------------------------- */

static void zt_body_log_first(void *arg)
{
    (void)arg;
    ZC_WARN(ZC_SUB_TEST, "a warning before anything read the config");
    _exit(zc_config()->buffsize_mb == 200 && zc_config()->exec_timeout_s == 1836 ? 0 : 2);
}

static void zt_body_acl_first(void *arg)
{
    (void)arg;
    uint32_t n = 0;
    if (aclInit(NULL) != ACL_SUCCESS || aclrtGetDeviceCount(&n) != ACL_SUCCESS || n == 0) {
        _exit(3);
    }
    _exit(zc_config()->devices == 0 ? 0 : 2);
}

static void zt_body_hccl_first(void *arg)
{
    (void)arg;
    HcclRootInfo info;
    if (HcclGetRootInfo(&info) != HCCL_SUCCESS) {
        _exit(3);
    }
    _exit(zc_config()->connect_timeout_s == 120 && zc_config()->deterministic == 1 ? 0 : 2);
}

static void zt_first_call(zt_body_fn body, const char *const *env, int want_lines)
{
    zt_run_t r;
    zt_run(env, body, NULL, &r);
    /* A hang is killed after ZT_KILL_MS; these also start the runtime or a
     * root listener, so they get more than the matrix's bound (sanitizers). */
    if (r.status != 0 || r.ms >= ZT_KILL_MS / 2 || r.err_lines != want_lines) {
        fail_msg("exit %d after %.1f ms with %d stderr lines (want %d):\n%s", r.status, r.ms,
                 r.err_lines, want_lines, r.err);
    }
    print_message("first call with bad values: %d stderr lines after %.1f ms\n", r.err_lines, r.ms);
}

static void test_first_calls(void **state)
{
    (void)state;
    const char *e1[] = {"HCCL_BUFFSIZE", "abc", "HCCL_EXEC_TIMEOUT", "-1", NULL};
    zt_first_call(zt_body_log_first, e1, 3); /* two warnings, then the test's own */
    const char *e2[] = {"ZCCL_DEVICES", "huge", "ZCCL_LOGLEVEL", "debug", NULL};
    zt_first_call(zt_body_acl_first, e2, 2);
    const char *e3[] = {"HCCL_CONNECT_TIMEOUT", "0", "HCCL_DETERMINISTIC", "maybe", NULL};
    zt_first_call(zt_body_hccl_first, e3, 2);
    const char *e4[] = {"ZCCL_LOG_LEVEL", "loud", "HCCL_BUFFSIZE", "0", NULL};
    zt_first_call(zt_body_log_first, e4, 3);
}

int main(void)
{
    snprintf(zt_dir, sizeof(zt_dir), "/tmp/zt-config-%d", (int)getpid());
    if (mkdir(zt_dir, 0700) != 0) {
        perror("mkdir");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix),
        cmocka_unit_test(test_unknown_names),
        cmocka_unit_test(test_table_covered),
        cmocka_unit_test(test_first_calls),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", zt_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "could not remove %s\n", zt_dir);
    }
    return rc;
}
