/*
 * Running and checking one case of zt_coll.h (in the test library,
 * zt_coll_run.c), the argument-check helper and the rank job the launchers run.
 *
 * zt_cc_start lays out this rank's buffers in its arena (zt_launch.h:
 * activated memory for the zero-copy path, aclrtMalloc memory for the
 * buffered path), fills the input, copies the output region with its
 * guards, issues the call and scribbles over the count arrays it passed
 * (HCCL lets the caller reuse them once the call returns). zt_cc_finish
 * then wants, after the sync: the expected image (the copy with this rank's
 * output blocks written) byte for byte, the input region unchanged out of
 * place, and the path's counters (zero-copy: staged bytes unchanged, one
 * zero-copy op; buffered: one buffered op). A case with a deviating rank
 * wants HCCL_E_PARA from the call or the sync and nothing written.
 */
#ifndef ZT_COLL_RUN_H
#define ZT_COLL_RUN_H

#include "core/hccl_test_api.h"
#include "zt_coll.h"

/* ---- running a case ------------------------------------------------------------ */

/** A started case (the call issued, not yet synchronised). */
typedef struct {
    zt_cc_t c;
    zt_cplan_t p;    /* this rank's arguments */
    zt_cplan_t args; /* the copy the call got, scribbled over once it returned */
    zt_env_t *env;
    unsigned char *rbase; /* output region (in place: the one buffer) */
    unsigned char *sbase; /* input region out of place, else NULL */
    size_t rlen;
    size_t slen;
    unsigned char *send; /* what the call got */
    unsigned char *recv;
    unsigned char *rbefore; /* the regions with their guards before the call */
    unsigned char *sbefore;
    int call_para;
    int skip_counters; /* set after start: other ops ran between start and finish */
    uint64_t st0;
    uint64_t zc0;
    uint64_t bo0;
} zt_ccrun_t;

#define ZT_CC_FAIL(r, ...)                                                                         \
    do {                                                                                           \
        char cs_[256];                                                                             \
        char m_[320];                                                                              \
        zt_cc_str(&(r)->c, cs_, sizeof(cs_));                                                      \
        snprintf(m_, sizeof(m_), __VA_ARGS__);                                                     \
        zt_report((r)->env, "%s: %s", cs_, m_);                                                    \
    } while (0)

/** Set up the buffers and issue the call (no sync). Returns 0, or 2 (stop). */
int zt_cc_start(zt_env_t *env, const zt_cc_t *c, zt_ccrun_t *r);

/** Check a started case given what aclrtSynchronizeStream returned. Returns 0, 1 or 2. */
int zt_cc_finish(zt_ccrun_t *r, aclError sync_rc);

/** Does case c take the buffered path on rank me of n (an op it counts)? */
int zt_cc_expect_buffered(const zt_cc_t *c, int n, int me);

/** Run one case: start, sync, finish. Returns 0, 1 (checked, failed) or 2 (stop). */
int zt_cc_run(zt_env_t *env, const zt_cc_t *c);

/* ---- argument checks ----------------------------------------------------------- */

typedef struct {
    zt_env_t *env;
    int cases;
    int fails;
} zt_bad_t;

void zt_bad_check(zt_bad_t *b, const char *what, int line, int got, int want);

#define ZT_BAD(b, call, want) zt_bad_check((b), #call, __LINE__, (int)(call), (int)(want))

/* ---- launching -------------------------------------------------------------------- */

/** What a rank runs on its own environment; returns its failures. */
typedef int (*zt_cc_body_fn)(zt_env_t *env, const void *arg);

/** arg of zt_cc_rank_job. */
typedef struct {
    zt_cc_body_fn body;
    const void *arg;
} zt_cc_job_t;

/**
 * A zt_rank_fn (zt_launch.h): open the rank's environment, run job->body,
 * close. arg: const zt_cc_job_t *.
 */
int zt_cc_rank_job(int rank, int nranks, const HcclRootInfo *root, void *arg);

#endif /* ZT_COLL_RUN_H */
