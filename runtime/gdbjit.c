/* gdbjit.c - GDB's JIT interface: for each registration an in-memory ELF
 * relocatable object with one .text (NOBITS) section per code range at its real
 * address, the .eh_frame that unwinds them and a symbol table naming what runs
 * there.
 *
 * Using it: nothing to set up. GDB looks for __jit_debug_register_code and
 * __jit_debug_descriptor (below) in every program it runs or attaches to, so
 * it learns of each executor as it is emitted (STENCILRT_GDB=0 turns this
 * off). JIT frames are named <op>@<executor>[<instruction>] and GDB unwinds
 * through them. Here the demo program stops in a C helper called by the
 * innermost of three JIT functions:
 *
 *   $ gdb -batch -nx -ex 'break tinyvm_breakpoint' -ex run -ex bt \
 *         --args build/stencils/tinyvm stencils/programs/reenter.tvm
 *   Breakpoint 1, tinyvm_breakpoint (v=50) at ../stencils/natives.c
 *   #0  tinyvm_breakpoint (v=50) at ../stencils/natives.c
 *   #1  0x00007ffff7cb0027 in native@inner[1] ()
 *   #2  0x0000555555557865 in vm_run (vm=<optimized out>, ...) at ../stencils/natives.c
 *   #3  0x00007ffff7cb105c in call@middle[3] ()
 *   #4  0x0000555555557865 in vm_run (vm=<optimized out>, ...) at ../stencils/natives.c
 *   #5  0x00007ffff7cb204b in call@outer[2] ()
 *   #6  0x0000555555557865 in vm_run (vm=<optimized out>, ...) at ../stencils/natives.c
 *   #7  0x00007ffff7cb3040 in call@main[1] ()
 *   #8  0x0000555555557865 in vm_run (vm=vm@entry=0x7fffffffe5c0, ...) at ../stencils/natives.c
 *   #9  0x000055555555754c in main (argc=<optimized out>, ...) at ../stencils/main.c
 *
 * The symbols work wherever GDB takes an address (same session, frame 1):
 *
 *   (gdb) info symbol $pc
 *   native@inner[1] + 20 in section .text of <in-memory@0x55555556b470>
 *   (gdb) x/2i 'call@middle[3]'
 *      0x7ffff7cb102b <call@middle[3]>:     push   %rax
 *      0x7ffff7cb102c <call@middle[3]+1>:   mov    0x5d(%rip),%rdx        # 0x7ffff7cb1090
 *
 * Code emitted one executor at a time can be told to GDB in batches between
 * sr_gdb_hold and sr_gdb_release (stencilrt.h): see the cost below.
 *
 * How it works:
 *
 * What GDB 13 does per registration (measured: docs/runtime.md, "GDB and
 * LLDB", and the bench's registration rows): it rebuilds and sorts its map of
 * every allocated section of every object file, and re-sets its internal
 * breakpoints with minimal-symbol lookups in every object file. So the cost of one registration grows with the allocated sections
 * alive, and the objects alive: callers pass as few code ranges as they can,
 * and .eh_frame is not allocated (GDB finds it by name; an allocated one would
 * be one more section in that map, at a heap address). Real, distinct section
 * addresses keep GDB from treating sections as overlapping. */
#include <stdlib.h>
#include <string.h>

#include "elfdefs.h"
#include "internal.h"

/* The interface GDB looks up by name (GDB manual, "JIT Interface"). They must be
 * global, default visibility, and the function must never be inlined or
 * removed, so that GDB's breakpoint on it fires. */
enum { JIT_NOACTION = 0, JIT_REGISTER_FN, JIT_UNREGISTER_FN };

struct jit_code_entry {
    struct jit_code_entry *next_entry;
    struct jit_code_entry *prev_entry;
    const char *symfile_addr;
    uint64_t symfile_size;
};

struct jit_descriptor {
    uint32_t version;
    uint32_t action_flag;
    struct jit_code_entry *relevant_entry;
    struct jit_code_entry *first_entry;
};

__attribute__((visibility("default"), used)) struct jit_descriptor __jit_debug_descriptor = {
    1, JIT_NOACTION, NULL, NULL};

__attribute__((visibility("default"), used, noinline)) void __jit_debug_register_code(void);
__attribute__((visibility("default"), used, noinline)) void __jit_debug_register_code(void)
{
    __asm__ volatile("" ::: "memory"); /* GDB sets a breakpoint here */
}

/* One allocation: the entry GDB walks, then the image it reads. */
struct gdbjit_entry {
    struct jit_code_entry entry;
    size_t capacity; /* bytes of image[] */
    _Alignas(8) uint8_t image[];
};

/* The smallest spare that holds `size` bytes without wasting more than it
 * uses, taken out of s; NULL if none. */
static gdbjit_entry *take_spare(gdbjit_spares *s, size_t size)
{
    size_t best = SIZE_MAX;
    for (size_t i = 0; s && i < s->n; i++) {
        size_t cap = s->entry[i]->capacity;
        if (cap >= size && cap - size <= size &&
            (best == SIZE_MAX || cap < s->entry[best]->capacity))
            best = i;
    }
    if (best == SIZE_MAX)
        return NULL;
    gdbjit_entry *e = s->entry[best];
    s->entry[best] = s->entry[--s->n];
    s->bytes -= e->capacity;
    return e;
}

void gdbjit_spares_free(gdbjit_spares *s)
{
    while (s->n)
        free(s->entry[--s->n]);
    s->bytes = 0;
}

/* Section layout: [0] null, [1..ntext] .text (one per code range), then
 * .eh_frame, .shstrtab, .symtab, .strtab. */
static const char shstrtab[] = "\0.text\0.eh_frame\0.shstrtab\0.symtab\0.strtab";
enum { NAME_TEXT = 1, NAME_EH_FRAME = 7, NAME_SHSTRTAB = 17, NAME_SYMTAB = 27, NAME_STRTAB = 35 };
/* The file symbol's name, the first in .strtab after its empty string. */
static const char file_name[] = "stencilrt-jit";

static size_t align8(size_t v)
{
    return (v + 7) & ~(size_t)7;
}

/* The image's parts: ELF header, section headers, .shstrtab, .strtab,
 * .symtab, .eh_frame. Everything but the text sections, the symbols after
 * the file symbol, their names and the .eh_frame's bytes is written here. */
bool gdbjit_begin(gdbjit_writer *w, gdbjit_spares *spares, unsigned machine, size_t ntext,
                  size_t nsyms, size_t names_size, size_t eh_size)
{
    size_t nsections = 1 + ntext + 4, sec_eh = 1 + ntext;
    if (nsections > 0xff00 || nsyms > SIZE_MAX / 64 || names_size > UINT32_MAX / 2 ||
        eh_size > SIZE_MAX / 4)
        return false;
    size_t strtab_size = 1 + sizeof file_name + names_size;
    size_t nelf_syms = nsyms + 2; /* null symbol, file symbol */
    size_t off_sh = align8(sizeof(elf_header));
    size_t off_shstr = off_sh + nsections * sizeof(elf_section);
    size_t off_str = off_shstr + sizeof shstrtab;
    size_t off_sym = align8(off_str + strtab_size);
    size_t off_eh = align8(off_sym + nelf_syms * sizeof(elf_symbol));
    size_t total = off_eh + eh_size;
    gdbjit_entry *e = take_spare(spares, total);
    if (!e && (e = malloc(sizeof *e + total)))
        e->capacity = total;
    if (!e)
        return false;
    uint8_t *img = e->image;
    e->entry = (struct jit_code_entry){.symfile_addr = (const char *)img, .symfile_size = total};
    *(elf_header *)img = (elf_header){
        .ident = {0x7f, 'E', 'L', 'F', ELFCLASS64, ELFDATA2LSB, EV_CURRENT},
        .type = ET_REL,
        .machine = (uint16_t)machine,
        .version = EV_CURRENT,
        .shoff = off_sh,
        .ehsize = sizeof(elf_header),
        .shentsize = sizeof(elf_section),
        .shnum = (uint16_t)nsections,
        .shstrndx = (uint16_t)(nsections - 3),
    };
    memset(img + sizeof(elf_header), 0, off_sh - sizeof(elf_header));
    elf_section *sh = (elf_section *)(img + off_sh);
    sh[0] = (elf_section){0};
    /* Not SHF_ALLOC: see the top of the file. Its pointers are absolute, so
     * its own address does not matter. */
    sh[sec_eh] = (elf_section){.name = NAME_EH_FRAME, .type = SHT_PROGBITS, .offset = off_eh,
                               .size = eh_size, .addralign = 8};
    sh[sec_eh + 1] = (elf_section){.name = NAME_SHSTRTAB, .type = SHT_STRTAB,
                                   .offset = off_shstr, .size = sizeof shstrtab,
                                   .addralign = 1};
    /* info: one past the last local symbol (the null and file symbols). */
    sh[sec_eh + 2] = (elf_section){.name = NAME_SYMTAB, .type = SHT_SYMTAB, .offset = off_sym,
                                   .size = nelf_syms * sizeof(elf_symbol),
                                   .link = (uint32_t)(sec_eh + 3), .info = 2, .addralign = 8,
                                   .entsize = sizeof(elf_symbol)};
    sh[sec_eh + 3] = (elf_section){.name = NAME_STRTAB, .type = SHT_STRTAB, .offset = off_str,
                                   .size = strtab_size, .addralign = 1};
    memcpy(img + off_shstr, shstrtab, sizeof shstrtab);
    img[off_str] = 0;
    memcpy(img + off_str + 1, file_name, sizeof file_name);
    memset(img + off_str + strtab_size, 0, off_sym - (off_str + strtab_size));
    elf_symbol *sym = (elf_symbol *)(img + off_sym);
    sym[0] = (elf_symbol){0};
    sym[1] = (elf_symbol){.name = 1, .info = ELF_ST_INFO(STB_LOCAL, STT_FILE), .shndx = SHN_ABS};
    memset(img + off_sym + nelf_syms * sizeof(elf_symbol), 0,
           off_eh - (off_sym + nelf_syms * sizeof(elf_symbol)));
    *w = (gdbjit_writer){.entry = e, .img = img, .eh_frame = img + off_eh, .off_sh = off_sh,
                         .off_str = off_str, .off_sym = off_sym, .nsyms = 0,
                         .stroff = 1 + sizeof file_name};
    return true;
}

void gdbjit_add_text(gdbjit_writer *w, size_t i, uint64_t addr, uint64_t size)
{
    elf_section *sh = (elf_section *)(w->img + w->off_sh);
    sh[1 + i] = (elf_section){.name = NAME_TEXT, .type = SHT_NOBITS,
                              .flags = SHF_ALLOC | SHF_EXECINSTR, .addr = addr,
                              .offset = (uint64_t)(w->eh_frame - w->img), .size = size,
                              .addralign = 16};
}

uint32_t gdbjit_add_names(gdbjit_writer *w, const char *names, size_t size)
{
    size_t at = w->stroff;
    memcpy(w->img + w->off_str + at, names, size);
    w->stroff += size;
    return (uint32_t)at;
}

void gdbjit_add_symbol(gdbjit_writer *w, uint32_t name, uint64_t addr, uint64_t size,
                       size_t text)
{
    const elf_section *sh = (const elf_section *)(w->img + w->off_sh);
    elf_symbol *sym = (elf_symbol *)(w->img + w->off_sym);
    /* ET_REL: a value is an offset into its section, whose sh_addr is real. */
    sym[2 + w->nsyms++] = (elf_symbol){.name = name, .info = ELF_ST_INFO(STB_GLOBAL, STT_FUNC),
                                       .shndx = (uint16_t)(1 + text),
                                       .value = addr - sh[1 + text].addr, .size = size};
}

/* Link in and tell GDB (the caller holds the registry lock). */
gdbjit_entry *gdbjit_publish(gdbjit_writer *w)
{
    gdbjit_entry *e = w->entry;
    e->entry.next_entry = __jit_debug_descriptor.first_entry;
    if (e->entry.next_entry)
        e->entry.next_entry->prev_entry = &e->entry;
    __jit_debug_descriptor.first_entry = &e->entry;
    __jit_debug_descriptor.relevant_entry = &e->entry;
    __jit_debug_descriptor.action_flag = JIT_REGISTER_FN;
    __jit_debug_register_code();
    return e;
}

gdbjit_entry *gdbjit_register(unsigned machine, const gdbjit_section *text, size_t ntext,
                              const uint8_t *eh_frame, size_t eh_size,
                              const gdbjit_symbol *syms, size_t nsyms)
{
    size_t names_size = 0;
    for (size_t i = 0; i < nsyms; i++)
        names_size += strlen(syms[i].name) + 1;
    gdbjit_writer w;
    if (!gdbjit_begin(&w, NULL, machine, ntext, nsyms, names_size, eh_size))
        return NULL;
    for (size_t i = 0; i < ntext; i++)
        gdbjit_add_text(&w, i, text[i].addr, text[i].size);
    for (size_t i = 0; i < nsyms; i++)
        gdbjit_add_symbol(&w, gdbjit_add_names(&w, syms[i].name, strlen(syms[i].name) + 1),
                      syms[i].addr, syms[i].size, syms[i].section);
    memcpy(w.eh_frame, eh_frame, eh_size);
    return gdbjit_publish(&w);
}

void gdbjit_unregister(gdbjit_entry *e, gdbjit_spares *keep)
{
    if (!e)
        return;
    struct jit_code_entry *j = &e->entry;
    if (j->prev_entry)
        j->prev_entry->next_entry = j->next_entry;
    else
        __jit_debug_descriptor.first_entry = j->next_entry;
    if (j->next_entry)
        j->next_entry->prev_entry = j->prev_entry;
    __jit_debug_descriptor.relevant_entry = j;
    __jit_debug_descriptor.action_flag = JIT_UNREGISTER_FN;
    __jit_debug_register_code();
    __jit_debug_descriptor.relevant_entry = NULL;
    __jit_debug_descriptor.action_flag = JIT_NOACTION;
    if (keep && keep->n < GDBJIT_SPARES && e->capacity <= GDBJIT_SPARE_BYTES - keep->bytes) {
        keep->entry[keep->n++] = e;
        keep->bytes += e->capacity;
    } else {
        free(e);
    }
}
