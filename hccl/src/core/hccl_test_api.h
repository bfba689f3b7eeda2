/*
 * Internal introspection for tests (not installed). Exported from libhccl
 * with a zccl_ prefix so tests can read counters without reaching into
 * struct layouts.
 */
#ifndef HCCL_TEST_API_H
#define HCCL_TEST_API_H

#include <stdint.h>

#include "hccl/hccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Bytes this rank copied into CCL buffers on this communicator so far
 *  (stays 0 while every op runs zero-copy). */
__attribute__((visibility("default"))) uint64_t zccl_comm_staged_bytes(HcclComm comm);

/** Ops this rank ran zero-copy / buffered on this communicator. */
__attribute__((visibility("default"))) uint64_t zccl_comm_zero_copy_ops(HcclComm comm);
__attribute__((visibility("default"))) uint64_t zccl_comm_buffered_ops(HcclComm comm);

/** Of the zero-copy ops, those this rank ran with a hierarchical algorithm
 *  (coll/coll_hier.h, grouped by NUMA node or package); 0 while flat. */
__attribute__((visibility("default"))) uint64_t zccl_comm_hier_ops(HcclComm comm);

/** Bytes this rank carried inline in its post slot: AllReduce / AllGather of
 *  at most 4 KiB per rank on activated memory skip the user-buffer reads. */
__attribute__((visibility("default"))) uint64_t zccl_comm_inline_bytes(HcclComm comm);

/** Large direct AllReduce / AllGather ops this rank ran with cached
 *  (streaming = 0) or streaming (streaming = 1) stores (coll_nt.c). */
__attribute__((visibility("default"))) uint64_t zccl_comm_store_kind_ops(HcclComm comm,
                                                                         int streaming);

/** 1 once the communicator created its CCL buffer (buffered path used). */
__attribute__((visibility("default"))) int zccl_comm_ccl_allocated(HcclComm comm);

/** Bytes this rank sent to ranks on other hosts (UCX), 0 on one host. */
__attribute__((visibility("default"))) uint64_t zccl_comm_net_bytes(HcclComm comm);

/** Level i of the communicator's levels (topo/hccl_topo.h), the host first:
 *  its kind (0 host, 1 package, 2 NUMA node, 3 L3 group) in *kind and each
 *  rank's group and index in its group in group_of / index_of (nranks ints
 *  each, either may be NULL). Returns the level's groups, 0 when there is
 *  no level i or the handle is bad. */
__attribute__((visibility("default"))) int zccl_comm_level(HcclComm comm, int i, int *kind,
                                                           int *group_of, int *index_of);

/** Overwrites the staging part this rank publishes for its buffered sends
 *  (its control segment's p2p_part), as a hostile local user could: tests
 *  check that peers refuse a value that does not fit the buffer. Returns 0,
 *  or -1 for a bad handle or before the first buffered send. */
__attribute__((visibility("default"))) int zccl_comm_poke_p2p_part(HcclComm comm, uint64_t part);

/** Hosts the communicator spans (1 on one host), 0 for a bad handle. */
__attribute__((visibility("default"))) int zccl_comm_hosts(HcclComm comm);

/** Copy this rank's UCX worker address (as published to its peers at init:
 *  interface, IP and port, nothing secret) into buf of cap bytes; its length,
 *  0 on one host or when it does not fit. The security tests' outsider
 *  aims at it. */
__attribute__((visibility("default"))) size_t zccl_comm_net_address(HcclComm comm, void *buf,
                                                                    size_t cap);

/** Messages from outside the communicator this rank dropped (0 on one host). */
__attribute__((visibility("default"))) uint64_t zccl_comm_net_dropped(HcclComm comm);

/** Where this process sees [va, va + bytes) of rank peer's activated memory
 *  (its shadow window; va itself for this rank and same-process peers), or
 *  NULL when it is not active there or the communicator spans hosts. */
__attribute__((visibility("default"))) void *zccl_comm_peer_addr(HcclComm comm, uint32_t peer,
                                                                 const void *va, uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif
