/*
 * The other ways to make a communicator (HcclCommInitAll, sub-communicators;
 * rank tables are in hccl_ranktable.c) and the calls a host cannot support
 * (suspend/resume), which fail with HCCL_E_NOT_SUPPORT and say why (after
 * the handle check, so a stale or bogus comm still gets HCCL_E_PARA).
 *
 * HcclCommInitAll: one process, ndev ranks: a root info is made here and one
 * thread per device runs the normal init (threads-as-ranks, addresses used
 * directly).
 * HcclCreateSubCommConfig: the member whose sub-rank is 0 makes a root info
 * and publishes it, with the subCommId, in its parent control segment; the
 * other members read it there (bounded by HCCL_CONNECT_TIMEOUT) and all run
 * the normal init. subCommId must be unique among live sub-communicators.
 */
#include "core/hccl_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zc/config.h"
#include "zc/log.h"
#include "zc/sync.h"

typedef struct {
    uint32_t n;
    uint32_t rank;
    int32_t device;
    const HcclRootInfo *info;
    HcclComm comm;
    HcclResult result;
} zh_initall_t;

static void *zh_initall_main(void *arg)
{
    zh_initall_t *a = arg;
    if (aclrtSetDevice(a->device) != ACL_SUCCESS) {
        ZC_WARN(ZC_SUB_INIT, "HcclCommInitAll: aclrtSetDevice(%d) failed", a->device);
        /* still join, so the others fail at once rather than time out */
    }
    a->result = zh_comm_init(a->n, a->info, a->rank, NULL, &a->comm);
    return NULL;
}

ZC_EXPORT HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms)
{
    if (devices == NULL || comms == NULL) {
        ZC_WARN(ZC_SUB_INIT, "HcclCommInitAll: devices %p / comms %p is NULL", (void *)devices,
                (void *)comms);
        return HCCL_E_PTR;
    }
    if (ndev == 0 || ndev > ZH_MAX_COMM_RANKS) {
        ZC_WARN(ZC_SUB_INIT, "HcclCommInitAll: ndev %u out of range 1..%d", ndev,
                ZH_MAX_COMM_RANKS);
        return HCCL_E_PARA;
    }
    uint32_t count = 0;
    if (aclrtGetDeviceCount(&count) == ACL_SUCCESS) {
        for (uint32_t i = 0; i < ndev; i++) {
            if (devices[i] < 0 || (uint32_t)devices[i] >= count) {
                ZC_WARN(ZC_SUB_INIT, "HcclCommInitAll: devices[%u] = %d (count %u)", i, devices[i],
                        count);
                return HCCL_E_PARA;
            }
        }
    }
    zh_initall_t *a = calloc(ndev, sizeof(*a));
    pthread_t *th = calloc(ndev, sizeof(*th));
    if (a == NULL || th == NULL) {
        ZC_WARN(ZC_SUB_INIT, "HcclCommInitAll: out of memory for %u init threads", ndev);
        free(a);
        free(th);
        return HCCL_E_MEMORY;
    }
    HcclRootInfo info;
    HcclResult r = zh_result(zh_boot_root_create(&info));
    if (r != HCCL_SUCCESS) {
        free(a);
        free(th);
        return r;
    }
    for (uint32_t i = 0; i < ndev; i++) {
        a[i] = (zh_initall_t){ndev, i, devices[i], &info, NULL, HCCL_E_INTERNAL};
        if (pthread_create(&th[i], NULL, zh_initall_main, &a[i]) != 0) {
            ZC_WARN(ZC_SUB_INIT, "HcclCommInitAll: cannot start init thread %u", i);
            a[i].result = HCCL_E_SYSCALL;
            th[i] = 0;
        }
    }
    for (uint32_t i = 0; i < ndev; i++) {
        if (th[i] != 0) {
            pthread_join(th[i], NULL);
        }
        if (a[i].result != HCCL_SUCCESS && r == HCCL_SUCCESS) {
            r = a[i].result;
        }
    }
    for (uint32_t i = 0; i < ndev; i++) {
        if (r != HCCL_SUCCESS && a[i].result == HCCL_SUCCESS) {
            (void)zh_comm_destroy(zh_comm_lookup(a[i].comm));
        }
        comms[i] = r == HCCL_SUCCESS ? a[i].comm : NULL;
    }
    free(a);
    free(th);
    return r;
}

ZC_EXPORT HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds,
                                             uint64_t subCommId, uint32_t subCommRankId,
                                             HcclCommConfig *config, HcclComm *subComm)
{
    if (comm == NULL || rankIds == NULL || subComm == NULL) {
        ZC_WARN(ZC_SUB_INIT, "HcclCreateSubCommConfig: comm %p, rankIds %p or subComm %p is NULL",
                (void *)comm, (void *)rankIds, (void *)subComm);
        return HCCL_E_PTR;
    }
    zh_comm_t *c = NULL;
    ZH_CHECK_RESULT(zh_comm_get(*comm, __func__, &c));
    if (c->hier != NULL) {
        ZC_WARN(ZC_SUB_INIT,
                "HcclCreateSubCommConfig: rank %d: the parent spans hosts, which "
                "sub-communicators do not support yet",
                c->rank);
        return HCCL_E_NOT_SUPPORT;
    }
    if (rankNum == 0 || rankNum > (uint32_t)c->nranks || subCommRankId >= rankNum ||
        rankIds[subCommRankId] != (uint32_t)c->rank) {
        ZC_WARN(ZC_SUB_INIT,
                "HcclCreateSubCommConfig: rank %d: rankNum %u, subCommRankId %u, "
                "rankIds[subCommRankId] must be my parent rank",
                c->rank, rankNum, subCommRankId);
        return HCCL_E_PARA;
    }
    for (uint32_t i = 0; i < rankNum; i++) {
        for (uint32_t j = 0; j < i; j++) {
            if (rankIds[i] >= (uint32_t)c->nranks || rankIds[i] == rankIds[j]) {
                ZC_WARN(ZC_SUB_INIT,
                        "HcclCreateSubCommConfig: rankIds[%u] = %u is out of range "
                        "or repeated",
                        i, rankIds[i]);
                return HCCL_E_PARA;
            }
        }
    }
    HcclRootInfo info;
    zh_ctrl_t *rc = c->peers[rankIds[0]].ctrl;
    if (subCommRankId == 0) {
        HcclResult r = zh_result(zh_boot_root_create(&info));
        if (r != HCCL_SUCCESS) {
            return r;
        }
        pthread_mutex_lock(&c->lock);
        uint32_t k = c->ctrl->sub_next++ % 4u;
        c->ctrl->sub[k].id = subCommId;
        memcpy(&c->ctrl->sub[k].info, &info, sizeof(info));
        zh_flag_post(&c->ctrl->sub[k].ready,
                     atomic_load_explicit(&c->ctrl->sub[k].ready.value, memory_order_relaxed) + 1);
        pthread_mutex_unlock(&c->lock);
    } else {
        uint64_t deadline = zc_time_ns() + zc_config()->connect_timeout_s * 1000000000ull;
        int found = 0;
        while (!found) {
            for (int k = 0; k < 4 && !found; k++) {
                if (atomic_load_explicit(&rc->sub[k].ready.value, memory_order_acquire) != 0 &&
                    rc->sub[k].id == subCommId) {
                    memcpy(&info, &rc->sub[k].info, sizeof(info));
                    found = 1;
                }
            }
            if (!found) {
                if (zc_time_ns() > deadline) {
                    ZC_WARN(ZC_SUB_INIT,
                            "HcclCreateSubCommConfig: rank %d: rank %u did not "
                            "publish sub-communicator %llu in time",
                            c->rank, rankIds[0], (unsigned long long)subCommId);
                    return HCCL_E_TIMEOUT;
                }
                usleep(1000);
            }
        }
    }
    return zh_comm_init(rankNum, &info, subCommRankId, config, subComm);
}

static HcclResult zh_not_supported(const char *fn, const char *why)
{
    ZC_WARN(ZC_SUB_COMM, "%s is not supported by zccl: %s", fn, why);
    return HCCL_E_NOT_SUPPORT;
}

ZC_EXPORT HcclResult HcclCommSuspend(HcclComm comm)
{
    ZH_COMM_OR_RETURN(c, comm);
    (void)c;
    return zh_not_supported(__func__, "suspend/resume serves NPU link recovery, which a host "
                                      "communicator does not have");
}

ZC_EXPORT HcclResult HcclCommResume(HcclComm comm)
{
    ZH_COMM_OR_RETURN(c, comm);
    (void)c;
    return zh_not_supported(__func__, "suspend/resume serves NPU link recovery, which a host "
                                      "communicator does not have");
}
