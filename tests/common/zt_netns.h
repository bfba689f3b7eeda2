/*
 * Ranks on namespace "hosts" (scripts/netns.sh): a layout says how many
 * ranks each host gets, ranks numbered host by host ("2,2": ranks 0-1 on
 * host 1, 2-3 on host 2). zt_hosts_use() makes every child of
 * zt_launch_procs enter its host before anything else runs in it: the
 * host's network namespace (/run/netns/TAGhK), its UTS and IPC namespaces
 * (kept by netns.sh under /run/zccl-netns/TAG), and a mount namespace of its
 * own with /sys mounted again, so /sys/class/net lists the host's own
 * interfaces (UCX reads its devices there), as `ip netns exec` does.
 *
 * Also the faults the multihost tests inject from the parent: a host's link
 * down or up (through netns.sh, whose path the test gets on its command line).
 */
#ifndef ZT_NETNS_H
#define ZT_NETNS_H

#define ZT_HOSTS_MAX 16

/** A set-up (its tag) and the host of every rank. */
typedef struct {
    char tag[32];
    char script[512]; /**< netns.sh, for link faults */
    int nhosts;
    int nranks;
    int per_host[ZT_HOSTS_MAX]; /**< ranks on host k + 1 */
    int host_of[64];            /**< host (1..nhosts) of each rank */
} zt_hosts_t;

/**
 * Fill h from a tag, the path of netns.sh and a layout such as "1,2,1".
 * Returns 0, or -1 after printing what was wrong.
 */
int zt_hosts_parse(zt_hosts_t *h, const char *tag, const char *script, const char *layout);

/** Launch ranks on h's hosts from now on (NULL: in this namespace again). h must outlive it. */
void zt_hosts_use(const zt_hosts_t *h);

/** Enter host k (1..) of tag in this process (single-threaded). Returns 0 or -1 (printed). */
int zt_hosts_enter(const char *tag, int host);

/** netns.sh link-down/link-up of host k. Returns 0 or -1. */
int zt_hosts_link(const zt_hosts_t *h, int host, int up);

#endif /* ZT_NETNS_H */
