/*
 * Time and futex helpers shared by every module.
 *
 * Futexes here are the shared (non-private) kind, so a waiter in one process
 * is woken by a writer in another through a MAP_SHARED mapping.
 */
#ifndef ZC_SYNC_H
#define ZC_SYNC_H

#include <stdatomic.h>
#include <stdint.h>

/** Monotonic time in nanoseconds. */
uint64_t zc_time_ns(void);

/**
 * Sleep until *addr != val, a wake, or timeout_ns passes (0 = no timeout).
 * Returns 0 on wake/value change, -1 on timeout (spurious wakes allowed).
 */
int zc_futex_wait(atomic_uint *addr, unsigned val, uint64_t timeout_ns);

/** Wake up to n waiters on addr (INT32_MAX for all). */
void zc_futex_wake(atomic_uint *addr, int n);

/** The same for a word that only threads of this process wait on (cheaper:
 *  the kernel keys it by address, not by page). */
int zc_futex_wait_private(atomic_uint *addr, unsigned val, uint64_t timeout_ns);
void zc_futex_wake_private(atomic_uint *addr, int n);

/**
 * Asymmetric fences for a Dekker pair across processes (a flag's post and
 * its sleeper, hccl_ctrl.c). zc_fence_peers_ready registers this process
 * for expedited global memory barriers (membarrier(2); call it again after
 * a fork, the child is not registered) and says
 * whether that worked: then a writer may publish a value and read the
 * sleeper count with no full fence between, as long as every sleeper calls
 * zc_fence_peers after counting itself and before reading the value: that
 * call makes every thread of every registered process pass a full barrier,
 * so the writer either saw the count or its value is visible. 0 when the
 * kernel has no such barrier (the writers keep their full fence).
 */
int zc_fence_peers_ready(void);

/** The sleeper's half: 0 once every registered process's running threads
 *  passed a full memory barrier, -1 when the kernel refused. */
int zc_fence_peers(void);

/** CPU relax hint for spin loops. */
static inline void zc_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/**
 * One poll's yield of the core to whoever else may run on it: 1 when it
 * yielded, 0 when the caller should sleep on its futex instead. Yields stop,
 * process-wide, for a while after one kept the thread off its core long: a
 * task that runs whole time slices (a busy loop, another job's compute)
 * shares the core, and every further yield would hand it a slice, while a
 * sleeper's wake preempts it. Not once zc_yield_to_peers was called.
 */
int zc_yield(void);

/**
 * Yields are off now (zc_yield would return 0): a busy task shares the
 * core, and waits sleep at once instead of spinning: a spin burns the slice
 * a wake won from the busy task. One exception: the caller's wait for the
 * peers' posts of an op still spins up to 20 us first, backing off after
 * spins that missed (the peers are due within that most of the time, and a
 * sleeper's wake can wait milliseconds behind the busy task).
 */
int zc_yield_is_off(void);

/**
 * Ranks of this process's communicators outnumber the cores: the tasks that
 * share a core are mostly peers, a yield is their turn however long it
 * takes, and yields go on (sleeping there was measured slower: every post
 * would pay a futex wake and the wakee a switch).
 */
void zc_yield_to_peers(void);

/** A 64-bit host id: hash of hostname, boot id and network namespace (same host <=> same
 *  id; each network namespace counts as a host of its own). */
uint64_t zc_host_id(void);

/** Fill buf with n unpredictable bytes (getrandom). Returns 0 or -1. */
int zc_random_bytes(void *buf, unsigned n);

#endif /* ZC_SYNC_H */
