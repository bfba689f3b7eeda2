/*
 * The sealed wire tags across hosts (hccl/src/hier/hccl_net_tag.c, compiled in):
 *  - every tag that may be in flight at once maps to its own wire tag: 2,048
 *    consecutive collectives x 16 ranks x steps 0..63 and both agreement
 *    steps, and 4,096 point-to-point seqs of 16 senders, all distinct;
 *  - every wire tag carries the communicator's mark in bits 63..48, which
 *    the drain relies on (a message whose mark differs is foreign);
 *  - another key (another communicator, or no job secret) gives other
 *    tags: under one key, no tag of the other matches (the injection a
 *    predictable scheme allowed: a tag computed without the key).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "hier/hccl_net_tag.c"

#define NT_SEQS 2048u
#define NT_RANKS 16u
#define NT_STEPS 66u /* 0..63, then the two agreement steps */

static int nt_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t nt_step(uint32_t i)
{
    return i < 64 ? i : 0xffffffeu + (i - 64);
}

/* Every in-flight tag of key k, sealed, sorted; *n of them. */
static uint64_t *nt_all(const uint8_t k[16], uint32_t first_seq, size_t *n)
{
    size_t ncoll = (size_t)NT_SEQS * NT_RANKS * NT_STEPS;
    size_t np2p = 4096u * NT_RANKS;
    uint64_t *t = malloc((ncoll + np2p) * sizeof(uint64_t));
    assert_non_null(t);
    size_t m = 0;
    for (uint32_t q = 0; q < NT_SEQS; q++) {
        for (uint32_t r = 0; r < NT_RANKS; r++) {
            for (uint32_t s = 0; s < NT_STEPS; s++) {
                t[m++] = zh_net_tag_seal(k, ZH_TAG_COLL(first_seq + q, r, nt_step(s)));
            }
        }
    }
    for (uint32_t q = 0; q < 4096u; q++) {
        for (uint32_t r = 0; r < NT_RANKS; r++) {
            t[m++] = zh_net_tag_seal(k, ZH_TAG_P2P(q, r));
        }
    }
    qsort(t, m, sizeof(uint64_t), nt_cmp);
    *n = m;
    return t;
}

static void test_distinct_and_marked(void **state)
{
    (void)state;
    uint8_t k[16] = "issue-33-key-01";
    size_t n = 0;
    /* a window that wraps the 23-bit seq, as a long-lived communicator's does */
    uint64_t *t = nt_all(k, 0x7fffffu - 1000u, &n);
    uint16_t mark = zh_net_tag_mark(k);
    size_t dup = 0;
    size_t unmarked = 0;
    for (size_t i = 0; i < n; i++) {
        dup += i > 0 && t[i] == t[i - 1];
        unmarked += (uint16_t)(t[i] >> 48) != mark;
    }
    print_message("%zu tags, %zu equal pairs, %zu without the mark 0x%04x\n", n, dup, unmarked,
                  mark);
    free(t);
    assert_int_equal(dup, 0);
    assert_int_equal(unmarked, 0);
}

static void test_other_key(void **state)
{
    (void)state;
    uint8_t a[16] = "issue-33-key-01";
    uint8_t b[16] = "issue-33-key-02";
    size_t na = 0;
    size_t nb = 0;
    uint64_t *ta = nt_all(a, 1, &na);
    uint64_t *tb = nt_all(b, 1, &nb);
    size_t common = 0;
    for (size_t i = 0, j = 0; i < na && j < nb;) {
        if (ta[i] == tb[j]) {
            common++;
            i++;
            j++;
        } else if (ta[i] < tb[j]) {
            i++;
        } else {
            j++;
        }
    }
    /* The logical tags themselves (the old wire tags) are not among the sealed ones. */
    size_t plain = 0;
    for (uint32_t q = 1; q <= 64; q++) {
        uint64_t want = ZH_TAG_COLL(q, 1, 0);
        plain += bsearch(&want, ta, na, sizeof(uint64_t), nt_cmp) != NULL;
    }
    free(ta);
    free(tb);
    assert_int_not_equal(zh_net_tag_mark(a), zh_net_tag_mark(b));
    assert_int_equal(common, 0);
    assert_int_equal(plain, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distinct_and_marked),
        cmocka_unit_test(test_other_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
