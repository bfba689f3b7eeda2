/*
 * The log of the algorithm each collective takes, once per (collective,
 * size class) on a comm (hccl_topo.h): called where an op chooses its path
 * (op/hccl_op_path.c), so the line says what ran, not what was planned:
 * "flat" or "hier:<kind of the level grouped by>".
 */
#include "topo/hccl_topo.h"

#include "zc/log.h"

/* The size class of `bytes`: k with bytes in (2^(k-1), 2^k], 0 for 0 and 1. */
static int zh_size_class(uint64_t bytes)
{
    return bytes <= 1 ? 0 : 64 - __builtin_clzll(bytes - 1);
}

void zh_levels_log_algo(zh_levels_t *lv, int kind, uint64_t bytes, const zh_level_t *by,
                        const char *path)
{
    if (lv == NULL || kind <= 0 || kind >= ZH_OP_MAX) {
        return;
    }
    int k = zh_size_class(bytes);
    uint_fast64_t bit = (uint_fast64_t)1 << k;
    if ((atomic_load_explicit(&lv->logged[kind], memory_order_relaxed) & bit) != 0 ||
        (atomic_fetch_or_explicit(&lv->logged[kind], bit, memory_order_relaxed) & bit) != 0) {
        return;
    }
    ZC_INFO(ZC_SUB_TOPO, "%s of (%llu, %llu] bytes: algorithm %s%s (%d levels), path %s",
            zh_op_name(kind), k > 0 ? (unsigned long long)1 << (k - 1) : 0ull,
            (unsigned long long)1 << k, by != NULL ? "hier:" : "flat",
            by != NULL ? zh_level_kind_name(by->kind) : "", lv->n, path);
}
