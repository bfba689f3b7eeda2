/*
 * HcclSend / HcclRecv, HcclBatchSendRecv and HcclGroupStart / HcclGroupEnd
 * with forked processes as ranks, np = 2, 3 and 4: rings (one to four
 * messages per pair matched in order, counts 0 to a message the staging
 * must chunk, grouped, nested, batched and ungrouped even-sends-first),
 * neighbour exchanges, all-to-all batches whose items each rank issues in
 * another order, a Broadcast inside a group, on every combination of
 * activated and plain send and receive buffers; staged bytes exactly the
 * bytes sent on the buffered path and 0 on the zero-copy path; count and
 * type mismatches (HCCL_E_PARA on both sides); local argument errors: the
 * point-to-point rows of tests/common/zt_coll_table.h (scenarios of
 * zt_coll_p2p.h); this file only forks the ranks.
 *
 * HCCL_BUFFSIZE=1 (unless set) keeps the staging buffer small so large
 * messages go in chunks; HCCL_EXEC_TIMEOUT=60 turns a deadlock into an
 * error the launcher sees. Ranks are forked before any library call.
 */
#include <stdlib.h>

#include "zt_coll_table.h"

int main(void)
{
    setenv("HCCL_BUFFSIZE", "1", 0);
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    static const zt_cs_launcher_t l = {
        .launch = zt_cs_launch_procs, .rows = ZT_CS_P2P, .seed = 0x9e2beedull};
    return zt_cs_run(&l);
}
