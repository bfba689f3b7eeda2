/*
 * Rank-table init, shared by its three files: the parsed table
 * (hccl_ranktable.c), the rendezvous across servers over TCP
 * (hccl_ranktable_net.c) and the local rendezvous and exported calls
 * (hccl_ranktable_init.c).
 */
#ifndef HCCL_RANKTABLE_H
#define HCCL_RANKTABLE_H

#include "core/hccl_internal.h"

#include <stdio.h>

#include "zc/log.h"

#define ZH_RT_PATH_MAX 4096
#define ZH_RT_FILE_MAX ((long)64 << 20)

/* Servers a table may name (one rank each at most). */
#define ZH_RT_SERVERS_MAX ZH_MAX_COMM_RANKS
#define ZH_RT_ID_MAX 128
#define ZH_RT_IP_MAX 48

typedef struct {
    char id[ZH_RT_ID_MAX]; /* server_id ("" when a 2.0 table gives none) */
    char ip[ZH_RT_IP_MAX]; /* host_ip (1.x), "" when absent */
    char where[64];        /* JSON path of its first mention, for messages */
} zh_rt_server_t;

/* The parsed table (large: allocate it). */
typedef struct {
    const char *path;
    uint32_t me; /* the calling rank: its server's addresses must be this host's */
    uint32_t nranks;
    uint32_t nservers;
    int32_t device[ZH_MAX_COMM_RANKS];     /* by rank; -1 = not seen */
    uint32_t server_of[ZH_MAX_COMM_RANKS]; /* by rank: index into server[] */
    zh_rt_server_t server[ZH_RT_SERVERS_MAX];
} zh_rt_t;

#define ZH_RT_BAD(t, ...)                                                                          \
    do {                                                                                           \
        char zh_m_[512];                                                                           \
        snprintf(zh_m_, sizeof(zh_m_), __VA_ARGS__);                                               \
        ZC_WARN(ZC_SUB_INIT, "rank table %s: %s", (t)->path, zh_m_);                               \
    } while (0)

/* Read the whole file into *buf (NUL-terminated, *len bytes; the caller frees
 * it). ZC_ERR_IO when it cannot be opened or read, ZC_ERR_INVAL when too big. */
int zh_rt_read(const char *path, char **buf, long *len);

/* Parse and check the table in buf into t (t->path and t->me set by the
 * caller). ZC_ERR_INVAL (logged, naming the field) on any refusal. */
int zh_rt_parse(zh_rt_t *t, const char *buf, long len);

/* The IPv4 address of server s (1.x host_ip, else a server_id that is an
 * IPv4 address, else what the server_id resolves to) into ip. ZC_ERR_INVAL
 * (logged) when it has none. */
int zh_rt_server_ip(const zh_rt_t *t, uint32_t s, char ip[ZH_RT_IP_MAX]);

/* Rendezvous of a table naming several servers (hccl_ranktable_net.c): the
 * root info for every rank into *info. Rank 0 makes it and serves it on its
 * server's address from a thread, *srv, until zh_rt_net_stop (once every
 * rank has joined); the others fetch it (*srv NULL). */
typedef struct zh_rt_srv zh_rt_srv_t;
HcclResult zh_rt_net_meet(const zh_rt_t *t, const char *buf, long len, uint32_t rank,
                          HcclRootInfo *info, zh_rt_srv_t **srv);
/* Stop serving and free srv (NULL: nothing). */
void zh_rt_net_stop(zh_rt_srv_t *srv);

#endif /* HCCL_RANKTABLE_H */
