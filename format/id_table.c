/*
 * format/id_table.c — "have I written this before?" for the stream writer:
 * maps a byte string (a native call chain, a Python code object key, a Python
 * call chain) to a small id, assigning the next id on first sight. The ids
 * are the STACK, PYCODE and PYSTACK ids of the stream (and the index of a
 * remembered Python line), so they count up from 0 in the order keys are
 * first seen.
 *
 * Not signal-handler code (it allocates); only writers use it.
 */
#include <stdlib.h>
#include <string.h>

#include "format/writer_internal.h"

static uint64_t hash_key(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint64_t h = 0xcbf29ce484222325ull ^ len;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 31);
}

static bool grow(struct id_table *d)
{
    size_t cap = d->cap ? d->cap * 2 : 1024;
    struct id_table_entry *t = calloc(cap, sizeof *t);
    if (!t)
        return false;
    for (size_t i = 0; i < d->cap; i++) {
        if (!d->entries[i].key)
            continue;
        size_t j = d->entries[i].hash & (cap - 1);
        while (t[j].key)
            j = (j + 1) & (cap - 1);
        t[j] = d->entries[i];
    }
    free(d->entries);
    d->entries = t;
    d->cap = cap;
    return true;
}

int64_t id_table_find_or_add(struct id_table *d, const void *key, size_t len, bool *added)
{
    *added = false;
    if ((d->count + 1) * 2 > d->cap && !grow(d))
        return -1;
    uint64_t h = hash_key(key, len);
    size_t j = h & (d->cap - 1);
    while (d->entries[j].key) {
        struct id_table_entry *e = &d->entries[j];
        if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)
            return e->id;
        j = (j + 1) & (d->cap - 1);
    }
    void *copy = malloc(len ? len : 1);
    if (!copy)
        return -1;
    memcpy(copy, key, len);
    d->entries[j] = (struct id_table_entry){h, (uint32_t)d->count, (uint32_t)len, copy};
    d->count++;
    *added = true;
    return d->entries[j].id;
}

void id_table_clear(struct id_table *d)
{
    for (size_t i = 0; i < d->cap; i++)
        free(d->entries[i].key);
    free(d->entries);
    memset(d, 0, sizeof *d);
}

/* ---- chain_trie: the longest root-side run an earlier chain already holds --- */

/* A node of the trie is (chain id << 32) | the index, leaf first, of the
 * element of that chain whose root-side run (elements index..n-1) it stands
 * for. Steps are keyed by the node they start from and the element they add
 * toward the leaf. */
#define TRIE_ROOT UINT64_MAX

unsigned chain_trie_add(struct chain_trie *t, uint32_t id, const void *elems, unsigned n, size_t size,
                        uint32_t *parent, uint32_t *skip)
{
    struct {
        uint64_t from;
        unsigned char elem[CHAIN_TRIE_MAX_ELEM];
    } key;
    memset(&key, 0, sizeof key);
    if (size > CHAIN_TRIE_MAX_ELEM || t->failed)
        return 0;
    const unsigned char *e = elems;
    uint64_t cur = TRIE_ROOT, last_known = TRIE_ROOT;
    unsigned matched = 0;
    for (unsigned i = n; i > 0; i--) {
        key.from = cur;
        memcpy(key.elem, e + (size_t)(i - 1) * size, size);
        bool added;
        int64_t node_id = id_table_find_or_add(&t->steps, &key, sizeof key.from + size, &added);
        uint64_t *nodes = node_id < 0 ? NULL
                                      : writer_grow(t->nodes, &t->cap, (size_t)node_id, sizeof *nodes, 1024);
        if (!nodes) {
            /* Out of memory: the trie stops learning here (a step without
             * its node would point nowhere); all it answered stays true. */
            t->failed = true;
            break;
        }
        t->nodes = nodes;
        if (!added) { /* an earlier chain goes this way: still shared */
            cur = last_known = nodes[node_id];
            matched = n - i + 1;
            continue;
        }
        cur = nodes[node_id] = ((uint64_t)id << 32) | (i - 1);
    }
    if (matched == 0)
        return 0;
    *parent = (uint32_t)(last_known >> 32);
    *skip = (uint32_t)last_known;
    return matched;
}

void chain_trie_clear(struct chain_trie *t)
{
    id_table_clear(&t->steps);
    free(t->nodes);
    memset(t, 0, sizeof *t);
}
