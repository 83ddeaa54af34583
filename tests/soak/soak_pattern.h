/* The payload of every soak message: a pattern that depends on the sender,
 * the sender's message number and the size, so that a message delivered to
 * the wrong receive, shifted, truncated or mixed with another one is caught.
 *
 * Byte i of the pattern of key is byte i % 8 of soak_word(key, i / 8) in
 * little-endian order (soak_byte). The word functions are the one definition
 * of the pattern: the CPU writes and checks host buffers with soak_fill and
 * soak_check below, eight bytes at a time; the kernels of soak_gpu.cu call
 * the same functions for device and managed buffers. A message between a
 * host and a device buffer is written by one and checked by the other, so
 * the two must agree byte for byte. */
#ifndef GPUWIRE_SOAK_PATTERN_H
#define GPUWIRE_SOAK_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the soak pattern is defined in little-endian byte order (as CUDA devices store words)"
#endif

#ifdef __CUDACC__
#define SOAK_HD __host__ __device__
#else
#define SOAK_HD
#endif

static inline SOAK_HD uint64_t soak_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static inline SOAK_HD uint64_t soak_key(int sender, uint64_t seq, size_t size)
{
    return soak_mix64(soak_mix64(((uint64_t)(unsigned)sender << 48) ^ seq) ^ (uint64_t)size);
}

/* Bytes 8j to 8j + 7 of the pattern. */
static inline SOAK_HD uint64_t soak_word(uint64_t key, uint64_t j)
{
    uint64_t w = key + (j + 1) * 0x9E3779B97F4A7C15ull;
    return w ^ (w >> 29) ^ (w << 17);
}

static inline SOAK_HD unsigned char soak_byte(uint64_t key, size_t i)
{
    return (unsigned char)(soak_word(key, i / 8) >> (8 * (i % 8)));
}

/* Word j of a received buffer that holds the pattern of key in its first
 * len bytes and the byte guard after them (byte b of the word is byte
 * 8j + b of the buffer). */
static inline SOAK_HD uint64_t soak_expected_word(uint64_t key, uint64_t j, size_t len,
                                                  unsigned char guard)
{
    uint64_t w = soak_word(key, j);
    for (unsigned b = 0; b < 8; ++b)
        if (8 * j + b >= len) w = (w & ~(0xffull << (8 * b))) | ((uint64_t)guard << (8 * b));
    return w;
}

/* The bytes of word j that lie below total, as a mask. */
static inline SOAK_HD uint64_t soak_word_mask(uint64_t j, size_t total)
{
    if (8 * j + 8 <= total) return ~0ull;
    if (8 * j >= total) return 0;
    return (1ull << (8 * (total - 8 * j))) - 1;
}

/* How many of the eight bytes of d are not 0. */
static inline SOAK_HD int soak_nonzero_bytes(uint64_t d)
{
    d |= d >> 4;
    d |= d >> 2;
    d |= d >> 1;
    d &= 0x0101010101010101ull;
    return (int)((d * 0x0101010101010101ull) >> 56);
}

static inline void soak_fill(void *buf, size_t len, uint64_t key)
{
    unsigned char *p = (unsigned char *)buf;
    size_t words = len / 8;
    for (size_t j = 0; j < words; ++j) {
        uint64_t w = soak_word(key, j);
        memcpy(p + 8 * j, &w, 8);
    }
    for (size_t i = 8 * words; i < len; ++i) p[i] = soak_byte(key, i);
}

/* Index of the first byte that differs from the pattern, or -1. The words
 * are compared in blocks without a branch per word; only a block with a
 * difference is looked at byte by byte. */
#define SOAK_CHECK_BLOCK 512 /* words */
static inline long soak_check(const void *buf, size_t len, uint64_t key)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t words = len / 8;
    for (size_t j0 = 0; j0 < words; j0 += SOAK_CHECK_BLOCK) {
        size_t j1 = words - j0 > SOAK_CHECK_BLOCK ? j0 + SOAK_CHECK_BLOCK : words;
        uint64_t diff = 0;
        for (size_t j = j0; j < j1; ++j) {
            uint64_t v;
            memcpy(&v, p + 8 * j, 8);
            diff |= v ^ soak_word(key, j);
        }
        if (diff)
            for (size_t i = 8 * j0; i < 8 * j1; ++i)
                if (p[i] != soak_byte(key, i)) return (long)i;
    }
    for (size_t i = 8 * words; i < len; ++i)
        if (p[i] != soak_byte(key, i)) return (long)i;
    return -1;
}

/* How many bytes differ from the pattern (for the report of a bad message). */
static inline size_t soak_count_wrong(const void *buf, size_t len, uint64_t key)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t words = len / 8, n = 0;
    for (size_t j = 0; j < words; ++j) {
        uint64_t v;
        memcpy(&v, p + 8 * j, 8);
        n += (size_t)soak_nonzero_bytes(v ^ soak_word(key, j));
    }
    for (size_t i = 8 * words; i < len; ++i) n += p[i] != soak_byte(key, i);
    return n;
}

#endif
