/*
 * HcclAllGather with forked processes as ranks, np = 1..4 (4 oversubscribes
 * a 2-core machine): the full dtype x {zero-copy, buffered} x {in-place,
 * out-of-place (send = this rank's slot of recv)} x count matrix against the
 * expected concatenation (raw random bits: copies must be bit-exact),
 * re-activation at the same address, descriptor mismatches, and two
 * communicators used alternately (scenarios in tests/common/zt_launch.c, the
 * cases those of tests/common/zt_suite1.h).
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

/* Forked ranks; the matrix launch may take 300 s. */
static const zt_suite1_t cfg = {ZT_ALLGATHER, NULL, 0, 0xa116a7e4, 300};

int main(void)
{
    setenv("HCCL_BUFFSIZE", "1", 0);
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    const struct CMUnitTest tests[] = {ZT_SUITE1_TESTS(&cfg)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
