/*
 * What the security tests across hosts share: the outsider program
 * (mh_outsider.c) started on a host of its own with pipes to its stdin and
 * stdout, and small waits.
 */
#ifndef MH_OUTSIDER_H
#define MH_OUTSIDER_H

#include <stdatomic.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zt_netns.h"

static inline double mo_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wait until *f is set, at most limit_s; 0 or -1. */
static inline int mo_wait_flag(atomic_int *f, double limit_s)
{
    double end = mo_now() + limit_s;
    while (!atomic_load_explicit(f, memory_order_acquire)) {
        if (mo_now() > end) {
            return -1;
        }
        usleep(1000);
    }
    return 0;
}

/* The outsider: its pid, stdin and stdout. */
typedef struct {
    pid_t pid;
    FILE *in;
    FILE *out;
} mo_outsider_t;

/* Run argv (argv[0]: mh_outsider's path) on host `host` of set-up tag. */
static inline int mo_outsider_start(mo_outsider_t *o, const char *tag, int host, char *const argv[])
{
    int to[2];
    int from[2];
    if (pipe(to) != 0 || pipe(from) != 0) {
        return -1;
    }
    fflush(stdout);
    o->pid = fork();
    if (o->pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[1]);
        close(from[0]);
        if (zt_hosts_enter(tag, host) != 0) {
            _exit(1);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    o->in = fdopen(to[1], "w");
    o->out = fdopen(from[0], "r");
    return o->pid > 0 && o->in != NULL && o->out != NULL ? 0 : -1;
}

/* Wait for the outsider's "injected" line: 0, or -1 when it did not come. */
static inline int mo_outsider_injected(mo_outsider_t *o)
{
    char line[64] = "";
    return fgets(line, sizeof(line), o->out) != NULL && strncmp(line, "injected", 8) == 0 ? 0 : -1;
}

/* Close its stdin (it exits) and reap it: its exit status, -1 if killed. */
static inline int mo_outsider_stop(mo_outsider_t *o)
{
    fclose(o->in);
    int status = 0;
    waitpid(o->pid, &status, 0);
    fclose(o->out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#endif /* MH_OUTSIDER_H */
