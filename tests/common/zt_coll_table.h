/*
 * The one table of collective and point-to-point scenarios that the fork
 * (tests/mp/test_mp_colls.c, test_mp_p2p.c), thread
 * (tests/unit/hccl/test_hccl_threads_colls.c) and MPI
 * (tests/mpi/test_mpi_colls.c) launchers run (in the test library,
 * zt_coll_table.c). A row names a scenario of zt_coll_scen.h or
 * zt_coll_p2p.h and the adapter that runs it on one rank's environment; a
 * launcher says only how it starts ranks (zt_cs_launcher_t), and zt_cs_run
 * turns the rows it selects into its cmocka cases:
 *
 *   case                     adapter runs          ranks  variants
 *   test_matrix(_np1..4)     zt_cc_matrix_run      1..4   1
 *   test_mismatch            zt_cc_mismatch_run    2..4   1 (every count, dtype, op, root)
 *   test_mismatch_counts     zt_cc_mismatch_run    2..4   8 (4 V collectives x zero-copy,
 *                                                            buffered), each on a fresh comm
 *   test_badargs             zt_cc_badargs_run     1..4   1
 *   test_p2p_ring            zt_p2p_ring_run       2..4   1
 *   test_p2p_batch_alltoall  zt_p2p_a2a_run        2..4   1
 *   test_p2p_mismatch        zt_p2p_mismatch_run   2..4   1
 *   test_p2p_badargs         zt_p2p_badargs_run    1..4   1
 *
 * The fork and thread launchers run each case at every rank count of its
 * row, the matrix as one case per rank count (test_matrix_np1..4); the MPI
 * launcher runs each case once on the ranks mpirun started (test_matrix).
 */
#ifndef ZT_COLL_TABLE_H
#define ZT_COLL_TABLE_H

#include "zt_coll_run.h"

/** Which rows a launcher runs. */
enum { ZT_CS_COLL = 1 << 0, ZT_CS_P2P = 1 << 1 };

typedef struct zt_cs_launcher zt_cs_launcher_t;

/** What an adapter gets as its arg. */
typedef struct {
    const zt_cs_launcher_t *l;
    int variant; /**< 0 .. the row's variants - 1 */
} zt_cs_arg_t;

/**
 * How a launcher starts ranks: launch runs job on n fresh ranks (on one
 * fresh root info) and returns non-zero when any rank failed.
 */
struct zt_cs_launcher {
    int (*launch)(int n, zt_cc_job_t *job, int timeout_s);
    int fixed_n;   /**< > 0: the ranks are given (MPI), each case runs once on them */
    int rows;      /**< ZT_CS_COLL, ZT_CS_P2P or both */
    uint64_t seed; /**< the launcher's seed base */
    int same_proc; /**< ranks are threads of one process (zt_coll_p2p.h) */
};

/** One row of the table. */
typedef struct {
    const char *name;   /**< cmocka case name */
    zt_cc_body_fn body; /**< the adapter; arg: const zt_cs_arg_t * */
    int rows;           /**< ZT_CS_COLL or ZT_CS_P2P */
    int lo;             /**< fork and thread launchers: rank counts lo..4 */
    int per_np;         /**< fork and thread launchers: one case per rank count */
    int variants;       /**< fresh communicators it runs on, one after another */
    int timeout_s;      /**< seconds one launch of forked ranks may take */
} zt_cs_t;

/** zt_cs_launcher_t.launch for forked ranks, each launch killed after timeout_s. */
int zt_cs_launch_procs(int n, zt_cc_job_t *job, int timeout_s);

/** zt_cs_launcher_t.launch for threads of this process (no timeout: ctest's applies). */
int zt_cs_launch_threads(int n, zt_cc_job_t *job, int timeout_s);

/** The table. */
extern const zt_cs_t zt_cs_table[];
extern const int zt_cs_rows;

/**
 * Run the rows l selects as one cmocka group (group name "tests"); returns
 * cmocka's result. l must outlive the call.
 */
int zt_cs_run(const zt_cs_launcher_t *l);

#endif /* ZT_COLL_TABLE_H */
