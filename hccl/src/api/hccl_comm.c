/*
 * Communicator lifecycle: init from a root info (with or without a config),
 * destroy. The registry of live handles is hccl_handle.c.
 *
 * Init order: settings (environment table, then the config's fields up to
 * the size it declares), control segment created and offered, bootstrap join
 * (the table of every rank), peers' control segments mapped, and a final
 * round through the root so that no rank returns success while another
 * failed. Init unwinds through named labels on failure.
 */
#include "boot/hccl_boot.h"
#include "core/hccl_prof.h"
#include "topo/hccl_topo.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "zc/config.h"
#include "zc/llc.h"
#include "zc/log.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"

#define ZH_SPIN_OVERSUB 16u

/* Does a config of `size` bytes contain the field ending at `end`? */
#define ZH_CFG_HAS(cfg, field)                                                                     \
    ((cfg)->size >= offsetof(HcclCommConfig, field) + sizeof((cfg)->field))

static int zh_comm_apply_config(zh_comm_t *c, const HcclCommConfig *cfg)
{
    if (cfg->magicWord != HCCL_COMM_CONFIG_MAGIC_WORD) {
        ZC_WARN(ZC_SUB_INIT,
                "rank %d: HcclCommConfig magic word is 0x%08x (want 0x%08x): "
                "was HcclCommConfigInit called?",
                c->rank, cfg->magicWord, HCCL_COMM_CONFIG_MAGIC_WORD);
        return ZC_ERR_INVAL;
    }
    if (cfg->size < HCCL_COMM_CONFIG_INFO_BYTES || cfg->version == 0) {
        ZC_WARN(ZC_SUB_INIT, "rank %d: HcclCommConfig size %zu / version %u is invalid", c->rank,
                cfg->size, cfg->version);
        return ZC_ERR_INVAL;
    }
    if (ZH_CFG_HAS(cfg, hcclBufferSize) &&
        cfg->hcclBufferSize != HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET) {
        if (cfg->hcclBufferSize == 0) {
            ZC_WARN(ZC_SUB_INIT, "rank %d: hcclBufferSize 0 MB is invalid (>= 1)", c->rank);
            return ZC_ERR_INVAL;
        }
        c->buffsize = (uint64_t)cfg->hcclBufferSize << 20;
    }
    if (ZH_CFG_HAS(cfg, hcclDeterministic) &&
        cfg->hcclDeterministic != HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET) {
        if (cfg->hcclDeterministic > 2) {
            ZC_WARN(ZC_SUB_INIT, "rank %d: hcclDeterministic %u is invalid (0, 1 or 2)", c->rank,
                    cfg->hcclDeterministic);
            return ZC_ERR_INVAL;
        }
        /* zccl's reduction order is always fixed by rank: every valid
         * value is honoured by construction. */
    }
    if (ZH_CFG_HAS(cfg, hcclCommName) && cfg->hcclCommName[0] != '\0') {
        if (memchr(cfg->hcclCommName, '\0', sizeof(cfg->hcclCommName)) == NULL) {
            ZC_WARN(ZC_SUB_INIT, "rank %d: hcclCommName is not NUL-terminated", c->rank);
            return ZC_ERR_INVAL;
        }
        snprintf(c->name, sizeof(c->name), "%s", cfg->hcclCommName);
    }
    if (ZH_CFG_HAS(cfg, hcclExecTimeOut) &&
        cfg->hcclExecTimeOut != HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET) {
        if (cfg->hcclExecTimeOut < 0) {
            ZC_WARN(ZC_SUB_INIT, "rank %d: hcclExecTimeOut %d s is invalid", c->rank,
                    cfg->hcclExecTimeOut);
            return ZC_ERR_INVAL;
        }
        c->exec_timeout_ns = (uint64_t)cfg->hcclExecTimeOut * 1000000000ull;
    }
    if (ZH_CFG_HAS(cfg, hcclSymWinMaxMemSizePerRank) && cfg->version >= 10) {
        if (cfg->hcclSymWinMaxMemSizePerRank == 0 ||
            cfg->hcclSymWinMaxMemSizePerRank > (1u << 20)) {
            ZC_WARN(ZC_SUB_INIT, "rank %d: hcclSymWinMaxMemSizePerRank %llu GB is invalid", c->rank,
                    (unsigned long long)cfg->hcclSymWinMaxMemSizePerRank);
            return ZC_ERR_INVAL;
        }
        c->symwin_max = cfg->hcclSymWinMaxMemSizePerRank << 30;
    }
    return ZC_OK;
}

void zh_comm_free(zh_comm_t *c)
{
    zh_levels_t *levels = c->levels; /* freed last: the tier across hosts points into them */
    if (c->hier != NULL) {
        zh_hier_destroy(c); /* the local comm holds the machinery; c has none */
        c->nranks = 0;      /* c never attached peers: only its own segment may be left */
        zh_ctrl_destroy(c); /* (set-up failed before moving it to the local comm) */
        pthread_mutex_destroy(&c->lock);
        free(c);
    } else {
        zh_comm_release(c);
    }
    zh_levels_free(levels);
}

/* ZCCL_HIER: 1 for auto, 0 for off; another value keeps auto (warned). */
static int zh_hier_setting(const char *v, uint32_t rank)
{
    if (strcmp(v, "off") == 0) {
        return 0;
    }
    if (strcmp(v, "auto") != 0 && v[0] != '\0') {
        ZC_WARN(ZC_SUB_INIT, "rank %u: ZCCL_HIER=%s is not auto or off; using auto", rank, v);
    }
    return 1;
}

/* My bootstrap entry: pid, device, host, control segment, my place on the
 * host (by my binding, else where my control segment lies, else my
 * device's node) and the settings the ranks must agree on. */
static int zh_comm_mine(const zh_comm_t *c, zh_boot_entry_t *mine)
{
    zccl_place_t pl;
    ZC_CHECK(zccl_topo_place(c->ctrl, sizeof(*c->ctrl), c->device, &pl));
    *mine = (zh_boot_entry_t){
        .pid = (int32_t)getpid(),
        .device = c->device,
        .host_id = zc_host_id(),
        .ctrl_token = c->ctrl_token,
        .numa = pl.numa,
        .package = pl.package,
        .l3 = pl.l3,
        .place_rule = pl.rule,
        .flags = c->hier_on ? ZH_ENTRY_HIER : 0u,
    };
    return ZC_OK;
}

/* The settings of every rank's entry, agreed: a hierarchical schedule only
 * when every rank allows it. Rank 0 says once when they differed. */
static void zh_comm_agree(zh_comm_t *c, const zh_boot_entry_t *table)
{
    int off = 0;
    int first = -1;
    for (int r = 0; r < c->nranks; r++) {
        if ((table[r].flags & ZH_ENTRY_HIER) == 0) {
            first = off++ == 0 ? r : first;
        }
    }
    if (off > 0 && off < c->nranks && c->rank == 0) {
        ZC_WARN(ZC_SUB_INIT,
                "rank 0: ZCCL_HIER differs between ranks (off on %d of %d, first rank %d); "
                "off on every rank",
                off, c->nranks, first);
    }
    c->hier_on = off == 0;
}

/* A comm on one host: at most ZCCL_MAX_LOCAL_RANKS ranks, its tables made,
 * peers attached. */
static int zh_comm_one_host(zh_comm_t *c, const zh_boot_entry_t *table)
{
    ZC_CHECK(zh_ctrl_check_local(c, c->nranks));
    ZC_CHECK(zh_comm_tables(c));
    return zh_ctrl_attach_peers(c, table);
}

HcclResult zh_comm_init(uint32_t nranks, const HcclRootInfo *info, uint32_t rank,
                        const HcclCommConfig *cfg, HcclComm *out)
{
    const zc_config_t *env = zc_config();
    zh_registry_init();
    zh_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        ZC_WARN(ZC_SUB_INIT, "rank %u: out of memory for the communicator", rank);
        return HCCL_E_MEMORY;
    }
    c->rank = (int)rank;
    c->nranks = (int)nranks;
    c->ctrl_fd = -1;
    c->ccl_fd = -1;
    c->p2p_fd = -1;
    c->buffsize = env->buffsize_mb << 20;
    c->exec_timeout_ns = env->exec_timeout_s * 1000000000ull;
    c->spin_iters = (uint32_t)env->spin_iters;
    c->tune.oneshot_max = (size_t)env->oneshot_max;
    c->tune.nt_min = (size_t)env->nt_min;
    c->tune.ag_pull_min = (size_t)env->ag_pull_min;
    if (c->tune.nt_min == 0) {
        uint64_t llc = zc_llc_bytes();
        c->tune.nt_min = coll_nt_min_for_llc(llc);
        ZC_INFO(
            ZC_SUB_INIT,
            "rank %u: ZCCL_NT_MIN auto: %zu bytes (last-level cache %llu bytes%s, reported %llu)",
            rank, c->tune.nt_min, (unsigned long long)llc, llc == 0 ? ", unknown" : "",
            (unsigned long long)zc_llc_reported_bytes());
    }
    c->symwin_max = HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE << 30;
    pthread_mutex_init(&c->lock, NULL);
    zc_log_set_rank((int)rank);
    int st = ZC_OK;
    zh_boot_t *boot = NULL;
    zh_boot_entry_t *table = calloc(nranks, sizeof(*table));
    uint8_t *addrs = NULL;
    size_t addrs_len = 0;
    if (table == NULL) {
        ZC_WARN(ZC_SUB_INIT, "rank %u: out of memory for the rank table", rank);
        st = ZC_ERR_NOMEM;
        goto fail;
    }
    if (cfg != NULL) {
        ZC_CHECK_GOTO(zh_comm_apply_config(c, cfg), st, fail);
    }
    /* No core to spare per rank: a stream worker could only take the
     * caller's own core, so the caller runs ops of any size itself. (Only
     * one-host comms ask, where nranks are this host's ranks: a comm that
     * spans hosts takes the hierarchical path.) */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    c->caller_max = env->caller_max != 0               ? env->caller_max
                    : ncpu > 0 && (long)nranks >= ncpu ? UINT64_MAX
                                                       : ZH_CALLER_MAX;
    c->oversub = ncpu > 0 && (long)nranks > ncpu;
    /* Oversubscribed, ranks sleep on most waits, and each sleep would pay
     * for its peers' fence (decision 0037): keep the writers' fence there. */
    c->fast_post = !c->oversub && zc_fence_peers_ready();
    c->spread = env->spread && !c->oversub;
    c->hier_on = zh_hier_setting(env->hier, rank);
    int dev = zccl_current_device();
    c->device = dev >= 0 ? dev : 0;
    zh_fd_raise_once(); /* a descriptor per peer (pidfd), a thousand ranks on one host */
    ZC_CHECK_GOTO(zh_ctrl_create(c), st, fail);
    zh_boot_entry_t mine;
    ZC_CHECK_GOTO(zh_comm_mine(c, &mine), st, fail);
    ZC_CHECK_GOTO(zh_boot_join(info, nranks, rank, &mine, env->connect_timeout_s * 1000000000ull,
                               &boot, table),
                  st, fail);
    const void *addr = NULL;
    size_t addr_len = 0;
    zh_comm_agree(c, table);
    int local = zh_levels_build(table, c->nranks, c->rank, &c->levels);
    if (local == ZC_OK) {
        zh_levels_log(c->levels, &table[c->rank]);
        local = zh_hier_setup(c, table, &addr, &addr_len);
    }
    if (local == ZC_OK && c->hier == NULL) {
        local = zh_comm_one_host(c, table);
    }
    /* Oversubscribed (more ranks than cores): spinning only burns the time
     * slice of the peer we wait for, so go straight to yielding, and keep
     * yielding however long a yield takes (zc_yield_to_peers). */
    if (c->oversub) {
        c->spin_iters = ZC_MIN(c->spin_iters, ZH_SPIN_OVERSUB);
        zc_yield_to_peers();
    }
    /* local's code, or ZC_ERR_REMOTE if a peer died */
    st = zh_boot_finish(boot, local, addr, (uint32_t)addr_len, &addrs, &addrs_len);
    if (st != ZC_OK) {
        goto fail;
    }
    if (c->name[0] == '\0') {
        /* Same on every rank: derived from the root info's unique id. */
        const unsigned char *u =
            (const unsigned char *)info->internal + ZH_RI_OFFSET + offsetof(zh_rootrec_t, uuid);
        snprintf(c->name, sizeof(c->name), "zccl_%02x%02x%02x%02x%02x%02x%02x%02x", u[0], u[1],
                 u[2], u[3], u[4], u[5], u[6], u[7]);
    }
    if (c->hier != NULL) {
        uint8_t key[16];
        zh_boot_net_key(info, key);
        ZC_CHECK_GOTO(zh_hier_connect(c, key, addrs, addrs_len), st, fail);
    } else {
        ZC_CHECK_GOTO(zh_mem_attach(c), st, fail);
    }
    ZC_CHECK_GOTO(zh_registry_add(c, out), st, fail);
    free(table);
    free(addrs);
    ZC_INFO(ZC_SUB_INIT, "rank %d/%d: communicator %s ready (device %d, buffer %llu MB)", c->rank,
            c->nranks, c->name, c->device, (unsigned long long)(c->buffsize >> 20));
    return HCCL_SUCCESS;
fail:
    free(table);
    free(addrs);
    zh_comm_free(c);
    return zh_result(st);
}

/* Wait until no op of c is queued or running (each is bounded by the exec
 * timeout and by the peers' liveness). */
static void zh_comm_wait_idle(zh_comm_t *c)
{
    uint64_t start = zc_time_ns();
    while (atomic_load_explicit(&c->inflight, memory_order_acquire) > 0) {
        if (zc_time_ns() - start > 1000000000ull) {
            usleep(1000);
        } else {
            sched_yield();
        }
    }
}

HcclResult zh_comm_quiesce(zh_comm_t *c, const char *fn)
{
    int queued = atomic_load_explicit(&c->inflight, memory_order_acquire);
    if (queued == 0) {
        return HCCL_SUCCESS;
    }
    if (zccl_stream_in_task()) {
        ZC_WARN(ZC_SUB_COMM,
                "%s: rank %d: called from a stream task while %d ops of "
                "communicator %s are queued, which it cannot wait for",
                fn, c->rank, queued, c->name);
        return HCCL_E_NOT_SUPPORT;
    }
    zh_comm_wait_idle(c);
    return HCCL_SUCCESS;
}

HcclResult zh_comm_destroy(zh_comm_t *c)
{
    zh_registry_remove(c);
    /* Ops still queued on streams reference the comm: let them finish. */
    zh_comm_wait_idle(c);
    zh_stats_print(c);
    zh_comm_free(c);
    return HCCL_SUCCESS;
}
