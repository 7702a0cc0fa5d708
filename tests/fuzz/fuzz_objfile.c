/* fuzz_objfile.c - libFuzzer target for the object reader: objfile_parse
 * (generator/objfile.c), that is LLVM's object library and the normalisation
 * in generator/llvm/objreader.cpp (COFF and Mach-O implicit addends,
 * ARM64_RELOC_ADDEND pairs, __eh_frame SUBTRACTOR pairs resolved in place,
 * section, symbol and relocation tables, symbol sizes).
 *
 * Input: the bytes of an object file (ELF, COFF or Mach-O), as the compiler
 * or the cache hands them over. Besides "no crash, no leak, no hang", the
 * target checks what objfile.h promises and later stages rely on, and traps
 * when one breaks: a failure carries a message and leaves an empty objfile;
 * a success has a name for every section and symbol, a section's bytes are
 * `size` bytes long (every byte is read, so ASan sees a short copy), indices
 * are in range, relocations are sorted by (section, offset). Then it runs
 * the format-neutral consumers every caller runs on what it read
 * (objfile_is_for for each format and machine stencilgen reads,
 * objfile_find_defined for every symbol's name, pn_object_features on its
 * property note).
 *
 * Known crashes, kept out (elf_known_crash): ELF inputs that abort in LLVM
 * before objreader.cpp can refuse them. A section whose sh_addralign is
 * not a power of two fails an assertion in SectionRef::getAlignment (an
 * inline of llvm/Object/ObjectFile.h compiled into objreader.cpp's
 * read_sections; meson builds it without NDEBUG). ELFObjectFile's symbol and
 * relocation accessors call report_fatal_error (abort) on a symbol table or a
 * REL/RELA table that is not an array of whole entries inside the file, or a
 * relocation section whose sh_link names no section, and divide by a
 * relocation section's sh_entsize (SIGFPE when 0); read_symbols and
 * read_relocations reach them through SymbolRef::getValue,
 * ELFSymbolRef::getSize/getBinding/getELFType and SectionRef::relocations.
 * COFFObjectFile::section_rel_begin calls report_fatal_error on a section
 * with relocations and a VirtualAddress other than 0 (coff_known_crash);
 * read_relocations reaches it through SectionRef::relocations.
 * Remove the checks once the generator validates these tables itself.
 *
 * The input is parsed from a copy followed by a NUL, as every object the
 * generator parses is (read_file NUL-terminates what it reads: a compiler's
 * output, or a cache entry, whose trailer follows the object): LLVM's
 * MachOObjectFile::getSymbolName takes a symbol's name with strlen, which
 * reads past the end of the file when its string table does not end in NUL.
 */
#include "objfile.h"
#include "property_notes.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        __builtin_trap();
}

static volatile uint8_t sink;

static uint64_t load(const uint8_t *p, unsigned n, int big)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[big ? n - 1 - i : i] << (8 * i);
    return v;
}

typedef struct elf_view {
    const uint8_t *data;
    size_t size;
    int is64, big;
} elf_view;

/* Field `f` of an ELF64 section header (offsets of the ELF32 one beside). */
enum { SH_TYPE, SH_OFFSET, SH_SIZE, SH_LINK, SH_ADDRALIGN, SH_ENTSIZE };

static uint64_t shdr_field(const elf_view *e, const uint8_t *sh, int f)
{
    static const unsigned off64[] = { 4, 0x18, 0x20, 0x28, 0x30, 0x38 };
    static const unsigned off32[] = { 4, 0x10, 0x14, 0x18, 0x20, 0x24 };
    unsigned n = e->is64 && f != SH_TYPE && f != SH_LINK ? 8 : 4;
    return load(sh + (e->is64 ? off64 : off32)[f], n, e->big);
}

/* Whether LLVM's getSectionContentsAsArray<T> reads the section as an array
 * of entries of `entry` bytes (aligned as they are). */
static int table_ok(const elf_view *e, const uint8_t *sh, uint64_t entry)
{
    uint64_t off = shdr_field(e, sh, SH_OFFSET), size = shdr_field(e, sh, SH_SIZE);
    uint64_t max = e->is64 ? UINT64_MAX : UINT32_MAX;
    return shdr_field(e, sh, SH_ENTSIZE) == entry && size % entry == 0 && max - off >= size &&
           off + size <= e->size && off % (e->is64 ? 8 : 4) == 0;
}

/* Whether data is an ELF file that hits one of the known crashes above. */
static int elf_known_crash(const uint8_t *data, size_t size)
{
    if (size < 64 || memcmp(data, "\x7f" "ELF", 4) || (data[4] != 1 && data[4] != 2))
        return 0;
    elf_view e = { data, size, data[4] == 2, data[5] == 2 };
    uint64_t shoff = e.is64 ? load(data + 0x28, 8, e.big) : load(data + 0x20, 4, e.big);
    uint64_t entsize = e.is64 ? 64 : 40;
    uint64_t shnum = load(data + (e.is64 ? 0x3c : 0x30), 2, e.big);
    if (shoff == 0 || shoff >= size || (size - shoff) / entsize == 0)
        return 0; /* no section table LLVM reads */
    if (shnum == 0) /* more than 0xff00 sections: the count is in section 0 */
        shnum = shdr_field(&e, data + shoff, SH_SIZE);
    if (shnum > (size - shoff) / entsize)
        return 0; /* LLVM refuses a section table past the end */
    uint64_t sym = e.is64 ? 24 : 16, rel = e.is64 ? 16 : 8, rela = e.is64 ? 24 : 12;
    int symtab_seen = 0;
    for (uint64_t i = 0; i < shnum; i++) {
        const uint8_t *sh = data + shoff + i * entsize;
        uint64_t type = shdr_field(&e, sh, SH_TYPE), align = shdr_field(&e, sh, SH_ADDRALIGN);
        if (align & (align - 1))
            return 1;
        if (type == 2 && !symtab_seen) { /* SHT_SYMTAB: LLVM reads the first */
            symtab_seen = 1;
            if (shdr_field(&e, sh, SH_SIZE) >= sym && !table_ok(&e, sh, sym))
                return 1;
        }
        if (type == 4 || type == 9) { /* SHT_RELA, SHT_REL */
            uint64_t es = shdr_field(&e, sh, SH_ENTSIZE);
            if (es == 0 || shdr_field(&e, sh, SH_LINK) >= shnum ||
                (shdr_field(&e, sh, SH_SIZE) / es && !table_ok(&e, sh, type == 4 ? rela : rel)))
                return 1;
        }
    }
    return 0;
}

static void check_tables(const objfile *o)
{
    check(o->nsecs == 0 || o->secs);
    for (size_t i = 0; i < o->nsecs; i++) {
        const obj_section *s = &o->secs[i];
        check(s->name != NULL);
        check(s->kind <= OBJ_SEC_XDATA);
        uint8_t sum = (uint8_t)strlen(s->name);
        /* Every stage after the reader indexes bytes[0, size). */
        if (s->bytes) {
            for (uint64_t j = 0; j < s->size; j++)
                sum += s->bytes[j];
        }
        sink = sum;
    }
    check(o->nsyms == 0 || o->syms);
    for (size_t i = 0; i < o->nsyms; i++) {
        const obj_symbol *y = &o->syms[i];
        check(y->name != NULL);
        check(y->section >= -1 && y->section < (int)o->nsecs);
    }
    check(o->nrelocs == 0 || o->relocs);
    for (size_t i = 0; i < o->nrelocs; i++) {
        const obj_reloc *r = &o->relocs[i];
        check(r->section >= -1 && r->section < (int)o->nsecs);
        check(r->symbol >= -1 && r->symbol < (int)o->nsyms);
        check(memchr(r->type_name, 0, sizeof r->type_name) != NULL);
        if (i > 0) {
            const obj_reloc *p = &o->relocs[i - 1];
            check(p->section < r->section || (p->section == r->section && p->offset <= r->offset));
        }
    }
    check(memchr(o->format, 0, sizeof o->format) != NULL);
    check(memchr(o->rel_section, 0, sizeof o->rel_section) != NULL);
}

/* Whether data starts as an ELF or a Mach-O file (one or fat): anything
 * else may be COFF. */
static int is_elf_or_macho(const uint8_t *data, size_t size)
{
    static const uint32_t macho[] = { 0xfeedface, 0xfeedfacf, 0xcefaedfe, 0xcffaedfe,
                                      0xcafebabe, 0xbebafeca, 0xcafebabf, 0xbfbafeca };
    if (size < 4)
        return 0;
    uint32_t magic = (uint32_t)load(data, 4, 1);
    for (size_t i = 0; i < sizeof macho / sizeof macho[0]; i++) {
        if (magic == macho[i])
            return 1;
    }
    return !memcmp(data, "\x7f" "ELF", 4);
}

/* Whether data may be a COFF file (an object, a /bigobj one or a PE image,
 * as LLVM reads them) with a section that has relocations (or says it has
 * more than 65535) at a VirtualAddress other than 0. */
static int coff_known_crash(const uint8_t *data, size_t size)
{
    uint64_t hdr = 0, table, nsecs;
    if (size >= 0x40 && data[0] == 'M' && data[1] == 'Z') { /* PE: "PE\0\0" at e_lfanew */
        hdr = load(data + 0x3c, 4, 0) + 4;
        if (hdr + 20 > size)
            return 0;
    }
    if (size >= 56 && !hdr && load(data, 4, 0) == 0xffff0000u) { /* bigobj */
        nsecs = load(data + 44, 4, 0);
        table = 56;
    } else {
        if (hdr + 20 > size)
            return 0;
        nsecs = load(data + hdr + 2, 2, 0);
        table = hdr + 20 + load(data + hdr + 16, 2, 0);
    }
    for (uint64_t i = 0; i < nsecs && table + i * 40 + 40 <= size; i++) {
        const uint8_t *sec = data + table + i * 40;
        if (load(sec + 12, 4, 0) != 0 &&
            (load(sec + 32, 2, 0) != 0 || (load(sec + 36, 4, 0) & 0x01000000u)))
            return 1;
    }
    return 0;
}

static const struct {
    obj_format kind;
    unsigned machine;
} wanted[] = {
    { OBJ_FORMAT_ELF, 62 },    /* x86_64-unknown-linux-gnu */
    { OBJ_FORMAT_ELF, 183 },   /* aarch64-unknown-linux-gnu */
    { OBJ_FORMAT_COFF, 62 },   /* x86_64-w64-windows-gnu */
    { OBJ_FORMAT_MACHO, 62 },  /* x86_64-apple-darwin */
    { OBJ_FORMAT_MACHO, 183 }, /* aarch64-apple-darwin */
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    objfile o;
    char err[512];
    if (elf_known_crash(data, size))
        return 0;
    if (!is_elf_or_macho(data, size) && coff_known_crash(data, size))
        return 0;
    err[0] = '\0';
    uint8_t *copy = malloc(size + 1);
    check(copy != NULL);
    if (size)
        memcpy(copy, data, size);
    copy[size] = '\0';
    memset(&o, 0xa5, sizeof o); /* objfile_parse must not read what it is given */
    bool parsed = objfile_parse(copy, size, &o, err, sizeof err);
    free(copy); /* the objfile owns copies of what it keeps */
    if (!parsed) {
        check(err[0] != '\0' && memchr(err, 0, sizeof err) != NULL);
        check(o.secs == NULL && o.syms == NULL && o.relocs == NULL);
        check(o.nsecs == 0 && o.nsyms == 0 && o.nrelocs == 0);
        objfile_free(&o); /* the caller may free it again */
        return 0;
    }
    check_tables(&o);
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        err[0] = '\0';
        if (!objfile_is_for(&o, wanted[i].kind, wanted[i].machine, err, sizeof err))
            check(err[0] != '\0');
    }
    for (size_t i = 0; i < o.nsyms; i++) {
        int d = objfile_find_defined(&o, o.syms[i].name);
        check(d >= -1 && d < (int)o.nsyms);
        if (d >= 0)
            check(!o.syms[d].undefined && o.syms[d].section >= 0 &&
                  !strcmp(o.syms[d].name, o.syms[i].name));
        else
            check(o.syms[i].undefined || o.syms[i].section < 0);
    }
    check(objfile_find_defined(&o, "") >= -1);
    uint32_t features;
    err[0] = '\0';
    if (!pn_object_features(&o, &features, err, sizeof err))
        check(err[0] != '\0' && features == 0);
    objfile_free(&o);
    return 0;
}
