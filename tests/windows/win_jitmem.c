/* win_jitmem.c - jitmem's Windows failures name the API that failed, its
 * arguments and GetLastError's code (runtime/jitmem.c, jitmem_error), not a
 * made-up errno. Two failures every Windows has: reserving more address space
 * than a process has, and VirtualProtect on a chunk already decommitted.
 * Also: winunwind_write refuses a table whose 32-bit offsets would wrap.
 * Prints each message; exit 0 when all are as expected, 1 otherwise. */
#include <stdio.h>
#include <string.h>
#include <windows.h>

#include "internal.h"

static int failures;

/* msg must name `call` and carry a numeric error code. */
static void expect(const char *what, bool failed, const char *msg, const char *call)
{
    unsigned long code = 0;
    const char *e = strstr(msg, "): error ");
    bool ok = failed && strncmp(msg, call, strlen(call)) == 0 && e &&
              sscanf(e, "): error %lu", &code) == 1 && code != 0;
    printf("win_jitmem: %s: %s: %s\n", what, ok ? "ok" : "WRONG", msg);
    failures += !ok;
}

int main(void)
{
    sr_region big;
    bool made = jitmem_region_init(&big, (size_t)1 << 47, false, PAGE_EXECUTE_READ);
    expect("reserve 128 TiB", !made, jitmem_error("mmap", NULL), "VirtualAlloc(NULL, ");
    if (made)
        jitmem_region_fini(&big);

    sr_region r;
    if (!jitmem_region_init(&r, 1 << 16, false, PAGE_EXECUTE_READ)) {
        printf("win_jitmem: cannot reserve 64 KiB: %s\n", jitmem_error(NULL, NULL));
        return 1;
    }
    uint8_t *write, *p = jitmem_alloc(&r, 4096, &write);
    if (!p || !jitmem_seal(&r, p, 4096)) {
        printf("win_jitmem: cannot commit and seal 4 KiB: %s\n", jitmem_error(NULL, NULL));
        return 1;
    }
    r.no_reuse = true; /* the chunk stays decommitted */
    jitmem_release(&r, p, 4096);
    bool sealed = jitmem_seal(&r, p, 4096);
    expect("seal a decommitted chunk", !sealed, jitmem_error("mprotect", NULL), "VirtualProtect(");
    bool unsealed = jitmem_unseal(&r, p, 4096) != NULL;
    expect("unseal a decommitted chunk", !unsealed, jitmem_error(NULL, NULL), "VirtualProtect(");
    jitmem_region_fini(&r);

    /* A function table whose offsets would not fit 32 bits is refused before
     * anything is written (the buffer is far smaller than `used`). */
    uint8_t table[64] = {0};
    static const uint8_t info[4] = {1, 0, 0, 0};
    sr_status st = winunwind_write(table, (size_t)1 << 32, 0, 16, info, sizeof info);
    bool untouched = true;
    for (size_t i = 0; i < sizeof table; i++)
        untouched &= table[i] == 0;
    bool ok = st == SR_ERANGE && untouched && strstr(sr_last_error(), "32 bits");
    printf("win_jitmem: a 4 GiB chunk's table: %s: %s\n", ok ? "ok" : "WRONG",
           st == SR_OK ? "written" : sr_last_error());
    failures += !ok;
    printf("win_jitmem: %d wrong\n", failures);
    return failures ? 1 : 0;
}
