/*
 * HcclAllReduce with forked processes as ranks, np = 1..4 (4 oversubscribes
 * a 2-core machine): the full dtype x op x {zero-copy, buffered} x {in-place,
 * out-of-place} x count matrix against a serial reference, re-activation at
 * the same address, descriptor mismatches, and two communicators used
 * alternately (scenarios in tests/common/zt_launch.c, the cases those of
 * tests/common/zt_suite1.h).
 *
 * HCCL_BUFFSIZE=1 (unless set) makes the buffered path chunk every op past
 * 1 MB; HCCL_EXEC_TIMEOUT=60 turns a hang into an error the launcher sees.
 * Nothing of the library runs in this parent process: ranks are forked first.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "zt_suite1.h"

static const int big_all_ops[] = {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_FP32};
/* Forked ranks; the matrix launch may take 300 s. */
static const zt_suite1_t cfg = {ZT_ALLREDUCE, big_all_ops,
                                (int)(sizeof(big_all_ops) / sizeof(big_all_ops[0])), 0xa11ed0ce,
                                300};

int main(void)
{
    setenv("HCCL_BUFFSIZE", "1", 0);
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {ZT_SUITE1_TESTS(&cfg)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
