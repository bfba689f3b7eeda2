/*
 * The communicator API checks, one rank body each, shared by the three
 * launchers: forked processes (tests/mp/test_mp_comm.c), threads of one
 * process (tests/unit/hccl/test_hccl_threads_comm.c) and mpirun
 * (tests/mpi/test_mpi_comm.c). Each body has the zt_rank_fn signature and
 * returns its failure count (each failure printed with the rank).
 *
 *  - zt_comm_api: rank size / id / name (the same name on every rank), error
 *    strings, HcclBarrier (nobody leaves before all arrived; the arrival
 *    counters live in a zt_comm_shared_t every rank sees);
 *  - zt_comm_config: local argument errors of init (before any rank is
 *    contacted), HcclCommInitRootInfoConfig with a bad magic word
 *    (HCCL_E_PARA), then with a 1 MB CCL buffer: chunked ops, the buffer
 *    created on first buffered use, the configured name;
 *  - zt_comm_zc_rules: the zero-copy rule errors with the codes hccl_comm.h
 *    documents, and the path each op takes across active, adjacent,
 *    deactivated and plain memory;
 *  - zt_comm_paths: one rank's buffers activated and the others' not
 *    (buffered everywhere), stream order after an async copy, the NULL
 *    stream.
 */
#ifndef ZT_COMM_H
#define ZT_COMM_H

#include <stdatomic.h>

#include "hccl/hccl.h"
#include "zt_launch.h"

/** What the ranks of one zt_comm_api launch share (zeroed before it). */
typedef struct {
    atomic_int arrived[4];
    char names[8][COMM_NAME_MAX_LENGTH];
} zt_comm_shared_t;

/** The comm name the config body asks for. */
#define ZT_COMM_NAME "zt-config-comm"

/** arg: a zt_comm_shared_t in memory every rank of the launch sees. */
int zt_comm_api(int rank, int nranks, const HcclRootInfo *root, void *arg);
/** arg: unused. */
int zt_comm_config(int rank, int nranks, const HcclRootInfo *root, void *arg);
/** arg: unused. */
int zt_comm_zc_rules(int rank, int nranks, const HcclRootInfo *root, void *arg);
/** zt_comm_paths' arg for thread ranks (else NULL): see its NULL-stream step. */
#define ZT_COMM_THREADS 1

/** arg: NULL, or a pointer to ZT_COMM_THREADS when the ranks are threads. */
int zt_comm_paths(int rank, int nranks, const HcclRootInfo *root, void *arg);

#endif /* ZT_COMM_H */
