/*
 * zc/place.h (common/zc_place.c): zc_cpu_now names the CPU the thread runs
 * on; a fence takes one CPU out of the thread's affinity mask (moving the
 * thread off it at once) and its lift gives the mask back; a fence that
 * cannot go up (a CPU not in the mask, the mask's only CPU, no CPU at all)
 * changes nothing.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sched.h>

#include "zc/place.h"

static cpu_set_t mask_now(void)
{
    cpu_set_t m;
    assert_int_equal(sched_getaffinity(0, sizeof(m), &m), 0);
    return m;
}

static void test_cpu_now(void **state)
{
    (void)state;
    cpu_set_t m = mask_now();
    int cpu = zc_cpu_now();
    assert_true(cpu >= 0);
    assert_true(CPU_ISSET(cpu, &m));
}

static void test_fence_moves_off_and_lifts(void **state)
{
    (void)state;
    cpu_set_t before = mask_now();
    if (CPU_COUNT(&before) < 2) {
        skip(); /* one CPU allowed: nowhere to move */
    }
    int cpu = zc_cpu_now();
    zc_cpu_fence_t f;
    assert_int_equal(zc_cpu_fence_up(&f, cpu), 1);
    cpu_set_t fenced = mask_now();
    assert_false(CPU_ISSET(cpu, &fenced));
    assert_int_equal(CPU_COUNT(&fenced), CPU_COUNT(&before) - 1);
    assert_int_not_equal(zc_cpu_now(), cpu); /* moved at once */
    zc_cpu_fence_lift(&f);
    cpu_set_t after = mask_now();
    assert_true(CPU_EQUAL(&after, &before));
    zc_cpu_fence_lift(&f); /* a second lift does nothing */
    after = mask_now();
    assert_true(CPU_EQUAL(&after, &before));
}

static void fence_refused(int cpu)
{
    cpu_set_t before = mask_now();
    zc_cpu_fence_t f;
    assert_int_equal(zc_cpu_fence_up(&f, cpu), 0);
    cpu_set_t m = mask_now();
    assert_true(CPU_EQUAL(&m, &before));
    zc_cpu_fence_lift(&f);
    m = mask_now();
    assert_true(CPU_EQUAL(&m, &before));
}

static void test_fence_refused(void **state)
{
    (void)state;
    fence_refused(-1);
    fence_refused(CPU_SETSIZE);
    fence_refused(1 << 30);
    /* The thread alone on one CPU: that CPU is all it has, another is not in its mask. */
    cpu_set_t all = mask_now();
    int cpu = zc_cpu_now();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
    fence_refused(cpu);
    fence_refused(cpu + 1);
    assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_now),
        cmocka_unit_test(test_fence_moves_off_and_lifts),
        cmocka_unit_test(test_fence_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
