#define _GNU_SOURCE
#include "zc/sync.h"

#include <errno.h>
#include <sched.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long zc_membarrier(int cmd)
{
    return syscall(SYS_membarrier, cmd, 0, 0);
}

/* Asked at every call, not remembered: a registration belongs to the
 * process's address space, and a child forked after it has none. */
int zc_fence_peers_ready(void)
{
    long cmds = zc_membarrier(MEMBARRIER_CMD_QUERY);
    long need = MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED;
    return cmds >= 0 && (cmds & need) == need &&
           zc_membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
}

int zc_fence_peers(void)
{
    return zc_membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0 ? 0 : -1;
}

uint64_t zc_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int zc_futex_wait_op(atomic_uint *addr, unsigned val, uint64_t timeout_ns, int op)
{
    struct timespec ts;
    struct timespec *tsp = NULL;
    if (timeout_ns != 0) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
        ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
        tsp = &ts;
    }
    long r = syscall(SYS_futex, (unsigned *)addr, op, val, tsp, NULL, 0);
    if (r != 0 && errno == ETIMEDOUT) {
        return -1;
    }
    return 0;
}

int zc_futex_wait(atomic_uint *addr, unsigned val, uint64_t timeout_ns)
{
    return zc_futex_wait_op(addr, val, timeout_ns, FUTEX_WAIT);
}

int zc_futex_wait_private(atomic_uint *addr, unsigned val, uint64_t timeout_ns)
{
    return zc_futex_wait_op(addr, val, timeout_ns, FUTEX_WAIT_PRIVATE);
}

void zc_futex_wake(atomic_uint *addr, int n)
{
    (void)syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE, n, NULL, NULL, 0);
}

void zc_futex_wake_private(atomic_uint *addr, int n)
{
    (void)syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* A yield that kept the thread away this long ran a whole slice of another
 * task (the scheduler's slices are milliseconds; a thread of ours that
 * shares the core posts or sleeps far sooner), and yields stay off this
 * long after it: the busy task stays, and probing it costs a slice. */
#define ZC_YIELD_LONG_NS 1000000ull
#define ZC_YIELD_OFF_NS 100000000ull

static _Atomic uint64_t zc_yield_off_until;
static atomic_int zc_yield_peers;

void zc_yield_to_peers(void)
{
    atomic_store_explicit(&zc_yield_peers, 1, memory_order_relaxed);
}

int zc_yield(void)
{
    if (atomic_load_explicit(&zc_yield_peers, memory_order_relaxed)) {
        sched_yield(); /* the long yields are peers' turns: they post sooner than a sleeper wakes */
        return 1;
    }
    uint64_t now = zc_time_ns();
    if (now < atomic_load_explicit(&zc_yield_off_until, memory_order_relaxed)) {
        return 0;
    }
    sched_yield();
    uint64_t after = zc_time_ns();
    if (after - now > ZC_YIELD_LONG_NS) {
        atomic_store_explicit(&zc_yield_off_until, after + ZC_YIELD_OFF_NS, memory_order_relaxed);
    }
    return 1;
}

int zc_yield_is_off(void)
{
    uint64_t off_until = atomic_load_explicit(&zc_yield_off_until, memory_order_relaxed);
    /* No clock read until yields were off once: quiet hosts pay one load. */
    return off_until != 0 && !atomic_load_explicit(&zc_yield_peers, memory_order_relaxed) &&
           zc_time_ns() < off_until;
}

static uint64_t zc_fnv1a(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t zc_host_id(void)
{
    char buf[256];
    uint64_t h = 1469598103934665603ull;
    if (gethostname(buf, sizeof(buf)) == 0) {
        buf[sizeof(buf) - 1] = '\0';
        h = zc_fnv1a(h, buf, strlen(buf));
    }
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        h = zc_fnv1a(h, buf, n);
    }
    /* A network namespace is a host of its own: its loopback, abstract Unix
     * sockets (the brokers) and addresses are not shared with the others. */
    ssize_t n = readlink("/proc/self/ns/net", buf, sizeof(buf) - 1);
    if (n > 0) {
        h = zc_fnv1a(h, buf, (size_t)n);
    }
    return h;
}

int zc_random_bytes(void *buf, unsigned n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        p += r;
        n -= (unsigned)r;
    }
    return 0;
}
