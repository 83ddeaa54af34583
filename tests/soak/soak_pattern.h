/* The payload of every soak message: a pattern that depends on the sender,
 * the sender's message number and the size, so that a message delivered to
 * the wrong receive, shifted, truncated or mixed with another one is caught.
 * Written eight bytes at a time: fast enough for messages of many MiB. */
#ifndef GPUWIRE_SOAK_PATTERN_H
#define GPUWIRE_SOAK_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t soak_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static inline uint64_t soak_key(int sender, uint64_t seq, size_t size)
{
    return soak_mix64(soak_mix64(((uint64_t)(unsigned)sender << 48) ^ seq) ^ (uint64_t)size);
}

static inline uint64_t soak_word(uint64_t key, uint64_t j)
{
    uint64_t w = key + (j + 1) * 0x9E3779B97F4A7C15ull;
    return w ^ (w >> 29) ^ (w << 17);
}

static inline void soak_fill(void *buf, size_t len, uint64_t key)
{
    unsigned char *p = (unsigned char *)buf;
    size_t words = len / 8;
    for (size_t j = 0; j < words; ++j) {
        uint64_t w = soak_word(key, j);
        memcpy(p + 8 * j, &w, 8);
    }
    if (len % 8) {
        uint64_t w = soak_word(key, words);
        memcpy(p + 8 * words, &w, len % 8);
    }
}

/* Index of the first byte that differs from the pattern, or -1. */
static inline long soak_check(const void *buf, size_t len, uint64_t key)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t words = len / 8;
    for (size_t j = 0; j <= words; ++j) {
        size_t n = j < words ? 8 : len % 8;
        if (!n) break;
        uint64_t w = soak_word(key, j);
        if (memcmp(p + 8 * j, &w, n) != 0) {
            const unsigned char *e = (const unsigned char *)&w;
            for (size_t b = 0; b < n; ++b)
                if (p[8 * j + b] != e[b]) return (long)(8 * j + b);
        }
    }
    return -1;
}

#endif
