/*
 * Rank-table init, shared by its two files: the parsed table
 * (hccl_ranktable.c) and the rendezvous and exported calls
 * (hccl_ranktable_init.c).
 */
#ifndef HCCL_RANKTABLE_H
#define HCCL_RANKTABLE_H

#include "hccl_internal.h"

#include <stdio.h>

#include "zc/log.h"

#define ZH_RT_PATH_MAX 4096
#define ZH_RT_FILE_MAX ((long)64 << 20)

typedef struct {
    const char *path;
    uint32_t nranks;
    int32_t device[ZH_MAX_RANKS]; /* by rank; -1 = not seen */
    char server[128];             /* the one server id seen */
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

/* Parse and check the table in buf into t (t->path set by the caller).
 * ZC_ERR_INVAL (logged, naming the field) on any refusal. */
int zh_rt_parse(zh_rt_t *t, const char *buf, long len);

#endif /* HCCL_RANKTABLE_H */
