/*
 * HcclAllReduce with threads of one process as ranks (one
 * HcclCommInitRootInfo per thread, as CANN's one-thread-per-device samples
 * do), np = 1..4: the full dtype x op x {zero-copy, buffered} x {in-place,
 * out-of-place} x count matrix against a serial reference, re-activation at
 * the same address, descriptor mismatches and two communicators used
 * alternately. Same-process peers use each other's addresses directly, so
 * this exercises the library's other peer-mapping path than the mp tests
 * (the cases are those of tests/common/zt_suite1.h).
 *
 * The CCL buffer keeps its default size here (the mp tests shrink it);
 * HCCL_EXEC_TIMEOUT=60 turns a hang into an error.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "zt_suite1.h"

static const int big_all_ops[] = {HCCL_DATA_TYPE_FP32};
/* Threads as ranks (procs_s 0). */
static const zt_suite1_t cfg = {ZT_ALLREDUCE, big_all_ops, 1, 0x7b7eadull, 0};

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {ZT_SUITE1_TESTS(&cfg)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
