/*
 * util/util.h — small data structures shared by the stages that run outside
 * the workload (analyze/, report/, symbolize/, cli/). The only header of
 * util/: other folders include this one and nothing else from here.
 *
 * Not for sampler/agent/ or sampler/common/: code in the signal handler's
 * process has its own rules (async-signal-safe, no malloc in the handler) and
 * its own id table (sampler/common/id_table.c).
 *
 * ---- Out of memory: one policy ---------------------------------------------
 *
 * Library code (everything but cli/) never aborts and never exits on out of
 * memory. A function that cannot allocate frees what it allocated itself,
 * leaves its outputs and the caller's data as they were (or freed, when its
 * comment says so), sets errno to ENOMEM and returns -1 — or, when it returns
 * an index, UINT32_MAX ((uint32_t)-1); when it returns a pointer, NULL. Its
 * caller passes the failure up the same way. Only cli/ decides what to do: it
 * prints one line, "opprof: out of memory ..." (or "opprof CMD: out of memory
 * ...", saying what it was doing), and exits with status 2. Why: a report library that aborts takes the caller's
 * other work with it, and a unit test cannot exercise an abort.
 *
 * A few places may degrade instead of failing, and say so where they do: a
 * cache that cannot grow (the symbolizer's lookup cache) stays correct
 * without the entry, and an optional note (a warning line) may be dropped.
 */
#ifndef OPPROF_UTIL_H
#define OPPROF_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- hashmap: one open-addressing hash table ------------------------------
 *
 * Linear probing in a power-of-two array kept at most half full, so lookups
 * stay at one or two probes; it grows by doubling and reinserting (rehash).
 * Each slot caches the key's 64-bit hash, so growing never calls back into
 * the caller and most mismatches are rejected without comparing keys.
 *
 * Keys come in three ways, chosen when the map is set up (the pattern of
 * Redis' dictType: one table, customised by a few callbacks):
 *   - bytes: type->equal is NULL. The map remembers a pointer to the key's
 *     len bytes and compares them with memcmp. It does not copy them: the
 *     bytes must stay valid while the entry exists (an arena, or the value's
 *     own storage).
 *   - callbacks: type->equal(key, len, value, ctx) says whether the lookup
 *     key belongs to the entry holding value. The map stores no key at all,
 *     which suits the common "index" map where the value is a row of the
 *     caller's array and the key is read from that row.
 *   - a 64-bit integer (hashmap_init_u64 and the _u64 calls): no callbacks.
 * type->hash may be NULL for bytes and callbacks: the key's len bytes are hashed
 * (hashmap_hash_bytes). Give a hash callback when the key is a struct with
 * padding or pointers to hash through.
 *
 * Values are uint64_t; pointers go through hashmap_*_ptr. Entries cannot be
 * removed one by one (nothing needs it): hashmap_clear empties the map.
 * Iteration order is not defined, so nothing that must be deterministic may
 * walk the slots — there is no iterator on purpose.
 */

struct hashmap_type {
    /* NULL: hashmap_hash_bytes(key, len, 0). */
    uint64_t (*hash)(const void *key, size_t len, const void *ctx);
    /* NULL: the map stores key pointers and compares the bytes. */
    bool (*equal)(const void *key, size_t len, uint64_t value, const void *ctx);
};

struct hashmap_slot {
    uint64_t hash; /* 0: empty (a key hashing to 0 is stored as 1) */
    uint64_t value;
};

struct hashmap_key {
    const void *bytes;
    size_t len;
};

/* Zero-initialised storage plus hashmap_init is a valid empty map; it
 * allocates nothing until the first insert. */
struct hashmap {
    const struct hashmap_type *type;
    const void *ctx;            /* handed to the callbacks */
    struct hashmap_slot *slots; /* cap entries, NULL while cap is 0 */
    struct hashmap_key *keys;   /* byte keys only: parallel to slots */
    size_t cap, count;
    unsigned shift;             /* 64 - log2(cap): the slot is the hash's top bits */
    bool max_key_set;           /* integer maps: the key UINT64_MAX, kept aside */
    uint64_t max_key_value;
};

/* type may be NULL: byte keys, default hash. ctx is passed to the callbacks
 * and may be NULL. type and ctx must outlive the map. */
void hashmap_init(struct hashmap *m, const struct hashmap_type *type, const void *ctx);
/* Frees the slots (not the keys or what values point to); m can be reused
 * after hashmap_init. */
void hashmap_free(struct hashmap *m);
/* Forgets every entry and keeps the memory. */
void hashmap_clear(struct hashmap *m);
static inline size_t hashmap_count(const struct hashmap *m)
{
    return m->count;
}

/* Makes room for n entries in total without growing again. 0, or -1 with
 * errno ENOMEM (the map unchanged). */
int hashmap_reserve(struct hashmap *m, size_t n);

/* true and *value (may be NULL) when key is present. */
bool hashmap_find(const struct hashmap *m, const void *key, size_t len, uint64_t *value);
/* The value of key, or, when absent, adds key -> new_value. Returns 1 when
 * found (*value the stored value), 0 when added (*value = new_value), -1 with
 * errno ENOMEM (nothing added). value may be NULL. One hash, one probe
 * sequence: what an interning table wants. */
int hashmap_find_or_add(struct hashmap *m, const void *key, size_t len, uint64_t new_value,
                        uint64_t *value);
/* Sets key -> value, replacing the value when key is present. 0, or -1 with
 * errno ENOMEM (the map unchanged). */
int hashmap_put(struct hashmap *m, const void *key, size_t len, uint64_t value);

/* Integer keys (two 32-bit ids, a pid and a tid): a map set up with
 * hashmap_init_u64 and used only through the _u64 calls. The key itself is
 * the identity (no callbacks, no key storage, one compare per probe), which
 * makes these the cheapest lookups; same returns as above. */
void hashmap_init_u64(struct hashmap *m);
bool hashmap_find_u64(const struct hashmap *m, uint64_t key, uint64_t *value);
int hashmap_find_or_add_u64(struct hashmap *m, uint64_t key, uint64_t new_value, uint64_t *value);

/* The pointer stored for key, NULL when absent. */
void *hashmap_find_ptr(const struct hashmap *m, const void *key, size_t len);
/* hashmap_put with a pointer value. */
int hashmap_put_ptr(struct hashmap *m, const void *key, size_t len, void *value);

/* A 64-bit hash of len bytes (a word-at-a-time multiply-xorshift, finished
 * so that all 64 bits depend on every byte). seed: 0, or the hash of the
 * previous field when a callback hashes several (chain the calls). */
uint64_t hashmap_hash_bytes(const void *data, size_t len, uint64_t seed);
/* A 64-bit integer key (two 32-bit ids, a pid and an address) mixed well
 * enough to use as a hash (splitmix64's finaliser). Inline: hash callbacks
 * of integer keys are a handful of instructions around it. */
static inline uint64_t hashmap_hash_u64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

#endif
