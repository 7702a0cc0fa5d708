/* test_util.c - unit tests for generator/util.c's hash_index: every item is
 * found again after the index grows, items of one hash stay apart, the
 * index stays at most half full. Prints "ok NAME" / "FAIL NAME: why" per
 * test and a final "N passed, N failed" line; exits 0 iff all passed. */
#include "../../generator/util.h"

#include <stdio.h>
#include <string.h>

#define UNIT_ERR "-"
static void unit_reset(void) {}
static void unit_cleanup(void) {}

#include "unit_harness.h"

/* Keys are numbers; `spread` numbers share each hash, as colliding keys do. */
enum { NKEYS = 5000 };
static long keys[NKEYS];

static uint64_t key_hash(long k, long spread)
{
    return hash64(&(long){k / spread}, sizeof k, 0);
}

/* The index of key k among keys[0, n) in x, or `add` it as item n. */
static size_t find_or_add(hash_index *x, long k, size_t *n, long spread, int add)
{
    uint64_t h = key_hash(k, spread);
    hash_slot *s = hash_index_first(x, h);
    for (; s->item; s = hash_index_next(x, s))
        if (s->hash == h && keys[s->item - 1] == k)
            return s->item - 1;
    if (!add)
        return (size_t)-1;
    keys[*n] = k;
    hash_index_put(x, s, h, *n);
    return (*n)++;
}

static int every_key_found(long spread)
{
    hash_index x = {0};
    size_t n = 0;
    for (long k = 0; k < NKEYS; k++)
        CHECK(find_or_add(&x, k * 3, &n, spread, 1) == (size_t)k); /* new: added */
    CHECK(n == NKEYS && x.count == NKEYS);
    CHECK(2 * x.count <= x.mask + 1); /* at most half full */
    for (long k = 0; k < NKEYS; k++) {
        CHECK(find_or_add(&x, k * 3, &n, spread, 1) == (size_t)k); /* old: found */
        CHECK(find_or_add(&x, k * 3 + 1, &n, spread, 0) == (size_t)-1);
    }
    CHECK(n == NKEYS && x.count == NKEYS);
    hash_index_free(&x);
    CHECK(!x.slots && !x.count);
    return 1;
}

TEST(hash_index_finds_every_item_after_growing)
{
    return every_key_found(1);
}

TEST(hash_index_keeps_items_of_one_hash_apart)
{
    return every_key_found(16); /* 16 keys a hash: the caller's compare tells them apart */
}

int main(void)
{
    RUN(hash_index_finds_every_item_after_growing);
    RUN(hash_index_keeps_items_of_one_hash_apart);
    return unit_summary();
}
