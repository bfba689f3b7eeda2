/*
 * The inter-host transport: UCX (UCP tag API), one context and one worker
 * per rank of a communicator that spans hosts, endpoints to the ranks on
 * other hosts only. Nothing here exists for a communicator on one host.
 *
 * Protocol:
 *  - zh_net_create makes the context and worker (UCX reads its own UCX_*
 *    variables: UCX_TLS, UCX_NET_DEVICES, ...; zccl sets none of them) and
 *    gives the worker's address, which travels to every rank through the
 *    bootstrap root (hccl_boot.h: the ready and go messages).
 *  - zh_net_connect makes an endpoint to each rank on another host, with
 *    peer error handling, so a dead peer or a broken link fails the
 *    endpoint and every request on it.
 *  - Data moves with tagged sends and receives. A tag names the sender, so
 *    a receive matches exactly one peer's message: collective k uses
 *    ZH_TAG_COLL(k, src, step), point-to-point message k of a pair uses
 *    ZH_TAG_P2P(k, src); on the wire each tag is sealed with the
 *    communicator's secret (hccl_net_tag.c), so only members can name a
 *    tag a receive matches, and messages without the communicator's mark
 *    (nobody's but an outsider's) are dropped at every progress round of a
 *    wait. Buffers are the user's own or the communicator's
 *    scratch; UCX registers them (its registration cache keeps a buffer
 *    that is used again registered, the scratch stays registered).
 *  - Progress is driven by zh_net_wait, called from the op's wait loops:
 *    it spins on the worker, then yields and sleeps in short slices (ranks
 *    may outnumber cores); it gives up at the communicator's exec timeout,
 *    when an endpoint it waits on failed, or when the comm broke. On
 *    failure every request still pending is cancelled before returning, so
 *    no late message lands in a buffer the caller has given back.
 */
#ifndef HCCL_NET_H
#define HCCL_NET_H

#include <stddef.h>
#include <stdint.h>

#define ZH_TAG_COLL(seq, src, step)                                                                \
    ((1ull << 63) | (((uint64_t)(seq)&0x7fffffull) << 40) | (((uint64_t)(src)&0xfffull) << 28) |   \
     ((uint64_t)(step)&0xfffffffull))
#define ZH_TAG_P2P(seq, src)                                                                       \
    ((((uint64_t)(seq)&0x7fffffull) << 40) | (((uint64_t)(src)&0xfffull) << 28))

/** The tag that crosses the wire for logical tag `tag`: the communicator's
 *  16-bit mark, then a keyed permutation of the tag packed into 48 bits
 *  (hccl_net_tag.c); key is the communicator's secret. */
uint64_t zh_net_tag_seal(const uint8_t key[16], uint64_t tag);

/** The communicator's mark: bits 63..48 of every tag its members send. */
uint16_t zh_net_tag_mark(const uint8_t key[16]);

typedef struct zh_net zh_net_t;

/* One outstanding send or receive. */
typedef struct {
    void *ucx;  /* the UCX request, NULL once complete */
    int peer;   /* rank it talks to */
    int status; /* ZC_OK or the error it ended with */
    int recv;   /* a receive (its length is checked) */
    size_t bytes;
} zh_net_req_t;

/** Make the context and worker for rank of nranks; *addr / *len: the worker
 *  address to publish (owned by the net). */
int zh_net_create(int rank, int nranks, zh_net_t **out, const void **addr, size_t *len);

/** Endpoints to every rank r with remote[r] set, from the go message's
 *  address list (nranks 32-bit lengths, then the addresses); key: the
 *  communicator's 128-bit secret (zh_boot_net_key), which seals every tag. */
int zh_net_connect(zh_net_t *n, const uint8_t key[16], const uint8_t *remote, const uint8_t *all,
                   size_t all_len);

/** Close every endpoint (forcibly when the comm broke) and free it all. */
void zh_net_destroy(zh_net_t *n, int broken);

/** Post a send / receive of bytes to / from peer with tag. */
int zh_net_isend(zh_net_t *n, int peer, uint64_t tag, const void *buf, size_t bytes,
                 zh_net_req_t *r);
int zh_net_irecv(zh_net_t *n, int peer, uint64_t tag, void *buf, size_t bytes, zh_net_req_t *r);

/** Has r completed? (drives progress once) 1 done, 0 pending. */
int zh_net_test(zh_net_t *n, zh_net_req_t *r);

/**
 * Wait for every request of r[0..count): ZC_OK, the first request's error
 * (ZC_ERR_REMOTE for a failed endpoint or a peer that is gone), ZC_ERR_TIMEOUT
 * past timeout_ns (0 = none), or ZC_ERR_REMOTE when abort(arg) says the comm
 * broke meanwhile (polled between progress rounds; may be NULL). On error
 * every pending request is cancelled and reaped.
 */
typedef int (*zh_net_abort_fn)(void *arg);
int zh_net_wait(zh_net_t *n, zh_net_req_t *r, int count, uint64_t timeout_ns, zh_net_abort_fn abort,
                void *arg);

/** Cancel and reap every request of r that is still pending. */
void zh_net_cancel(zh_net_t *n, zh_net_req_t *r, int count);

/** This rank's worker address (what it published at init) and its length. */
const void *zh_net_address(const zh_net_t *n, size_t *len);

/** Messages dropped as sent by no member (their tags open to nothing plausible). */
uint64_t zh_net_dropped(const zh_net_t *n);

/** The name of the transport UCX chose towards peer (for the log), or "?". */
const char *zh_net_transport(zh_net_t *n, int peer);

#endif /* HCCL_NET_H */
