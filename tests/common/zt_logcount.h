/*
 * "Exactly one log line per error" harness of the vmm unit tests.
 *
 * zt_lg_open points the library's log at a per-process file (before the
 * library reads its configuration, so call it first in main) at level warn;
 * ZT_EXPECT_ERR(call, code) then checks that call returns code and appended
 * exactly one line to that file, by counting the newlines past the file's
 * size before the call. zt_lg_close removes the file. Also the two small
 * helpers those tests share: running a body in a fresh thread (which has no
 * current device) and sleeping some milliseconds.
 *
 * Header-only (static inline): each test executable takes only what it uses.
 */
#ifndef ZT_LOGCOUNT_H
#define ZT_LOGCOUNT_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The per-process log file (set by zt_lg_open). */
static char zt_lg_path[256];

/** Send the library's warnings to /tmp/zt-vmm-<topic>-<pid>.log, emptied first. */
static inline void zt_lg_open(const char *topic)
{
    snprintf(zt_lg_path, sizeof(zt_lg_path), "/tmp/zt-vmm-%s-%d.log", topic, (int)getpid());
    unlink(zt_lg_path);
    setenv("ZCCL_LOG_FILE", zt_lg_path, 1);
    setenv("ZCCL_LOG_LEVEL", "warn", 1);
}

/** Remove the log file. */
static inline void zt_lg_close(void)
{
    unlink(zt_lg_path);
}

/** The log's current size: a mark for zt_lg_lines_since. */
static inline long zt_lg_mark(void)
{
    struct stat st;
    return stat(zt_lg_path, &st) == 0 ? (long)st.st_size : 0;
}

/** Lines written to the log after mark. */
static inline int zt_lg_lines_since(long mark)
{
    FILE *f = fopen(zt_lg_path, "r");
    int n = 0, c;
    if (f == NULL) {
        return 0;
    }
    fseek(f, mark, SEEK_SET);
    while ((c = fgetc(f)) != EOF) {
        n += c == '\n';
    }
    fclose(f);
    return n;
}

/** call must return code and log exactly one line. */
#define ZT_EXPECT_ERR(call, code)                                                                  \
    do {                                                                                           \
        long m_ = zt_lg_mark();                                                                    \
        assert_int_equal((call), (code));                                                          \
        assert_int_equal(zt_lg_lines_since(m_), 1);                                                \
    } while (0)

static inline void *zt_thread_tramp(void *p)
{
    int (*fn)(void) = (int (*)(void))(uintptr_t)p;
    return (void *)(intptr_t)fn();
}

/** Run fn in a new thread (which has no current device); returns fn's result. */
static inline int zt_in_fresh_thread(int (*fn)(void))
{
    pthread_t t;
    void *r = NULL;
    assert_int_equal(pthread_create(&t, NULL, zt_thread_tramp, (void *)(uintptr_t)fn), 0);
    pthread_join(t, &r);
    return (int)(intptr_t)r;
}

/** Sleep ms milliseconds. */
static inline void zt_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#endif /* ZT_LOGCOUNT_H */
