/*
 * ReduceScatter(V), Reduce, Broadcast, Scatter, AllGatherV, AlltoAll(V, VC),
 * Send/Recv, BatchSendRecv and groups with threads of one process as ranks
 * (one HcclCommInitRootInfo per thread, as CANN's one-thread-per-device
 * samples do), np = 1..4: the collective matrix, mismatches between ranks,
 * local argument errors, Send/Recv rings, all-to-all batches and send/recv
 * mismatches (every row of tests/common/zt_coll_table.h; this file only
 * starts the threads). Same-process peers use each other's addresses directly,
 * the library's other peer-mapping path than the mp tests take: collectives
 * on plain memory still go buffered, but point-to-point messages between
 * threads always go zero-copy, so they must stage nothing.
 *
 * The CCL buffer keeps its default size here (the mp tests shrink it);
 * HCCL_EXEC_TIMEOUT=60 turns a hang into an error.
 */
#include <stdlib.h>

#include "zt_coll_table.h"

int main(void)
{
    setenv("HCCL_EXEC_TIMEOUT", "60", 0);
    setenv("HCCL_CONNECT_TIMEOUT", "60", 0);
    static const zt_cs_launcher_t l = {.launch = zt_cs_launch_threads,
                                       .rows = ZT_CS_COLL | ZT_CS_P2P,
                                       .seed = 0x7c011ull,
                                       .same_proc = 1};
    return zt_cs_run(&l);
}
