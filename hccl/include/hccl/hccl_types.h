/*
 * hccl/hccl_types.h - value types of the public HCCL API as zccl provides it.
 *
 * Names, enum values and struct layouts follow CANN's public hccl_types.h so
 * that programs written for CANN compile and run unchanged against zccl. The
 * header is plain C11 and C++11: sizes are #define constants (CANN uses
 * `const uint32_t`, which C cannot use as an array bound) and every struct
 * layout that crosses the library boundary is pinned with a static assertion.
 *
 * HcclCommConfig is versioned: its first 24 bytes hold {size, magic word,
 * version, reserved}, written by HcclCommConfigInit() (hccl_comm.h). The
 * library checks the magic word and reads only the fields that exist in the
 * version the caller declares, so a program built against an older layout
 * keeps working with a newer library.
 */
#ifndef HCCL_TYPES_H_
#define HCCL_TYPES_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Status code returned by every HCCL call. */
typedef enum {
    HCCL_SUCCESS = 0,              /**< the call succeeded */
    HCCL_E_PARA = 1,               /**< an argument is invalid */
    HCCL_E_PTR = 2,                /**< a required pointer is NULL */
    HCCL_E_MEMORY = 3,             /**< a memory operation failed */
    HCCL_E_INTERNAL = 4,           /**< an internal invariant failed */
    HCCL_E_NOT_SUPPORT = 5,        /**< the feature is not supported */
    HCCL_E_NOT_FOUND = 6,          /**< the requested resource does not exist */
    HCCL_E_UNAVAIL = 7,            /**< the resource is not available now */
    HCCL_E_SYSCALL = 8,            /**< a system call failed */
    HCCL_E_TIMEOUT = 9,            /**< an operation timed out */
    HCCL_E_OPEN_FILE_FAILURE = 10, /**< a file could not be opened */
    HCCL_E_TCP_CONNECT = 11,       /**< a TCP connection could not be made */
    HCCL_E_ROCE_CONNECT = 12,      /**< a RoCE connection could not be made */
    HCCL_E_TCP_TRANSFER = 13,      /**< a TCP transfer failed */
    HCCL_E_ROCE_TRANSFER = 14,     /**< a RoCE transfer failed */
    HCCL_E_RUNTIME = 15,           /**< a runtime (ACL) call failed */
    HCCL_E_DRV = 16,               /**< a driver call failed */
    HCCL_E_PROFILING = 17,         /**< a profiling call failed */
    HCCL_E_CCE = 18,               /**< a CCE call failed */
    HCCL_E_NETWORK = 19,           /**< a network call failed */
    HCCL_E_AGAIN = 20,             /**< the caller should try again */
    HCCL_E_REMOTE = 21,            /**< a peer reported an error */
    HCCL_E_SUSPENDING = 22,        /**< the communicator is suspended */
    HCCL_E_OPRETRY_FAIL = 23,      /**< an operation retry failed */
    HCCL_E_OOM = 24,               /**< out of memory */
    HCCL_E_IN_STATUS = 1041,       /**< the detail is held in a status object */
    HCCL_E_RESERVED                /**< first value past the defined codes */
} HcclResult;

/** Opaque handle to a communicator. */
typedef void *HcclComm;

/** Opaque handle to a registered symmetric memory window. */
typedef void *HcclCommSymWindow;

/** Older CANN spelling of HcclCommSymWindow, kept for source compatibility. */
typedef HcclCommSymWindow CommSymWindow;

/** Flags accepted by HcclCommSymWinRegister(). */
typedef enum {
    HCCL_WIN_DEFAULT = 0,       /**< reserved by CANN, not accepted today */
    HCCL_WIN_COLL_SYMMETRIC = 1 /**< window used by collectives as symmetric memory */
} symmetricMemoryFlag;

/** Reduction applied by the reducing collectives. */
typedef enum {
    HCCL_REDUCE_SUM = 0,       /**< element-wise sum */
    HCCL_REDUCE_PROD = 1,      /**< element-wise product */
    HCCL_REDUCE_MAX = 2,       /**< element-wise maximum */
    HCCL_REDUCE_MIN = 3,       /**< element-wise minimum */
    HCCL_REDUCE_RESERVED = 255 /**< not a valid operation */
} HcclReduceOp;

/** Element type of a collective's buffers. Value 13 is unused by CANN. */
typedef enum {
    HCCL_DATA_TYPE_INT8 = 0,      /**< int8_t */
    HCCL_DATA_TYPE_INT16 = 1,     /**< int16_t */
    HCCL_DATA_TYPE_INT32 = 2,     /**< int32_t */
    HCCL_DATA_TYPE_FP16 = 3,      /**< IEEE 754 binary16 */
    HCCL_DATA_TYPE_FP32 = 4,      /**< IEEE 754 binary32 */
    HCCL_DATA_TYPE_INT64 = 5,     /**< int64_t */
    HCCL_DATA_TYPE_UINT64 = 6,    /**< uint64_t */
    HCCL_DATA_TYPE_UINT8 = 7,     /**< uint8_t */
    HCCL_DATA_TYPE_UINT16 = 8,    /**< uint16_t */
    HCCL_DATA_TYPE_UINT32 = 9,    /**< uint32_t */
    HCCL_DATA_TYPE_FP64 = 10,     /**< IEEE 754 binary64 */
    HCCL_DATA_TYPE_BFP16 = 11,    /**< bfloat16 */
    HCCL_DATA_TYPE_INT128 = 12,   /**< 128-bit signed integer */
    HCCL_DATA_TYPE_HIF8 = 14,     /**< HiFloat8 */
    HCCL_DATA_TYPE_FP8E4M3 = 15,  /**< 8-bit float, 4 exponent and 3 mantissa bits */
    HCCL_DATA_TYPE_FP8E5M2 = 16,  /**< 8-bit float, 5 exponent and 2 mantissa bits */
    HCCL_DATA_TYPE_FP8E8M0 = 17,  /**< 8-bit power-of-two scale */
    HCCL_DATA_TYPE_RESERVED = 255 /**< not a valid type */
} HcclDataType;

/** Size of HcclRootInfo, fixed by CANN's ABI. */
#define HCCL_ROOT_INFO_BYTES 4108U
/** Capacity of HcclCommConfig.hcclCommName, including the terminating NUL. */
#define COMM_NAME_MAX_LENGTH 128U
/** Capacity of HcclCommConfig.hcclBufferName, including the terminating NUL. */
#define BUFFER_NAME_MAX_LENGTH 128U
/** Capacity of HcclCommConfig.hcclUdi, including the terminating NUL. */
#define UDI_MAX_LENGTH 128U
/** Capacity of HcclCommConfig.hcclAlgo. */
#define HCCL_COMM_ALGO_MAX_LENGTH 1600U
/** Capacity of HcclCommConfig.hcclRetryEnable. */
#define HCCL_COMM_RETRY_ENABLE_MAX_LENGTH 50U
/** Capacity of HcclCommConfig.hcclRetryParams. */
#define HCCL_COMM_RETRY_PARAMS_MAX_LENGTH 128U

/**
 * Rendezvous information made by HcclGetRootInfo() on one rank and passed,
 * unchanged and by the application's own means, to every rank that calls
 * HcclCommInitRootInfo(). zccl stores a NUL-terminated address string first.
 */
typedef struct HcclRootInfoDef {
    char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

/** Bytes of the versioning header at the start of HcclCommConfig. */
#define HCCL_COMM_CONFIG_INFO_BYTES 24U
/** Value HcclCommConfigInit() stores in HcclCommConfig.magicWord. */
#define HCCL_COMM_CONFIG_MAGIC_WORD 0xf0f0f0f0U
/** Layout version of HcclCommConfig declared by this header. */
#define HCCL_COMM_CONFIG_VERSION 11U
/** CCL buffer size, in MB, used when neither config nor environment sets one. */
#define HCCL_COMM_DEFAULT_BUFFSIZE 200U
/** hcclBufferSize value meaning "not set": use HCCL_BUFFSIZE or the default. */
#define HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET 0xffffffffU
/** Deterministic reduction setting used when nothing sets one (off). */
#define HCCL_COMM_DEFAULT_DETERMINISTIC 0U
/** hcclDeterministic value meaning "not set". */
#define HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET 0xffffffffU
/** hcclOpExpansionMode value meaning "library default". */
#define HCCL_COMM_DEFAULT_OP_EXPANSION_MODE 0U
/** hcclRdmaTrafficClass value meaning "not set". */
#define HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET 0xffffffffU
/** hcclRdmaServiceLevel value meaning "not set". */
#define HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET 0xffffffffU
/** hcclExecTimeOut value meaning "not set" (CANN writes 0xffffffff into an int32). */
#define HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET ((int32_t)-1)
/** hcclQos value meaning "not set". */
#define HCCL_COMM_QOS_CONFIG_NOT_SET 0xffffffffU
/** Default hcclSymWinMaxMemSizePerRank, in GB. */
#define HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE 16ULL
/** hcclChannelSqDepth value meaning "not set". */
#define HCCL_COMM_SQ_DEPTH_CONFIG_NOT_SET 0xffffffffU

/**
 * Per-communicator settings for the *Config initialisers. Always fill it with
 * HcclCommConfigInit() first, then change the fields wanted: a field left at
 * its "not set" value falls back to the environment, then to the default.
 */
typedef struct HcclCommConfigDef {
    size_t size;                /**< sizeof(HcclCommConfig) as the caller compiled it */
    uint32_t magicWord;         /**< HCCL_COMM_CONFIG_MAGIC_WORD */
    uint32_t version;           /**< layout version the caller compiled against */
    uint64_t reserved;          /**< zero */
    uint32_t hcclBufferSize;    /**< CCL buffer size in MB */
    uint32_t hcclDeterministic; /**< 0 off, 1 deterministic, 2 strict order */
    char hcclCommName[COMM_NAME_MAX_LENGTH];  /**< unique name; empty: generated */
    char hcclUdi[UDI_MAX_LENGTH];             /**< user-defined information */
    uint32_t hcclOpExpansionMode;             /**< 0 default, 1 host, 2 AI CPU, 3/4 AIV, ... */
    uint32_t hcclRdmaTrafficClass;            /**< RDMA traffic class, multiple of 4 in [0,255] */
    uint32_t hcclRdmaServiceLevel;            /**< RDMA service level in [0,7] */
    uint32_t hcclWorldRankID;                 /**< framework's global rank (load balancing) */
    uint64_t hcclJobID;                       /**< framework's job identifier */
    uint8_t aclGraphZeroCopyEnable;           /**< zero copy for reductions in graph capture */
    int32_t hcclExecTimeOut;                  /**< execution timeout in seconds */
    char hcclAlgo[HCCL_COMM_ALGO_MAX_LENGTH]; /**< algorithm selection */
    char hcclRetryEnable[HCCL_COMM_RETRY_ENABLE_MAX_LENGTH]; /**< e.g. "L1:1, L2:0" */
    char hcclRetryParams[HCCL_COMM_RETRY_PARAMS_MAX_LENGTH]; /**< retry count and delays */
    char hcclBufferName[BUFFER_NAME_MAX_LENGTH];             /**< name of a shared CCL buffer */
    uint32_t hcclQos;                     /**< QoS level in [0,7] (version 10+) */
    uint64_t hcclSymWinMaxMemSizePerRank; /**< symmetric heap per rank, GB (version 10+) */
    uint32_t hcclChannelSqDepth;          /**< send queue depth (version 11+) */
} HcclCommConfig;

/** Config fields; field v is supported when HcclGetCommConfigCapability() > v. */
typedef enum {
    HCCL_COMM_CONFIG_BUFFER_SIZE = 0,
    HCCL_COMM_CONFIG_DETERMINISTIC = 1,
    HCCL_COMM_CONFIG_COMM_NAME = 2,
    HCCL_COMM_CONFIG_OP_EXPANSION_MODE = 3,
    HCCL_COMM_CONFIG_SUPPORT_INIT_BY_ENV = 4,
    HCCL_COMM_CONFIG_WORLD_RANKID = 5,
    HCCL_COMM_CONFIG_JOBID = 6,
    HCCL_COMM_CONFIG_ACLGRAPH_ZEROCOPY_ENABLE = 7,
    HCCL_COMM_CONFIG_EXEC_TIMEOUT = 8,
    HCCL_COMM_CONFIG_ALGO = 9,
    HCCL_COMM_CONFIG_RETRY = 10,
    HCCL_COMM_CONFIG_BUFFER_NAME = 11,
    HCCL_COMM_CONFIG_RESERVED
} HcclCommConfigCapability;

/** Direction of one HcclBatchSendRecv() item. */
typedef enum { HCCL_SEND = 0, HCCL_RECV = 1, HCCL_SEND_RECV_RESERVED } HcclSendRecvType;

/** One point-to-point transfer in an HcclBatchSendRecv() call. */
typedef struct HcclSendRecvItemDef {
    HcclSendRecvType sendRecvType; /**< HCCL_SEND or HCCL_RECV */
    void *buf;                     /**< data to send, or space to receive into */
    uint64_t count;                /**< number of elements */
    HcclDataType dataType;         /**< element type */
    uint32_t remoteRank;           /**< peer rank in the communicator */
} HcclSendRecvItem;

/*
 * Layout pins: these offsets are CANN's ABI on LP64 targets, and the library
 * reads a caller's config by them, so a change here must fail to compile.
 */
#if defined(__cplusplus)
#define HCCL_TYPES_ASSERT_(cond, msg) static_assert(cond, msg)
#else
#define HCCL_TYPES_ASSERT_(cond, msg) _Static_assert(cond, msg)
#endif
HCCL_TYPES_ASSERT_(sizeof(HcclRootInfo) == 4108, "HcclRootInfo must be 4108 bytes");
#if UINTPTR_MAX == 0xffffffffffffffffULL
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, magicWord) == 8, "config header layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, version) == 12, "config header layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclBufferSize) == HCCL_COMM_CONFIG_INFO_BYTES,
                   "config header must be 24 bytes");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclCommName) == 32, "config layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclUdi) == 160, "config layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclOpExpansionMode) == 288, "config layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclWorldRankID) == 300, "config layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclJobID) == 304, "config layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, aclGraphZeroCopyEnable) == 312, "config layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclExecTimeOut) == 316, "config layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclAlgo) == 320, "config layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclRetryEnable) == 1920, "config layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclRetryParams) == 1970, "config layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclBufferName) == 2098, "config layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclQos) == 2228, "config layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclSymWinMaxMemSizePerRank) == 2232, "config layout");
HCCL_TYPES_ASSERT_(offsetof(HcclCommConfig, hcclChannelSqDepth) == 2240, "config layout");
HCCL_TYPES_ASSERT_(sizeof(HcclCommConfig) == 2248, "config size");
HCCL_TYPES_ASSERT_(sizeof(HcclSendRecvItem) == 32, "send/recv item layout");
#endif
#undef HCCL_TYPES_ASSERT_

#ifdef __cplusplus
}
#endif

#endif /* HCCL_TYPES_H_ */
