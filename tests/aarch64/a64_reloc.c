/* a64_reloc.c - AArch64 patching, run for real (under qemu-user).
 *
 * Compiled by tests/integration/test_aarch64_qemu.py against one generated
 * header (a relocation-kind fixture or the bundled stencils), stencilrt.h and
 * the cross-built static runtime. Reads a plan on stdin, emits executors,
 * prints what the runtime did and, on request, runs them through the shim.
 *
 * Appended to the header's set (test-only, hand-written, never run):
 *   pad      4 x nop, falls through, no holes; pad4k: 1024 x nop, likewise
 *   lo12_16, lo12_32, lo12_64, lo12_128: one load whose scaled 12-bit
 *            offset is a hole (LDST16/32/64/128_LO12) against OPERAND0, so
 *            the alignment checks can be driven with any value;
 *   adrp_add tos = OPERAND0 by ADRP + ADD (holes ADRP, ADD_LO12), runnable;
 *   adr      tos = OPERAND0 by ADR (hole ADR21), runnable.
 *
 * Plan lines:
 *   far HEXADDR              map a helper (add x0, x1, #5; ret: what vm_print
 *                            does here) at HEXADDR, far from everything
 *   sym INDEX near|far|HEX   run-time symbol INDEX: the program's own
 *                            function, the far helper, or a raw value
 *   exec LABEL N DUMPLEN RUN an executor of N instructions follows (RUN 1:
 *                            run it through the shim with an empty stack)
 *   ins OP TARGET O0 O1 O2 O3  one instruction (tests/common/emit_plan.h)
 * A sym line is echoed as "sym INDEX HEXVALUE".
 * Output per executor: the exec, addr and mem lines of emit_plan.h, then
 *   result LABEL VALUE       (RUN 1) what the executor returned */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "emit_plan.h"
#include "jit_stencils.h"
#include "tinyvm.h"
#include "stencilrt.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

typedef vm_value shim_fn(vm_frame *frame, vm_value *sp, void *code);

/* The run-time symbols, near: plain C functions of this program. */
vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    return value + 5;
}

vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    (void)frame;
    return which * 1000 + arg;
}

vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc, vm_value *args)
{
    (void)caller;
    (void)args;
    return function * 100 + argc;
}

_Noreturn void vm_trap(vm_frame *frame, const char *why)
{
    (void)frame;
    printf("trap %s\n", why);
    exit(3);
}

static const void *near_symbol(const char *name)
{
    if (!strcmp(name, "vm_print"))
        return (const void *)vm_print;
    if (!strcmp(name, "vm_native"))
        return (const void *)vm_native;
    if (!strcmp(name, "vm_call"))
        return (const void *)vm_call;
    if (!strcmp(name, "vm_trap"))
        return (const void *)vm_trap;
    return NULL;
}

static const uint32_t pad_code[4] = {0xd503201f, 0xd503201f, 0xd503201f, 0xd503201f};
static uint32_t pad4k_code[1024]; /* nop x 1024, filled in by make_set */
static const uint32_t lo12_code[4] = {
    0x794002d6, /* ldrh w22, [x22] */
    0xb94002d6, /* ldr w22, [x22] */
    0xf94002d6, /* ldr x22, [x22] */
    0x3dc002c0, /* ldr q0, [x22] */
};
static const sg_hole lo12_holes[4] = {
    {0, SG_PATCH_AARCH64_LDST16_LO12, SG_VALUE_OPERAND, 0, 0},
    {0, SG_PATCH_AARCH64_LDST32_LO12, SG_VALUE_OPERAND, 0, 0},
    {0, SG_PATCH_AARCH64_LDST64_LO12, SG_VALUE_OPERAND, 0, 0},
    {0, SG_PATCH_AARCH64_LDST128_LO12, SG_VALUE_OPERAND, 0, 0},
};
static const char *const lo12_names[4] = {"lo12_16", "lo12_32", "lo12_64", "lo12_128"};
/* tos = OPERAND0, computed PC-relatively: ADRP + ADD (+-4 GiB), ADR (+-1 MiB). */
static const uint32_t adrp_code[2] = {0x90000016 /* adrp x22, 0 */,
                                      0x910002d6 /* add x22, x22, #0 */};
static const sg_hole adrp_holes[2] = {
    {0, SG_PATCH_AARCH64_ADRP, SG_VALUE_OPERAND, 0, 0},
    {4, SG_PATCH_AARCH64_ADD_LO12, SG_VALUE_OPERAND, 0, 0},
};
static const uint32_t adr_code[1] = {0x10000016 /* adr x22, 0 */};
static const sg_hole adr_holes[1] = {{0, SG_PATCH_AARCH64_ADR21, SG_VALUE_OPERAND, 0, 0}};

#define EXTRA 8
static const sr_stencil_set header_set = SR_STENCIL_SET_FROM_HEADER;
static sg_stencil stencils[SG_OP__COUNT + EXTRA];
static size_t cold_sizes[SG_OP__COUNT + EXTRA]; /* the header's, then 0s */

static sr_stencil_set make_set(void)
{
    sr_stencil_set set = header_set;
    for (size_t i = 0; i < SG_OP__COUNT; i++)
        stencils[i] = sg_stencils[i];
    stencils[SG_OP__COUNT] = (sg_stencil){
        "pad", (const uint8_t *)pad_code, sizeof pad_code, NULL, 0, 1, NULL, 0, NULL, 0, 1, NULL, 0};
    for (size_t k = 0; k < 1024; k++)
        pad4k_code[k] = 0xd503201f;
    stencils[SG_OP__COUNT + 5] = (sg_stencil){"pad4k", (const uint8_t *)pad4k_code,
                                              sizeof pad4k_code, NULL, 0, 1, NULL, 0, NULL, 0, 1,
                                              NULL, 0};
    stencils[SG_OP__COUNT + 6] = (sg_stencil){"adrp_add", (const uint8_t *)adrp_code,
                                              sizeof adrp_code, NULL, 0, 1, adrp_holes, 2,
                                              NULL, 0, 1, NULL, 0};
    stencils[SG_OP__COUNT + 7] = (sg_stencil){"adr", (const uint8_t *)adr_code, sizeof adr_code,
                                              NULL, 0, 1, adr_holes, 1, NULL, 0, 1, NULL, 0};
    for (size_t k = 0; k < 4; k++)
        stencils[SG_OP__COUNT + 1 + k] =
            (sg_stencil){lo12_names[k], (const uint8_t *)&lo12_code[k], 4, NULL, 0, 1,
                         &lo12_holes[k], 1, NULL, 0, 1, NULL, 0};
    memcpy(cold_sizes, sg_cold_sizes, sizeof sg_cold_sizes);
    set.stencils = stencils;
    set.cold_sizes = cold_sizes;
    set.count = SG_OP__COUNT + EXTRA;
    return set;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "info")) {
        for (size_t i = 0; i < SG_OP__COUNT + EXTRA; i++) {
            sr_stencil_set s = make_set();
            printf("stencil %zu %s %zu\n", i, s.stencils[i].name, s.stencils[i].code_size);
        }
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    sr_stencil_set set = make_set();
    const void *symbols[SG_SYM__COUNT + 1] = {0};
    void *far = NULL;
    sr_runtime *rt = NULL;
    sr_instr *code = NULL;
    uintptr_t last_entry = 0;
    char line[1024];
    while (fgets(line, sizeof line, stdin)) {
        unsigned idx, run;
        unsigned long long val;
        char label[256], how[64];
        size_t n, dumplen;
        if (sscanf(line, "far %llx", &val) == 1) {
            far = mmap((void *)(uintptr_t)val, 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (far == MAP_FAILED || far != (void *)(uintptr_t)val) {
                printf("far failed\n");
                return 1;
            }
            static const uint32_t helper[2] = {0x91001420, 0xd65f03c0}; /* add x0, x1, #5; ret */
            memcpy(far, helper, sizeof helper);
            mprotect(far, 4096, PROT_READ | PROT_EXEC);
            __builtin___clear_cache((char *)far, (char *)far + sizeof helper);
            printf("far %" PRIxPTR "\n", (uintptr_t)far);
            continue;
        }
        if (sscanf(line, "sym %u %63s", &idx, how) == 2) {
            if (idx >= SG_SYM__COUNT || rt)
                return fprintf(stderr, "bad sym line: %s", line), 2;
            if (!strcmp(how, "near"))
                symbols[idx] = near_symbol(sg_symbol_names[idx]);
            else if (!strcmp(how, "far"))
                symbols[idx] = far;
            else
                symbols[idx] = (const void *)(uintptr_t)strtoull(how, NULL, 16);
            printf("sym %u %" PRIxPTR "\n", idx, (uintptr_t)symbols[idx]);
            continue;
        }
        if (sscanf(line, "exec %255s %zu %zx %u", label, &n, &dumplen, &run) != 4)
            return fprintf(stderr, "bad plan line: %s", line), 2;
        if (!rt && !(rt = ep_runtime(&set, symbols, -1)))
            return 1;
        if (ep_read_instrs(stdin, label, n, last_entry, &code))
            return 2;
        sr_executor *ex = ep_emit_and_print(rt, code, n, label, dumplen);
        if (!ex)
            continue;
        last_entry = (uintptr_t)sr_executor_entry(ex);
        if (run) {
            vm_frame frame = {0};
            vm_value stack[64];
            vm_value v = ((shim_fn *)sr_shim_entry(rt))(&frame, stack, sr_executor_entry(ex));
            printf("result %s %lld\n", label, (long long)v);
        }
    }
    free(code);
    sr_runtime_destroy(rt);
    return 0;
}
