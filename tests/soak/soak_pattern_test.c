/* The soak's pattern functions against their byte-by-byte definition: the
 * CPU fill and check, the wrong-byte count, and the word helpers that the
 * check kernel of soak_gpu.cu is built from (its per-word logic is repeated
 * in check_words below), at every alignment and length modulo 8, with and
 * without guard bytes after the payload. Exits 1 on the first mismatch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soak_pattern.h"

#define GUARD_BYTE 0xA5

static int failures;

#define EXPECT(cond, ...)                                                                  \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            if (failures++ < 20) {                                                         \
                fprintf(stderr, "soak_pattern_test: %s: ", #cond);                         \
                fprintf(stderr, __VA_ARGS__);                                              \
                fputc('\n', stderr);                                                       \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* The reference: byte by byte from soak_byte. */
static void reference(const unsigned char *p, size_t len, size_t tail, uint64_t key, long *first,
                      size_t *wrong)
{
    *first = -1;
    *wrong = 0;
    for (size_t i = 0; i < len + tail; ++i) {
        unsigned char want = i < len ? soak_byte(key, i) : GUARD_BYTE;
        if (p[i] != want) {
            if (*first < 0) *first = (long)i;
            ++*wrong;
        }
    }
}

/* What check_kernel computes, one word after the other. */
static void check_words(const unsigned char *p, size_t len, size_t tail, uint64_t key,
                        long *first, size_t *wrong)
{
    size_t total = len + tail, words = (total + 7) / 8;
    *first = -1;
    *wrong = 0;
    for (size_t j = 0; j < words; ++j) {
        size_t off = 8 * j;
        uint64_t got = 0, mask = soak_word_mask(j, total);
        for (int b = 0; b < 8 && off + b < total; ++b) got |= (uint64_t)p[off + b] << (8 * b);
        uint64_t want =
            off + 8 <= len ? soak_word(key, j) : soak_expected_word(key, j, len, GUARD_BYTE);
        uint64_t d = (got ^ want) & mask;
        if (d) {
            *wrong += (size_t)soak_nonzero_bytes(d);
            long at = (long)(off + (size_t)__builtin_ctzll(d) / 8);
            if (*first < 0 || at < *first) *first = at;
        }
    }
}

static void one_case(unsigned char *base, size_t align, size_t len, size_t tail, uint64_t key,
                     const size_t *flips, int nflips)
{
    unsigned char *p = base + align;
    memset(base, 0x5A, align + len + tail + 16);
    soak_fill(p, len, key);
    memset(p + len, GUARD_BYTE, tail);
    for (size_t i = 0; i < len; ++i)
        if (p[i] != soak_byte(key, i)) {
            EXPECT(0, "soak_fill byte %zu of %zu (align %zu)", i, len, align);
            break;
        }
    for (int f = 0; f < nflips; ++f)
        if (flips[f] < len + tail) p[flips[f]] ^= (unsigned char)(0x10 << (f % 4));
    long rf, cf;
    size_t rw, cw;
    reference(p, len, tail, key, &rf, &rw);
    check_words(p, len, tail, key, &cf, &cw);
    EXPECT(rf == cf && rw == cw, "len %zu tail %zu align %zu: reference %ld/%zu, words %ld/%zu",
           len, tail, align, rf, rw, cf, cw);
    long pf;
    size_t pw;
    reference(p, len, 0, key, &pf, &pw);
    EXPECT(soak_check(p, len, key) == pf, "soak_check len %zu align %zu: %ld, reference %ld", len,
           align, soak_check(p, len, key), pf);
    EXPECT(soak_count_wrong(p, len, key) == pw, "soak_count_wrong len %zu align %zu: %zu, "
           "reference %zu", len, align, soak_count_wrong(p, len, key), pw);
}

int main(void)
{
    size_t cap = (1u << 20) + 4096;
    unsigned char *base = malloc(cap);
    if (!base) return 1;
    uint64_t key = soak_key(1, 12345, 77);
    for (size_t len = 0; len <= 72; ++len)
        for (size_t align = 0; align < 8; ++align)
            for (size_t tail = 0; tail <= 9; tail += 3) {
                one_case(base, align, len, tail, key, NULL, 0);
                for (size_t at = 0; at < len + tail; ++at) {
                    size_t fl[2] = {at, (at * 7 + 3) % (len + tail)};
                    one_case(base, align, len, tail, key, fl, 1);
                    one_case(base, align, len, tail, key, fl, 2);
                }
            }
    /* Large: a difference in a late block, several in one word, one in the
     * tail that is not a whole word. */
    size_t sizes[] = {4096 * 8 + 5, 1u << 20};
    for (int s = 0; s < 2; ++s)
        for (size_t align = 0; align < 8; align += 3) {
            size_t len = sizes[s];
            size_t fl[4] = {len - 1, len / 2, len / 2 + 1, 8 * SOAK_CHECK_BLOCK * 3 + 2};
            one_case(base, align, len, 64, key, NULL, 0);
            one_case(base, align, len, 64, key, fl, 4);
            size_t g[1] = {len + 63};
            one_case(base, align, len, 64, key, g, 1);
        }
    for (uint64_t d = 1; d; d <<= 7) EXPECT(soak_nonzero_bytes(d) == 1, "nonzero bytes of %llx",
                                             (unsigned long long)d);
    EXPECT(soak_nonzero_bytes(~0ull) == 8, "all bytes");
    EXPECT(soak_nonzero_bytes(0) == 0, "no byte");
    free(base);
    if (failures) {
        fprintf(stderr, "soak_pattern_test: %d failures\n", failures);
        return 1;
    }
    printf("soak_pattern_test: fill, check, counts and kernel word logic agree\n");
    return 0;
}
