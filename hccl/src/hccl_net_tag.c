/*
 * Wire tags of the inter-host tier (protocol in hccl_net.h): a keyed
 * permutation of the 64-bit logical tag, so that only holders of the
 * communicator's secret can name a tag a receive of ours will match, and a
 * receiver can tell a tag a member could have sent from one it could not.
 *
 * The permutation is a 4-round Feistel network on 32-bit halves whose round
 * function is SipHash-2-4 under the communicator's key (a pseudo-random
 * function; four rounds of one make a pseudo-random permutation). Nothing of
 * it crosses the wire but its outputs, and an off-path outsider never sees
 * those, so it has nothing to work from: a tag it sends is a random 64-bit
 * value to us, whose inverse is a valid logical tag (a collective of a rank
 * of another host within ZH_NET_SEQ_AHEAD of ours, or a point-to-point tag
 * with its 28 zero bits) with a probability of about 2^-24 at most.
 */
#include "hccl_boot.h"
#include "hccl_net.h"

static uint32_t zh_net_tag_round(const uint8_t key[16], uint32_t i, uint32_t x)
{
    uint8_t m[8];
    memcpy(m, &i, 4);
    memcpy(m + 4, &x, 4);
    return (uint32_t)zh_siphash(key, m, sizeof(m));
}

uint64_t zh_net_tag_seal(const uint8_t key[16], uint64_t tag)
{
    uint32_t l = (uint32_t)(tag >> 32);
    uint32_t r = (uint32_t)tag;
    for (uint32_t i = 0; i < 4; i++) {
        uint32_t f = zh_net_tag_round(key, i, r);
        uint32_t nl = r;
        r = l ^ f;
        l = nl;
    }
    return ((uint64_t)l << 32) | r;
}

uint64_t zh_net_tag_open(const uint8_t key[16], uint64_t wire)
{
    uint32_t l = (uint32_t)(wire >> 32);
    uint32_t r = (uint32_t)wire;
    for (uint32_t i = 4; i-- > 0;) {
        uint32_t pl = r ^ zh_net_tag_round(key, i, l);
        r = l;
        l = pl;
    }
    return ((uint64_t)l << 32) | r;
}

int zh_net_tag_plausible(uint64_t tag, uint32_t cur_seq, const uint8_t *remote_src, int nranks)
{
    uint32_t src = (uint32_t)((tag >> 28) & 0xfffu);
    if (src >= (uint32_t)nranks || !remote_src[src]) {
        return 0;
    }
    if ((tag >> 63) == 0) {
        return (tag & 0xfffffffull) == 0; /* ZH_TAG_P2P leaves the step bits clear */
    }
    uint32_t seq = (uint32_t)((tag >> 40) & 0x7fffffu);
    return ((seq - cur_seq) & 0x7fffffu) < ZH_NET_SEQ_AHEAD;
}
