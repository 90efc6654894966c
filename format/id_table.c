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
