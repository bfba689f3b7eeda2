/*
 * The one table of environment variables.
 *
 * Every variable zccl reads is listed here once (name, type, field, default,
 * valid range, help). The table is read once per process into an immutable
 * zc_config_t; ZCCL_PRINT_CONFIG=1 dumps it, and the README's table is
 * generated from it (zccl_config --markdown, with a "valid values" column
 * made from each entry's type and range). Communicators copy the values they
 * use, so HcclCommConfig can override them per comm.
 *
 * Bad values never stop a program: a value that does not parse or lies
 * outside its entry's range keeps the default, with one warning naming the
 * variable, the value, the valid values and the default used; a set ZCCL_
 * variable that is not in the table gets one warning (with the closest name,
 * a misspelling would otherwise be silent). An empty value means the
 * default. HCCL_ variables outside the table are CANN's and are ignored.
 * Loading never waits on the logger: the log settings are taken from the
 * table being loaded before any of these warnings is printed.
 */
#ifndef ZC_CONFIG_H
#define ZC_CONFIG_H

#include <stdint.h>
#include <stdio.h>

/* Value kinds. UINT: decimal digits only, min..max. BOOL: true/false, 1/0,
 * yes/no, on/off. STR: any text of at most max bytes. IPV4: a dotted IPv4
 * address. LEVEL: a log level name. SUBSYS: a comma list of log subsystem
 * names (see zc/log.h), a leading ^ inverting it. SECRET: text like STR
 * that is never printed (the dump and the warnings say whether it is set). */
typedef enum {
    ZC_CFG_UINT,
    ZC_CFG_BOOL,
    ZC_CFG_STR,
    ZC_CFG_IPV4,
    ZC_CFG_LEVEL,
    ZC_CFG_SUBSYS,
    ZC_CFG_SECRET
} zc_cfg_type_t;

/* Bytes a string value may hold (the field is one more, for the NUL). */
#define ZC_CFG_STR_MAX 255

/* X(ENV_NAME, type, field, default, min, max, help); min/max bound a UINT's
 * value and a STR's length (in bytes), other kinds ignore them. */
#define ZC_CONFIG_TABLE(X)                                                                         \
    X(HCCL_BUFFSIZE, ZC_CFG_UINT, buffsize_mb, "200", 1, 65536,                                    \
      "Size in MB of each communicator's CCL buffer (buffered path), created on first use")        \
    X(HCCL_CONNECT_TIMEOUT, ZC_CFG_UINT, connect_timeout_s, "120", 1, 86400,                       \
      "Seconds communicator init waits for all ranks before failing with HCCL_E_TIMEOUT")          \
    X(HCCL_EXEC_TIMEOUT, ZC_CFG_UINT, exec_timeout_s, "1836", 0, 2147483,                          \
      "Seconds a collective may wait for its peers (0 = never time out)")                          \
    X(HCCL_IF_IP, ZC_CFG_IPV4, if_ip, "", 0, 0,                                                    \
      "IPv4 address the root listener binds and advertises (default: the address of "              \
      "HCCL_SOCKET_IFNAME, else of the first non-loopback interface that is up, else loopback)")   \
    X(HCCL_SOCKET_IFNAME, ZC_CFG_STR, socket_ifname, "", 0, ZC_CFG_STR_MAX,                        \
      "Interface whose IPv4 address the root listener binds and advertises when HCCL_IF_IP "       \
      "is not set")                                                                                \
    X(ZCCL_RANKTABLE_PORT, ZC_CFG_UINT, ranktable_port, "60001", 1, 65535,                         \
      "TCP port on which the rank table's rank 0 serves the root info when the table names "       \
      "several servers (on its server's address from the table)")                                  \
    X(ZCCL_JOB_SECRET, ZC_CFG_SECRET, job_secret, "", 0, ZC_CFG_STR_MAX,                           \
      "A secret every rank of the job holds alike (e.g. 32 random hex digits): the bootstrap "     \
      "proofs, the rank-table rendezvous and the tags across hosts are keyed with it too, so "     \
      "whoever guesses a rank table cannot fetch its root info or reach into its "                 \
      "communicators; never printed")                                                              \
    X(HCCL_DETERMINISTIC, ZC_CFG_BOOL, deterministic, "true", 0, 1,                                \
      "Fixed reduction order (zccl is always deterministic; false is accepted)")                   \
    X(HCCL_WHITELIST_DISABLE, ZC_CFG_BOOL, whitelist_disable, "true", 0, 1,                        \
      "Accepted for compatibility; the root listener checks the unique id")                        \
    X(ZCCL_DEVICES, ZC_CFG_UINT, devices, "0", 0, 4096,                                            \
      "Number of logical devices (0 = max(8, cores reported by hwloc): CANN's 8-device "           \
      "samples run on any host; device d is placed on NUMA node d mod #nodes)")                    \
    X(ZCCL_LOG_LEVEL, ZC_CFG_LEVEL, log_level, "warn", 0, 0, "Log level")                          \
    X(ZCCL_LOG_SUBSYS, ZC_CFG_SUBSYS, log_subsys, "ALL", 0, 0,                                     \
      "Subsystems to log (errors are always logged)")                                              \
    X(ZCCL_LOG_FILE, ZC_CFG_STR, log_file, "", 0, ZC_CFG_STR_MAX,                                  \
      "Log to this file instead of stderr (%h = host, %p = pid); stderr if it cannot be "          \
      "opened")                                                                                    \
    X(ZCCL_PRINT_CONFIG, ZC_CFG_BOOL, print_config, "false", 0, 1,                                 \
      "Print this table with the values in force at first use")                                    \
    X(ZCCL_PRINT_STATS, ZC_CFG_BOOL, print_stats, "false", 0, 1,                                   \
      "At HcclCommDestroy every rank prints 'zccl stats: rank R comm NAME: Z zero-copy ops, "      \
      "I inline ops, B buffered ops, S bytes staged; C ops finished on the caller's thread' on "   \
      "stdout")                                                                                    \
    X(ZCCL_SPIN_ITERS, ZC_CFG_UINT, spin_iters, "2000", 0, 100000000,                              \
      "Polls of a shared flag before a waiter sleeps on its futex")                                \
    X(ZCCL_CALLER_MAX, ZC_CFG_UINT, caller_max, "0", 0, 1099511627776ull,                          \
      "Zero-copy collectives whose buffers are at most this many bytes run on the caller's "       \
      "thread when their stream is idle (0 = auto: 65536, or any size when this host has no "      \
      "more cores than the communicator has ranks)")                                               \
    X(ZCCL_SPREAD, ZC_CFG_BOOL, spread, "true", 0, 1,                                              \
      "While a busy task shares the cores, a rank's thread that sleeps waiting for a peer "        \
      "keeps the CPU that peer last posted from out of its affinity mask until it wakes, so "      \
      "the scheduler cannot stack the ranks on one CPU, and on quiet cores a rank that finds the " \
      "peer it waits for on its own CPU steps off it (never when the ranks outnumber the cores); " \
      "false leaves placement to the scheduler")                                                   \
    X(ZCCL_MAX_LOCAL_RANKS, ZC_CFG_UINT, max_local_ranks, "1024", 1, 1024,                         \
      "Most ranks of one communicator on one host; init with more fails with HCCL_E_PARA "         \
      "(memory per rank grows with them: docs/ARCHITECTURE.md, control segment)")                  \
    X(ZCCL_ONESHOT_MAX, ZC_CFG_UINT, oneshot_max, "16384", 0, 1073741824,                          \
      "AllReduce messages up to this many bytes use the one-shot algorithm")                       \
    X(ZCCL_AG_PULL_MIN, ZC_CFG_UINT, ag_pull_min, "0", 0, 1073741824,                              \
      "AllGather outputs of at least this many bytes per rank are pulled (every rank copies "      \
      "each block into its own output) instead of pushed when every rank's output is probably "    \
      "cached (0 = a timed trial of both forms picks, from 512 KiB, where the output is "          \
      "probably cached and the op's data under half the last-level cache; which form is faster "   \
      "depends on the host)")                                                                      \
    X(ZCCL_NT_MIN, ZC_CFG_UINT, nt_min, "0", 0, 4294967295u,                                       \
      "Copies of at least this many bytes use non-temporal stores; direct AllReduce and "          \
      "AllGather stream from twice this much data over all ranks, or when their output was not "   \
      "used within the last twice this many bytes of such ops; from this much data up to twice "   \
      "it, ops whose output is still cached are timed both ways now and then and take the "        \
      "faster; twice this should be the last-level cache (0 = auto: half the last-level cache "    \
      "the kernel reports, counted at most 12 MiB per CPU sharing it, at least 1 MiB, 16 MiB "     \
      "when it reports none; 4294967295 streams only ops of gigabytes)")                           \
    X(ZCCL_HIER, ZC_CFG_STR, hier, "auto", 0, ZC_CFG_STR_MAX,                                      \
      "Hierarchical collectives on one host: auto (AllReduce, AllGather, ReduceScatter, "          \
      "Broadcast and Reduce of at least 256 KiB of data on activated memory go within each NUMA "  \
      "node (else package) first when the ranks span several) or off (always flat); agreed at "    \
      "init: off on any rank means flat on every rank")                                            \
    X(ZCCL_NET_CHUNK, ZC_CFG_UINT, net_chunk, "1048576", 4096, 1073741824,                         \
      "Bytes per pipelined message of the inter-host (UCX) phase of a collective")                 \
    X(ZCCL_KERNEL, ZC_CFG_STR, kernel, "auto", 0, ZC_CFG_STR_MAX,                                  \
      "fp16/bf16 reduction kernel: auto (the best this CPU runs; AVX2 for calls of under 4096 "    \
      "elements where that is AVX-512), scalar, avx2, avx512 or "                                  \
      "avx512bf16 (AVX-512 rounding bf16 with AVX512-BF16's instruction); all give the same "      \
      "bits; one the CPU cannot run falls back to the best it can")

typedef struct {
#define ZC_CFG_FIELD_UINT(f) uint64_t f;
#define ZC_CFG_FIELD_BOOL(f) int f;
#define ZC_CFG_FIELD_STR(f) char f[ZC_CFG_STR_MAX + 1];
#define ZC_CFG_FIELD(name, type, field, def, mn, mx, help) ZC_CFG_FIELD_##type(field)
#define ZC_CFG_FIELD_ZC_CFG_UINT(f) ZC_CFG_FIELD_UINT(f)
#define ZC_CFG_FIELD_ZC_CFG_BOOL(f) ZC_CFG_FIELD_BOOL(f)
#define ZC_CFG_FIELD_ZC_CFG_STR(f) ZC_CFG_FIELD_STR(f)
#define ZC_CFG_FIELD_ZC_CFG_IPV4(f) ZC_CFG_FIELD_STR(f)
#define ZC_CFG_FIELD_ZC_CFG_LEVEL(f) ZC_CFG_FIELD_STR(f)
#define ZC_CFG_FIELD_ZC_CFG_SUBSYS(f) ZC_CFG_FIELD_STR(f)
#define ZC_CFG_FIELD_ZC_CFG_SECRET(f) ZC_CFG_FIELD_STR(f)
    ZC_CONFIG_TABLE(ZC_CFG_FIELD)
#undef ZC_CFG_FIELD
} zc_config_t;

/** The process-wide configuration, read from the environment on first call (never blocks
 *  on itself: a warning raised while loading is printed with the log settings being loaded). */
const zc_config_t *zc_config(void);

/** Print the table with values in force (text) or as a Markdown table with the valid values
 *  of each variable (docs). */
void zc_config_print(FILE *out, int markdown);

#endif /* ZC_CONFIG_H */
