/*
 * Stream capture into model run instances (aclmdlRI), the subset of CANN's
 * acl_mdl.h that graph-capturing programs use. Names and values follow
 * CANN's public headers.
 *
 * Between aclmdlRICaptureBegin and aclmdlRICaptureEnd, work issued on the
 * capturing stream is recorded in a model instead of run: memory copies and
 * fills, HCCL collectives and point-to-point ops. aclmdlRIExecuteAsync
 * issues the recorded work again, in order, on the stream it is given; every
 * replay of a collective is a new op matched across ranks. Events and
 * synchronising calls on a capturing stream are not supported: they fail
 * with ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT and invalidate the capture.
 */
#ifndef ZCCL_ACL_ACL_MDL_H
#define ZCCL_ACL_ACL_MDL_H

#include "acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A model run instance: the work captured from one stream. */
typedef void *aclmdlRI;

/** Which threads' unsafe calls a capture guards against (recorded; every
 *  mode captures the same work here). Except in RELAXED mode the capture
 *  must end on the thread that began it. */
typedef enum {
    ACL_MODEL_RI_CAPTURE_MODE_GLOBAL = 0,
    ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
    ACL_MODEL_RI_CAPTURE_MODE_RELAXED,
} aclmdlRICaptureMode;

/** Capture state of a stream (aclmdlRICaptureGetInfo). */
typedef enum {
    ACL_MODEL_RI_CAPTURE_STATUS_NONE = 0,
    ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE,
    ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED,
} aclmdlRICaptureStatus;

/**
 * @brief Start capturing the work issued on @p stream into a new model.
 * @param stream a live stream, or NULL for the current device's default stream.
 * @param mode   an aclmdlRICaptureMode.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM mode is not a capture mode.
 * @retval ACL_ERROR_RT_STREAM_CAPTURED the stream is capturing already.
 * @retval ACL_ERROR_RT_INVALID_HANDLE / ACL_ERROR_RT_CONTEXT_NULL bad stream.
 */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode);

/**
 * @brief Report whether @p stream is capturing, and into which model.
 * @param status  out: NONE, ACTIVE or INVALIDATED.
 * @param modelRI out (may be NULL): the model being captured, NULL when none.
 * @retval ACL_SUCCESS, ACL_ERROR_INVALID_PARAM (status NULL), or a stream error.
 */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureGetInfo(aclrtStream stream,
                                                    aclmdlRICaptureStatus *status,
                                                    aclmdlRI *modelRI);

/**
 * @brief Stop capturing on @p stream and hand out the model.
 * @param modelRI out: the captured model (run it with aclmdlRIExecuteAsync).
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM modelRI is NULL.
 * @retval ACL_ERROR_RT_STREAM_NOT_CAPTURED the stream is not capturing.
 * @retval ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD another thread began it (not RELAXED).
 * @retval ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED an unsupported call broke the
 *         capture; the model is destroyed.
 */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI);

/**
 * @brief Issue the captured work of @p modelRI, in order, on @p stream.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM modelRI is NULL or not a model.
 * @retval ACL_ERROR_RT_MODEL_CAPTURED the model is still being captured.
 * @retval ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT @p stream is capturing.
 * @retval other: the error of the first node that could not be issued
 *         (nodes before it are queued).
 */
ACL_FUNC_VISIBILITY aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream);

/**
 * @brief Run @p modelRI on a stream of its own (made on the caller's current
 *        device at first use) and wait for it.
 * @param timeout ms to wait, -1 = no limit.
 * @retval ACL_SUCCESS, ACL_ERROR_INVALID_PARAM (bad model or timeout < -1),
 *         ACL_ERROR_RT_STREAM_SYNC_TIMEOUT (the replay goes on), the error of
 *         a node, or what aclmdlRIExecuteAsync returns.
 */
ACL_FUNC_VISIBILITY aclError aclmdlRIExecute(aclmdlRI modelRI, int32_t timeout);

/** @brief Name a model (the last name set counts).
 *  @retval ACL_SUCCESS, ACL_ERROR_INVALID_PARAM (NULL name or not a model). */
ACL_FUNC_VISIBILITY aclError aclmdlRISetName(aclmdlRI modelRI, const char *name);

/** @brief Copy a model's name ("" if none set) into name[maxLen].
 *  @retval ACL_SUCCESS, ACL_ERROR_INVALID_PARAM (not a model, NULL or too short). */
ACL_FUNC_VISIBILITY aclError aclmdlRIGetName(aclmdlRI modelRI, uint32_t maxLen, char *name);

/**
 * @brief Destroy a model (its captured work and copies of its arguments).
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM modelRI is NULL or not a model.
 * @retval ACL_ERROR_RT_MODEL_RUNNING a replay of it is still queued or running.
 * @retval ACL_ERROR_RT_MODEL_CAPTURED it is still being captured.
 */
ACL_FUNC_VISIBILITY aclError aclmdlRIDestroy(aclmdlRI modelRI);

#ifdef __cplusplus
}
#endif

#endif /* ZCCL_ACL_ACL_MDL_H */
