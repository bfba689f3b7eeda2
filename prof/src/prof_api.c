/*
 * aclprof* on the recorder of libascendcl (zccl/prof_ext.h).
 *
 * State: aclprofInit names the output directory (created if missing, and
 * checked writable) once per process; aclprofStart turns the config's data
 * switches into the recorder's mask and starts it; aclprofStop stops it and
 * writes the records of the config's devices, one trace file per rank;
 * aclprofFinalize stops a running collection the same way. Configs are
 * validated against the list of live ones, so a stale pointer is
 * ACL_ERROR_INVALID_PARAM, not a crash.
 */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "acl/acl_rt.h"
#include "zc/export.h"
#include "zc/log.h"

#define PROF_CONFIG_MAGIC 0x7a70726fu
#define PROF_RECORDS (1u << 16)
#define PROF_PATH_MAX 4096

#define PROF_TASK_TIME_ANY                                                                         \
    (ACL_PROF_TASK_TIME | ACL_PROF_TASK_TIME_L0 | ACL_PROF_TASK_TIME_L2 | ACL_PROF_TASK_TIME_L3)
#define PROF_KNOWN                                                                                 \
    (ACL_PROF_ACL_API | ACL_PROF_TASK_TIME | ACL_PROF_AICORE_METRICS | ACL_PROF_AICPU |            \
     ACL_PROF_L2CACHE | ACL_PROF_HCCL_TRACE | ACL_PROF_TRAINING_TRACE | ACL_PROF_MSPROFTX |        \
     ACL_PROF_RUNTIME_API | ACL_PROF_GE_API_L0 | ACL_PROF_TASK_TIME_L0 | ACL_PROF_TASK_MEMORY |    \
     ACL_PROF_TASK_TIME_L2 | ACL_PROF_OP_ATTR | ACL_PROF_TASK_TIME_L3 | ACL_PROF_GE_API_L1 |       \
     ACL_PROF_API_STATS)

struct aclprofConfig {
    uint32_t magic;
    uint32_t ndevs;
    aclprofAicoreMetrics metrics;
    uint64_t types;
    struct aclprofConfig *next; /* live configs */
    uint32_t devs[];
};

static pthread_mutex_t prof_mu = PTHREAD_MUTEX_INITIALIZER;
static int prof_inited;
static char prof_dir[PROF_PATH_MAX];
static int prof_active;         /* a collection is running */
static uint32_t *prof_run_devs; /* its devices (copied from the config at start) */
static uint32_t prof_run_ndevs;
static unsigned prof_runs;
static aclprofConfig *prof_configs;

static int prof_config_live(const aclprofConfig *cfg)
{
    for (const aclprofConfig *c = prof_configs; c != NULL; c = c->next) {
        if (c == cfg) {
            return c->magic == PROF_CONFIG_MAGIC;
        }
    }
    return 0;
}

/* mkdir -p dir (mode 0750 for what it creates). */
static int prof_mkdirs(const char *dir)
{
    char tmp[PROF_PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", dir);
    for (char *p = tmp + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0750) != 0 && errno != EEXIST) {
                return -1;
            }
            *p = '/';
        }
    }
    return mkdir(tmp, 0750) != 0 && errno != EEXIST ? -1 : 0;
}

ZC_EXPORT aclError aclprofInit(const char *profilerResultPath, size_t length)
{
    if (profilerResultPath == NULL || length == 0 || length >= PROF_PATH_MAX ||
        strnlen(profilerResultPath, length + 1) != length) {
        ZC_WARN(ZC_SUB_INIT,
                "aclprofInit: path %s with length %zu (want a path of that strlen, "
                "1..%d)",
                profilerResultPath != NULL ? "given" : "NULL", length, PROF_PATH_MAX - 1);
        return ACL_ERROR_INVALID_PARAM;
    }
    pthread_mutex_lock(&prof_mu);
    aclError rc = ACL_SUCCESS;
    if (prof_inited) {
        rc = ACL_ERROR_REPEAT_INITIALIZE;
        ZC_WARN(ZC_SUB_INIT, "aclprofInit: already initialised (aclprofFinalize first)");
    } else if (prof_mkdirs(profilerResultPath) != 0 || access(profilerResultPath, W_OK) != 0) {
        rc = ACL_ERROR_INVALID_FILE;
        ZC_WARN(ZC_SUB_INIT, "aclprofInit: directory '%s' cannot be created or written: %s",
                profilerResultPath, strerror(errno));
    } else {
        memcpy(prof_dir, profilerResultPath, length);
        prof_dir[length] = '\0';
        prof_inited = 1;
    }
    pthread_mutex_unlock(&prof_mu);
    return rc;
}

static int prof_config_check(const uint32_t *devs, uint32_t n, aclprofAicoreMetrics metrics,
                             const aclprofAicoreEvents *events, uint64_t types)
{
    uint32_t count = 0;
    (void)aclrtGetDeviceCount(&count);
    const char *bad = NULL;
    unsigned long long value = 0;
    if (n == 0 || devs == NULL) {
        bad = n == 0 ? "deviceNums" : "deviceIdList (NULL)";
        value = n;
    } else if (!((int)metrics >= ACL_AICORE_ARITHMETIC_UTILIZATION &&
                 (int)metrics <= ACL_AICORE_MEMORY_ACCESS) &&
               metrics != ACL_AICORE_NONE) {
        bad = "aicoreMetrics";
        value = (unsigned long long)metrics;
    } else if (events != NULL) {
        bad = "aicoreEvents (must be NULL)";
    } else if ((types & ~(uint64_t)PROF_KNOWN) != 0) {
        bad = "dataTypeConfig (unknown bits)";
        value = (unsigned long long)(types & ~(uint64_t)PROF_KNOWN);
    }
    for (uint32_t i = 0; bad == NULL && i < n; i++) {
        int dup = 0;
        for (uint32_t j = 0; j < i; j++) {
            dup |= devs[j] == devs[i];
        }
        if (devs[i] >= count || dup) {
            bad = dup ? "deviceIdList (duplicate device)" : "deviceIdList (no such device)";
            value = devs[i];
        }
    }
    if (bad != NULL) {
        ZC_WARN(ZC_SUB_INIT, "aclprofCreateConfig: bad %s: %llu", bad, value);
        return -1;
    }
    return 0;
}

ZC_EXPORT aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums,
                                             aclprofAicoreMetrics aicoreMetrics,
                                             const aclprofAicoreEvents *aicoreEvents,
                                             uint64_t dataTypeConfig)
{
    if (prof_config_check(deviceIdList, deviceNums, aicoreMetrics, aicoreEvents, dataTypeConfig) !=
        0) {
        return NULL;
    }
    aclprofConfig *c = calloc(1, sizeof(*c) + (size_t)deviceNums * sizeof(uint32_t));
    if (c == NULL) {
        ZC_WARN(ZC_SUB_INIT, "aclprofCreateConfig: out of memory");
        return NULL;
    }
    c->magic = PROF_CONFIG_MAGIC;
    c->ndevs = deviceNums;
    c->metrics = aicoreMetrics;
    c->types = dataTypeConfig;
    memcpy(c->devs, deviceIdList, (size_t)deviceNums * sizeof(uint32_t));
    pthread_mutex_lock(&prof_mu);
    c->next = prof_configs;
    prof_configs = c;
    pthread_mutex_unlock(&prof_mu);
    return c;
}

ZC_EXPORT aclError aclprofDestroyConfig(const aclprofConfig *profilerConfig)
{
    pthread_mutex_lock(&prof_mu);
    aclprofConfig *found = NULL;
    for (aclprofConfig **p = &prof_configs; *p != NULL; p = &(*p)->next) {
        if (*p == profilerConfig) {
            found = *p;
            *p = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&prof_mu);
    if (found == NULL) {
        ZC_WARN(ZC_SUB_INIT, "aclprofDestroyConfig: %p is not a live config",
                (const void *)profilerConfig);
        return ACL_ERROR_INVALID_PARAM;
    }
    found->magic = 0;
    free(found);
    return ACL_SUCCESS;
}

ZC_EXPORT aclError aclprofStart(const aclprofConfig *profilerConfig)
{
    aclError rc = ACL_SUCCESS;
    pthread_mutex_lock(&prof_mu);
    if (profilerConfig == NULL || !prof_config_live(profilerConfig)) {
        rc = ACL_ERROR_INVALID_PARAM;
        ZC_WARN(ZC_SUB_INIT, "aclprofStart: config %p is not a live config",
                (const void *)profilerConfig);
    } else if (!prof_inited) {
        rc = ACL_ERROR_PROF_NOT_RUN;
        ZC_WARN(ZC_SUB_INIT, "aclprofStart: call aclprofInit first");
    } else if (prof_active) {
        rc = ACL_ERROR_PROF_ALREADY_RUN;
        ZC_WARN(ZC_SUB_INIT, "aclprofStart: a collection is running (aclprofStop first)");
    }
    uint64_t types = rc == ACL_SUCCESS ? profilerConfig->types : 0;
    unsigned what = ((types & (ACL_PROF_HCCL_TRACE | PROF_TASK_TIME_ANY)) ? ZCCL_PROF_HCCL : 0u) |
                    ((types & (ACL_PROF_RUNTIME_API | PROF_TASK_TIME_ANY)) ? ZCCL_PROF_COPY : 0u) |
                    ((types & ACL_PROF_MSPROFTX) ? ZCCL_PROF_TX : 0u);
    uint32_t *devs = NULL;
    if (rc == ACL_SUCCESS) {
        devs = malloc(profilerConfig->ndevs * sizeof(*devs));
        if (devs == NULL || (what != 0 && zccl_prof_begin(what, PROF_RECORDS) != 0)) {
            rc = ACL_ERROR_BAD_ALLOC;
            free(devs);
        }
    }
    if (rc == ACL_SUCCESS) {
        memcpy(devs, profilerConfig->devs, profilerConfig->ndevs * sizeof(*devs));
        free(prof_run_devs);
        prof_run_devs = devs;
        prof_run_ndevs = profilerConfig->ndevs;
        prof_active = 1;
        if (what == 0) {
            ZC_INFO(ZC_SUB_INIT,
                    "aclprofStart: switches 0x%llx select nothing zccl records "
                    "(HCCL_TRACE, TASK_TIME, RUNTIME_API or MSPROFTX do)",
                    (unsigned long long)types);
        }
    }
    pthread_mutex_unlock(&prof_mu);
    return rc;
}

/* Stop the running collection and write its traces (prof_mu held). */
static aclError prof_stop_locked(void)
{
    zccl_prof_end();
    zccl_prof_rec_t *recs = NULL;
    uint64_t dropped = 0;
    size_t n = zccl_prof_take(&recs, &dropped);
    prof_filter_t filter = {prof_run_devs, prof_run_ndevs};
    aclError rc = prof_trace_write(prof_dir, prof_runs++, recs, n, dropped, &filter);
    free(recs);
    prof_active = 0;
    return rc;
}

ZC_EXPORT aclError aclprofStop(const aclprofConfig *profilerConfig)
{
    aclError rc;
    pthread_mutex_lock(&prof_mu);
    if (profilerConfig == NULL || !prof_config_live(profilerConfig)) {
        rc = ACL_ERROR_INVALID_PARAM;
        ZC_WARN(ZC_SUB_INIT, "aclprofStop: config %p is not a live config",
                (const void *)profilerConfig);
    } else if (!prof_active) {
        rc = ACL_ERROR_PROF_NOT_RUN;
        ZC_WARN(ZC_SUB_INIT, "aclprofStop: no collection is running");
    } else {
        rc = prof_stop_locked();
    }
    pthread_mutex_unlock(&prof_mu);
    return rc;
}

ZC_EXPORT aclError aclprofFinalize(void)
{
    aclError rc = ACL_SUCCESS;
    pthread_mutex_lock(&prof_mu);
    if (!prof_inited) {
        rc = ACL_ERROR_PROF_NOT_RUN;
        ZC_WARN(ZC_SUB_INIT, "aclprofFinalize: aclprofInit was not called");
    } else {
        if (prof_active) {
            rc = prof_stop_locked();
        }
        prof_inited = 0;
    }
    pthread_mutex_unlock(&prof_mu);
    return rc;
}
