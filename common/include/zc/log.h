/*
 * Logging: one line per event, "host:pid:tid [rank] zccl LEVEL file:line msg".
 *
 * ZCCL_LOG_LEVEL (error|warn|info|debug, default warn) picks the level,
 * ZCCL_LOG_SUBSYS a comma list of subsystems (INIT,VMM,MEM,STREAM,BROKER,
 * BOOT,COMM,COLL,ZCOPY,TEST,TOPO or ALL; a leading ^ inverts), ZCCL_LOG_FILE a file
 * ("%h" host, "%p" pid expanded) instead of stderr. Errors are logged once,
 * where they are first seen; the CHECK macros add a "-> status" trace line at
 * debug level at every level they pass through.
 *
 * The state (level, mask, sink, process rank) exists once per process: common
 * is compiled into libascendcl only and libhccl calls it there. The rank in the
 * prefix is the thread's own (zc_log_set_rank, set by libhccl on the threads
 * that run a communicator's work) or else the process's: the rank of the
 * communicators made in this process while they all have one rank (the usual
 * one-rank-per-process program); with ranks of several values in one process
 * (thread ranks, sub-communicators) a thread without its own rank shows "-".
 */
#ifndef ZC_LOG_H
#define ZC_LOG_H

#include "zc/status.h"

typedef enum {
    ZC_LOG_NONE = 0,
    ZC_LOG_ERROR = 1,
    ZC_LOG_WARN = 2,
    ZC_LOG_INFO = 3,
    ZC_LOG_DEBUG = 4,
} zc_log_level_t;

typedef enum {
    ZC_SUB_INIT = 1u << 0,
    ZC_SUB_VMM = 1u << 1,
    ZC_SUB_MEM = 1u << 2,
    ZC_SUB_STREAM = 1u << 3,
    ZC_SUB_BROKER = 1u << 4,
    ZC_SUB_BOOT = 1u << 5,
    ZC_SUB_COMM = 1u << 6,
    ZC_SUB_COLL = 1u << 7,
    ZC_SUB_ZCOPY = 1u << 8,
    ZC_SUB_TEST = 1u << 9,
    ZC_SUB_TOPO = 1u << 10,
    ZC_SUB_ALL = 0xffffffffu,
} zc_log_subsys_t;

/** Names of the levels and subsystems, as ZCCL_LOG_LEVEL / ZCCL_LOG_SUBSYS take them. */
#define ZC_LOG_LEVEL_NAMES "none, error, warn, info, debug"
#define ZC_LOG_SUBSYS_NAMES                                                                        \
    "INIT, VMM, MEM, STREAM, BROKER, BOOT, COMM, COLL, ZCOPY, TEST, TOPO, ALL"

/** Parse a level name (case-insensitive); 0, or -1 when s is not one. Pure: never logs. */
int zc_log_parse_level(const char *s, zc_log_level_t *out);

/** Parse a comma list of subsystem names (a leading ^ inverts it); 0, or -1 when a name is
 *  unknown or the list is empty. Pure: never logs. */
int zc_log_parse_subsys(const char *s, unsigned *mask);

/**
 * Put the logger in service: level, subsystem mask and file (NULL or "" = stderr; "%h" and
 * "%p" are expanded). The config loader calls it once, before it prints any warning of its
 * own, so logging never waits for the finished config. Returns 0, or the errno of a file
 * that cannot be opened (the log then stays on stderr; the caller warns).
 */
int zc_log_setup(zc_log_level_t level, unsigned mask, const char *file);

/**
 * The rank shown in this thread's log prefix; -1 falls back to the process's.
 * A rank >= 0 also counts towards the process's rank (see above).
 */
void zc_log_set_rank(int rank);
/** This thread's own rank (-1: none). */
int zc_log_get_rank(void);

/**
 * Show rank in this thread's log prefix until zc_log_rank_leave(prev, rank), prev being
 * what this returns. A thread that shows rank already makes no call: zc_log_set_rank is an
 * atomic read-modify-write, too dear for every op.
 */
static inline int zc_log_rank_enter(int rank)
{
    int prev = zc_log_get_rank();
    if (prev != rank) {
        zc_log_set_rank(rank);
    }
    return prev;
}

/** Back to the rank the thread showed before zc_log_rank_enter(rank) returned prev. */
static inline void zc_log_rank_leave(int prev, int rank)
{
    if (prev != rank) {
        zc_log_set_rank(prev);
    }
}

void zc_log_emit(zc_log_level_t level, unsigned subsys, const char *file, int line, const char *fmt,
                 ...) __attribute__((format(printf, 5, 6)));

int zc_log_enabled(zc_log_level_t level, unsigned subsys);

#define ZC_LOG(level, subsys, ...)                                                                 \
    do {                                                                                           \
        if (zc_log_enabled((level), (subsys))) {                                                   \
            zc_log_emit((level), (subsys), __FILE__, __LINE__, __VA_ARGS__);                       \
        }                                                                                          \
    } while (0)

#define ZC_ERROR(subsys, ...) ZC_LOG(ZC_LOG_ERROR, (subsys), __VA_ARGS__)
#define ZC_WARN(subsys, ...) ZC_LOG(ZC_LOG_WARN, (subsys), __VA_ARGS__)
#define ZC_INFO(subsys, ...) ZC_LOG(ZC_LOG_INFO, (subsys), __VA_ARGS__)
#define ZC_DEBUG(subsys, ...) ZC_LOG(ZC_LOG_DEBUG, (subsys), __VA_ARGS__)

/* Propagate a non-OK status, leaving a debug trace line at each level. */
#define ZC_CHECK(call)                                                                             \
    do {                                                                                           \
        zc_status_t zc_st_ = (call);                                                               \
        if (zc_st_ != ZC_OK) {                                                                     \
            ZC_DEBUG(ZC_SUB_ALL, "%s -> %s", #call, zc_status_str(zc_st_));                        \
            return zc_st_;                                                                         \
        }                                                                                          \
    } while (0)

#define ZC_CHECK_GOTO(call, st, label)                                                             \
    do {                                                                                           \
        (st) = (call);                                                                             \
        if ((st) != ZC_OK) {                                                                       \
            ZC_DEBUG(ZC_SUB_ALL, "%s -> %s", #call, zc_status_str(st));                            \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#endif /* ZC_LOG_H */
