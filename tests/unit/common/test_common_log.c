/*
 * The log prefix's rank (common/zc_log.c, libascendcl's one copy): a thread
 * shows its own rank; a thread without one shows the process's rank while
 * every rank set in the process had one value, and "-" before any was set
 * or once two values were (thread ranks, sub-communicators), never a wrong
 * rank. The log goes to a file set before the library reads its settings.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zc/log.h"

static char lg_path[256];

/* The rank field ("[...]") of the last line in the log file. */
static void last_rank(char *out, size_t n)
{
    char line[1024] = "";
    char last[1024] = "";
    FILE *f = fopen(lg_path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        memcpy(last, line, sizeof(last));
    }
    fclose(f);
    const char *a = strchr(last, '[');
    const char *b = a != NULL ? strchr(a, ']') : NULL;
    assert_non_null(b);
    snprintf(out, n, "%.*s", (int)(b - a - 1), a + 1);
}

static void *emit_thread(void *arg)
{
    int rank = *(int *)arg;
    if (rank != -1) {
        zc_log_set_rank(rank);
    }
    ZC_INFO(ZC_SUB_TEST, "from a thread");
    return NULL;
}

/* Log one line from a fresh thread that sets rank first (-1: sets none). */
static void emit_from_thread(int rank)
{
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, emit_thread, &rank), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
}

static void test_rank_prefix(void **state)
{
    (void)state;
    char r[32];
    ZC_INFO(ZC_SUB_TEST, "no rank yet");
    last_rank(r, sizeof(r));
    assert_string_equal(r, "-");
    zc_log_set_rank(3);
    assert_int_equal(zc_log_get_rank(), 3);
    ZC_INFO(ZC_SUB_TEST, "own rank");
    last_rank(r, sizeof(r));
    assert_string_equal(r, "3");
    emit_from_thread(-1); /* no rank of its own: the process's */
    last_rank(r, sizeof(r));
    assert_string_equal(r, "3");
    emit_from_thread(3); /* the same rank again: still one value */
    emit_from_thread(-1);
    last_rank(r, sizeof(r));
    assert_string_equal(r, "3");
    emit_from_thread(5); /* its own rank, and now two values in the process */
    last_rank(r, sizeof(r));
    assert_string_equal(r, "5");
    emit_from_thread(-1);
    last_rank(r, sizeof(r));
    assert_string_equal(r, "-");
    ZC_INFO(ZC_SUB_TEST, "own rank after");
    last_rank(r, sizeof(r));
    assert_string_equal(r, "3");
    zc_log_set_rank(-1); /* back to none: the process's, which is "-" now */
    assert_int_equal(zc_log_get_rank(), -1);
    ZC_INFO(ZC_SUB_TEST, "none again");
    last_rank(r, sizeof(r));
    assert_string_equal(r, "-");
}

int main(void)
{
    snprintf(lg_path, sizeof(lg_path), "/tmp/zt-log-%d.log", (int)getpid());
    setenv("ZCCL_LOG_FILE", lg_path, 1);
    setenv("ZCCL_LOG_LEVEL", "info", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank_prefix),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(lg_path);
    return rc;
}
