/*
 * zccl internal status codes.
 *
 * One enum for the whole code base (0 ok, negative errors), generated with the
 * string table from a single X-macro so the two can never drift apart. The
 * public HcclResult / aclError values are derived from these in exactly one
 * place per library (the API edge).
 */
#ifndef ZC_STATUS_H
#define ZC_STATUS_H

/* X(name, value, text) */
#define ZC_STATUS_LIST(X)                                                                          \
    X(ZC_OK, 0, "success")                                                                         \
    X(ZC_ERR_INVAL, -1, "invalid argument")                                                        \
    X(ZC_ERR_PTR, -2, "null pointer")                                                              \
    X(ZC_ERR_NOMEM, -3, "out of memory")                                                           \
    X(ZC_ERR_SYS, -4, "system call failed")                                                        \
    X(ZC_ERR_TIMEOUT, -5, "timed out")                                                             \
    X(ZC_ERR_REMOTE, -6, "remote peer failed")                                                     \
    X(ZC_ERR_NOT_SUPPORT, -7, "not supported")                                                     \
    X(ZC_ERR_NOT_FOUND, -8, "not found")                                                           \
    X(ZC_ERR_PERM, -9, "permission denied")                                                        \
    X(ZC_ERR_INTERNAL, -10, "internal error")                                                      \
    X(ZC_ERR_UNAVAIL, -11, "resource unavailable")                                                 \
    X(ZC_ERR_AGAIN, -12, "try again")                                                              \
    X(ZC_ERR_IO, -13, "socket i/o failed")                                                         \
    X(ZC_ERR_CONNECT, -14, "connect failed")                                                       \
    X(ZC_ERR_STATE, -15, "wrong state")                                                            \
    X(ZC_ERR_HANDLE, -16, "invalid handle")                                                        \
    X(ZC_ERR_UNALIGNED, -17, "address unaligned")                                                  \
    X(ZC_ERR_DEVICE, -18, "invalid device")                                                        \
    X(ZC_ERR_UNINIT, -19, "not initialized")                                                       \
    X(ZC_ERR_REPEAT, -20, "already initialized")                                                   \
    X(ZC_ERR_OVERLIMIT, -21, "over limit")

typedef enum {
#define ZC_STATUS_ENUM(name, value, text) name = (value),
    ZC_STATUS_LIST(ZC_STATUS_ENUM)
#undef ZC_STATUS_ENUM
} zc_status_t;

/** Short English text for a status; "unknown status" for anything else. */
const char *zc_status_str(zc_status_t st);

#endif /* ZC_STATUS_H */
