/*
 * Bootstrap wire protocol, shared by the rank side (hccl_boot.c), the root
 * listener (hccl_boot_root.c) and the tests that speak it.
 *
 * Root info (4108 bytes): the IP string first (NUL-terminated), then at
 * ZH_RI_OFFSET a zh_rootrec_t: magic, port, the root's pid and host id, and
 * a 128-bit random unique id. The unique id is the session's secret: it never
 * crosses the wire, in either direction.
 *
 * One TCP connection per rank, all messages fixed-size:
 *   root -> rank  zh_chal_t {CHAL, nonce_s}     at accept, to our uid only;
 *                 another uid gets a refusal {TABLE, ZC_ERR_PERM} instead.
 *   rank -> root  zh_hello_t {HELLO, nranks, rank, entry, nonce_c, mac}
 *                 mac = zh_boot_mac(uuid, 'H', nonce_s | hello without mac).
 *   root -> rank  zh_reply_t {TABLE, status, nranks}; when status is ZC_OK
 *                 the nranks entries follow, then a 16-byte mac =
 *                 zh_boot_mac(uuid, 'T', nonce_s | nonce_c | reply | entries).
 *   rank -> root  zh_reply_t {READY, my status, 0, n} once it attached its
 *                 peers, then n bytes: its transport address (n = 0 when the
 *                 communicator lies on one host and needs none).
 *   root -> rank  zh_reply_t {GO, worst status of all, nranks, m}; when m > 0
 *                 (some rank sent an address) m bytes follow: nranks 32-bit
 *                 lengths, then the addresses in rank order; then a 16-byte
 *                 mac = zh_go_mac(uuid, nonce_s, nonce_c, reply, those bytes).
 * A hello whose mac does not verify (another session's root info, a guess)
 * is refused with {TABLE, ZC_ERR_INVAL} and changes nothing for the session;
 * a rank checks the table's mac, so a process that took the port after the
 * root left cannot feed it a table.
 *
 * The mac is SipHash-2-4 (a keyed pseudo-random function with a 128-bit key)
 * run twice with two domain bytes for 128 bits. It proves knowledge of the
 * unique id without revealing it: a process that can reach the port but does
 * not hold the root info cannot join or learn the table, and a recorded
 * exchange does not let anyone answer a new challenge. It is no defence
 * against a process of our own uid holding a copy of the root info (such a
 * process can read our memory anyway); the uid check at accept keeps every
 * other uid out even when it holds a copy.
 */
#ifndef HCCL_BOOT_H
#define HCCL_BOOT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "core/hccl_internal.h"

#define ZH_RI_OFFSET 64
#define ZH_RI_MAGIC 0x5a435249u /* "ZCRI" */
#define ZH_MSG_CHAL 0x5a434243u
#define ZH_MSG_HELLO 0x5a434248u
#define ZH_MSG_TABLE 0x5a434254u
#define ZH_MSG_READY 0x5a434252u
#define ZH_MSG_GO 0x5a434247u
#define ZH_BOOT_VERSION 4u /* 3: entries carry the rank's place; 4: and its flags */
/* A joined rank's socket, both ends: how long one send or receive may make
 * no progress. Dead peers close their end at once; this bounds a stuck one.
 * Long, because 1,024 ranks on 2 cores may not run for seconds while the root
 * streams them the table and the address list (2 s lost ranks at 1,024). */
#define ZH_IO_TIMEOUT_MS 30000
/* Connections the listener holds before their hello is in: a whole
 * communicator and a margin, so that no real rank is dropped for being slow
 * on a loaded machine. A connection is dropped for slowness only when the
 * table is full, and then the oldest one, if it is at least
 * ZH_PEND_MIN_AGE_MS old (a younger one is never evicted: the newcomer is
 * closed instead, and a real rank retries); else it is held until the
 * session ends (the connect timeout). */
#define ZH_MAX_PENDING (ZH_MAX_COMM_RANKS + 64)
#define ZH_PEND_MIN_AGE_MS 1000
/* Descriptors a listener leaves to the rest of the process (UCX, the
 * broker, the ranks of this process), and the least pending table. */
#define ZH_FD_HEADROOM 256
#define ZH_PEND_MIN 16
/* The backoff between a joiner's attempts (zh_backoff). */
#define ZH_BACKOFF_MIN_MS 10
#define ZH_BACKOFF_MAX_MS 1000
#define ZH_MAC_LEN 16
/* Longest transport address a rank may send (UCX worker addresses are far
 * shorter). */
#define ZH_ADDR_MAX 8192
#define ZH_NONCE_LEN 16

typedef struct {
    uint32_t magic;
    uint16_t port;
    uint16_t pad;
    int32_t pid;
    uint32_t pad2;
    uint64_t host_id;
    uint8_t uuid[16];
} zh_rootrec_t;
_Static_assert(ZH_RI_OFFSET + sizeof(zh_rootrec_t) <= HCCL_ROOT_INFO_BYTES, "the record fits");

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint8_t nonce[ZH_NONCE_LEN];
} zh_chal_t;

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint32_t nranks;
    uint32_t rank;
    zh_boot_entry_t entry;
    uint8_t nonce[ZH_NONCE_LEN];
    uint8_t mac[ZH_MAC_LEN];
} zh_hello_t;
_Static_assert(sizeof(zh_hello_t) == 96, "hello layout is fixed");

typedef struct {
    uint32_t magic;
    int32_t status;
    uint32_t nranks;
    uint32_t pad;
} zh_reply_t;

/* ---- the mac ------------------------------------------------------------------------ */

static inline uint64_t zh_rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static inline void zh_sipround(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = zh_rotl(v[1], 13) ^ v[0];
    v[0] = zh_rotl(v[0], 32);
    v[2] += v[3];
    v[3] = zh_rotl(v[3], 16) ^ v[2];
    v[0] += v[3];
    v[3] = zh_rotl(v[3], 21) ^ v[0];
    v[2] += v[1];
    v[1] = zh_rotl(v[1], 17) ^ v[2];
    v[2] = zh_rotl(v[2], 32);
}

/* SipHash-2-4 of m[0..n) under the 128-bit key k (little-endian words). */
static inline uint64_t zh_siphash(const uint8_t k[16], const uint8_t *m, size_t n)
{
    uint64_t k0;
    uint64_t k1;
    memcpy(&k0, k, 8);
    memcpy(&k1, k + 8, 8);
    uint64_t v[4] = {0x736f6d6570736575ull ^ k0, 0x646f72616e646f6dull ^ k1,
                     0x6c7967656e657261ull ^ k0, 0x7465646279746573ull ^ k1};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, m + i, 8);
        v[3] ^= w;
        zh_sipround(v);
        zh_sipround(v);
        v[0] ^= w;
    }
    uint64_t last = (uint64_t)n << 56;
    for (size_t j = 0; i + j < n; j++) {
        last |= (uint64_t)m[i + j] << (8 * j);
    }
    v[3] ^= last;
    zh_sipround(v);
    zh_sipround(v);
    v[0] ^= last;
    v[2] ^= 0xff;
    for (int r = 0; r < 4; r++) {
        zh_sipround(v);
    }
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* 128-bit mac of domain | a | b | c under the unique id. */
static inline void zh_boot_mac(const uint8_t uuid[16], char domain, const void *a, size_t na,
                               const void *b, size_t nb, const void *c, size_t nc,
                               uint8_t out[ZH_MAC_LEN])
{
    uint8_t buf[1 + 2 * ZH_NONCE_LEN + sizeof(zh_reply_t) +
                ZH_MAX_COMM_RANKS * sizeof(zh_boot_entry_t)];
    size_t n = 1;
    if (na + nb + nc > sizeof(buf) - 1) {
        memset(out, 0, ZH_MAC_LEN); /* never happens: callers pass fixed-size records */
        return;
    }
    const void *part[3] = {a, b, c};
    size_t len[3] = {na, nb, nc};
    for (int i = 0; i < 3; i++) {
        if (len[i] > 0) {
            memcpy(buf + n, part[i], len[i]);
            n += len[i];
        }
    }
    buf[0] = (uint8_t)domain;
    uint64_t h0 = zh_siphash(uuid, buf, n);
    buf[0] = (uint8_t)(domain | 0x80);
    uint64_t h1 = zh_siphash(uuid, buf, n);
    memcpy(out, &h0, 8);
    memcpy(out + 8, &h1, 8);
}

/* The hello's mac: over the challenge nonce and the hello up to its mac. */
static inline void zh_hello_mac(const uint8_t uuid[16], const uint8_t nonce_s[ZH_NONCE_LEN],
                                const zh_hello_t *h, uint8_t out[ZH_MAC_LEN])
{
    zh_boot_mac(uuid, 'H', nonce_s, ZH_NONCE_LEN, h, offsetof(zh_hello_t, mac), NULL, 0, out);
}

/* The GO message's mac: over both nonces, the reply and a keyed digest of the
 * address blobs that follow it (which may be far larger than a table). */
static inline void zh_go_mac(const uint8_t uuid[16], const uint8_t nonce_s[ZH_NONCE_LEN],
                             const uint8_t nonce_c[ZH_NONCE_LEN], const zh_reply_t *rep,
                             const uint8_t *blob, size_t n, uint8_t out[ZH_MAC_LEN])
{
    uint8_t k2[16];
    memcpy(k2, uuid, sizeof(k2));
    k2[0] ^= 0x47;
    uint64_t d[2] = {zh_siphash(uuid, blob, n), zh_siphash(k2, blob, n)};
    uint8_t msg[sizeof(zh_reply_t) + sizeof(d)];
    memcpy(msg, rep, sizeof(*rep));
    memcpy(msg + sizeof(*rep), d, sizeof(d));
    zh_boot_mac(uuid, 'G', nonce_s, ZH_NONCE_LEN, nonce_c, ZH_NONCE_LEN, msg, sizeof(msg), out);
}

/* Equal in time independent of where they differ. */
static inline int zh_mac_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t d = 0;
    for (int i = 0; i < ZH_MAC_LEN; i++) {
        d |= (uint8_t)(a[i] ^ b[i]);
    }
    return d == 0;
}

/* ---- shared helpers (hccl_boot.c) --------------------------------------------------- */

/** Send or receive exactly n bytes (honouring the socket's timeouts). */
int zh_io_full(int fd, void *buf, size_t n, int writing);

/** How many pending clients a listener may hold, given `held` descriptors
 *  it keeps besides (listener, joined ranks): what the descriptor limit
 *  leaves after what was open at first use and ZH_FD_HEADROOM, at most
 *  ZH_MAX_PENDING, at least ZH_PEND_MIN. The first call raises the soft
 *  descriptor limit to the hard one. */
int zh_pend_cap(int held);

/** Raise the soft descriptor limit to the hard one, once per process (comm
 *  init: a rank holds a descriptor per peer process). */
void zh_fd_raise_once(void);

/** Between attempts to reach a server: sleep a random time in [*ms / 2, *ms]
 *  (never past deadline, in zc_time_ns), then double *ms up to
 *  ZH_BACKOFF_MAX_MS. Start *ms at ZH_BACKOFF_MIN_MS. */
void zh_backoff(uint32_t *ms, uint64_t deadline);

/** Set both socket timeouts to ms and TCP_NODELAY. */
void zh_sock_timeouts(int fd, int ms);

/** Connect a new stream socket to sa, waiting at most ms (non-blocking
 *  connect and poll: a silent address costs ms, never the kernel's SYN
 *  retries). The connected, blocking fd; or -1 with errno (ETIMEDOUT when
 *  ms passed). */
int zh_sock_connect(const struct sockaddr *sa, socklen_t len, int ms);

/** Send {magic, status} (best effort). */
void zh_send_status(int fd, uint32_t magic, int status);

/**
 * The uid owning the other end of the loopback-or-local TCP connection fd,
 * asked of the kernel by the exact address pair (sock_diag), else read from
 * /proc/net/tcp. Returns 0, or -1 when the peer is not a socket of this
 * host's network namespace, -2 when it cannot be told now (no descriptor
 * for the lookup).
 */
int zh_tcp_peer_uid(int fd, uint32_t *uid);

/**
 * HcclGetRootInfo's work (hccl_boot_root.c) with a default address: the
 * listener binds fallback_ip when neither HCCL_IF_IP nor HCCL_SOCKET_IFNAME
 * is set (NULL: the first interface that is up, as HcclGetRootInfo).
 */
int zh_boot_root_create_at(HcclRootInfo *info, const char *fallback_ip);

/** out = the 128-bit key in keyed further with ZCCL_JOB_SECRET under domain
 *  (a mac), or in itself when no job secret is set (out may be in). */
void zh_key_with_secret(const uint8_t in[16], char domain, uint8_t out[16]);

/** The communicator's secret for its traffic across hosts (hccl_net.h's
 *  sealed tags): derived from the root info's unique id (and the job
 *  secret); every member holds it, it never crosses the wire. */
void zh_boot_net_key(const HcclRootInfo *info, uint8_t key[16]);

/** Is sa an address of this host (network namespace)? Loopback counts: 1;
 *  another host's: 0; -1 when it cannot be told now (getifaddrs failed). */
struct sockaddr_in;
int zh_addr_is_local(const struct sockaddr_in *sa);

#endif /* HCCL_BOOT_H */
