/*
 * zc_yield (common/zc_sync.c): with a busy thread pinned to this thread's
 * core, a yield hands it a time slice (over 1 ms), after which zc_yield
 * returns 0 (sleep instead) without yielding; with the core to itself a
 * yield returns at once and yields go on; zc_yield_is_off says which; after
 * zc_yield_to_peers every call yields again.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "zc/sync.h"

static atomic_int spin_stop;

static void *spin_main(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&spin_stop, memory_order_relaxed)) {
        zc_cpu_relax();
    }
    return NULL;
}

static void pin_to(pthread_t t, int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    assert_int_equal(pthread_setaffinity_np(t, sizeof(set), &set), 0);
}

static void test_yield_quiet_then_busy_then_peers(void **state)
{
    (void)state;
    int cpu = sched_getcpu();
    assert_true(cpu >= 0);
    pin_to(pthread_self(), cpu);
    /* Nobody else wants this core (most of the time): yields go on. A
     * neighbour's slice may still turn them off, so only check that the
     * first yield yields. */
    assert_int_equal(zc_yield_is_off(), 0); /* no yield yet: waits may spin */
    assert_int_equal(zc_yield(), 1);

    /* A busy loop on the same core: within a few hundred yields one of
     * them runs its slice, and from then on zc_yield says sleep. */
    pthread_t spinner;
    atomic_store(&spin_stop, 0);
    assert_int_equal(pthread_create(&spinner, NULL, spin_main, NULL), 0);
    pin_to(spinner, cpu);
    int off = 0;
    uint64_t until = zc_time_ns() + 5000000000ull;
    while (!off && zc_time_ns() < until) {
        off = zc_yield() == 0;
    }
    assert_true(off);
    assert_int_equal(zc_yield(), 0);        /* stays off: no yield, no slice handed over */
    assert_int_equal(zc_yield_is_off(), 1); /* waits sleep instead of yielding */
    atomic_store(&spin_stop, 1);
    pthread_join(spinner, NULL);

    /* Oversubscribed comms: every call yields, whatever came before. */
    zc_yield_to_peers();
    assert_int_equal(zc_yield(), 1);
    assert_int_equal(zc_yield(), 1);
    assert_int_equal(zc_yield_is_off(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yield_quiet_then_busy_then_peers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
