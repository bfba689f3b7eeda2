/*
 * Wire tags of the inter-host tier (protocol in hccl_net.h): what crosses
 * the wire for a logical tag (ZH_TAG_COLL / ZH_TAG_P2P) is
 *
 *   bits 63..48  the communicator's mark: 16 bits of a keyed hash
 *   bits 47..0   a keyed permutation of the logical tag packed into 48 bits
 *
 * both under the communicator's key, which only members hold. The packing
 * keeps everything that may be in flight apart (a collective's seq modulo
 * 2,048, ranks below 1,024, steps below 2^26 - 2 and the two agreement
 * steps; a point-to-point pair's 23-bit seq whole), so receives still
 * match exactly one message: a peer is never 2,048 collectives ahead (each
 * collective's agreement waits for its counterparts). The permutation is a 4-round Feistel network
 * on 24-bit halves with SipHash-2-4 as its round function (a pseudo-random permutation): an
 * off-path outsider, who never sees a tag, can name a tag a receive of ours will match only by
 * guessing 64 bits.
 *
 * The mark is how a rank finds the messages no member sent without
 * looking at each one: every message whose bit b (48..63) differs from the
 * mark's is foreign, and UCX can search its unexpected queue for exactly
 * that (a probe with a one-bit mask), wherever the message lies in the
 * queue. A foreign message carries the mark by chance with probability
 * 2^-16; those stay in the queue (about 0.3 of a flood of 20,000).
 */
#include "boot/hccl_boot.h"
#include "hier/hccl_net.h"

#define ZH_TAG_HALF 0xffffffu

static uint32_t zh_net_tag_round(const uint8_t key[16], uint32_t i, uint32_t x)
{
    uint8_t m[8];
    memcpy(m, &i, 4);
    memcpy(m + 4, &x, 4);
    return (uint32_t)zh_siphash(key, m, sizeof(m)) & ZH_TAG_HALF;
}

/* The logical tag in 48 bits (see above). */
static uint64_t zh_net_tag_pack(uint64_t tag)
{
    uint64_t seq = (tag >> 40) & 0x7fffffull;
    uint64_t src = (tag >> 28) & 0x3ffull;
    if ((tag >> 63) == 0) {
        return (src << 37) | seq;
    }
    uint64_t step = tag & 0xfffffffull;
    step = step >= 0xffffffeull ? step - 0xffffffeull + 0x3fffffeull : step & 0x3ffffffull;
    return (1ull << 47) | ((seq & 0x7ffull) << 36) | (src << 26) | step;
}

uint16_t zh_net_tag_mark(const uint8_t key[16])
{
    const uint8_t m[4] = {'m', 'a', 'r', 'k'};
    return (uint16_t)(zh_siphash(key, m, sizeof(m)) >> 48);
}

uint64_t zh_net_tag_seal(const uint8_t key[16], uint64_t tag)
{
    uint64_t p = zh_net_tag_pack(tag);
    uint32_t l = (uint32_t)(p >> 24) & ZH_TAG_HALF;
    uint32_t r = (uint32_t)p & ZH_TAG_HALF;
    for (uint32_t i = 0; i < 4; i++) {
        uint32_t f = zh_net_tag_round(key, i, r);
        uint32_t nl = r;
        r = l ^ f;
        l = nl;
    }
    return ((uint64_t)zh_net_tag_mark(key) << 48) | ((uint64_t)l << 24) | r;
}
