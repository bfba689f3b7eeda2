/*
 * zccl's ACL runtime API: devices, streams, events, memory, VMM and IPC
 * (the subset of CANN's acl_rt.h that collective programs use), on a Linux
 * host.
 *
 * Model: a device is a logical accelerator bound to a host
 * NUMA node; "device memory" is host memory (memfd-backed, so it can be
 * shared with other processes); a stream is a FIFO worker thread; an event is
 * a marker a stream completes and timestamps. The current device is per
 * thread, as in ACL. The NULL stream is the current device's default stream.
 *
 * Error conventions used throughout (each failing call logs one line):
 *  - a NULL out-pointer, a zero or inconsistent size, a bad enum value or a
 *    non-zero reserved flag: ACL_ERROR_INVALID_PARAM;
 *  - a device id outside [0, count): ACL_ERROR_RT_INVALID_DEVICEID;
 *  - a call that needs a current device in a thread without one (stream
 *    creation, the NULL stream): ACL_ERROR_RT_CONTEXT_NULL;
 *  - a stream or event handle that is not live (never created, destroyed, or
 *    inherited across fork): ACL_ERROR_RT_INVALID_HANDLE;
 *  - memory exhaustion (including absurd sizes): ACL_ERROR_RT_MEMORY_ALLOCATION;
 *  - an importer the exporter does not trust: ACL_ERROR_RT_NO_PERMISSION;
 *  - an exporting process that is gone, does not know the shareable handle
 *    or key, or does not answer: ACL_ERROR_RT_IPC_ERROR;
 *  - something a host cannot do: ACL_ERROR_RT_FEATURE_NOT_SUPPORT.
 *
 * Names, prototypes and enum values follow CANN's public headers; the text
 * is zccl's own. Compiles as C11 and as C++11.
 */
#ifndef ZCCL_ACL_ACL_RT_H
#define ZCCL_ACL_ACL_RT_H

#include <stddef.h>
#include <stdint.h>

#include "acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- flags ---------------------------------------------------------------- */

/* Event creation flags (aclrtCreateEventWithFlag / aclrtCreateEventExWithFlag). */
#define ACL_EVENT_SYNC 0x00000001U
#define ACL_EVENT_CAPTURE_STREAM_PROGRESS 0x00000002U
#define ACL_EVENT_TIME_LINE 0x00000008U
#define ACL_EVENT_DEVICE_USE_ONLY 0x00000010U
#define ACL_EVENT_EXTERNAL 0x00000020U
#define ACL_EVENT_IPC 0x00000040U

/* Stream creation flags (aclrtCreateStreamWithConfig). */
#define ACL_STREAM_FAST_LAUNCH 0x00000001U
#define ACL_STREAM_FAST_SYNC 0x00000002U
#define ACL_STREAM_PERSISTENT 0x00000004U
#define ACL_STREAM_HUGE 0x00000008U
#define ACL_STREAM_CPU_SCHEDULE 0x00000010U
#define ACL_STREAM_DEVICE_USE_ONLY 0x00000020U

/* Stream failure modes (aclrtSetStreamFailureMode). */
#define ACL_CONTINUE_ON_FAILURE 0x00000000U
#define ACL_STOP_ON_FAILURE 0x00000001U

/* IPC memory export / import flags. */
#define ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT 0x0UL
#define ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION 0x1UL
#define ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT 0x0UL
#define ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS 0x1UL

/* VMM shareable-handle export flags. */
#define ACL_RT_VMM_EXPORT_FLAG_DEFAULT 0x0UL
#define ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION 0x1UL

/** Length of an IPC memory key buffer, including the terminating NUL. */
#define ACL_IPC_MEM_KEY_LEN 65U

/* ---- enums and structs ------------------------------------------------------ */

/** Where the program runs. zccl always reports ACL_HOST. */
typedef enum aclrtRunMode {
    ACL_DEVICE,
    ACL_HOST,
} aclrtRunMode;

/** Event status of the deprecated aclrtQueryEvent. */
typedef enum aclrtEventStatus {
    ACL_EVENT_STATUS_COMPLETE = 0,
    ACL_EVENT_STATUS_NOT_READY = 1,
    ACL_EVENT_STATUS_RESERVED = 2,
} aclrtEventStatus;

/** Whether the latest record of an event has executed (aclrtQueryEventStatus). */
typedef enum aclrtEventRecordedStatus {
    ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
    ACL_EVENT_RECORDED_STATUS_COMPLETE = 1,
} aclrtEventRecordedStatus;

/** Whether a wait on an event would pass now (aclrtQueryEventWaitStatus). */
typedef enum aclrtEventWaitStatus {
    ACL_EVENT_WAIT_STATUS_COMPLETE = 0,
    ACL_EVENT_WAIT_STATUS_NOT_READY = 1,
    ACL_EVENT_WAIT_STATUS_RESERVED = 0xFFFF,
} aclrtEventWaitStatus;

/** Whether all work enqueued on a stream has run (aclrtStreamQuery). */
typedef enum aclrtStreamStatus {
    ACL_STREAM_STATUS_COMPLETE = 0,
    ACL_STREAM_STATUS_NOT_READY = 1,
    ACL_STREAM_STATUS_RESERVED = 0xFFFF,
} aclrtStreamStatus;

/** Copy direction; all kinds are plain memory copies on a host. */
typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEFAULT,
    ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE,
    ACL_MEMCPY_INNER_DEVICE_TO_DEVICE,
    ACL_MEMCPY_INTER_DEVICE_TO_DEVICE,
} aclrtMemcpyKind;

/** aclrtMalloc page policy (huge pages are a transparent-huge-page hint on a host). */
typedef enum aclrtMemMallocPolicy {
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEM_MALLOC_HUGE_ONLY,
    ACL_MEM_MALLOC_NORMAL_ONLY,
    ACL_MEM_MALLOC_HUGE_FIRST_P2P,
    ACL_MEM_MALLOC_HUGE_ONLY_P2P,
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P,
    ACL_MEM_MALLOC_HUGE1G_ONLY,
    ACL_MEM_MALLOC_HUGE1G_ONLY_P2P,
    ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
    ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000,
    ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000,
} aclrtMemMallocPolicy;

/** Memory kind and page size (aclrtGetMemInfo, aclrtPhysicalMemProp::memAttr). */
typedef enum aclrtMemAttr {
    ACL_DDR_MEM,
    ACL_HBM_MEM,
    ACL_DDR_MEM_HUGE,
    ACL_DDR_MEM_NORMAL,
    ACL_HBM_MEM_HUGE,
    ACL_HBM_MEM_NORMAL,
    ACL_DDR_MEM_P2P_HUGE,
    ACL_DDR_MEM_P2P_NORMAL,
    ACL_HBM_MEM_P2P_HUGE,
    ACL_HBM_MEM_P2P_NORMAL,
    ACL_HBM_MEM_HUGE1G,
    ACL_HBM_MEM_P2P_HUGE1G,
    ACL_MEM_NORMAL,
    ACL_MEM_HUGE,
    ACL_MEM_HUGE1G,
    ACL_MEM_P2P_NORMAL,
    ACL_MEM_P2P_HUGE,
    ACL_MEM_P2P_HUGE1G,
} aclrtMemAttr;

/** Floating-point overflow behaviour (aclrtSetDeviceSatMode). */
typedef enum aclrtFloatOverflowMode {
    ACL_RT_OVERFLOW_MODE_SATURATION = 0,
    ACL_RT_OVERFLOW_MODE_INFNAN,
    ACL_RT_OVERFLOW_MODE_UNDEF,
} aclrtFloatOverflowMode;

/** Location kind of a physical allocation. */
typedef enum aclrtMemLocationType {
    ACL_MEM_LOCATION_TYPE_HOST = 0,
    ACL_MEM_LOCATION_TYPE_DEVICE,
    ACL_MEM_LOCATION_TYPE_UNREGISTERED,
    ACL_MEM_LOCATION_TYPE_MANAGED,
    ACL_MEM_LOCATION_TYPE_HOST_NUMA = 4,
} aclrtMemLocationType;

/** Where a physical allocation lives: a device id (or NUMA id) and its kind. */
typedef struct aclrtMemLocation {
    uint32_t id;
    aclrtMemLocationType type;
} aclrtMemLocation;

/** Physical allocation type; only pinned memory exists. */
typedef enum aclrtMemAllocationType {
    ACL_MEM_ALLOCATION_TYPE_PINNED = 0,
} aclrtMemAllocationType;

/** OS handle type requested for a physical allocation. */
typedef enum aclrtMemHandleType {
    ACL_MEM_HANDLE_TYPE_NONE = 0,
    ACL_MEM_HANDLE_TYPE_POSIX = 2,
} aclrtMemHandleType;

/** Kind of shareable handle (V2 export/import). */
typedef enum aclrtMemSharedHandleType {
    ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT = 0x1, /**< a uint64_t */
    ACL_MEM_SHARE_HANDLE_TYPE_FABRIC = 0x2,  /**< an aclrtMemFabricHandle */
} aclrtMemSharedHandleType;

/** A FABRIC shareable handle: opaque 128 bytes. */
typedef struct aclrtMemFabricHandle {
    uint8_t data[128];
} aclrtMemFabricHandle;

/** Properties of a physical allocation (aclrtMallocPhysical). */
typedef struct aclrtPhysicalMemProp {
    aclrtMemHandleType handleType;
    aclrtMemAllocationType allocationType;
    aclrtMemAttr memAttr;
    aclrtMemLocation location;
    uint64_t reserve;
} aclrtPhysicalMemProp;

/** Which granularity aclrtMemGetAllocationGranularity reports. */
typedef enum aclrtMemGranularityOptions {
    ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
    ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
    ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF = 0xFFFF,
} aclrtMemGranularityOptions;

/* ---- init ------------------------------------------------------------------- */

/**
 * @brief Initialise the runtime for this process.
 * @param configPath a JSON config file, or NULL; zccl takes its settings from
 *        the environment, so a given file must exist and be readable but its
 *        content is not interpreted.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_REPEAT_INITIALIZE a second aclInit without aclFinalize
 * @retval ACL_ERROR_INVALID_FILE configPath given but not readable
 */
ACL_FUNC_VISIBILITY aclError aclInit(const char *configPath);

/**
 * @brief Finalise the runtime: drains and releases every device's default
 *        stream. aclInit may be called again afterwards.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_REPEAT_FINALIZE aclInit was not called (or already finalised)
 */
ACL_FUNC_VISIBILITY aclError aclFinalize(void);

/* ---- devices ------------------------------------------------------------------ */

/**
 * @brief Number of logical devices: ZCCL_DEVICES if non-zero, else the number
 *        of cores hwloc reports. Does not need aclInit.
 * @param count [OUT] the count (at least 1)
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM count is NULL
 */
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t *count);

/**
 * @brief Make deviceId the calling thread's current device (and count one
 *        use of it; aclrtResetDevice releases one).
 * @param deviceId a device in [0, count)
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_RT_INVALID_DEVICEID deviceId out of range
 */
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);

/**
 * @brief The calling thread's current device.
 * @param deviceId [OUT] the device
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM deviceId is NULL
 * @retval ACL_ERROR_RT_CONTEXT_NULL this thread has no current device
 */
ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t *deviceId);

/**
 * @brief Release one use of deviceId (from aclrtSetDevice). When the last use
 *        goes, its default stream is drained and destroyed and the calling
 *        thread no longer has it as current device. Explicitly created
 *        streams and events should be destroyed first (as in CANN).
 * @param deviceId a device in [0, count)
 * @retval ACL_SUCCESS (also for a device that was never set)
 * @retval ACL_ERROR_RT_INVALID_DEVICEID deviceId out of range
 */
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);

/**
 * @brief Reset deviceId regardless of how many times it was set.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_RT_INVALID_DEVICEID deviceId out of range
 */
ACL_FUNC_VISIBILITY aclError aclrtResetDeviceForce(int32_t deviceId);

/**
 * @brief Where the program runs.
 * @param runMode [OUT] always ACL_HOST
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM runMode is NULL
 */
ACL_FUNC_VISIBILITY aclError aclrtGetRunMode(aclrtRunMode *runMode);

/**
 * @brief Set the floating-point overflow mode. Host arithmetic is IEEE, so
 *        only ACL_RT_OVERFLOW_MODE_INFNAN can be honoured.
 * @retval ACL_SUCCESS mode is ACL_RT_OVERFLOW_MODE_INFNAN
 * @retval ACL_ERROR_RT_FEATURE_NOT_SUPPORT mode is SATURATION (not available on a host)
 * @retval ACL_ERROR_INVALID_PARAM any other value
 */
ACL_FUNC_VISIBILITY aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode);

/**
 * @brief The floating-point overflow mode in force.
 * @param mode [OUT] always ACL_RT_OVERFLOW_MODE_INFNAN
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM mode is NULL
 */
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceSatMode(aclrtFloatOverflowMode *mode);

/**
 * @brief Wait until every stream of the current device has run all its work.
 * @retval ACL_SUCCESS, or the first error of an enqueued task (as
 *         aclrtSynchronizeStream; cleared)
 * @retval ACL_ERROR_RT_CONTEXT_NULL this thread has no current device
 */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDevice(void);

/**
 * @brief aclrtSynchronizeDevice bounded by timeout milliseconds (-1 = forever).
 * @retval ACL_ERROR_RT_STREAM_SYNC_TIMEOUT the work did not finish in time
 * @retval ACL_ERROR_INVALID_PARAM timeout < -1
 * @retval others as aclrtSynchronizeDevice
 */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout);

/**
 * @brief The pid the device side knows this process by: on a host, getpid().
 *        Used as the trustlist entry for aclrtMemSetPidToShareableHandle and
 *        aclrtIpcMemSetImportPid.
 * @param pid [OUT] the pid
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM pid is NULL
 */
ACL_FUNC_VISIBILITY aclError aclrtDeviceGetBareTgid(int32_t *pid);

/**
 * @brief Whether deviceId can access memory of peerDeviceId. All devices
 *        share the host's memory, so any two distinct valid devices can.
 * @param canAccessPeer [OUT] 1 if deviceId != peerDeviceId, else 0
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM canAccessPeer is NULL
 * @retval ACL_ERROR_RT_INVALID_DEVICEID either id out of range
 */
ACL_FUNC_VISIBILITY aclError aclrtDeviceCanAccessPeer(int32_t *canAccessPeer, int32_t deviceId,
                                                      int32_t peerDeviceId);

/**
 * @brief Enable access from the current device to peerDeviceId's memory.
 *        Enabling an already enabled pair succeeds.
 * @param flags reserved, must be 0
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM flags != 0, or peerDeviceId is the current device
 * @retval ACL_ERROR_RT_INVALID_DEVICEID peerDeviceId out of range
 * @retval ACL_ERROR_RT_CONTEXT_NULL this thread has no current device
 */
ACL_FUNC_VISIBILITY aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags);

/**
 * @brief Disable access from the current device to peerDeviceId's memory.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM access was not enabled
 * @retval ACL_ERROR_RT_INVALID_DEVICEID peerDeviceId out of range
 * @retval ACL_ERROR_RT_CONTEXT_NULL this thread has no current device
 */
ACL_FUNC_VISIBILITY aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId);

/* ---- memory -------------------------------------------------------------------- */

/**
 * @brief Allocate size bytes of "device" memory: a shared memfd mapping placed
 *        on the current device's NUMA node (best effort; no current device
 *        means no placement). It can be exported with aclrtIpcMemGetExportKey.
 * @param devPtr [OUT] the address (page aligned)
 * @param size bytes, > 0
 * @param policy an aclrtMemMallocPolicy page value, optionally with the
 *        bandwidth / read-only bits
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM devPtr NULL, size 0, unknown policy
 * @retval ACL_ERROR_RT_MEMORY_ALLOCATION out of memory (or an absurd size)
 */
ACL_FUNC_VISIBILITY aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);

/**
 * @brief Free memory from aclrtMalloc.
 *        Ordered after queued work: it first waits until the work this thread
 *        queued before the call (on any stream) has run, so a queued copy or
 *        collective never touches memory that is gone. Work other threads
 *        queued is not waited for (order those threads first).
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM devPtr NULL or not the start of an aclrtMalloc block
 * @retval ACL_ERROR_RT_STREAM_CONTEXT called from a stream task (which cannot
 *         wait for the streams); nothing is freed
 */
ACL_FUNC_VISIBILITY aclError aclrtFree(void *devPtr);

/**
 * @brief Allocate size bytes of page-locked-style host memory.
 * @param hostPtr [OUT] the address (64-byte aligned at least)
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM hostPtr NULL or size 0
 * @retval ACL_ERROR_RT_MEMORY_ALLOCATION out of memory (or an absurd size)
 */
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void **hostPtr, size_t size);

/**
 * @brief Free memory from aclrtMallocHost.
 *        Ordered after queued work: it first waits until the work this thread
 *        queued before the call (on any stream) has run, so a queued copy or
 *        collective never touches memory that is gone. Work other threads
 *        queued is not waited for (order those threads first).
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM hostPtr NULL or not from aclrtMallocHost
 * @retval ACL_ERROR_RT_STREAM_CONTEXT called from a stream task (which cannot
 *         wait for the streams); nothing is freed
 */
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void *hostPtr);

/**
 * @brief Copy count bytes from src to dst, synchronously.
 * @param destMax capacity of dst in bytes; must be >= count
 * @param kind any aclrtMemcpyKind value
 * @retval ACL_SUCCESS (count 0 copies nothing)
 * @retval ACL_ERROR_INVALID_PARAM dst/src NULL with count > 0, destMax < count, bad kind
 */
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                                         aclrtMemcpyKind kind);

/**
 * @brief Enqueue a copy on stream; the arguments are checked now, the copy runs
 *        in stream order.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM as aclrtMemcpy
 * @retval ACL_ERROR_RT_INVALID_HANDLE stream is not a live stream
 * @retval ACL_ERROR_RT_CONTEXT_NULL stream NULL and no current device
 */
ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src,
                                              size_t count, aclrtMemcpyKind kind,
                                              aclrtStream stream);

/**
 * @brief Set count bytes at devPtr to (uint8_t)value, synchronously.
 * @param maxCount capacity of devPtr in bytes; must be >= count
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM devPtr NULL with count > 0, maxCount < count
 */
ACL_FUNC_VISIBILITY aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value,
                                         size_t count);

/**
 * @brief Enqueue aclrtMemset on stream.
 * @retval as aclrtMemset, plus the stream errors of aclrtMemcpyAsync
 */
ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value,
                                              size_t count, aclrtStream stream);

/**
 * @brief Free and total memory of the kind attr (all kinds are host RAM:
 *        MemAvailable and MemTotal of the system).
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM free or total NULL, attr out of range
 */
ACL_FUNC_VISIBILITY aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total);

/* ---- streams ------------------------------------------------------------------ */

/**
 * @brief Create a stream on the current device: a FIFO worker thread bound to
 *        the device's NUMA node.
 * @param stream [OUT] the stream
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM stream is NULL
 * @retval ACL_ERROR_RT_CONTEXT_NULL this thread has no current device
 * @retval ACL_ERROR_RT_NO_STREAM_RESOURCE the worker thread could not start
 */
ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream *stream);

/**
 * @brief aclrtCreateStream with a priority (0..7, recorded, no effect) and
 *        ACL_STREAM_* flags (accepted, no effect on a host).
 * @retval ACL_ERROR_INVALID_PARAM priority > 7 or an unknown flag bit
 * @retval others as aclrtCreateStream
 */
ACL_FUNC_VISIBILITY aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority,
                                                         uint32_t flag);

/**
 * @brief Run the stream's remaining work, then destroy it.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM stream is NULL (the default stream cannot be destroyed)
 * @retval ACL_ERROR_RT_INVALID_HANDLE stream is not a live stream
 * @retval ACL_ERROR_RT_PARAM_INVALID called from one of the stream's own tasks
 */
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);

/**
 * @brief Destroy a stream, dropping work that has not started.
 * @retval as aclrtDestroyStream
 */
ACL_FUNC_VISIBILITY aclError aclrtDestroyStreamForce(aclrtStream stream);

/**
 * @brief Wait until all work enqueued on stream before this call has run.
 * @retval ACL_SUCCESS
 * @retval the first non-zero result of a task enqueued since the last
 *         synchronize (then cleared)
 * @retval ACL_ERROR_RT_INVALID_HANDLE stream is not a live stream
 * @retval ACL_ERROR_RT_CONTEXT_NULL stream NULL and no current device
 */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);

/**
 * @brief aclrtSynchronizeStream bounded by timeout milliseconds (-1 = forever,
 *        0 = check now).
 * @retval ACL_ERROR_RT_STREAM_SYNC_TIMEOUT the work did not finish in time
 *         (the stream error, if any, is kept for the next synchronize)
 * @retval ACL_ERROR_INVALID_PARAM timeout < -1
 * @retval others as aclrtSynchronizeStream
 */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);

/**
 * @brief Whether all work enqueued on stream has run.
 * @param status [OUT] ACL_STREAM_STATUS_COMPLETE or ACL_STREAM_STATUS_NOT_READY
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM status is NULL
 * @retval ACL_ERROR_RT_INVALID_HANDLE / ACL_ERROR_RT_CONTEXT_NULL as aclrtSynchronizeStream
 */
ACL_FUNC_VISIBILITY aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status);

/**
 * @brief What a stream does after a task fails: ACL_CONTINUE_ON_FAILURE (run
 *        the following tasks; the default) or ACL_STOP_ON_FAILURE (drop the
 *        following tasks until the error is collected by a synchronize).
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM stream NULL (the default stream's mode is
 *         fixed) or an unknown mode
 * @retval ACL_ERROR_RT_INVALID_HANDLE stream is not a live stream
 */
ACL_FUNC_VISIBILITY aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode);

/**
 * @brief Make stream wait (in stream order) for event: for events from
 *        aclrtCreateEvent[WithFlag], until the latest record at this call (or,
 *        if none yet, the next record) has run; for aclrtCreateEventExWithFlag
 *        events, until the latest record at this call has run (no record: no wait).
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_RT_INVALID_HANDLE stream or event is not live
 * @retval ACL_ERROR_RT_CONTEXT_NULL stream NULL and no current device
 */
ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);

/* ---- events ------------------------------------------------------------------- */

/**
 * @brief Create an event with ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM event is NULL
 */
ACL_FUNC_VISIBILITY aclError aclrtCreateEvent(aclrtEvent *event);

/**
 * @brief Create an event with ACL_EVENT_* flags; only events with
 *        ACL_EVENT_TIME_LINE can be timed with aclrtEventElapsedTime.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM event is NULL or an unknown flag bit
 * @retval ACL_ERROR_RT_FEATURE_NOT_SUPPORT ACL_EVENT_IPC (not available)
 */
ACL_FUNC_VISIBILITY aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag);

/**
 * @brief Create a reusable event (CUDA-like: waits and queries refer to the
 *        latest record; no reset needed).
 * @retval as aclrtCreateEventWithFlag
 */
ACL_FUNC_VISIBILITY aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag);

/**
 * @brief Destroy an event. Pending waits on it fail with ACL_ERROR_RT_INVALID_HANDLE.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_RT_INVALID_HANDLE event is not live
 */
ACL_FUNC_VISIBILITY aclError aclrtDestroyEvent(aclrtEvent event);

/**
 * @brief Enqueue a record of event on stream: when the stream reaches it the
 *        event is timestamped and complete.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_RT_INVALID_HANDLE stream or event is not live
 * @retval ACL_ERROR_RT_CONTEXT_NULL stream NULL and no current device
 */
ACL_FUNC_VISIBILITY aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);

/**
 * @brief Enqueue a reset of event on stream: records that have run before it
 *        no longer count as complete.
 * @retval as aclrtRecordEvent
 */
ACL_FUNC_VISIBILITY aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream);

/**
 * @brief Block until the latest record of event has run (no record: return at once).
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_RT_INVALID_HANDLE event is not live (or destroyed while waiting)
 */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEvent(aclrtEvent event);

/**
 * @brief aclrtSynchronizeEvent bounded by timeout milliseconds (-1 = forever).
 * @retval ACL_ERROR_RT_EVENT_SYNC_TIMEOUT the record did not run in time
 * @retval ACL_ERROR_INVALID_PARAM timeout < -1
 * @retval others as aclrtSynchronizeEvent
 */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout);

/**
 * @brief Whether the latest record of event has run (and no reset came after).
 * @param status [OUT] ACL_EVENT_RECORDED_STATUS_COMPLETE or _NOT_READY (also
 *        for an event never recorded)
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM status is NULL
 * @retval ACL_ERROR_RT_INVALID_HANDLE event is not live
 */
ACL_FUNC_VISIBILITY aclError aclrtQueryEventStatus(aclrtEvent event,
                                                   aclrtEventRecordedStatus *status);

/**
 * @brief Deprecated form of aclrtQueryEventStatus.
 * @param status [OUT] ACL_EVENT_STATUS_COMPLETE or ACL_EVENT_STATUS_NOT_READY
 * @retval as aclrtQueryEventStatus
 */
ACL_FUNC_VISIBILITY aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status);

/**
 * @brief Whether a stream wait on event enqueued now would pass at once.
 * @param status [OUT] ACL_EVENT_WAIT_STATUS_COMPLETE or _NOT_READY
 * @retval as aclrtQueryEventStatus
 */
ACL_FUNC_VISIBILITY aclError aclrtQueryEventWaitStatus(aclrtEvent event,
                                                       aclrtEventWaitStatus *status);

/**
 * @brief Milliseconds between the completed records of startEvent and endEvent.
 * @param ms [OUT] elapsed time (microsecond resolution or better)
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM ms NULL, or an event never recorded
 * @retval ACL_ERROR_RT_INVALID_HANDLE an event is not live
 * @retval ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID an event lacks ACL_EVENT_TIME_LINE
 * @retval ACL_ERROR_RT_EVENT_NOT_COMPLETE a record has not run yet
 * @retval ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL end ran before start
 */
ACL_FUNC_VISIBILITY aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent,
                                                   aclrtEvent endEvent);

/* ---- VMM ---------------------------------------------------------------------- */

/**
 * @brief Reserve address space (PROT_NONE, no memory behind it) for
 *        aclrtMapMem. The range stays reserved until aclrtReleaseMemAddress.
 * @param virPtr [OUT] start of the reservation
 * @param size any size > 0, rounded up to the page size
 * @param alignment 0 (2 MiB) or a power of two (at least the page size is used)
 * @param expectPtr NULL, or a wished start aligned to alignment (2 MiB when
 *        alignment is 0): the reservation is placed exactly there or the
 *        call fails
 * @param flags 0 or 1 (both behave the same on a host)
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM virPtr NULL, size 0, flags > 1, alignment
 *         not a power of two, or expectPtr misaligned
 * @retval ACL_ERROR_RT_MEMORY_ALLOCATION the expectPtr range is in use, the
 *         address space is exhausted, or an absurd size (e.g. SIZE_MAX)
 */
ACL_FUNC_VISIBILITY aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment,
                                                    void *expectPtr, uint64_t flags);

/**
 * @brief Release a reservation from aclrtReserveMemAddress (unmap everything
 *        in it first).
 *        Ordered after queued work: it first waits until the work this thread
 *        queued before the call (on any stream) has run, so a queued copy or
 *        collective never touches memory that is gone. Work other threads
 *        queued is not waited for (order those threads first).
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM virPtr NULL or not the start of a
 *         reservation, or the reservation still has mappings
 * @retval ACL_ERROR_RT_STREAM_CONTEXT called from a stream task (which cannot
 *         wait for the streams); nothing is freed
 */
ACL_FUNC_VISIBILITY aclError aclrtReleaseMemAddress(void *virPtr);

/**
 * @brief Allocate physical memory: a memfd of size bytes rounded up to the
 *        minimum granularity of prop (aclrtMemGetAllocationGranularity).
 *        Pages come on first touch, preferring prop->location's NUMA node.
 * @param handle [OUT] the physical handle (one reference)
 * @param size bytes, > 0
 * @param prop handleType ACL_MEM_HANDLE_TYPE_NONE or _POSIX; allocationType
 *        PINNED; a physical memAttr; location.type DEVICE (a valid device id,
 *        not a DDR attribute; the device's NUMA node), HOST or MANAGED (no
 *        placement) or HOST_NUMA (location.id is the NUMA node)
 * @param flags must be 0
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM handle or prop NULL, size 0, flags != 0, or
 *         a bad prop field (including a device id out of range)
 * @retval ACL_ERROR_RT_MEMORY_ALLOCATION size exceeds this host's memory, or
 *         the memfd could not be made
 */
ACL_FUNC_VISIBILITY aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size,
                                                 const aclrtPhysicalMemProp *prop, uint64_t flags);

/**
 * @brief Drop one reference to a physical handle (from aclrtMallocPhysical,
 *        an import or aclrtMemRetainAllocationHandle). Freeing while mapped
 *        is allowed: the memory lives until the last unmap. When the last
 *        reference goes, its shareable handle is withdrawn (later imports
 *        fail; earlier imports keep their memory).
 *        Ordered after queued work: it first waits until the work this thread
 *        queued before the call (on any stream) has run, so a queued copy or
 *        collective never touches memory that is gone. Work other threads
 *        queued is not waited for (order those threads first).
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM handle is NULL
 * @retval ACL_ERROR_RT_INVALID_HANDLE handle is not a live physical handle
 * @retval ACL_ERROR_RT_STREAM_CONTEXT called from a stream task (which cannot
 *         wait for the streams); nothing is freed
 */
ACL_FUNC_VISIBILITY aclError aclrtFreePhysical(aclrtDrvMemHandle handle);

/**
 * @brief Map a whole physical handle read-write at virPtr inside one
 *        reservation (placed on the handle's NUMA node; transparent huge
 *        pages are asked for when 2 MiB aligned).
 * @param virPtr page aligned, with [virPtr, virPtr+size) inside one
 *        reservation and overlapping no mapping
 * @param size must equal the handle's (rounded) size
 * @param offset must be 0
 * @param flags 0 or 1
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM virPtr or handle NULL, size 0 or unlike the
 *         handle's, non-zero offset, flags > 1, virPtr not page aligned,
 *         outside one reservation, or overlapping a mapping
 * @retval ACL_ERROR_RT_INVALID_HANDLE handle is not a live physical handle
 * @retval ACL_ERROR_RT_MEMORY_ALLOCATION out of memory, or mmap failed
 */
ACL_FUNC_VISIBILITY aclError aclrtMapMem(void *virPtr, size_t size, size_t offset,
                                         aclrtDrvMemHandle handle, uint64_t flags);

/**
 * @brief Unmap the mapping that starts at virPtr; the range goes back to
 *        PROT_NONE and stays reserved. A handle already freed dies here if
 *        this was its last mapping.
 *        Ordered after queued work: it first waits until the work this thread
 *        queued before the call (on any stream) has run, so a queued copy or
 *        collective never touches memory that is gone. Work other threads
 *        queued is not waited for (order those threads first).
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM virPtr NULL, or no mapping starts at virPtr
 * @retval ACL_ERROR_RT_MEMORY_ALLOCATION the range could not be re-reserved
 * @retval ACL_ERROR_RT_STREAM_CONTEXT called from a stream task (which cannot
 *         wait for the streams); nothing is freed
 */
ACL_FUNC_VISIBILITY aclError aclrtUnmapMem(void *virPtr);

/**
 * @brief Allocation granularity for prop. Huge-page attributes (and
 *        ACL_HBM_MEM_NORMAL): 2 MiB, minimum and recommended; normal
 *        attributes: the page size minimum, 2 MiB recommended; 1G attributes:
 *        1 GiB, minimum and recommended.
 * @param prop checked as in aclrtMallocPhysical
 * @param granularity [OUT] bytes
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM prop or granularity NULL, option not
 *         MINIMUM or RECOMMENDED, or a bad prop field
 */
ACL_FUNC_VISIBILITY aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop,
                                                              aclrtMemGranularityOptions option,
                                                              size_t *granularity);

/**
 * @brief The physical handle mapped at virPtr (the same handle aclrtMapMem
 *        got). Each retain takes a reference that needs its own
 *        aclrtFreePhysical (a handle freed while mapped comes back to life).
 * @param virPtr the start of a mapping
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM virPtr or handle NULL, or no mapping starts
 *         at virPtr
 */
ACL_FUNC_VISIBILITY aclError aclrtMemRetainAllocationHandle(void *virPtr,
                                                            aclrtDrvMemHandle *handle);

/**
 * @brief Export a physical handle as a DEFAULT shareable handle: a uint64_t
 *        token naming this process and a random part, fetchable through
 *        this process's broker by processes of the same uid on its trustlist
 *        (aclrtMemSetPidToShareableHandle). One export per physical handle;
 *        it lasts until the handle's last aclrtFreePhysical.
 * @param handleType ACL_MEM_HANDLE_TYPE_NONE or ACL_MEM_HANDLE_TYPE_POSIX
 * @param flags 0 or ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION (any pid
 *        of the same uid may import)
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM handle or shareableHandle NULL, bad
 *         handleType, unknown flag bits, or the handle was exported already
 * @retval ACL_ERROR_RT_INVALID_HANDLE handle is not a live physical handle
 * @retval ACL_ERROR_RT_MEMORY_ALLOCATION out of memory
 * @retval ACL_ERROR_RT_INTERNAL_ERROR the broker could not be started
 */
ACL_FUNC_VISIBILITY aclError aclrtMemExportToShareableHandle(aclrtDrvMemHandle handle,
                                                             aclrtMemHandleType handleType,
                                                             uint64_t flags,
                                                             uint64_t *shareableHandle);

/**
 * @brief Export with an explicit share type: shareableHandle points to a
 *        uint64_t (DEFAULT) or an aclrtMemFabricHandle (FABRIC; zccl's
 *        record of the token, usable on this host only).
 * @param flags 0 or ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION
 * @retval as aclrtMemExportToShareableHandle; ACL_ERROR_INVALID_PARAM also
 *         for a shareType other than DEFAULT or FABRIC
 */
ACL_FUNC_VISIBILITY aclError aclrtMemExportToShareableHandleV2(aclrtDrvMemHandle handle,
                                                               uint64_t flags,
                                                               aclrtMemSharedHandleType shareType,
                                                               void *shareableHandle);

/**
 * @brief Add pids to the trustlist of a shareable handle this process
 *        exported (see aclrtDeviceGetBareTgid). Calls add up.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM pid NULL, pidNum 0, a pid <= 0, or not a
 *         live shareable handle exported by this process
 * @retval ACL_ERROR_RT_MEMORY_ALLOCATION out of memory
 */
ACL_FUNC_VISIBILITY aclError aclrtMemSetPidToShareableHandle(uint64_t shareableHandle, int32_t *pid,
                                                             size_t pidNum);

/**
 * @brief aclrtMemSetPidToShareableHandle for a DEFAULT or FABRIC handle.
 * @retval as aclrtMemSetPidToShareableHandle; ACL_ERROR_INVALID_PARAM also
 *         for a NULL shareableHandle, a bad shareType, or a FABRIC handle
 *         not made by zccl on this host
 */
ACL_FUNC_VISIBILITY aclError aclrtMemSetPidToShareableHandleV2(void *shareableHandle,
                                                               aclrtMemSharedHandleType shareType,
                                                               int32_t *pid, size_t pidNum);

/**
 * @brief Import a DEFAULT shareable handle exported by another process of
 *        this host. Each import gives a new physical handle of this process
 *        (free it with aclrtFreePhysical); its memory stays valid after the
 *        exporter frees its handle or exits.
 * @param deviceId the importing device (its NUMA node is preferred)
 * @param handle [OUT] a physical handle of this process
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM handle NULL, or shareableHandle is not a
 *         token (0, or no random part)
 * @retval ACL_ERROR_RT_INVALID_DEVICEID deviceId out of range
 * @retval ACL_ERROR_RT_NO_PERMISSION not on the exporter's trustlist, or of
 *         another uid
 * @retval ACL_ERROR_RT_FEATURE_NOT_SUPPORT exported by this same process
 *         (use the memory directly)
 * @retval ACL_ERROR_RT_IPC_ERROR the exporter is gone, does not know the
 *         handle (never exported, or freed) or did not answer in time
 * @retval ACL_ERROR_RT_MEMORY_ALLOCATION out of memory
 */
ACL_FUNC_VISIBILITY aclError aclrtMemImportFromShareableHandle(uint64_t shareableHandle,
                                                               int32_t deviceId,
                                                               aclrtDrvMemHandle *handle);

/**
 * @brief Import a DEFAULT or FABRIC shareable handle for the calling
 *        thread's current device (device 0 if it has none).
 * @param flags must be 0
 * @retval as aclrtMemImportFromShareableHandle, and also:
 * @retval ACL_ERROR_INVALID_PARAM shareableHandle NULL, flags != 0, a bad
 *         shareType, or a FABRIC handle not made by zccl
 * @retval ACL_ERROR_RT_FEATURE_NOT_SUPPORT a FABRIC handle from another host
 */
ACL_FUNC_VISIBILITY aclError aclrtMemImportFromShareableHandleV2(void *shareableHandle,
                                                                 aclrtMemSharedHandleType shareType,
                                                                 uint64_t flags,
                                                                 aclrtDrvMemHandle *handle);

/* ---- IPC memory keys ---------------------------------------------------------------- */

/**
 * @brief Make [devPtr, devPtr+size) shareable and write its key (a
 *        NUL-terminated string) into key. devPtr may point anywhere inside
 *        an aclrtMalloc block or a mapped VMM range (aclrtMapMem); the range
 *        must not run past it. Each call makes a new key.
 * @param len size of key, at least ACL_IPC_MEM_KEY_LEN (65)
 * @param flags 0 or ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION (any
 *        pid of the same uid may import)
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM devPtr or key NULL, size 0, len < 65,
 *         unknown flag bits, memory that is neither aclrtMalloc nor mapped
 *         VMM memory, or a range past the end of it
 * @retval ACL_ERROR_RT_MEMORY_ALLOCATION out of memory
 * @retval ACL_ERROR_RT_INTERNAL_ERROR the memory could not be duplicated or
 *         the broker could not be started
 */
ACL_FUNC_VISIBILITY aclError aclrtIpcMemGetExportKey(void *devPtr, size_t size, char *key,
                                                     size_t len, uint64_t flags);

/**
 * @brief Add pids to the trustlist of a key this process exported. Calls add up.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM key NULL or malformed, pid NULL, num 0, a
 *         pid <= 0, or a key not exported by this process (or closed)
 * @retval ACL_ERROR_RT_MEMORY_ALLOCATION out of memory
 */
ACL_FUNC_VISIBILITY aclError aclrtIpcMemSetImportPid(const char *key, int32_t *pid, size_t num);

/**
 * @brief Map the memory named by key (exported by another process of this
 *        host) into this process. Importing the same key twice in one
 *        process returns the same address; each import needs its own
 *        aclrtIpcMemClose.
 * @param devPtr [OUT] the local address of the key's first byte
 * @param flags 0 or ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS (no effect
 *        on a host)
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM devPtr NULL, key NULL or malformed, unknown
 *         flag bits, or a key naming bytes past the exporter's memory
 * @retval ACL_ERROR_RT_NO_PERMISSION not on the exporter's trustlist, or of
 *         another uid
 * @retval ACL_ERROR_RT_FEATURE_NOT_SUPPORT a key this process exported (use
 *         the memory directly)
 * @retval ACL_ERROR_RT_IPC_ERROR the exporter is gone, does not know the key
 *         (or closed it) or did not answer in time
 * @retval ACL_ERROR_RT_MEMORY_ALLOCATION out of memory, or mmap failed
 */
ACL_FUNC_VISIBILITY aclError aclrtIpcMemImportByKey(void **devPtr, const char *key, uint64_t flags);

/**
 * @brief Close key. In an importer, drop one import (the last one unmaps).
 *        In the exporter, withdraw the key: later imports fail, existing
 *        ones keep their memory, and the exporter may then free its memory.
 * @retval ACL_SUCCESS
 * @retval ACL_ERROR_INVALID_PARAM key NULL or malformed, or neither imported
 *         nor exported by this process
 */
ACL_FUNC_VISIBILITY aclError aclrtIpcMemClose(const char *key);

#ifdef __cplusplus
}
#endif

#endif /* ZCCL_ACL_ACL_RT_H */
