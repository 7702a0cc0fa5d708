/* gdbjit.c - GDB's JIT interface: for each registration an in-memory ELF
 * relocatable object whose .text (NOBITS) sits at the code's real address, with
 * the .eh_frame that unwinds it and a symbol table naming what runs there.
 * Real, distinct section addresses keep GDB fast with many objects. */
#include <stdlib.h>
#include <string.h>

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

/* ELF64 structures (from the System V gABI), spelled out to need no <elf.h>. */
typedef struct {
    uint8_t ident[16];
    uint16_t type, machine;
    uint32_t version;
    uint64_t entry, phoff, shoff;
    uint32_t flags;
    uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx;
} elf_header;

typedef struct {
    uint32_t name, type;
    uint64_t flags, addr, offset, size;
    uint32_t link, info;
    uint64_t addralign, entsize;
} elf_section;

typedef struct {
    uint32_t name;
    uint8_t info, other;
    uint16_t shndx;
    uint64_t value, size;
} elf_symbol;

enum { SEC_NULL, SEC_TEXT, SEC_EH_FRAME, SEC_SHSTRTAB, SEC_SYMTAB, SEC_STRTAB, SEC__COUNT };
enum { SHT_PROGBITS = 1, SHT_SYMTAB = 2, SHT_STRTAB = 3, SHT_NOBITS = 8 };
enum { SHF_ALLOC = 2, SHF_EXECINSTR = 4 };
enum { STB_LOCAL = 0, STB_GLOBAL = 1, STT_FUNC = 2, STT_FILE = 4 };
enum { SHN_ABS = 0xfff1 };

static const char shstrtab[] = "\0.text\0.eh_frame\0.shstrtab\0.symtab\0.strtab";
enum { NAME_TEXT = 1, NAME_EH_FRAME = 7, NAME_SHSTRTAB = 17, NAME_SYMTAB = 27, NAME_STRTAB = 35 };

static size_t align8(size_t v)
{
    return (v + 7) & ~(size_t)7;
}

static void fill_header(elf_header *h, unsigned machine, size_t shoff)
{
    static const uint8_t ident[16] = {0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* LE */, 1};
    memcpy(h->ident, ident, sizeof ident);
    h->type = 1; /* ET_REL */
    h->machine = (uint16_t)machine;
    h->version = 1;
    h->shoff = shoff;
    h->ehsize = sizeof(elf_header);
    h->shentsize = sizeof(elf_section);
    h->shnum = SEC__COUNT;
    h->shstrndx = SEC_SHSTRTAB;
}

gdbjit_entry *gdbjit_register(unsigned machine, uint64_t text, size_t text_size,
                              const uint8_t *eh_frame, size_t eh_size,
                              const gdbjit_symbol *syms, size_t nsyms)
{
    static const char file_name[] = "stencilrt-jit";
    size_t strtab_size = 1 + sizeof file_name;
    for (size_t i = 0; i < nsyms; i++)
        strtab_size += strlen(syms[i].name) + 1;
    size_t nelfsyms = nsyms + 2; /* null symbol, file symbol */
    size_t off_sh = align8(sizeof(elf_header));
    size_t off_shstr = off_sh + SEC__COUNT * sizeof(elf_section);
    size_t off_str = off_shstr + sizeof shstrtab;
    size_t off_sym = align8(off_str + strtab_size);
    size_t off_eh = align8(off_sym + nelfsyms * sizeof(elf_symbol));
    size_t total = off_eh + eh_size;

    gdbjit_entry *e = calloc(1, sizeof *e);
    uint8_t *img = calloc(1, total);
    if (!e || !img) {
        free(e);
        free(img);
        return NULL;
    }
    fill_header((elf_header *)img, machine, off_sh);
    elf_section *sh = (elf_section *)(img + off_sh);
    sh[SEC_TEXT] = (elf_section){NAME_TEXT, SHT_NOBITS, SHF_ALLOC | SHF_EXECINSTR, text, off_eh,
                                 text_size, 0, 0, 16, 0};
    sh[SEC_EH_FRAME] = (elf_section){NAME_EH_FRAME, SHT_PROGBITS, SHF_ALLOC,
                                     (uint64_t)(uintptr_t)(img + off_eh), off_eh, eh_size, 0, 0,
                                     8, 0};
    sh[SEC_SHSTRTAB] = (elf_section){NAME_SHSTRTAB, SHT_STRTAB, 0, 0, off_shstr, sizeof shstrtab,
                                     0, 0, 1, 0};
    sh[SEC_SYMTAB] = (elf_section){NAME_SYMTAB, SHT_SYMTAB, 0, 0, off_sym,
                                   nelfsyms * sizeof(elf_symbol), SEC_STRTAB, 2, 8,
                                   sizeof(elf_symbol)};
    sh[SEC_STRTAB] = (elf_section){NAME_STRTAB, SHT_STRTAB, 0, 0, off_str, strtab_size, 0, 0, 1,
                                   0};
    memcpy(img + off_shstr, shstrtab, sizeof shstrtab);
    char *str = (char *)img + off_str;
    size_t stroff = 1;
    memcpy(str + stroff, file_name, sizeof file_name);
    elf_symbol *sym = (elf_symbol *)(img + off_sym);
    sym[1] = (elf_symbol){(uint32_t)stroff, (STB_LOCAL << 4) | STT_FILE, 0, SHN_ABS, 0, 0};
    stroff += sizeof file_name;
    for (size_t i = 0; i < nsyms; i++) {
        size_t len = strlen(syms[i].name) + 1;
        memcpy(str + stroff, syms[i].name, len);
        /* ET_REL: values are offsets into .text, whose sh_addr is the real address. */
        sym[i + 2] = (elf_symbol){(uint32_t)stroff, (STB_GLOBAL << 4) | STT_FUNC, 0, SEC_TEXT,
                                  syms[i].addr - text, syms[i].size};
        stroff += len;
    }
    memcpy(img + off_eh, eh_frame, eh_size);

    e->image = img;
    e->entry.symfile_addr = (const char *)img;
    e->entry.symfile_size = total;
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
