/*
 * ReduceScatter(V), Reduce, Broadcast, Scatter, AllGatherV and
 * AlltoAll(V, VC) with forked processes as ranks, np = 2, 3 and 4 (4
 * oversubscribes a 2-core machine; np = 1 too): every collective x {zero-copy, buffered,
 * rank 0 plain} x {in place, out of place} x counts (0 to chunked) x dtypes
 * (all 12 for the reductions, with all 4 ops) x roots, uneven V counts with
 * zeros, each element checked against a serial reference and each byte
 * around the outputs; staged bytes 0 on the zero-copy path; mismatches
 * between ranks (HCCL_E_PARA on every rank) and local argument errors: the
 * collective rows of tests/common/zt_coll_table.h (cases of zt_coll.h,
 * scenarios of zt_coll_scen.h); this file only forks the ranks.
 *
 * HCCL_BUFFSIZE=1 (unless set) makes the buffered path chunk the large
 * cases; HCCL_EXEC_TIMEOUT=60 turns a hang into an error the launcher sees.
 * Nothing of the library runs in this parent process: ranks are forked first.
 */
#include <stdlib.h>

#include "zt_coll_table.h"

int main(void)
{
    setenv("HCCL_BUFFSIZE", "1", 0);
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    static const zt_cs_launcher_t l = {
        .launch = zt_cs_launch_procs, .rows = ZT_CS_COLL, .seed = 0xc011ec7ull};
    return zt_cs_run(&l);
}
