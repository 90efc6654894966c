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

/* A word at a time: keys are call chains of 8-byte PCs and 16-32 byte
 * Python frame keys, hashed once per sample by the writer (byte by byte this
 * was the agent's largest user-mode cost on PyTorch, 0.64 % of the process's
 * CPU time beside the handler's table walk at 0.37 %). */
static uint64_t hash_key(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, p, sizeof w);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    for (; len > 0; p++, len--)
        h = (h ^ *p) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

/* Zeroed by writing, not calloc: a lookup reads a slot at random before an
 * insert writes it, and on a page calloc left untouched that read maps the
 * shared zero page, whose replacement at the write then flushes the TLB of
 * every CPU running the process's threads with an interrupt. In the agent's
 * writer that was 50 of the ~100 such flushes of a PyTorch run
 * (torch_train.py --steps 60, perf record -e ipi:ipi_send_cpu), each an exit
 * to the hypervisor on a VM, on the workload's CPU too. */
static bool grow(struct id_table *d)
{
    size_t cap = d->cap ? d->cap * 2 : 1024;
    struct id_table_entry *t = malloc(cap * sizeof *t);
    if (!t)
        return false;
    explicit_bzero(t, cap * sizeof *t); /* memset here: gcc makes malloc + memset a calloc */
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
    d->last_added = copy;
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

/* Every root-side run of every chain written (elements k..n-1, leaf first)
 * is in a hash table under the hash of its elements, pointing at the chain
 * and k. "Run k..n-1 is known" holds for every k from some smallest one up
 * to n (a known run's shorter runs are the same chain's), so a binary search
 * over k finds the longest shared run in ~log2(n) lookups: ~6 for a PyTorch
 * stack of 55 frames, where walking a trie frame by frame from the root took
 * 55 (and was then the agent's largest user-mode cost). A hit is checked
 * against the chain's own copy, so a hash collision costs sharing, never
 * correctness. */
#define NO_NODE UINT64_MAX

static uint64_t run_hash_step(uint64_t h, const unsigned char *elem, size_t size)
{
    for (size_t off = 0; off < size; off += 8) {
        uint64_t w;
        memcpy(&w, elem + off, sizeof w);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

/* Slot of hash h: the node under it, or the empty slot where it goes. */
static struct chain_trie_slot *slot_of(const struct chain_trie *t, uint64_t h, uint64_t node_want,
                                       const unsigned char *elems, unsigned k, unsigned n, size_t size)
{
    for (size_t j = h & (t->cap - 1);; j = (j + 1) & (t->cap - 1)) {
        struct chain_trie_slot *sl = &t->slots[j];
        if (sl->node == NO_NODE)
            return sl;
        if (sl->hash != h)
            continue;
        if (node_want != NO_NODE) /* inserting: the same run twice cannot happen, keep probing */
            continue;
        uint32_t id = (uint32_t)(sl->node >> 32), at = (uint32_t)sl->node;
        if (id < t->nchains && t->chain_len[id] - at == n - k &&
            memcmp(t->chains[id] + (size_t)at * size, elems + (size_t)k * size, (size_t)(n - k) * size) == 0)
            return sl;
    }
}

static bool grow_slots(struct chain_trie *t)
{
    size_t cap = t->cap ? t->cap * 2 : 4096;
    struct chain_trie_slot *slots = malloc(cap * sizeof *slots);
    if (!slots)
        return false;
    for (size_t j = 0; j < cap; j++)
        slots[j].node = NO_NODE;
    for (size_t i = 0; i < t->cap; i++) {
        if (t->slots[i].node == NO_NODE)
            continue;
        size_t j = t->slots[i].hash & (cap - 1);
        while (slots[j].node != NO_NODE)
            j = (j + 1) & (cap - 1);
        slots[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return true;
}

unsigned chain_root_shared(const void *chain_a, unsigned na, const void *chain_b, unsigned nb, size_t size)
{
    const unsigned char *a = chain_a, *b = chain_b;
    unsigned k = 0;
    while (k < na && k < nb && memcmp(a + (size_t)(na - 1 - k) * size, b + (size_t)(nb - 1 - k) * size, size) == 0)
        k++;
    return k;
}

unsigned chain_trie_add(struct chain_trie *t, uint32_t id, const void *elems, unsigned n, size_t size,
                        uint32_t *parent, uint32_t *skip)
{
    const unsigned char *e = elems;
    if (t->failed || size % 8 || n == 0 || n > CHAIN_TRIE_MAX_LEN)
        return 0;
    /* hashes[k]: of the run k..n-1, built from the root side */
    uint64_t hashes[CHAIN_TRIE_MAX_LEN + 1];
    hashes[n] = 0x9e3779b97f4a7c15ull ^ size;
    for (unsigned k = n; k > 0; k--)
        hashes[k - 1] = run_hash_step(hashes[k], e + (size_t)(k - 1) * size, size);
    /* Room first (for the at most n runs added), and the chain's own copy. */
    while ((t->count + n + 1) * 2 > t->cap)
        if (!grow_slots(t)) {
            t->failed = true;
            return 0;
        }
    if (id >= t->chains_cap) {
        size_t cap = t->chains_cap ? t->chains_cap * 2 : 1024;
        while (cap <= id)
            cap *= 2;
        const unsigned char **chains = realloc(t->chains, cap * sizeof *chains);
        if (chains)
            t->chains = chains;
        uint32_t *lens = chains ? realloc(t->chain_len, cap * sizeof *lens) : NULL;
        if (!lens) {
            t->failed = true;
            return 0;
        }
        t->chain_len = lens;
        for (size_t i = t->chains_cap; i < cap; i++)
            t->chains[i] = NULL, t->chain_len[i] = 0;
        t->chains_cap = cap;
    }
    /* The caller's copy, not one of our own: the writer's id_table already
     * holds every chain, and a second copy was a malloc, a memcpy and, as
     * the heap grows, a first-touch page fault (~10 us on this VM) every
     * dozen chains, plus the memory twice over. */
    if (id < t->nchains || t->chains[id]) {
        t->failed = true; /* chain ids not new and in order: learn nothing more */
        return 0;
    }
    /* The root-side run this chain shares with the chain added last (every
     * run of a chain added is known): compared in place, warm from its
     * add, it bounds the search below to the elements toward the leaf that
     * differ, ~1-2 lookups of a table the workload has pushed out of the
     * cache instead of ~6 for a 40-frame stack whose leaf moved. */
    uint32_t last_id = t->nchains ? (uint32_t)(t->nchains - 1) : 0;
    unsigned with_last = t->nchains ? chain_root_shared(e, n, t->chains[last_id], t->chain_len[last_id], size) : 0;
    t->chains[id] = e;
    t->chain_len[id] = n;
    t->nchains = (size_t)id + 1;
    /* Smallest k in [0, n] whose run is known (k = n: the empty run, no
     * lookup needed; k = n - with_last: the last chain's, from its element
     * last_n - with_last on). */
    unsigned lo = 0, hi = n - with_last;
    uint64_t found = with_last ? ((uint64_t)last_id << 32) | (t->chain_len[last_id] - with_last) : NO_NODE;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        struct chain_trie_slot *sl = slot_of(t, hashes[mid], NO_NODE, e, mid, n, size);
        if (sl->node != NO_NODE) {
            hi = mid;
            found = sl->node;
        } else {
            lo = mid + 1;
        }
    }
    /* hi moved only on hits, so the last hit was run lo: found is its node. */
    /* This chain's new runs 0..lo-1 are known from now on. */
    for (unsigned k = 0; k < lo; k++) {
        struct chain_trie_slot *sl = slot_of(t, hashes[k], 0, e, k, n, size);
        sl->hash = hashes[k];
        sl->node = ((uint64_t)id << 32) | k;
        t->count++;
    }
    if (lo == n || found == NO_NODE)
        return 0;
    *parent = (uint32_t)(found >> 32);
    *skip = (uint32_t)found;
    return n - lo;
}

void chain_trie_clear(struct chain_trie *t)
{
    free(t->chains);
    free(t->chain_len);
    free(t->slots);
    memset(t, 0, sizeof *t);
}
