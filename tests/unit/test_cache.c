/* test_cache.c - unit tests for generator/cache.c's record index: a part a
 * run appended holds newer records than those before it, a part out of
 * sequence ends the index there, a run that only adds records appends them
 * and leaves the bytes before alone, and an index another run wrote since
 * this one loaded it is merged and written whole. Prints "ok NAME" /
 * "FAIL NAME: why" per test and a final "N passed, N failed" line; exits 0
 * iff all passed. */
#define _GNU_SOURCE /* mkdtemp */
#include "../../generator/cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../generator/opunit.h"
#include "../../generator/util.h"

#define UNIT_ERR "-"

/* The cache asks opunit.c whether a file mentions a source position; these
 * tests' files are plain text that does not. */
bool text_mentions_position(const char *text, size_t size)
{
    (void)text;
    (void)size;
    return false;
}

static char dir[64];

static void unit_reset(void)
{
    snprintf(dir, sizeof dir, "/tmp/sg-test-cache.XXXXXX");
    if (!mkdtemp(dir))
        dir[0] = '\0';
}

static void free_files(void);

static void unit_cleanup(void)
{
    free_files();
    if (dir[0])
        remove_tree(dir);
}

#include "unit_harness.h"

/* A record's argument digest, in memory and as the index writes it. */
#define ARGS_HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
static const gen_key args = {{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
                              0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
                              0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
                              0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}};
#define ARGS (&args)
#define ABSENT "0000000000000000000000000000000000000000000000000000000000000000"

static char *in_dir(const char *name)
{
    return path_join(dir, name);
}

static int put(const char *name, const char *text)
{
    char *p = in_dir(name);
    int ok = write_file(p, text, strlen(text));
    free(p);
    return ok;
}

/* An index part: a list of one file (under dir) and one record of it for
 * `slot` ("S <part>" first, unless part is 0: the first part). */
static void part(strbuf *sb, size_t n, const char *file, const char *slot)
{
    if (n)
        sb_printf(sb, "S %zu\n", n);
    sb_printf(sb, "L 0\n%s/%s\n.\nR %s %s 0 %s\n", dir, file, ARGS_HEX, ABSENT,
              slot);
}

/* The key the cache at `cachedir` (an index of `text`) gives `slot`; 0 when none. */
static int key_of(const char *cachedir, const char *text, const char *slot, gen_key *key)
{
    char *d = in_dir(cachedir);
    char *idx = path_join(d, "records3.idx");
    int ok = mkdir_p(d) && write_file(idx, text, strlen(text));
    gen_cache *c = ok ? cache_open(d) : NULL;
    gen_key absent;
    bool positional;
    ok = c && cache_key_for(c, slot, ARGS, key, &absent, &positional);
    cache_close(c);
    free(idx);
    free(d);
    return ok;
}

static int same_key(gen_key a, gen_key b)
{
    return digest_equal(&a, &b);
}

TEST(an_appended_part_holds_the_newest_record_of_a_key)
{
    CHECK(put("a.h", "int a;\n") && put("b.h", "int b;\n"));
    strbuf only_a = {0}, only_b = {0}, a_then_b = {0}, b_a_b = {0};
    part(&only_a, 0, "a.h", "x/op.o");
    part(&only_b, 0, "b.h", "x/op.o");
    part(&a_then_b, 0, "a.h", "x/op.o");
    part(&a_then_b, 1, "b.h", "x/op.o");
    part(&b_a_b, 0, "b.h", "x/op.o");
    part(&b_a_b, 1, "a.h", "x/op.o");
    part(&b_a_b, 2, "b.h", "x/op.o");
    gen_key ka, kb, k1, k2;
    int ok = key_of("ca", only_a.data, "x/op.o", &ka) && key_of("cb", only_b.data, "x/op.o", &kb) &&
             key_of("c1", a_then_b.data, "x/op.o", &k1) && key_of("c2", b_a_b.data, "x/op.o", &k2);
    sb_free(&only_a);
    sb_free(&only_b);
    sb_free(&a_then_b);
    sb_free(&b_a_b);
    CHECK(ok);
    CHECK(!same_key(ka, kb)); /* the two lists make two keys */
    CHECK(same_key(k1, kb));
    CHECK(same_key(k2, kb));
    return 1;
}

TEST(a_part_out_of_sequence_ends_the_index)
{
    CHECK(put("a.h", "int a;\n"));
    strbuf sb = {0};
    part(&sb, 0, "a.h", "x/first.o");
    part(&sb, 2, "a.h", "x/second.o"); /* no part 1 */
    gen_key k;
    int first = key_of("c", sb.data, "x/first.o", &k);
    int second = key_of("c", sb.data, "x/second.o", &k);
    sb_free(&sb);
    CHECK(first);
    CHECK(!second);
    return 1;
}

/* Records `slot` (of a.h) in the cache at d and closes it. */
static int record(const char *d, const char *slot)
{
    char *a = in_dir("a.h");
    gen_cache *c = cache_open(d);
    struct timespec since;
    usleep(20000); /* a.h was written before the work "started" */
    cache_now(&since);
    gen_key key, absent = {{0}};
    bool positional;
    int ok = c && cache_record(c, slot, ARGS, &a, 1, &absent, &since, &key, &positional);
    cache_close(c);
    free(a);
    return ok;
}

/* Files of a test, freed after it (unit_cleanup), so that a CHECK may return. */
static uint8_t *before, *after;
static char *cachedir, *idx;

static void free_files(void)
{
    free(before);
    free(after);
    free(cachedir);
    free(idx);
    before = after = NULL;
    cachedir = idx = NULL;
}

TEST(a_run_that_adds_records_appends_them_and_a_changed_index_is_merged)
{
    CHECK(put("a.h", "int a;\n"));
    cachedir = in_dir("c");
    idx = path_join(cachedir, "records3.idx");
    strbuf sb = {0}; /* a first part of 50 records of one list */
    sb_printf(&sb, "L 0\n%s/a.h\n.\n", dir);
    for (int i = 0; i < 50; i++)
        sb_printf(&sb, "R %s %s 0 x/op%d.o\n", ARGS_HEX, ABSENT, i);
    int wrote = mkdir_p(cachedir) && write_file(idx, sb.data, sb.len);
    sb_free(&sb);
    size_t nbefore = 0, nafter = 0;
    CHECK(wrote && read_file(idx, &before, &nbefore));
    CHECK(record(cachedir, "x/new.o"));
    CHECK(read_file(idx, &after, &nafter));
    /* The bytes before kept, one part after them, read back with them. */
    CHECK(nafter > nbefore && !memcmp(before, after, nbefore));
    CHECK(!strncmp((char *)after + nbefore, "S 1\n", 4));
    gen_key k;
    CHECK(key_of("c-copy", (char *)after, "x/new.o", &k));
    CHECK(key_of("c-copy2", (char *)after, "x/op49.o", &k));
    /* Another run appends its part after this one loaded the index: merged,
     * every record kept, one part again. */
    free(after);
    after = NULL;
    char *a = in_dir("a.h");
    gen_cache *c = cache_open(cachedir);
    struct timespec since;
    cache_now(&since);
    gen_key key, absent = {{0}};
    bool positional;
    int recorded = cache_record(c, "x/newer.o", ARGS, &a, 1, &absent, &since, &key, &positional);
    free(a);
    strbuf other = {0};
    part(&other, 2, "a.h", "x/other.o");
    FILE *f = fopen(idx, "a");
    int appended = f && fputs(other.data, f) >= 0;
    if (f)
        fclose(f);
    sb_free(&other);
    cache_close(c);
    CHECK(recorded && appended);
    CHECK(read_file(idx, &after, &nafter));
    CHECK(!memmem(after, nafter, "\nS ", 3));
    CHECK(memmem(after, nafter, " x/newer.o\n", 11) && memmem(after, nafter, " x/other.o\n", 11) &&
          memmem(after, nafter, " x/new.o\n", 9));
    return 1;
}

int main(void)
{
    RUN(an_appended_part_holds_the_newest_record_of_a_key);
    RUN(a_part_out_of_sequence_ends_the_index);
    RUN(a_run_that_adds_records_appends_them_and_a_changed_index_is_merged);
    return unit_summary();
}
