/*
 * A listener's pending clients, served by poll (the root listener, the
 * rank-table server and the memory broker).
 *
 * A server keeps its pending clients (accepted, their request not complete)
 * in a table in accept order, the oldest first; each record starts with a
 * zc_pend_t. A round polls the listener and every pending client at once, so
 * no client holds up another: zc_pollsrv_fds fills the set, the server polls
 * it (with fds of its own after it), zc_pollsrv_sweep serves the readable
 * clients, drops the silent ones past limit_ns and compacts the table, and
 * zc_pollsrv_accept takes every waiting client. A full table evicts its
 * oldest client once that one is evict_ns old; else the newcomer is closed
 * without a word, which a real client takes as "try again".
 */
#ifndef ZC_POLLSRV_H
#define ZC_POLLSRV_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

/** How every pending client's record starts. */
typedef struct {
    int fd;
    uint64_t since; /* zc_time_ns at accept */
} zc_pend_t;

/** What ready() makes of a client: kept pending, closed, or its fd taken over by the server. */
enum { ZC_PEND_KEEP = 0, ZC_PEND_CLOSE = 1, ZC_PEND_TAKEN = 2 };

typedef struct zc_pollsrv zc_pollsrv_t;

/** What a server allows and does (one static table a server). */
typedef struct {
    /** A full table evicts its oldest client once it is this old (UINT64_MAX: never). */
    uint64_t evict_ns;
    /** A client silent this long after accept is dropped (0: never). */
    uint64_t limit_ns;
    /** A client accepted on fd (non-blocking): zc_pollsrv_add it, or close fd. */
    void (*admit)(zc_pollsrv_t *s, int fd);
    /** A readable client: serve it and return ZC_PEND_KEEP, _CLOSE or _TAKEN. */
    int (*ready)(zc_pollsrv_t *s, void *rec);
    /** Optional (NULL: none): a client dropped for silence, before it is closed. */
    void (*expired)(zc_pollsrv_t *s, const void *rec);
    /** Optional: a newcomer closed, the table holding cap clients none of which may go. */
    void (*full)(zc_pollsrv_t *s, int cap);
    /** Optional: accept failed for want of descriptors or memory (errno err). */
    void (*starved)(zc_pollsrv_t *s, int err);
} zc_pollsrv_ops_t;

struct zc_pollsrv {
    int lfd;                     /* the listening socket, non-blocking */
    void *pend;                  /* npend records of size bytes, the oldest first */
    size_t size;                 /* a record: a zc_pend_t and the server's own fields */
    const zc_pollsrv_ops_t *ops; /* the server's rules */
    void *ctx;                   /* the server's */
    int npend;                   /* pending clients */
    unsigned evicted;            /* clients evicted for a newcomer or a descriptor */
};

/** The listener, then every pending client, into pfd (room for 1 + npend); returns how many. */
int zc_pollsrv_fds(const zc_pollsrv_t *s, struct pollfd *pfd);

/** Poll timeout (ms) until the oldest client's limit_ns runs out; -1 when none does. */
int zc_pollsrv_wait_ms(const zc_pollsrv_t *s);

/** After a poll over zc_pollsrv_fds's set: ready() every readable client, drop every
 *  silent one past limit_ns (expired() first), and close the gaps, in accept order. */
void zc_pollsrv_sweep(zc_pollsrv_t *s, const struct pollfd *pfd);

/** When pfd[0] (the listener) is readable: admit() every waiting client into a table
 *  that may hold cap, making room as the header says (full() for each newcomer closed).
 *  Out of descriptors, the oldest client is evicted to take the newcomer when it may go;
 *  else starved() and a 10 ms pause (the listener stays readable). */
void zc_pollsrv_accept(zc_pollsrv_t *s, const struct pollfd *pfd, int cap);

/** The record of a client admitted on fd: zeroed but for fd and since, and counted. */
void *zc_pollsrv_add(zc_pollsrv_t *s, int fd);

/** Close every pending client. */
void zc_pollsrv_close(zc_pollsrv_t *s);

#endif /* ZC_POLLSRV_H */
