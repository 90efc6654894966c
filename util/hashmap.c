/*
 * util/hashmap.c — the one hash table of the code outside the workload
 * (interface and rationale in util/util.h).
 *
 * Linear probing over a power-of-two slot array, at most half full. The slot
 * of a hash is its top bits after a multiply by 2^64/phi (Fibonacci
 * hashing): cheap, and it spreads keys whose hashes differ only in their low
 * bits (ids, aligned addresses), which a plain `hash & mask` would pile up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define HASHMAP_MIN_CAP 16

/* Eight bytes at a time (multiply, then fold the high half down), so a
 * 160-byte stack key costs 20 rounds instead of FNV's 160; the length is
 * mixed in first so that keys of different lengths with the same bytes
 * differ. The value depends on byte order, which is fine: nothing outside
 * one process sees it. */
uint64_t hashmap_hash_bytes(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = seed ^ 0xcbf29ce484222325ull ^ (len * 0x9e3779b97f4a7c15ull);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        p += 8;
        len -= 8;
    }
    if (len) {
        uint64_t w = 0;
        memcpy(&w, p, len);
        h = (h ^ w ^ ((uint64_t)len << 59)) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return hashmap_hash_u64(h);
}


void hashmap_init(struct hashmap *m, const struct hashmap_type *type, const void *ctx)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->ctx = ctx;
}

void hashmap_free(struct hashmap *m)
{
    free(m->slots);
    free(m->keys);
    m->slots = NULL;
    m->keys = NULL;
    m->cap = m->count = 0;
    m->shift = 0;
    m->max_key_set = false;
}

void hashmap_clear(struct hashmap *m)
{
    m->max_key_set = false;
    if (m->slots)
        memset(m->slots, 0, m->cap * sizeof *m->slots);
    if (m->keys)
        memset(m->keys, 0, m->cap * sizeof *m->keys);
    m->count = 0;
}

/* Integer maps (hashmap_init_u64) have this type; its equal is never
 * called, it only tells byte_keys that no key storage is wanted. */
static bool u64_never_called(const void *key, size_t len, uint64_t value, const void *ctx)
{
    (void)key;
    (void)len;
    (void)value;
    (void)ctx;
    return false;
}

static const struct hashmap_type u64_type = {NULL, u64_never_called};

static bool byte_keys(const struct hashmap *m)
{
    return !m->type || !m->type->equal;
}

static inline uint64_t key_hash(const struct hashmap *m, const void *key, size_t len)
{
    uint64_t h = m->type && m->type->hash ? m->type->hash(key, len, m->ctx) : hashmap_hash_bytes(key, len, 0);
    return h ? h : 1; /* 0 marks an empty slot */
}

static size_t home_slot(const struct hashmap *m, uint64_t h)
{
    return (size_t)((h * 0x9e3779b97f4a7c15ull) >> m->shift);
}

/* Moves every entry into a new array of cap slots (a power of two). The map
 * is unchanged when the allocation fails. */
static int rehash(struct hashmap *m, size_t cap)
{
    struct hashmap_slot *slots = calloc(cap, sizeof *slots);
    struct hashmap_key *keys = byte_keys(m) ? calloc(cap, sizeof *keys) : NULL;
    if (!slots || (byte_keys(m) && !keys)) {
        free(slots);
        free(keys);
        errno = ENOMEM;
        return -1;
    }
    unsigned shift = 64;
    for (size_t c = cap; c > 1; c >>= 1)
        shift--;
    size_t mask = cap - 1;
    for (size_t i = 0; i < m->cap; i++) {
        uint64_t h = m->slots[i].hash;
        if (!h)
            continue;
        size_t j = (size_t)((h * 0x9e3779b97f4a7c15ull) >> shift);
        while (slots[j].hash)
            j = (j + 1) & mask;
        slots[j] = m->slots[i];
        if (keys)
            keys[j] = m->keys[i];
    }
    free(m->slots);
    free(m->keys);
    m->slots = slots;
    m->keys = keys;
    m->cap = cap;
    m->shift = shift;
    return 0;
}

int hashmap_reserve(struct hashmap *m, size_t n)
{
    /* Refuse sizes whose slot array would overflow size_t before asking
     * malloc: the answer is the same (ENOMEM) and sanitizers stay quiet. */
    if (n > SIZE_MAX / 4 / sizeof(struct hashmap_slot)) {
        errno = ENOMEM;
        return -1;
    }
    size_t cap = m->cap ? m->cap : HASHMAP_MIN_CAP;
    while (cap < 2 * n)
        cap *= 2;
    return cap == m->cap ? 0 : rehash(m, cap);
}

/* Where key is (true), or the empty slot where it would go (false). The map
 * must have slots. Inlined: it is the whole cost of a lookup, and a call's
 * prologue was a tenth of it (callgrind, profile_add_thread). */
static inline __attribute__((always_inline)) bool probe(const struct hashmap *m, const void *key, size_t len, uint64_t h, size_t *at)
{
    size_t mask = m->cap - 1;
    const struct hashmap_type *t = m->type;
    for (size_t j = home_slot(m, h);; j = (j + 1) & mask) {
        const struct hashmap_slot *s = &m->slots[j];
        if (!s->hash) {
            *at = j;
            return false;
        }
        if (s->hash != h)
            continue;
        bool same = t && t->equal ? t->equal(key, len, s->value, m->ctx)
                                  : m->keys[j].len == len && (len == 0 || memcmp(m->keys[j].bytes, key, len) == 0);
        if (same) {
            *at = j;
            return true;
        }
    }
}

bool hashmap_find(const struct hashmap *m, const void *key, size_t len, uint64_t *value)
{
    if (!m->count)
        return false;
    size_t j = 0;
    if (!probe(m, key, len, key_hash(m, key, len), &j))
        return false;
    if (value)
        *value = m->slots[j].value;
    return true;
}

/* Finds key (1, *at its slot) or makes room and returns the empty slot for
 * it (0); -1 on out of memory. Inlined into its two callers, like probe. */
static inline __attribute__((always_inline)) int find_or_slot(struct hashmap *m, const void *key, size_t len, uint64_t h, size_t *at)
{
    if (m->cap && probe(m, key, len, h, at))
        return 1;
    /* Absent: grow first when one more entry would pass half full. */
    if ((m->count + 1) * 2 > m->cap) {
        if (rehash(m, m->cap ? m->cap * 2 : HASHMAP_MIN_CAP) != 0)
            return -1;
        probe(m, key, len, h, at);
    }
    return 0;
}

static void fill_slot(struct hashmap *m, size_t j, const void *key, size_t len, uint64_t h, uint64_t value)
{
    m->slots[j].hash = h;
    m->slots[j].value = value;
    if (m->keys)
        m->keys[j] = (struct hashmap_key){key, len};
    m->count++;
}

int hashmap_find_or_add(struct hashmap *m, const void *key, size_t len, uint64_t new_value,
                        uint64_t *value)
{
    uint64_t h = key_hash(m, key, len);
    size_t j = 0;
    int rc = find_or_slot(m, key, len, h, &j);
    if (rc < 0)
        return -1;
    if (rc == 0)
        fill_slot(m, j, key, len, h, new_value);
    if (value)
        *value = m->slots[j].value;
    return rc;
}

int hashmap_put(struct hashmap *m, const void *key, size_t len, uint64_t value)
{
    uint64_t h = key_hash(m, key, len);
    size_t j = 0;
    int rc = find_or_slot(m, key, len, h, &j);
    if (rc < 0)
        return -1;
    if (rc == 0)
        fill_slot(m, j, key, len, h, value);
    else
        m->slots[j].value = value;
    return 0;
}

void *hashmap_find_ptr(const struct hashmap *m, const void *key, size_t len)
{
    uint64_t v;
    return hashmap_find(m, key, len, &v) ? (void *)(uintptr_t)v : NULL;
}

int hashmap_put_ptr(struct hashmap *m, const void *key, size_t len, void *value)
{
    return hashmap_put(m, key, len, (uint64_t)(uintptr_t)value);
}

/* ---- integer keys ------------------------------------------------------------
 *
 * hashmap_hash_u64 is a bijection, so the slot's hash of key + 1 identifies
 * the key: equal hashes are equal keys, and no callback is needed. key + 1
 * hashes to 0 (the empty mark) only for UINT64_MAX, which lives beside the
 * slots. */

void hashmap_init_u64(struct hashmap *m)
{
    hashmap_init(m, &u64_type, NULL);
}

static inline __attribute__((always_inline)) bool probe_u64(const struct hashmap *m, uint64_t h, size_t *at)
{
    size_t mask = m->cap - 1;
    for (size_t j = home_slot(m, h);; j = (j + 1) & mask) {
        uint64_t sh = m->slots[j].hash;
        if (sh == h || !sh) {
            *at = j;
            return sh == h;
        }
    }
}

bool hashmap_find_u64(const struct hashmap *m, uint64_t key, uint64_t *value)
{
    if (key == UINT64_MAX) {
        if (m->max_key_set && value)
            *value = m->max_key_value;
        return m->max_key_set;
    }
    size_t j = 0;
    if (!m->cap || !probe_u64(m, hashmap_hash_u64(key + 1), &j))
        return false;
    if (value)
        *value = m->slots[j].value;
    return true;
}

int hashmap_find_or_add_u64(struct hashmap *m, uint64_t key, uint64_t new_value, uint64_t *value)
{
    if (key == UINT64_MAX) {
        int found = m->max_key_set;
        if (!found) {
            m->max_key_set = true;
            m->max_key_value = new_value;
            m->count++;
        }
        if (value)
            *value = m->max_key_value;
        return found;
    }
    uint64_t h = hashmap_hash_u64(key + 1);
    size_t j = 0;
    if (m->cap && probe_u64(m, h, &j)) {
        if (value)
            *value = m->slots[j].value;
        return 1;
    }
    if ((m->count + 1) * 2 > m->cap) {
        if (rehash(m, m->cap ? m->cap * 2 : HASHMAP_MIN_CAP) != 0)
            return -1;
        probe_u64(m, h, &j);
    }
    m->slots[j].hash = h;
    m->slots[j].value = new_value;
    m->count++;
    if (value)
        *value = new_value;
    return 0;
}
