/*
 * Tiny fork harness of the vmm mp tests: a child ("kid") forked with one end
 * of a socketpair as its control channel, the parent keeping the other.
 *
 * Children never return into cmocka: the kid function's result is its exit
 * status (ZT_KCHECK returns 1 after printing the failed condition), and
 * alarm() kills a kid whose parent stopped talking to it. zt_kid_wait reaps
 * a kid (killing it after ZT_KID_WAIT_S) and closes the parent's end;
 * zt_msg_put/zt_msg_get move fixed-size messages over the channel, a read
 * giving up after ZT_KID_WAIT_S of silence.
 *
 * Header-only (static inline): each test executable takes only what it uses.
 */
#ifndef ZT_FORK_H
#define ZT_FORK_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zc/sync.h"

/** A kid dies by alarm() after this many seconds. */
#define ZT_KID_ALARM_S 30
/** The parent waits this long for a kid's exit, and either side for a message. */
#define ZT_KID_WAIT_S 30

/** A forked kid: its pid and the parent's end of the control socketpair. */
typedef struct {
    pid_t pid;
    int sock;
} zt_kid_t;

/** A kid's body: sock is its end of the control channel; returns its exit status. */
typedef int (*zt_kid_fn)(int sock, void *arg);

/** In a kid: on a false condition, print it and return 1 (the exit status). */
#define ZT_KCHECK(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "child %d: %s:%d: check failed: %s\n", (int)getpid(), __FILE__,        \
                    __LINE__, #cond);                                                              \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/** Fork a kid running fn(sock, arg) and exiting with its result. */
static inline zt_kid_t zt_kid_start(zt_kid_fn fn, void *arg)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        alarm(ZT_KID_ALARM_S);
        _exit(fn(sv[1], arg));
    }
    close(sv[1]);
    return (zt_kid_t){.pid = pid, .sock = sv[0]};
}

/** Exit status of the kid (0 = success, 128 + signal if killed); kills it after ZT_KID_WAIT_S
 *  (then -1). Closes the parent's end of the channel. */
static inline int zt_kid_wait(zt_kid_t k)
{
    uint64_t deadline = zc_time_ns() + (uint64_t)ZT_KID_WAIT_S * 1000000000ull;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(k.pid, &status, WNOHANG);
        if (r == k.pid) {
            break;
        }
        if (zc_time_ns() > deadline) {
            kill(k.pid, SIGKILL);
            waitpid(k.pid, &status, 0);
            close(k.sock);
            return -1;
        }
        usleep(5000);
    }
    close(k.sock);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/** Write the n bytes of buf in one write; 0 or -1. */
static inline int zt_msg_put(int sock, const void *buf, size_t n)
{
    return write(sock, buf, n) == (ssize_t)n ? 0 : -1;
}

/** Read exactly n bytes into buf; -1 on EOF, error or ZT_KID_WAIT_S of silence. */
static inline int zt_msg_get(int sock, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd p = {.fd = sock, .events = POLLIN};
        if (poll(&p, 1, ZT_KID_WAIT_S * 1000) != 1) {
            return -1;
        }
        ssize_t r = read(sock, (char *)buf + got, n - got);
        if (r <= 0) {
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

#endif /* ZT_FORK_H */
