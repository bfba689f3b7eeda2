/*
 * msproftx (acl_prof.h): the program's own marks and ranges, recorded as
 * ZCCL_PROF_TX records (path ZCCL_PROF_PATH_TX, the message in the comm
 * field, the calling thread's current device so the trace writer puts them
 * in that rank's file). Push/pop ranges nest per thread; start/stop ranges
 * live in a table any thread may close them from. Stamps are validated
 * against the list of live ones. When no collection records marks, every
 * call still checks its arguments and records nothing.
 */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zc/export.h"
#include "zc/log.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"

#define PROF_STAMP_MAGIC 0x7a74786du
#define PROF_TX_DEPTH 32
#define PROF_TX_RANGES 1024

typedef struct prof_stamp {
    uint32_t magic;
    struct prof_stamp *next; /* live stamps */
    char msg[ZCCL_PROF_NAME_MAX];
} prof_stamp_t;

typedef struct {
    uint64_t t0;
    char msg[ZCCL_PROF_NAME_MAX];
} prof_open_t;

static pthread_mutex_t prof_tx_mu = PTHREAD_MUTEX_INITIALIZER;
static prof_stamp_t *prof_stamps;
static prof_open_t prof_ranges[PROF_TX_RANGES]; /* t0 == 0: free */
static _Thread_local prof_open_t prof_stack[PROF_TX_DEPTH];
static _Thread_local int prof_depth;

/* Copy the stamp's message into msg if stamp is live; 0 or -1 (logged). */
static int prof_stamp_msg(const void *stamp, char *msg, const char *fn)
{
    int ok = 0;
    pthread_mutex_lock(&prof_tx_mu);
    for (prof_stamp_t *s = prof_stamps; s != NULL && !ok; s = s->next) {
        if (s == stamp && s->magic == PROF_STAMP_MAGIC) {
            memcpy(msg, s->msg, sizeof(s->msg));
            ok = 1;
        }
    }
    pthread_mutex_unlock(&prof_tx_mu);
    if (!ok) {
        ZC_WARN(ZC_SUB_INIT, "%s: %p is not a live stamp", fn, stamp);
    }
    return ok ? 0 : -1;
}

static void prof_tx_record_dev(const char *kind, const char *msg, uint64_t t0, uint64_t t1, int dev)
{
    zccl_prof_rec_t r;
    memset(&r, 0, sizeof(r));
    r.t_enq = t0;
    r.t_start = t0;
    r.t_end = t1;
    r.stream = UINT64_MAX; /* a track of its own in the trace */
    r.rank = -1;
    r.device = dev;
    r.dtype = -1;
    r.peer = -1;
    r.path = ZCCL_PROF_PATH_TX;
    snprintf(r.op, sizeof(r.op), "%s", kind);
    snprintf(r.comm, sizeof(r.comm), "%s", msg);
    zccl_prof_record(&r, ZCCL_PROF_TX);
}

static void prof_tx_record(const char *kind, const char *msg, uint64_t t0, uint64_t t1)
{
    prof_tx_record_dev(kind, msg, t0, t1, zccl_current_device());
}

ZC_EXPORT void *aclprofCreateStamp(void)
{
    prof_stamp_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        ZC_WARN(ZC_SUB_INIT, "aclprofCreateStamp: out of memory");
        return NULL;
    }
    s->magic = PROF_STAMP_MAGIC;
    pthread_mutex_lock(&prof_tx_mu);
    s->next = prof_stamps;
    prof_stamps = s;
    pthread_mutex_unlock(&prof_tx_mu);
    return s;
}

ZC_EXPORT void aclprofDestroyStamp(void *stamp)
{
    prof_stamp_t *found = NULL;
    pthread_mutex_lock(&prof_tx_mu);
    for (prof_stamp_t **p = &prof_stamps; *p != NULL; p = &(*p)->next) {
        if (*p == stamp) {
            found = *p;
            *p = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&prof_tx_mu);
    if (found == NULL) {
        ZC_WARN(ZC_SUB_INIT, "aclprofDestroyStamp: %p is not a live stamp", stamp);
        return;
    }
    found->magic = 0;
    free(found);
}

ZC_EXPORT aclError aclprofSetStampTraceMessage(void *stamp, const char *msg, uint32_t msgLen)
{
    if (msg == NULL || msgLen == 0) {
        ZC_WARN(ZC_SUB_INIT, "aclprofSetStampTraceMessage: msg %s, msgLen %u",
                msg == NULL ? "NULL" : "given", msgLen);
        return ACL_ERROR_INVALID_PARAM;
    }
    int ok = 0;
    pthread_mutex_lock(&prof_tx_mu);
    for (prof_stamp_t *s = prof_stamps; s != NULL && !ok; s = s->next) {
        if (s == stamp) {
            size_t n = strnlen(msg, ZC_MIN((size_t)msgLen, sizeof(s->msg) - 1));
            memcpy(s->msg, msg, n);
            s->msg[n] = '\0';
            ok = 1;
        }
    }
    pthread_mutex_unlock(&prof_tx_mu);
    if (!ok) {
        ZC_WARN(ZC_SUB_INIT, "aclprofSetStampTraceMessage: %p is not a live stamp", stamp);
        return ACL_ERROR_INVALID_PARAM;
    }
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclprofMark(void *stamp)
{
    char msg[ZCCL_PROF_NAME_MAX];
    if (prof_stamp_msg(stamp, msg, "aclprofMark") != 0) {
        return ACL_ERROR_INVALID_PARAM;
    }
    if (zccl_prof_on(ZCCL_PROF_TX)) {
        uint64_t t = zc_time_ns();
        prof_tx_record("mark", msg, t, t);
    }
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclprofMarkEx(const char *msg, size_t msgLen, aclrtStream stream)
{
    int dev = zccl_stream_device(stream);
    if (msg == NULL || msgLen == 0 || dev < 0) {
        ZC_WARN(ZC_SUB_INIT, "aclprofMarkEx: msg %s, msgLen %zu, stream %p (device %d)",
                msg == NULL ? "NULL" : "given", msgLen, stream, dev);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (zccl_prof_on(ZCCL_PROF_TX)) {
        char text[ZCCL_PROF_NAME_MAX];
        size_t n = strnlen(msg, ZC_MIN(msgLen, sizeof(text) - 1));
        memcpy(text, msg, n);
        text[n] = '\0';
        uint64_t t = zc_time_ns();
        prof_tx_record_dev("mark", text, t, t, dev);
    }
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclprofPush(void *stamp)
{
    if (prof_depth >= PROF_TX_DEPTH) {
        ZC_WARN(ZC_SUB_INIT, "aclprofPush: %d ranges open on this thread already", prof_depth);
        return ACL_ERROR_INVALID_PARAM;
    }
    prof_open_t *o = &prof_stack[prof_depth];
    if (prof_stamp_msg(stamp, o->msg, "aclprofPush") != 0) {
        return ACL_ERROR_INVALID_PARAM;
    }
    o->t0 = zc_time_ns();
    prof_depth++;
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclprofPop(void)
{
    if (prof_depth == 0) {
        ZC_WARN(ZC_SUB_INIT, "aclprofPop: no aclprofPush range is open on this thread");
        return ACL_ERROR_INVALID_PARAM;
    }
    prof_open_t *o = &prof_stack[--prof_depth];
    if (zccl_prof_on(ZCCL_PROF_TX)) {
        prof_tx_record("push/pop", o->msg, o->t0, ZC_MAX(zc_time_ns(), o->t0 + 1));
    }
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclprofRangeStart(void *stamp, uint32_t *rangeId)
{
    char msg[ZCCL_PROF_NAME_MAX];
    if (rangeId == NULL) {
        ZC_WARN(ZC_SUB_INIT, "aclprofRangeStart: rangeId is NULL");
        return ACL_ERROR_INVALID_PARAM;
    }
    if (prof_stamp_msg(stamp, msg, "aclprofRangeStart") != 0) {
        return ACL_ERROR_INVALID_PARAM;
    }
    uint64_t t0 = zc_time_ns();
    int slot = -1;
    pthread_mutex_lock(&prof_tx_mu);
    for (int i = 0; i < PROF_TX_RANGES && slot < 0; i++) {
        if (prof_ranges[i].t0 == 0) {
            slot = i;
            prof_ranges[i].t0 = t0;
            memcpy(prof_ranges[i].msg, msg, sizeof(msg));
        }
    }
    pthread_mutex_unlock(&prof_tx_mu);
    if (slot < 0) {
        ZC_WARN(ZC_SUB_INIT, "aclprofRangeStart: %d ranges open already", PROF_TX_RANGES);
        return ACL_ERROR_INVALID_PARAM;
    }
    *rangeId = (uint32_t)slot + 1;
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclprofRangeStop(uint32_t rangeId)
{
    prof_open_t o = {0, ""};
    pthread_mutex_lock(&prof_tx_mu);
    if (rangeId >= 1 && rangeId <= PROF_TX_RANGES && prof_ranges[rangeId - 1].t0 != 0) {
        o = prof_ranges[rangeId - 1];
        prof_ranges[rangeId - 1].t0 = 0;
    }
    pthread_mutex_unlock(&prof_tx_mu);
    if (o.t0 == 0) {
        ZC_WARN(ZC_SUB_INIT, "aclprofRangeStop: range %u is not open", rangeId);
        return ACL_ERROR_INVALID_PARAM;
    }
    if (zccl_prof_on(ZCCL_PROF_TX)) {
        prof_tx_record("range", o.msg, o.t0, ZC_MAX(zc_time_ns(), o.t0 + 1));
    }
    return ACL_SUCCESS;
}
