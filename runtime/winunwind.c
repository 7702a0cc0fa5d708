/* winunwind.c - JIT code made visible to the Windows x64 unwinder
 * (RtlLookupFunctionEntry, RtlVirtualUnwind: exceptions, SEH, C++ EH and
 * CaptureStackBackTrace all walk through them).
 *
 * Windows finds a frame's unwind rule through a RUNTIME_FUNCTION (a code
 * range, as 32-bit offsets from a base address) and its UNWIND_INFO. The
 * header carries both UNWIND_INFOs the runtime needs: the shim's as compiled,
 * and the executors' (the shim's frame after its prolog, true at every
 * executor PC because no stencil writes rbp). Each chunk of code gets one
 * RUNTIME_FUNCTION and a copy of its UNWIND_INFO right after its own bytes,
 * registered with RtlAddFunctionTable taking the chunk's start as the base:
 * every offset is inside the chunk, so it fits 32 bits whatever the arena. The
 * table lives and dies with its chunk, so a free deregisters exactly it.
 * Built on Windows only (meson.build). */
#include <stdio.h>
#include <string.h>
#include <windows.h>

#include "internal.h"

enum {
    UNWIND_VERSION = 1,
    RUNTIME_FUNCTION_SIZE = 12, /* BeginAddress, EndAddress, UnwindData */
};
/* The table's layout (winunwind_size) assumes the x64 RUNTIME_FUNCTION. */
_Static_assert(sizeof(RUNTIME_FUNCTION) == RUNTIME_FUNCTION_SIZE,
               "RUNTIME_FUNCTION is not the x64 one (3 DWORDs)");

/* Both structures must be DWORD-aligned: the table starts at the first
 * 4-byte boundary after the chunk's bytes, and the UNWIND_INFO's copy takes
 * whole DWORDs. */
static size_t dword_align(size_t n)
{
    return (n + 3) & ~(size_t)3;
}

sr_status winunwind_check(const uint8_t *info, size_t len, const char *what)
{
    if (!info || len < 4)
        return sr_fail(SR_EINVAL, "the stencil set is for another target: it has no %s "
                       "UNWIND_INFO, which Windows needs", what);
    unsigned version = info[0] & 7, flags = info[0] >> 3, codes = info[2];
    if (version != UNWIND_VERSION || flags != 0)
        return sr_fail(SR_EINVAL, "the %s UNWIND_INFO has version %u and flags %#x: the runtime "
                       "places version 1 without handler or chained info", what, version, flags);
    if (len < 4 + 2 * (size_t)codes)
        return sr_fail(SR_EINVAL, "the %s UNWIND_INFO is %zu bytes: its %u unwind codes need %zu",
                       what, len, codes, 4 + 2 * (size_t)codes);
    return SR_OK;
}

/* SR_EUNSUPPORTED if a branch of s that may go through a veneer is not a
 * call (E8): Windows takes a veneer's `jmp [rip+x]` for an epilog and
 * unwinds it by popping [rsp], which is the veneer's caller only when a call
 * entered it. A jmp or jcc there would leave the stack mid-frame. */
static sr_status veneers_entered_by_calls(const sg_stencil *s)
{
    for (size_t i = 0; i < s->code_hole_count; i++) {
        const sg_hole *h = &s->code_holes[i];
        if (h->patch != SG_PATCH_X86_BRANCH32 || !sg_hole_may_use_veneer(h->patch, h->value))
            continue;
        if (h->offset == 0 || s->code[h->offset - 1] != 0xe8)
            return sr_fail(SR_EUNSUPPORTED, "%s: the branch at +0x%x may go through a veneer "
                           "and is not a call: Windows unwinds a veneer as an epilog, which is "
                           "right only when a call entered it", s->name, (unsigned)h->offset);
    }
    return SR_OK;
}

sr_status winunwind_check_veneers(const sr_stencil_set *set)
{
    sr_status st = veneers_entered_by_calls(set->shim);
    for (size_t op = 0; st == SR_OK && op < set->count; op++)
        st = veneers_entered_by_calls(&set->stencils[op]);
    return st;
}

size_t winunwind_size(size_t used, size_t info_len)
{
    return dword_align(used) - used + RUNTIME_FUNCTION_SIZE + dword_align(info_len);
}

sr_status winunwind_write(uint8_t *write, size_t used, size_t begin, size_t end,
                          const uint8_t *info, size_t info_len)
{
    size_t at = dword_align(used), info_at = at + RUNTIME_FUNCTION_SIZE;
    /* RVAs are 32 bits: a chunk (an arena_size or a program) past 4 GiB
     * cannot be described, and a truncated RVA would point elsewhere. */
    if (begin > end || end > used || info_at > UINT32_MAX)
        return sr_fail(SR_ERANGE, "the code's function table cannot describe %zu bytes of "
                       "code at [%zu, %zu): a RUNTIME_FUNCTION's offsets are 32 bits", used,
                       begin, end);
    RUNTIME_FUNCTION f = {(DWORD)begin, (DWORD)end, (DWORD)info_at};
    memcpy(write + at, &f, sizeof f);
    memcpy(write + info_at, info, info_len);
    memset(write + info_at + info_len, 0, dword_align(info_len) - info_len);
    return SR_OK;
}

void *winunwind_register(uint8_t *mem, size_t used)
{
    RUNTIME_FUNCTION *table = (RUNTIME_FUNCTION *)(mem + dword_align(used));
    return RtlAddFunctionTable(table, 1, (DWORD64)(uintptr_t)mem) ? table : NULL;
}

bool winunwind_deregister(void *table)
{
    if (!table || RtlDeleteFunctionTable(table))
        return true;
    fprintf(stderr, "stencilrt: warning: RtlDeleteFunctionTable(%p): error %lu: the function "
            "table stays registered\n", table, (unsigned long)GetLastError());
    return false;
}
