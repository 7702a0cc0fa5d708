/* fuzz_cache_index.c - libFuzzer target for the record index of generator/cache.c.
 *
 * Input: the bytes of a cache directory's records3.idx, which any run sharing
 * the directory may have written (or torn). Besides "no crash", the target
 * traps when what the cache saves after reading the input does not read back
 * to itself: the input is loaded, one record added and the index saved
 * (appended to, or merged: save_records reads it again); that index is
 * loaded, the same record added again, which must change nothing, and the two
 * saved indexes must be the same bytes.
 */
#include "cache.h"
#include "util.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void check(int cond)
{
    if (!cond)
        __builtin_trap();
}

/* The fuzzer's cache directory and the one file its record names, made once. */
static const char *fuzz_dir(void)
{
    static char dir[] = "/tmp/fuzz_cache_index.XXXXXX";
    static int made;
    if (!made) {
        check(mkdtemp(dir) != NULL);
        char *file = path_join(dir, "header.h");
        check(write_file(file, "int x;\n", 7));
        free(file);
        made = 1;
    }
    return dir;
}

/* Open the cache, record one slot, close it (which saves the index), and
 * return what it saved. */
static strbuf save_with_one_record(const char *dir, const char *index)
{
    gen_cache *c = cache_open(dir);
    char *dep = path_join(dir, "header.h");
    gen_key absent = {{1, 2}}, key, args = {{0x12, 0x34}};
    bool positional;
    check(cache_record(c, "x86_64-unknown-linux-gnu/op_add.o", &args, &dep, 1, &absent, NULL,
                       &key, &positional));
    gen_key again;
    check(cache_key_for(c, "x86_64-unknown-linux-gnu/op_add.o", &args, &again, &absent,
                        &positional));
    check(digest_equal(&again, &key));
    cache_close(c);
    free(dep);
    uint8_t *data = NULL;
    size_t size = 0;
    check(read_file(index, &data, &size));
    strbuf sb = {0};
    sb_putn(&sb, data, size);
    free(data);
    return sb;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_dir();
    char *index = path_join(dir, "records3.idx");
    check(write_file(index, data, size));
    strbuf first = save_with_one_record(dir, index);
    strbuf second = save_with_one_record(dir, index);
    check(first.len == second.len && !memcmp(first.data, second.data, first.len));
    sb_free(&first);
    sb_free(&second);
    unlink(index);
    free(index);
    return 0;
}
