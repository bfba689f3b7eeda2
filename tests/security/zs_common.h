/*
 * Shared by the security tests: a throw-away system user for the hostile
 * side, and real ranks run as forked kids (tests/common/zt_fork.h).
 *
 * The user: zs_user_create runs `useradd --system` for "zcsec-<our pid>"
 * (first removing any left by an earlier run whose process is gone) and
 * registers its removal at exit of this process; zs_user_remove removes it
 * at once. A kid becomes it with zs_become (groups, gid, uid, in that order).
 * Without root, zs_user_create returns -1 after printing why, and the test
 * skips its cross-uid part.
 *
 * A rank kid (zs_rank_kid) waits for the root info on its channel, inits,
 * reports {code, ms}, waits for a "go", runs ZS_OPS verified AllReduce ops
 * on the buffered path and on the zero-copy path (each over a fresh
 * SetMemoryRange + Activate, so every op round fetches its peers' memory
 * through their brokers), reports {code, ms}, and destroys everything.
 */
#ifndef ZS_COMMON_H
#define ZS_COMMON_H

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"
#include "hccl/hccl.h"
#include "zt_fork.h"
#include "zt_launch.h"

#define ZS_OPS 3
#define ZS_COUNT 1024

typedef struct {
    char name[40];
    uid_t uid;
    gid_t gid;
    pid_t owner; /* the process that made it (removes it at exit) */
} zs_user_t;

static zs_user_t zs_the_user;

static inline uint64_t zs_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void zs_user_remove(zs_user_t *u)
{
    if (u->name[0] != '\0' && u->owner == getpid()) {
        char cmd[96];
        snprintf(cmd, sizeof(cmd), "userdel -f %s >/dev/null 2>&1", u->name);
        if (system(cmd) != 0) {
            fprintf(stderr, "zs: %s failed\n", cmd);
        }
        u->name[0] = '\0';
    }
}

static inline void zs_user_atexit(void)
{
    zs_user_remove(&zs_the_user);
}

/* Remove users of earlier runs whose process is gone (a run killed by ctest). */
static inline void zs_user_sweep(void)
{
    FILE *f = fopen("/etc/passwd", "r");
    char line[256];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        int pid = 0;
        if (sscanf(line, "zcsec-%d:", &pid) == 1 && pid > 0 && kill(pid, 0) != 0) {
            char cmd[96];
            snprintf(cmd, sizeof(cmd), "userdel -f zcsec-%d >/dev/null 2>&1", pid);
            (void)system(cmd);
        }
    }
    if (f != NULL) {
        fclose(f);
    }
}

/* The test's hostile user, made once per process. Returns it or NULL (skip). */
static inline const zs_user_t *zs_user_get(void)
{
    if (zs_the_user.name[0] != '\0') {
        return &zs_the_user;
    }
    if (geteuid() != 0) {
        printf("zs: not root: the cross-uid cases are skipped (they need useradd and setuid)\n");
        return NULL;
    }
    zs_user_sweep();
    zs_user_t *u = &zs_the_user;
    snprintf(u->name, sizeof(u->name), "zcsec-%d", (int)getpid());
    char cmd[160];
    snprintf(cmd, sizeof(cmd),
             "useradd --system --no-create-home --shell /usr/sbin/nologin %s >/dev/null 2>&1",
             u->name);
    struct passwd *pw = system(cmd) == 0 ? getpwnam(u->name) : NULL;
    if (pw == NULL) {
        printf("zs: `%s` failed: the cross-uid cases are skipped\n", cmd);
        u->name[0] = '\0';
        return NULL;
    }
    u->uid = pw->pw_uid;
    u->gid = pw->pw_gid;
    u->owner = getpid();
    atexit(zs_user_atexit);
    return u;
}

/* In a kid: become u for good. Returns 0 or -1. */
static inline int zs_become(const zs_user_t *u)
{
    if (setgroups(0, NULL) != 0 || setgid(u->gid) != 0 || setuid(u->uid) != 0 ||
        getuid() != u->uid) {
        fprintf(stderr, "zs: cannot become uid %u\n", (unsigned)u->uid);
        return -1;
    }
    return 0;
}

/* ---- rank kids ----------------------------------------------------------------------- */

typedef struct {
    int32_t code;
    int32_t pad;
    int64_t ms;
} zs_report_t;

typedef struct {
    int rank;
    int nranks;
    int zero_copy; /* also run the zero-copy rounds */
} zs_rank_t;

/* ZS_OPS verified AllReduce ops on (in, out); 0 or the first failing code. */
static inline int zs_ops(HcclComm comm, aclrtStream s, int32_t *in, int32_t *out, int rank,
                         int nranks)
{
    for (int k = 0; k < ZS_OPS; k++) {
        for (int i = 0; i < ZS_COUNT; i++) {
            in[i] = rank + i + k;
        }
        int e =
            (int)HcclAllReduce(in, out, ZS_COUNT, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, s);
        if (e == 0) {
            e = (int)aclrtSynchronizeStream(s);
        }
        for (int i = 0; i < ZS_COUNT && e == 0; i++) {
            if (out[i] != nranks * (nranks - 1) / 2 + nranks * (i + k)) {
                fprintf(stderr, "rank %d: op %d out[%d] = %d\n", rank, k, i, out[i]);
                e = -1;
            }
        }
        if (e != 0) {
            return e;
        }
    }
    return 0;
}

/* The op rounds after "go": buffered, then zero-copy over a fresh range. */
static inline int zs_rounds(const zs_rank_t *a, HcclComm comm, aclrtStream s, int32_t *in,
                            int32_t *out)
{
    int e = zs_ops(comm, s, in, out, a->rank, a->nranks);
    if (e != 0 || !a->zero_copy) {
        return e;
    }
    zt_zc_t z;
    if (zt_zc_open(&z, comm, 0, 2 * ZS_COUNT * sizeof(int32_t), 1, 1) != 0) {
        return -2;
    }
    e = zs_ops(comm, s, z.va, (int32_t *)z.va + ZS_COUNT, a->rank, a->nranks);
    return zt_zc_close(&z, comm) != 0 && e == 0 ? -3 : e;
}

static inline int zs_rank_kid(int sock, void *arg)
{
    const zs_rank_t *a = arg;
    HcclRootInfo ri;
    aclrtStream s = NULL;
    int32_t *in = NULL;
    int32_t *out = NULL;
    ZT_KCHECK(zt_msg_get(sock, &ri, sizeof(ri)) == 0);
    ZT_KCHECK(aclInit(NULL) == ACL_SUCCESS && aclrtSetDevice(0) == ACL_SUCCESS);
    ZT_KCHECK(aclrtCreateStream(&s) == ACL_SUCCESS);
    ZT_KCHECK(aclrtMalloc((void **)&in, ZS_COUNT * 4, ACL_MEM_MALLOC_HUGE_FIRST) == 0);
    ZT_KCHECK(aclrtMalloc((void **)&out, ZS_COUNT * 4, ACL_MEM_MALLOC_HUGE_FIRST) == 0);
    HcclComm comm = NULL;
    uint64_t t0 = zs_ms();
    zs_report_t rep = {
        (int32_t)HcclCommInitRootInfo((uint32_t)a->nranks, &ri, (uint32_t)a->rank, &comm), 0, 0};
    rep.ms = (int64_t)(zs_ms() - t0);
    ZT_KCHECK(zt_msg_put(sock, &rep, sizeof(rep)) == 0);
    if (rep.code == 0) {
        char go;
        ZT_KCHECK(zt_msg_get(sock, &go, 1) == 0);
        t0 = zs_ms();
        rep.code = zs_rounds(a, comm, s, in, out);
        rep.ms = (int64_t)(zs_ms() - t0);
        ZT_KCHECK(zt_msg_put(sock, &rep, sizeof(rep)) == 0);
        ZT_KCHECK(HcclCommDestroy(comm) == HCCL_SUCCESS);
    }
    aclrtFree(in);
    aclrtFree(out);
    aclrtDestroyStream(s);
    return 0;
}

/* Start n rank kids running fn (arg: their zs_rank_t), before any library call of the parent. */
static inline void zs_ranks_start_fn(zt_kid_t *k, zs_rank_t *a, int n, int zero_copy, zt_kid_fn fn)
{
    for (int r = 0; r < n; r++) {
        a[r] = (zs_rank_t){r, n, zero_copy};
        k[r] = zt_kid_start(fn, &a[r]);
    }
}

/* Start n rank kids (before any library call of the parent). */
static inline void zs_ranks_start(zt_kid_t *k, zs_rank_t *a, int n, int zero_copy)
{
    zs_ranks_start_fn(k, a, n, zero_copy, zs_rank_kid);
}

/* Hand the kids ri, collect their init reports; max init ms in *ms. Returns
 * the number of ranks whose init failed. */
static inline int zs_ranks_init(zt_kid_t *k, int n, const HcclRootInfo *ri, zs_report_t *rep)
{
    for (int r = 0; r < n; r++) {
        assert_int_equal(zt_msg_put(k[r].sock, ri, sizeof(*ri)), 0);
    }
    int bad = 0;
    for (int r = 0; r < n; r++) {
        assert_int_equal(zt_msg_get(k[r].sock, &rep[r], sizeof(rep[r])), 0);
        bad += rep[r].code != 0;
    }
    return bad;
}

/* Say go to the ranks whose init worked, collect their op reports, reap
 * every kid. Returns failed ranks. */
static inline int zs_ranks_run(zt_kid_t *k, int n, const zs_report_t *init, zs_report_t *rep)
{
    int bad = 0;
    for (int r = 0; r < n; r++) {
        rep[r] = init[r];
        if (init[r].code == 0) {
            assert_int_equal(zt_msg_put(k[r].sock, "g", 1), 0);
        }
    }
    for (int r = 0; r < n; r++) {
        if (init[r].code == 0) {
            assert_int_equal(zt_msg_get(k[r].sock, &rep[r], sizeof(rep[r])), 0);
        }
        bad += rep[r].code != 0;
    }
    for (int r = 0; r < n; r++) {
        bad += zt_kid_wait(k[r]) != 0;
    }
    return bad;
}

#endif /* ZS_COMMON_H */
