/* ehframe.c - a synthetic .eh_frame: one CIE carrying the shim's initial
 * instructions and factors, then one FDE per code range. The runtime's own
 * table uses absolute pointers (DW_EH_PE_absptr), so the same bytes serve
 * libgcc and GDB's in-memory ELF; perf's images, loaded at addresses only perf
 * knows, are written with pc-relative ones by the same two functions. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#ifndef _WIN32 /* Windows unwinds JIT code from its own tables (winunwind.c) */
#include <dlfcn.h>

/* The unwinders' registration entry points, in no public header. libgcc's
 * __register_frame takes a whole zero-terminated .eh_frame. LLVM's libunwind
 * has one of that name too, but it takes a single FDE (given a section it
 * says "FDE is really a CIE" and registers nothing); it takes a section
 * through __unw_add_dynamic_eh_frame_section. This library's reference to
 * __register_frame binds to whichever unwinder it was linked against. */
extern void __register_frame(void *begin);
extern void __deregister_frame(void *begin);
/* LLVM's section entry points, also as weak references: a program that links
 * LLVM's libunwind.a into itself does not export them (unless -rdynamic), so
 * dlsym cannot find them, yet this reference binds to them at link time. */
extern void __unw_add_dynamic_eh_frame_section(uintptr_t eh_frame)
    __attribute__((weak, visibility("default")));
extern void __unw_remove_dynamic_eh_frame_section(uintptr_t eh_frame)
    __attribute__((weak, visibility("default")));

typedef void frame_fn(void *eh_frame);
typedef void section_fn(uintptr_t eh_frame);

/* The unwinders in the process, each with its pair of entry points (NULL: absent). */
typedef struct unwinders {
    frame_fn *gcc_add, *gcc_remove;
    section_fn *llvm_add, *llvm_remove;
} unwinders;

static bool same_object(void *a, void *b)
{
    Dl_info x, y;
    return dladdr(a, &x) && dladdr(b, &y) && x.dli_fbase == y.dli_fbase;
}

/* Looked up at each registration, not once: a process may load an unwinder
 * later (glibc's backtrace() loads libgcc_s on first use), and both may be
 * there at once (a program on LLVM's libunwind that also loads libgcc_s). */
static unwinders find_unwinders(void)
{
    unwinders u = {0};
    u.llvm_add = (section_fn *)dlsym(RTLD_DEFAULT, "__unw_add_dynamic_eh_frame_section");
    u.llvm_remove = (section_fn *)dlsym(RTLD_DEFAULT, "__unw_remove_dynamic_eh_frame_section");
    if (!u.llvm_add || !u.llvm_remove) {
        u.llvm_add = __unw_add_dynamic_eh_frame_section;
        u.llvm_remove = __unw_remove_dynamic_eh_frame_section;
    }
    if (!u.llvm_add || !u.llvm_remove)
        u.llvm_add = u.llvm_remove = NULL;
    if (!u.llvm_add || !same_object((void *)__register_frame, (void *)u.llvm_add)) {
        u.gcc_add = __register_frame;
        u.gcc_remove = __deregister_frame;
    } else { /* linked against LLVM's: libgcc_s, if loaded, under its symbol version
              * (GCC_3.0 on x86-64; GLIBC_2.0 on AArch64, whose libgcc_s inherits it) */
        static const char *const versions[] = {"GCC_3.0", "GLIBC_2.0"};
        for (size_t i = 0; i < sizeof versions / sizeof versions[0] && !u.gcc_add; i++) {
            u.gcc_add = (frame_fn *)dlvsym(RTLD_DEFAULT, "__register_frame", versions[i]);
            u.gcc_remove = (frame_fn *)dlvsym(RTLD_DEFAULT, "__deregister_frame", versions[i]);
            if (!u.gcc_add || !u.gcc_remove)
                u.gcc_add = u.gcc_remove = NULL;
        }
    }
    return u;
}
#endif

_Static_assert(DW_CFA_nop == 0, "padding is written with buf_zeros");

/* Pad the entry that started at `start` (its length field) with DW_CFA_nop
 * to a multiple of 8 bytes, then to `size`, and fill in its length. The pad
 * is counted first: a failed buffer stops growing. */
static void end_entry(sr_buf *b, size_t start, size_t size)
{
    size_t len = b->len - start, padded = (len + 7) & ~(size_t)7;
    buf_zeros(b, (padded > size ? padded : size) - len);
    buf_patch_u32(b, start, (uint32_t)(b->len - start - 4));
}

/* A pointer field in encoding `enc` (the two ehframe_cie documents). */
static void put_pointer(sr_buf *b, uint8_t enc, uint64_t v, uint64_t base)
{
    if ((enc & 0x70) == DW_EH_PE_pcrel)
        v -= base + b->len;
    if ((enc & 0x0f) == DW_EH_PE_sdata4)
        buf_u32(b, (uint32_t)v);
    else
        buf_u64(b, v);
}

size_t ehframe_cie(sr_buf *b, const sr_stencil_set *set, uint8_t enc, size_t size)
{
    size_t cie = b->len;
    buf_u32(b, 0); /* length, filled in by end_entry */
    buf_u32(b, 0); /* CIE id */
    buf_u8(b, 1);  /* version */
    buf_put(b, "zR", 3);
    buf_uleb(b, set->code_align);
    buf_sleb(b, set->data_align);
    buf_u8(b, (uint8_t)set->ra_column);
    buf_uleb(b, 1); /* augmentation data: the FDE pointer encoding */
    buf_u8(b, enc);
    buf_put(b, set->cie_insns, set->cie_insns_len);
    end_entry(b, cie, size);
    return cie;
}

void ehframe_fde(sr_buf *b, size_t cie_at, const sr_fde *f, uint8_t enc, uint64_t base)
{
    size_t fde = b->len;
    buf_u32(b, 0);
    buf_u32(b, (uint32_t)(b->len - cie_at)); /* CIE pointer: back to the CIE */
    put_pointer(b, enc, f->pc, base);
    put_pointer(b, enc & 0x0f, f->size, 0); /* a length: never relative */
    buf_uleb(b, 0); /* no augmentation data */
    buf_put(b, f->insns, f->insns_len);
    end_entry(b, fde, 0);
}

uint8_t *ehframe_build(const sr_stencil_set *set, const sr_fde *fdes, size_t n, size_t *size)
{
    sr_buf b = {0};
    size_t cie = ehframe_cie(&b, set, DW_EH_PE_absptr, 0);
    for (size_t i = 0; i < n; i++)
        ehframe_fde(&b, cie, &fdes[i], DW_EH_PE_absptr, 0);
    buf_u32(&b, 0); /* terminator: libgcc walks until a zero length */
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    *size = b.len;
    return b.p;
}

/* In an FDE written with DW_EH_PE_absptr: where its CIE pointer, pc_begin and
 * pc_range are (after the 4-byte length). */
enum { FDE_CIE_POINTER = 4, FDE_PC = 8, FDE_RANGE = 16 };

bool ehframe_template(sr_eh_template *t, const sr_stencil_set *set, const uint8_t *insns,
                      size_t insns_len)
{
    sr_buf b = {0};
    size_t cie = ehframe_cie(&b, set, DW_EH_PE_absptr, 0);
    size_t fde = b.len;
    ehframe_fde(&b, cie, &(sr_fde){0, 0, insns, insns_len}, DW_EH_PE_absptr, 0);
    if (b.failed) {
        free(b.p);
        *t = (sr_eh_template){0};
        return false;
    }
    *t = (sr_eh_template){b.p, fde, b.len - fde};
    return true;
}

void ehframe_template_free(sr_eh_template *t)
{
    free(t->bytes);
    *t = (sr_eh_template){0};
}

size_t ehframe_table_size(const sr_eh_template *t, size_t n)
{
    return t->cie_size + n * t->fde_size + 4;
}

void ehframe_table_cie(const sr_eh_template *t, uint8_t *table)
{
    memcpy(table, t->bytes, t->cie_size);
}

void ehframe_table_fde(const sr_eh_template *t, uint8_t *table, size_t i, uint64_t pc,
                       uint64_t size)
{
    size_t at = t->cie_size + i * t->fde_size;
    uint32_t cie_pointer = (uint32_t)(at + FDE_CIE_POINTER); /* back to the CIE at 0 */
    memcpy(table + at, t->bytes + t->cie_size, t->fde_size);
    memcpy(table + at + FDE_CIE_POINTER, &cie_pointer, 4);
    memcpy(table + at + FDE_PC, &pc, 8);
    memcpy(table + at + FDE_RANGE, &size, 8);
}

void ehframe_table_end(const sr_eh_template *t, uint8_t *table, size_t n)
{
    memset(table + t->cie_size + n * t->fde_size, 0, 4); /* the terminator */
}

#ifndef _WIN32
unsigned ehframe_register(uint8_t *eh)
{
    unwinders u = find_unwinders();
    unsigned registered = 0;
    if (u.gcc_add) {
        u.gcc_add(eh);
        registered |= SR_UNWINDER_LIBGCC;
    }
    if (u.llvm_add) {
        u.llvm_add((uintptr_t)eh);
        registered |= SR_UNWINDER_LLVM;
    }
    return registered;
}

void ehframe_deregister(uint8_t *eh, unsigned registered)
{
    unwinders u = find_unwinders();
    if ((registered & SR_UNWINDER_LIBGCC) && u.gcc_remove)
        u.gcc_remove(eh);
    if ((registered & SR_UNWINDER_LLVM) && u.llvm_remove)
        u.llvm_remove((uintptr_t)eh);
}
#endif
