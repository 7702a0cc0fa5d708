/* test_util.c - unit tests for generator/util.c's hash_index: every item is
 * found again after the index grows, items of one hash stay apart, the
 * index stays at most half full; path_search finds programs the shell's way
 * and LLVM's way; digest.c is SHA-256 (FIPS 180-4's vectors), fields stay
 * apart, hex round-trips. Prints "ok NAME" / "FAIL NAME: why" per
 * test and a final "N passed, N failed" line; exits 0 iff all passed. */
#define _GNU_SOURCE /* mkdtemp */
#include "../../generator/util.h"
#include "../../generator/digest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* path_search in a directory of its own: bin/tool (executable), bin/data
 * (not executable), bin/sub (a directory), ./tool (for empty entries). */
TEST(path_search_finds_the_first_program_and_reads_empty_entries_both_ways)
{
    char root[] = "/tmp/sg-test-util-XXXXXX";
    CHECK(mkdtemp(root));
    char *bin = path_join(root, "bin"), *tool = path_join(bin, "tool"),
         *data = path_join(bin, "data"), *sub = path_join(bin, "sub"),
         *here = path_join(root, "tool");
    CHECK(mkdir(bin, 0755) == 0 && mkdir(sub, 0755) == 0);
    FILE *f;
    const char *files[] = {tool, data, here};
    for (size_t i = 0; i < 3; i++) {
        CHECK((f = fopen(files[i], "w")) && fclose(f) == 0);
        CHECK(chmod(files[i], files[i] == data ? 0644 : 0755) == 0);
    }
    char *cwd = getcwd(NULL, 0);
    CHECK(cwd && chdir(root) == 0);
    char *dirs = xasprintf("/nonexistent:%s", bin), *got;
    CHECK((got = path_search(dirs, "tool", X_OK, false)) && !strcmp(got, tool));
    free(got);
    CHECK(!path_search(dirs, "data", X_OK, false)); /* not executable */
    CHECK((got = path_search(dirs, "data", R_OK, false)) && !strcmp(got, data));
    free(got);
    CHECK(!path_search(dirs, "sub", X_OK, false)); /* a directory */
    free(dirs);
    dirs = xasprintf(":%s", bin); /* an empty entry first: the shell's "." */
    CHECK((got = path_search(dirs, "tool", X_OK, true)) && !strcmp(got, "./tool"));
    free(got);
    CHECK((got = path_search(dirs, "tool", X_OK, false)) && !strcmp(got, tool)); /* LLVM's: none */
    free(got);
    CHECK(!path_search("", "tool", X_OK, false) && !path_search("", "tool", X_OK, true));
    free(dirs);
    CHECK(chdir(cwd) == 0);
    free(cwd);
    const char *gone[] = {tool, data, here, sub, bin};
    for (size_t i = 0; i < 5; i++)
        remove(gone[i]);
    remove(root);
    free(bin), free(tool), free(data), free(sub), free(here);
    return 1;
}

static int digest_is(const digest *d, const char *hex)
{
    char got[DIGEST_HEX + 1];
    digest_hex(d, got);
    return !strcmp(got, hex);
}

TEST(digest_is_sha256_and_keeps_fields_apart)
{
    digest d = digest_of("abc", 3);
    CHECK(digest_is(&d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    /* Two adds hash as one run of bytes, across a 64-byte block. */
    static const char two[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    digest_ctx c;
    digest_begin(&c);
    digest_add(&c, two, 20);
    digest_add(&c, two + 20, sizeof two - 1 - 20);
    d = digest_end(&c);
    CHECK(digest_is(&d, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    /* Fields: ("ab", "c") and ("a", "bc") differ, NULL and "" differ. */
    digest f[4];
    const char *parts[4][2] = {{"ab", "c"}, {"a", "bc"}, {NULL, "x"}, {"", "x"}};
    for (int i = 0; i < 4; i++) {
        digest_begin(&c);
        digest_add_str(&c, parts[i][0]);
        digest_add_str(&c, parts[i][1]);
        f[i] = digest_end(&c);
    }
    CHECK(!digest_equal(&f[0], &f[1]) && !digest_equal(&f[2], &f[3]));
    char hex[DIGEST_HEX + 1];
    digest back;
    digest_hex(&f[0], hex);
    CHECK(digest_from_hex(hex, &back) && digest_equal(&back, &f[0]));
    hex[DIGEST_HEX - 1] = 'G';
    CHECK(!digest_from_hex(hex, &back));
    return 1;
}

int main(void)
{
    RUN(hash_index_finds_every_item_after_growing);
    RUN(hash_index_keeps_items_of_one_hash_apart);
    RUN(path_search_finds_the_first_program_and_reads_empty_entries_both_ways);
    RUN(digest_is_sha256_and_keeps_fields_apart);
    return unit_summary();
}
