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
 *   Breakpoint 1, tinyvm_breakpoint (v=50) at ../stencils/main.c:41
 *   #0  tinyvm_breakpoint (v=50) at ../stencils/main.c:41
 *   #1  0x00007ffff7cb0027 in native@inner[1] ()
 *   #2  0x0000555555557865 in vm_run (vm=<optimized out>, ...) at ../stencils/main.c:23
 *   #3  0x00007ffff7cb105c in call@middle[3] ()
 *   #4  0x0000555555557865 in vm_run (vm=<optimized out>, ...) at ../stencils/main.c:23
 *   #5  0x00007ffff7cb204b in call@outer[2] ()
 *   #6  0x0000555555557865 in vm_run (vm=<optimized out>, ...) at ../stencils/main.c:23
 *   #7  0x00007ffff7cb3040 in call@main[1] ()
 *   #8  0x0000555555557865 in vm_run (vm=vm@entry=0x7fffffffe5c0, ...) at ../stencils/main.c:23
 *   #9  0x000055555555754c in main (argc=<optimized out>, ...) at ../stencils/main.c:119
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
 * What GDB 13 does per registration (measured, see runtime.c): it rebuilds
 * and sorts its map of every allocated section of every object file, and
 * re-sets its internal breakpoints with minimal-symbol lookups in every object
 * file. So the cost of one registration grows with the allocated sections
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

struct gdbjit_entry {
    struct jit_code_entry entry;
    uint8_t *image;
};

/* Section layout: [0] null, [1..ntext] .text (one per code range), then
 * .eh_frame, .shstrtab, .symtab, .strtab. */
static const char shstrtab[] = "\0.text\0.eh_frame\0.shstrtab\0.symtab\0.strtab";
enum { NAME_TEXT = 1, NAME_EH_FRAME = 7, NAME_SHSTRTAB = 17, NAME_SYMTAB = 27, NAME_STRTAB = 35 };

static size_t align8(size_t v)
{
    return (v + 7) & ~(size_t)7;
}

static void fill_header(elf_header *h, unsigned machine, size_t shoff, size_t nsections)
{
    *h = (elf_header){
        .ident = {0x7f, 'E', 'L', 'F', ELFCLASS64, ELFDATA2LSB, EV_CURRENT},
        .type = ET_REL,
        .machine = (uint16_t)machine,
        .version = EV_CURRENT,
        .shoff = shoff,
        .ehsize = sizeof(elf_header),
        .shentsize = sizeof(elf_section),
        .shnum = (uint16_t)nsections,
        .shstrndx = (uint16_t)(nsections - 3),
    };
}

/* Where each part of the image goes. */
typedef struct layout {
    size_t nsections, sec_eh, sec_shstr, sec_sym, sec_str;
    size_t off_sh, off_shstr, off_str, off_sym, off_eh, total;
    size_t strtab_size, nsyms;
} layout;

static layout plan(size_t ntext, const gdbjit_symbol *syms, size_t nsyms, size_t eh_size)
{
    static const char file_name[] = "stencilrt-jit";
    layout l = {0};
    l.nsections = 1 + ntext + 4;
    l.sec_eh = 1 + ntext;
    l.sec_shstr = l.sec_eh + 1;
    l.sec_sym = l.sec_eh + 2;
    l.sec_str = l.sec_eh + 3;
    l.strtab_size = 1 + sizeof file_name;
    for (size_t i = 0; i < nsyms; i++)
        l.strtab_size += strlen(syms[i].name) + 1;
    l.nsyms = nsyms + 2; /* null symbol, file symbol */
    l.off_sh = align8(sizeof(elf_header));
    l.off_shstr = l.off_sh + l.nsections * sizeof(elf_section);
    l.off_str = l.off_shstr + sizeof shstrtab;
    l.off_sym = align8(l.off_str + l.strtab_size);
    l.off_eh = align8(l.off_sym + l.nsyms * sizeof(elf_symbol));
    l.total = l.off_eh + eh_size;
    return l;
}

static void fill_symbols(uint8_t *img, const layout *l, const gdbjit_section *text,
                         const gdbjit_symbol *syms, size_t nsyms)
{
    static const char file_name[] = "stencilrt-jit";
    char *str = (char *)img + l->off_str;
    elf_symbol *sym = (elf_symbol *)(img + l->off_sym);
    size_t stroff = 1;
    memcpy(str + stroff, file_name, sizeof file_name);
    sym[1] = (elf_symbol){.name = (uint32_t)stroff, .info = ELF_ST_INFO(STB_LOCAL, STT_FILE),
                          .shndx = SHN_ABS};
    stroff += sizeof file_name;
    for (size_t i = 0; i < nsyms; i++) {
        size_t len = strlen(syms[i].name) + 1;
        memcpy(str + stroff, syms[i].name, len);
        /* ET_REL: a value is an offset into its section, whose sh_addr is real. */
        sym[i + 2] = (elf_symbol){.name = (uint32_t)stroff,
                                  .info = ELF_ST_INFO(STB_GLOBAL, STT_FUNC),
                                  .shndx = (uint16_t)(1 + syms[i].section),
                                  .value = syms[i].addr - text[syms[i].section].addr,
                                  .size = syms[i].size};
        stroff += len;
    }
}

gdbjit_entry *gdbjit_register(unsigned machine, const gdbjit_section *text, size_t ntext,
                              const uint8_t *eh_frame, size_t eh_size,
                              const gdbjit_symbol *syms, size_t nsyms)
{
    layout l = plan(ntext, syms, nsyms, eh_size);
    gdbjit_entry *e = calloc(1, sizeof *e);
    uint8_t *img = calloc(1, l.total);
    if (!e || !img || l.nsections > 0xff00) {
        free(e);
        free(img);
        return NULL;
    }
    fill_header((elf_header *)img, machine, l.off_sh, l.nsections);
    elf_section *sh = (elf_section *)(img + l.off_sh);
    for (size_t i = 0; i < ntext; i++)
        sh[1 + i] = (elf_section){.name = NAME_TEXT, .type = SHT_NOBITS,
                                  .flags = SHF_ALLOC | SHF_EXECINSTR, .addr = text[i].addr,
                                  .offset = l.off_eh, .size = text[i].size, .addralign = 16};
    /* Not SHF_ALLOC: see the top of the file. Its pointers are absolute, so
     * its own address does not matter. */
    sh[l.sec_eh] = (elf_section){.name = NAME_EH_FRAME, .type = SHT_PROGBITS, .offset = l.off_eh,
                                 .size = eh_size, .addralign = 8};
    sh[l.sec_shstr] = (elf_section){.name = NAME_SHSTRTAB, .type = SHT_STRTAB,
                                    .offset = l.off_shstr, .size = sizeof shstrtab,
                                    .addralign = 1};
    /* info: one past the last local symbol (the null and file symbols). */
    sh[l.sec_sym] = (elf_section){.name = NAME_SYMTAB, .type = SHT_SYMTAB, .offset = l.off_sym,
                                  .size = l.nsyms * sizeof(elf_symbol),
                                  .link = (uint32_t)l.sec_str, .info = 2, .addralign = 8,
                                  .entsize = sizeof(elf_symbol)};
    sh[l.sec_str] = (elf_section){.name = NAME_STRTAB, .type = SHT_STRTAB, .offset = l.off_str,
                                  .size = l.strtab_size, .addralign = 1};
    memcpy(img + l.off_shstr, shstrtab, sizeof shstrtab);
    fill_symbols(img, &l, text, syms, nsyms);
    memcpy(img + l.off_eh, eh_frame, eh_size);

    e->image = img;
    e->entry.symfile_addr = (const char *)img;
    e->entry.symfile_size = l.total;
    /* Link in and tell GDB (the caller holds the registry lock). */
    e->entry.next_entry = __jit_debug_descriptor.first_entry;
    if (e->entry.next_entry)
        e->entry.next_entry->prev_entry = &e->entry;
    __jit_debug_descriptor.first_entry = &e->entry;
    __jit_debug_descriptor.relevant_entry = &e->entry;
    __jit_debug_descriptor.action_flag = JIT_REGISTER_FN;
    __jit_debug_register_code();
    return e;
}

void gdbjit_unregister(gdbjit_entry *e)
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
    free(e->image);
    free(e);
}
