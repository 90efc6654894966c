/*
 * tests/unit/test_hashmap.c — util/hashmap.c: byte keys and callback keys,
 * find / find-or-add / put, growth by rehash, colliding hashes, and the
 * out-of-memory path (an impossible reserve fails with ENOMEM and leaves the
 * map as it was), and profile_grow's share of the same policy.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/profile_internal.h"
#include "tests/unit/unit.h"
#include "util/util.h"

static void test_bytes_insert_find(void)
{
    struct hashmap m;
    hashmap_init(&m, NULL, NULL);
    uint64_t v = 99;
    CU_ASSERT_FALSE(hashmap_find(&m, "a", 1, &v)); /* empty map, no slots yet */
    CU_ASSERT_EQUAL(v, 99);
    CU_ASSERT_EQUAL(hashmap_put(&m, "alpha", 5, 1), 0);
    CU_ASSERT_EQUAL(hashmap_put(&m, "beta", 4, 2), 0);
    CU_ASSERT_EQUAL(hashmap_put(&m, "", 0, 3), 0); /* the empty key is a key */
    CU_ASSERT_EQUAL(hashmap_count(&m), 3);
    CU_ASSERT_TRUE(hashmap_find(&m, "alpha", 5, &v));
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_TRUE(hashmap_find(&m, "beta", 4, &v));
    CU_ASSERT_EQUAL(v, 2);
    CU_ASSERT_TRUE(hashmap_find(&m, "", 0, &v));
    CU_ASSERT_EQUAL(v, 3);
    CU_ASSERT_FALSE(hashmap_find(&m, "alph", 4, NULL)); /* a prefix is another key */
    /* put replaces; find_or_add keeps the first value. */
    CU_ASSERT_EQUAL(hashmap_put(&m, "alpha", 5, 10), 0);
    CU_ASSERT_EQUAL(hashmap_find_or_add(&m, "alpha", 5, 20, &v), 1);
    CU_ASSERT_EQUAL(v, 10);
    CU_ASSERT_EQUAL(hashmap_find_or_add(&m, "gamma", 5, 30, &v), 0);
    CU_ASSERT_EQUAL(v, 30);
    CU_ASSERT_EQUAL(hashmap_count(&m), 4);
    /* Pointer values. */
    static int target;
    CU_ASSERT_EQUAL(hashmap_put_ptr(&m, "ptr", 3, &target), 0);
    CU_ASSERT_PTR_EQUAL(hashmap_find_ptr(&m, "ptr", 3), &target);
    CU_ASSERT_PTR_NULL(hashmap_find_ptr(&m, "nope", 4));
    hashmap_clear(&m);
    CU_ASSERT_EQUAL(hashmap_count(&m), 0);
    CU_ASSERT_FALSE(hashmap_find(&m, "beta", 4, NULL));
    CU_ASSERT_EQUAL(hashmap_put(&m, "beta", 4, 5), 0);
    CU_ASSERT_TRUE(hashmap_find(&m, "beta", 4, &v));
    CU_ASSERT_EQUAL(v, 5);
    hashmap_free(&m);
}

/* Many keys: the table grows (rehash) many times and keeps every entry. */
static void test_grow(void)
{
    enum { N = 50000 };
    static char keys[N][12];
    struct hashmap m;
    hashmap_init(&m, NULL, NULL);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        CU_ASSERT_EQUAL_FATAL(hashmap_find_or_add(&m, keys[i], strlen(keys[i]), (uint64_t)i, NULL), 0);
    }
    CU_ASSERT_EQUAL(hashmap_count(&m), N);
    CU_ASSERT(m.cap >= 2 * N); /* at most half full */
    int bad = 0;
    for (int i = 0; i < N; i++) {
        uint64_t v;
        if (!hashmap_find(&m, keys[i], strlen(keys[i]), &v) || v != (uint64_t)i)
            bad++;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_FALSE(hashmap_find(&m, "k50000", 6, NULL));
    hashmap_free(&m);
}

/* Callback keys: the map stores only the index; the key is read from the
 * caller's rows. The hash is deliberately terrible (4 distinct values, one of
 * them 0) so every lookup walks a collision chain and must decide by equal. */
struct row {
    uint32_t a, b;
};
static struct row rows[3000];

static uint64_t bad_hash(const void *key, size_t len, const void *ctx)
{
    (void)len;
    (void)ctx;
    const struct row *k = key;
    return k->a % 4; /* 0 included: the map must still tell it from an empty slot */
}

static bool row_equal(const void *key, size_t len, uint64_t value, const void *ctx)
{
    (void)len;
    const struct row *k = key, *all = ctx;
    return all[value].a == k->a && all[value].b == k->b;
}

static void test_callbacks_collisions(void)
{
    static const struct hashmap_type type = {bad_hash, row_equal};
    struct hashmap m;
    hashmap_init(&m, &type, rows);
    size_t n = sizeof rows / sizeof rows[0];
    for (size_t i = 0; i < n; i++) {
        rows[i] = (struct row){(uint32_t)i, (uint32_t)(i * 7)};
        uint64_t v;
        CU_ASSERT_EQUAL_FATAL(hashmap_find_or_add(&m, &rows[i], sizeof rows[i], i, &v), 0);
    }
    CU_ASSERT_PTR_NULL(m.keys); /* callback keys: no key storage */
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        struct row k = {(uint32_t)i, (uint32_t)(i * 7)};
        uint64_t v;
        if (hashmap_find_or_add(&m, &k, sizeof k, 12345, &v) != 1 || v != i)
            bad++;
    }
    CU_ASSERT_EQUAL(bad, 0);
    struct row absent = {5, 6};
    CU_ASSERT_FALSE(hashmap_find(&m, &absent, sizeof absent, NULL));
    CU_ASSERT_EQUAL(hashmap_count(&m), n);
    hashmap_free(&m);
}

/* Byte keys that differ only in their length or last byte, and binary keys
 * with zeros: a hash match alone must never be taken for a key match. */
static void test_binary_keys(void)
{
    struct hashmap m;
    hashmap_init(&m, NULL, NULL);
    static const uint64_t k1[2] = {1, 0}, k2[2] = {1, 1};
    CU_ASSERT_EQUAL(hashmap_put(&m, k1, sizeof k1, 1), 0);
    CU_ASSERT_EQUAL(hashmap_put(&m, k2, sizeof k2, 2), 0);
    CU_ASSERT_EQUAL(hashmap_put(&m, k1, 8, 3), 0); /* first 8 bytes of k1 */
    uint64_t v;
    CU_ASSERT_TRUE(hashmap_find(&m, k1, sizeof k1, &v));
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_TRUE(hashmap_find(&m, k2, sizeof k2, &v));
    CU_ASSERT_EQUAL(v, 2);
    CU_ASSERT_TRUE(hashmap_find(&m, k1, 8, &v));
    CU_ASSERT_EQUAL(v, 3);
    CU_ASSERT_EQUAL(hashmap_count(&m), 3);
    CU_ASSERT_NOT_EQUAL(hashmap_hash_bytes("ab", 2, 0), hashmap_hash_bytes("ba", 2, 0));
    CU_ASSERT_NOT_EQUAL(hashmap_hash_u64(1), hashmap_hash_u64(2));
    hashmap_free(&m);
}

/* Integer keys: the key is its own identity, including 0 and UINT64_MAX
 * (the one key whose hash would be the empty mark, kept aside). */
static void test_u64_keys(void)
{
    struct hashmap m;
    hashmap_init_u64(&m);
    uint64_t v = 0;
    CU_ASSERT_FALSE(hashmap_find_u64(&m, 0, &v));
    CU_ASSERT_FALSE(hashmap_find_u64(&m, UINT64_MAX, &v));
    CU_ASSERT_EQUAL(hashmap_find_or_add_u64(&m, UINT64_MAX, 9, &v), 0);
    CU_ASSERT_EQUAL(v, 9);
    CU_ASSERT_FALSE(hashmap_find_u64(&m, 0, NULL)); /* only the aside key so far */
    enum { N = 40000 };
    int bad = 0;
    for (uint64_t i = 0; i < N; i++) /* pairs of 32-bit ids, as the callers build them */
        if (hashmap_find_or_add_u64(&m, i % 200 << 32 | i / 200, i, &v) != 0 || v != i)
            bad++;
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(hashmap_count(&m), N + 1);
    CU_ASSERT_PTR_NULL(m.keys); /* integer keys: no key storage */
    for (uint64_t i = 0; i < N; i++)
        if (!hashmap_find_u64(&m, i % 200 << 32 | i / 200, &v) || v != i ||
            hashmap_find_or_add_u64(&m, i % 200 << 32 | i / 200, 77, &v) != 1 || v != i)
            bad++;
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_TRUE(hashmap_find_u64(&m, UINT64_MAX, &v));
    CU_ASSERT_EQUAL(v, 9);
    CU_ASSERT_FALSE(hashmap_find_u64(&m, (uint64_t)200 << 32, NULL));
    CU_ASSERT_EQUAL(hashmap_find_or_add_u64(&m, UINT64_MAX, 10, &v), 1);
    CU_ASSERT_EQUAL(v, 9);
    hashmap_clear(&m);
    CU_ASSERT_EQUAL(hashmap_count(&m), 0);
    CU_ASSERT_FALSE(hashmap_find_u64(&m, UINT64_MAX, NULL));
    CU_ASSERT_FALSE(hashmap_find_u64(&m, 0, NULL));
    hashmap_free(&m);
}

/* Out of memory: a reserve no machine can satisfy returns -1 with ENOMEM,
 * aborts nothing, and leaves the entries where they were. */
static void test_out_of_memory(void)
{
    struct hashmap m;
    hashmap_init(&m, NULL, NULL);
    CU_ASSERT_EQUAL(hashmap_put(&m, "kept", 4, 7), 0);
    size_t cap = m.cap;
    errno = 0;
    CU_ASSERT_EQUAL(hashmap_reserve(&m, SIZE_MAX / 2), -1);
    CU_ASSERT_EQUAL(errno, ENOMEM);
    CU_ASSERT_EQUAL(m.cap, cap);
    uint64_t v;
    CU_ASSERT_TRUE(hashmap_find(&m, "kept", 4, &v));
    CU_ASSERT_EQUAL(v, 7);
    /* A reserve that fits sizes the table once: no growth while filling. */
    CU_ASSERT_EQUAL(hashmap_reserve(&m, 1000), 0);
    cap = m.cap;
    char keys[1000][8];
    for (int i = 0; i < 999; i++) {
        snprintf(keys[i], sizeof keys[i], "%d", i);
        CU_ASSERT_EQUAL(hashmap_put(&m, keys[i], strlen(keys[i]), (uint64_t)i), 0);
    }
    CU_ASSERT_EQUAL(m.cap, cap);
    hashmap_free(&m);
}

/* profile_grow follows the policy like realloc: NULL with ENOMEM, and the
 * caller's array and capacity untouched (it used to abort). */
static void test_profile_grow_out_of_memory(void)
{
    size_t cap = 0;
    uint64_t *a = profile_grow(NULL, &cap, 3, sizeof *a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(cap, 64); /* doubling starts at 64 */
    a[0] = 42;
    errno = 0;
    CU_ASSERT_PTR_NULL(profile_grow(a, &cap, SIZE_MAX / 2, sizeof *a));
    CU_ASSERT_EQUAL(errno, ENOMEM);
    CU_ASSERT_EQUAL(cap, 64);
    CU_ASSERT_EQUAL(a[0], 42); /* still the caller's, still readable */
    CU_ASSERT_PTR_EQUAL(profile_grow(a, &cap, 64, sizeof *a), a); /* fits: no realloc */
    free(a);
}

void register_hashmap_tests(void)
{
    CU_pSuite s = CU_add_suite("hashmap", NULL, NULL);
    if (!s)
        return;
    CU_add_test(s, "byte keys: put, find, find_or_add, pointers, clear", test_bytes_insert_find);
    CU_add_test(s, "growth by rehash keeps every entry", test_grow);
    CU_add_test(s, "callback keys through a colliding hash", test_callbacks_collisions);
    CU_add_test(s, "binary keys: length and content both count", test_binary_keys);
    CU_add_test(s, "integer keys, 0 and UINT64_MAX included", test_u64_keys);
    CU_add_test(s, "out of memory: -1, ENOMEM, map unchanged", test_out_of_memory);
    CU_add_test(s, "profile_grow out of memory: NULL, ENOMEM, array kept", test_profile_grow_out_of_memory);
}
