/* patch_dump.c - the runtime half of the patching differential
 * (tests/integration/test_patch.py).
 *
 * Compiled against one generated header (the bundled stencils or a fixture's),
 * stencilrt.h and the static runtime. Emits the executors a plan describes and
 * prints, for each, the address of every instruction and the bytes of the
 * executor's page run, so the test can compare them with what ld.lld links
 * from the same objects at the same addresses. Nothing emitted is executed.
 *
 * Two stencils are appended to the header's set (test-only, hand-written):
 * "pad" (16 x nop, falls through, no holes) and "end" (ret, no holes), so an
 * executor can give an op a continuation and a jump target at different
 * addresses and still end legally.
 *
 *   patch_dump info            one line per stencil, then the shim:
 *                              stencil|shim INDEX NAME CODE DATA ALIGN FALLS CHOLES DHOLES
 *                              (for the shim, INDEX is its entry offset)
 *   patch_dump run [--low]     reads a plan on stdin, prints results
 *
 * Plan lines:
 *   sym INDEX VALUE            run-time symbol value (hex), before the first exec
 *   exec LABEL N DUMPLEN       an executor of N instructions follows
 *   ins OP TARGET O0 O1 O2 O3  one instruction (tests/common/emit_plan.h)
 *   shim DUMPLEN               dump the shim as the runtime placed it
 * Output per executor: the exec, addr and mem lines of emit_plan.h;
 * and for the shim:
 *   shim HEXADDR HEXBYTES      from the start of its code, up to DUMPLEN readable bytes
 *
 * --low maps the runtime's memory below 2 GiB (MAP_32BIT, through the linker's
 * --wrap=mmap/mmap64), so holes that need 32-bit addresses can be patched. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>

#include "emit_plan.h"
#include "jit_stencils.h"
#include "stencilrt.h"

static int low_mode;

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__real_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__wrap_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off);

static int low_flags(void *addr, int flags)
{
    if (low_mode && !addr && !(flags & MAP_FIXED))
        flags |= MAP_32BIT;
    return flags;
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return __real_mmap(addr, len, prot, low_flags(addr, flags), fd, off);
}

void *__wrap_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return __real_mmap64(addr, len, prot, low_flags(addr, flags), fd, off);
}

static const uint8_t pad_code[16] = {0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
                                     0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90};
static const uint8_t end_code[1] = {0xc3};

static const sr_stencil_set header_set = SR_STENCIL_SET_FROM_HEADER;
static sg_stencil stencils[SG_OP__COUNT + 2];
static size_t cold_sizes[SG_OP__COUNT + 2]; /* the header's, then 0s */

static sr_stencil_set make_set(void)
{
    sr_stencil_set set = header_set;
    for (size_t i = 0; i < SG_OP__COUNT; i++)
        stencils[i] = sg_stencils[i];
    stencils[SG_OP__COUNT] =
        (sg_stencil){"pad", pad_code, sizeof pad_code, NULL, 0, 1, NULL, 0, NULL, 0, 1, NULL, 0};
    stencils[SG_OP__COUNT + 1] =
        (sg_stencil){"end", end_code, sizeof end_code, NULL, 0, 1, NULL, 0, NULL, 0, 0, NULL, 0};
    memcpy(cold_sizes, sg_cold_sizes, sizeof sg_cold_sizes);
    set.stencils = stencils;
    set.cold_sizes = cold_sizes;
    set.count = SG_OP__COUNT + 2;
    return set;
}

static void info_line(const char *what, size_t index, const sg_stencil *s)
{
    printf("%s %zu %s %zu %zu %zu %u %zu %zu\n", what, index, s->name, s->code_size,
           s->data_size, s->data_align, s->falls_through, s->code_hole_count,
           s->data_hole_count);
}

static void info(void)
{
    for (size_t i = 0; i < SG_OP__COUNT + 2; i++)
        info_line("stencil", i, &stencils[i]);
    info_line("shim", (size_t)SG_SHIM_ENTRY, &sg_shim);
    printf("symbols %d\n", (int)SG_SYM__COUNT);
}

static int run(void)
{
    sr_stencil_set set = make_set();
    const void *symbols[SG_SYM__COUNT + 1] = {0};
    sr_runtime *rt = NULL;
    char line[1024];
    sr_instr *code = NULL;
    uintptr_t last_entry = 0;
    while (fgets(line, sizeof line, stdin)) {
        unsigned idx;
        unsigned long long val;
        char label[256];
        size_t n = 0, dumplen;
        if (sscanf(line, "sym %u %llx", &idx, &val) == 2) {
            if (idx >= SG_SYM__COUNT || rt) {
                fprintf(stderr, "bad sym line: %s", line);
                return 2;
            }
            symbols[idx] = (const void *)(uintptr_t)val;
            continue;
        }
        int is_shim = sscanf(line, "shim %zx", &dumplen) == 1;
        if (!is_shim && sscanf(line, "exec %255s %zu %zx", label, &n, &dumplen) != 3) {
            fprintf(stderr, "bad plan line: %s", line);
            return 2;
        }
        /* patching only: no unwind registrations to get in the way */
        if (!rt && !(rt = ep_runtime(&set, symbols, 0)))
            return 1;
        if (is_shim) {
            printf("shim ");
            ep_dump((const uint8_t *)sr_shim_entry(rt) - SG_SHIM_ENTRY, dumplen);
            continue;
        }
        if (ep_read_instrs(stdin, label, n, last_entry, &code))
            return 2;
        sr_executor *ex = ep_emit_and_print(rt, code, n, label, dumplen);
        if (ex)
            last_entry = (uintptr_t)sr_executor_entry(ex);
    }
    free(code);
    sr_runtime_destroy(rt);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    make_set();
    if (argc == 2 && !strcmp(argv[1], "info")) {
        info();
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "run")) {
        low_mode = argc == 3 && !strcmp(argv[2], "--low");
        return run();
    }
    fprintf(stderr, "usage: patch_dump info | run [--low] < plan\n");
    return 2;
}
