/*
 * libmsprofiler internals: the aclprof* state (prof_api.c) and the trace
 * writer (prof_trace.c).
 */
#ifndef PROF_INTERNAL_H
#define PROF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "acl/acl_prof.h"
#include "zccl/prof_ext.h"

/** A device filter: records of other devices are left out (copies with an
 *  unknown device are kept). */
typedef struct {
    const uint32_t *devs;
    uint32_t ndevs;
} prof_filter_t;

/**
 * Write recs (n of them, any order; sorted in place) as Chrome trace JSON,
 * one file per rank, into dir, named zccl-rank<R>-pid<P>-<run>.trace.json.
 * Returns ACL_SUCCESS or ACL_ERROR_WRITE_FILE (logged).
 */
aclError prof_trace_write(const char *dir, unsigned run, zccl_prof_rec_t *recs, size_t n,
                          uint64_t dropped, const prof_filter_t *filter);

#endif /* PROF_INTERNAL_H */
