/*
 * Profiling (CANN's acl_prof.h subset), implemented by libmsprofiler.so:
 * link with -lmsprofiler. Names and values follow CANN's public headers.
 *
 * On a host there is no AI Core to sample: what zccl records is the work a
 * program issues. Between aclprofStart and aclprofStop every HCCL collective
 * and point-to-point op (ACL_PROF_HCCL_TRACE or any ACL_PROF_TASK_TIME*
 * switch) and every stream copy or fill (ACL_PROF_TASK_TIME* or
 * ACL_PROF_RUNTIME_API) is recorded with its rank, communicator, op, dtype,
 * count, bytes, data path (zero-copy, inline, buffered), stream and its
 * issue / start / end times. aclprofStop (or aclprofFinalize) writes them as
 * Chrome trace JSON, one file per rank and process, into the directory given
 * to aclprofInit: zccl-rank<R>-pid<P>-<N>.trace.json (N counts the stops of
 * the process; R is "copies" for copies not attributable to one rank).
 * Ranks are trace processes and streams their threads; the files open in the
 * Perfetto UI. ACL_PROF_MSPROFTX records the program's marks and ranges (the
 * msproftx calls at the end of this header). Other switches are accepted and
 * produce nothing.
 */
#ifndef ZCCL_ACL_ACL_PROF_H
#define ZCCL_ACL_ACL_PROF_H

#include "acl_base.h"

#define MSVP_PROF_API __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

/* Data switches of aclprofCreateConfig's dataTypeConfig. */
#define ACL_PROF_ACL_API 0x0001ULL
#define ACL_PROF_TASK_TIME 0x0002ULL
#define ACL_PROF_AICORE_METRICS 0x0004ULL
#define ACL_PROF_AICPU 0x0008ULL
#define ACL_PROF_L2CACHE 0x0010ULL
#define ACL_PROF_HCCL_TRACE 0x0020ULL
#define ACL_PROF_TRAINING_TRACE 0x0040ULL
#define ACL_PROF_MSPROFTX 0x0080ULL
#define ACL_PROF_RUNTIME_API 0x0100ULL
#define ACL_PROF_GE_API_L0 0x0200ULL
#define ACL_PROF_TASK_TIME_L0 0x0800ULL
#define ACL_PROF_TASK_MEMORY 0x1000ULL
#define ACL_PROF_TASK_TIME_L2 0x2000ULL
#define ACL_PROF_OP_ATTR 0x4000ULL
#define ACL_PROF_TASK_TIME_L3 0x8000ULL
#define ACL_PROF_GE_API_L1 0x01000000ULL
#define ACL_PROF_API_STATS 0x400000000ULL

#define ACL_PROF_MAX_OP_NAME_LEN 257
#define ACL_PROF_MAX_OP_TYPE_LEN 65

/** AI Core metric sets (accepted; a host has no AI Core to sample). */
typedef enum {
    ACL_AICORE_ARITHMETIC_UTILIZATION = 0,
    ACL_AICORE_PIPE_UTILIZATION = 1,
    ACL_AICORE_MEMORY_BANDWIDTH = 2,
    ACL_AICORE_L0B_AND_WIDTH = 3,
    ACL_AICORE_RESOURCE_CONFLICT_RATIO = 4,
    ACL_AICORE_MEMORY_UB = 5,
    ACL_AICORE_L2_CACHE = 6,
    ACL_AICORE_PIPE_EXECUTE_UTILIZATION = 7,
    ACL_AICORE_MEMORY_ACCESS = 8,
    ACL_AICORE_NONE = 0xFF
} aclprofAicoreMetrics;

typedef struct aclprofConfig aclprofConfig;
typedef struct aclprofAicoreEvents aclprofAicoreEvents;

/**
 * @brief Set the directory the trace files go to (created if missing).
 * @param profilerResultPath the directory; @param length its strlen.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM NULL path, or length 0, over 4095 or not strlen.
 * @retval ACL_ERROR_INVALID_FILE the directory cannot be created or written.
 * @retval ACL_ERROR_REPEAT_INITIALIZE aclprofInit was called already.
 */
MSVP_PROF_API aclError aclprofInit(const char *profilerResultPath, size_t length);

/**
 * @brief End profiling: stops a running collection (writing its traces).
 * @retval ACL_SUCCESS, ACL_ERROR_PROF_NOT_RUN (no aclprofInit), or the error of
 *         writing the traces.
 */
MSVP_PROF_API aclError aclprofFinalize(void);

/**
 * @brief Start recording what @p profilerConfig selects.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM profilerConfig is NULL or not a config.
 * @retval ACL_ERROR_PROF_NOT_RUN aclprofInit was not called.
 * @retval ACL_ERROR_PROF_ALREADY_RUN a collection is running.
 * @retval ACL_ERROR_BAD_ALLOC no memory for the record buffer.
 */
MSVP_PROF_API aclError aclprofStart(const aclprofConfig *profilerConfig);

/**
 * @brief Stop recording and write one trace file per rank.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM profilerConfig is NULL or not a config.
 * @retval ACL_ERROR_PROF_NOT_RUN no collection is running.
 * @retval ACL_ERROR_WRITE_FILE a trace file could not be written.
 */
MSVP_PROF_API aclError aclprofStop(const aclprofConfig *profilerConfig);

/**
 * @brief Make a profiling config.
 * @param deviceIdList devices to profile (deviceNums entries, each a valid device).
 * @param aicoreMetrics an aclprofAicoreMetrics value.
 * @param aicoreEvents must be NULL.
 * @param dataTypeConfig ACL_PROF_* switches (unknown bits are refused).
 * @return the config, or NULL on bad input (logged).
 */
MSVP_PROF_API aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums,
                                                 aclprofAicoreMetrics aicoreMetrics,
                                                 const aclprofAicoreEvents *aicoreEvents,
                                                 uint64_t dataTypeConfig);

/**
 * @brief Free a config made by aclprofCreateConfig.
 * @retval ACL_SUCCESS, or ACL_ERROR_INVALID_PARAM (NULL or not a config).
 */
MSVP_PROF_API aclError aclprofDestroyConfig(const aclprofConfig *profilerConfig);

/* ---- msproftx: the program's own marks and ranges (ACL_PROF_MSPROFTX) ----
 * A stamp carries a message. Marks, push/pop and start/stop ranges are
 * recorded on the calling thread's current device while a collection with
 * ACL_PROF_MSPROFTX runs, and appear in the trace as instant events and
 * ranges named by the message; at other times they are accepted and record
 * nothing (so they can stay in a program). */

/** @brief A new stamp (message ""); NULL when out of memory. */
MSVP_PROF_API void *aclprofCreateStamp(void);

/** @brief Free a stamp (NULL or a stamp not made here is ignored, with a log). */
MSVP_PROF_API void aclprofDestroyStamp(void *stamp);

/** @brief Set a stamp's message (msgLen bytes, at most 127 kept).
 *  @retval ACL_SUCCESS, ACL_ERROR_INVALID_PARAM (bad stamp, NULL msg or msgLen 0). */
MSVP_PROF_API aclError aclprofSetStampTraceMessage(void *stamp, const char *msg, uint32_t msgLen);

/** @brief Record an instant event named by the stamp's message.
 *  @retval ACL_SUCCESS, ACL_ERROR_INVALID_PARAM (bad stamp). */
MSVP_PROF_API aclError aclprofMark(void *stamp);

/** @brief Record an instant event named msg[0, msgLen) on the device of @p stream.
 *  @retval ACL_SUCCESS, ACL_ERROR_INVALID_PARAM (NULL msg, msgLen 0, bad stream). */
MSVP_PROF_API aclError aclprofMarkEx(const char *msg, size_t msgLen, aclrtStream stream);

/** @brief Open a range on the calling thread (closed by aclprofPop; 32 deep).
 *  @retval ACL_SUCCESS, ACL_ERROR_INVALID_PARAM (bad stamp or too deep). */
MSVP_PROF_API aclError aclprofPush(void *stamp);

/** @brief Close the calling thread's innermost aclprofPush range.
 *  @retval ACL_SUCCESS, ACL_ERROR_INVALID_PARAM (no range open). */
MSVP_PROF_API aclError aclprofPop(void);

/** @brief Open a range any thread may close; *rangeId names it.
 *  @retval ACL_SUCCESS, ACL_ERROR_INVALID_PARAM (bad stamp, NULL rangeId, 1024 open). */
MSVP_PROF_API aclError aclprofRangeStart(void *stamp, uint32_t *rangeId);

/** @brief Close a range opened by aclprofRangeStart.
 *  @retval ACL_SUCCESS, ACL_ERROR_INVALID_PARAM (no such open range). */
MSVP_PROF_API aclError aclprofRangeStop(uint32_t rangeId);

#ifdef __cplusplus
}
#endif

#endif /* ZCCL_ACL_ACL_PROF_H */
