/* objfile.h - a format-neutral view of one relocatable object file.
 *
 * Filled by llvm/objreader.cpp from LLVM's object library; everything after this
 * stage works on these plain structs only. */
#ifndef STENCILGEN_OBJFILE_H
#define STENCILGEN_OBJFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum obj_sec_kind {
    OBJ_SEC_OTHER,    /* not loaded: symbol tables, notes, relocation sections */
    OBJ_SEC_CODE,     /* allocated, executable */
    OBJ_SEC_RODATA,   /* allocated, read-only */
    OBJ_SEC_DATA,     /* allocated, writable */
    OBJ_SEC_BSS,      /* allocated, no file contents */
    OBJ_SEC_EH_FRAME, /* unwind tables */
    OBJ_SEC_PDATA,    /* COFF .pdata: RUNTIME_FUNCTION entries */
    OBJ_SEC_XDATA,    /* COFF .xdata: the UNWIND_INFO they point at */
} obj_sec_kind;

typedef enum obj_format { OBJ_FORMAT_ELF, OBJ_FORMAT_COFF, OBJ_FORMAT_MACHO } obj_format;

/* The one section not loaded whose bytes are read: what an ELF object says it
 * was built with (property_notes.h). */
#define OBJ_PROPERTY_NOTE ".note.gnu.property"

typedef struct obj_section {
    char *name; /* Mach-O: "segment,section", e.g. "__TEXT,__text" */
    obj_sec_kind kind;
    uint8_t *bytes; /* owned copy; NULL for OBJ_SEC_BSS and OBJ_SEC_OTHER but OBJ_PROPERTY_NOTE */
    uint64_t size;
    uint64_t align;
    /* Where the object places it: Mach-O sections share one address space
     * (its unwind tables are resolved in it, see obj_reloc); 0 elsewhere. */
    uint64_t addr;
    /* SHF_MERGE: the linker may fold equal pieces (constants of entsize bytes,
     * or NUL-terminated strings when `strings`), so its bytes are pieces that
     * symbols name, not one object (split.c takes pieces). */
    bool merge;
    bool strings;
    /* COFF IMAGE_SCN_LNK_COMDAT: a section -ffunction-sections or
     * -fdata-sections made for one definition (.rdata$table), where a section
     * named in the source (section(".rdata$x")) has none (split.c). */
    bool comdat;
} obj_section;

typedef struct obj_symbol {
    char *name; /* as C names it: Mach-O's leading '_' is dropped */
    int section; /* index into secs, -1 when undefined or absolute */
    uint64_t value;
    uint64_t size;
    bool global;
    bool undefined;
    bool is_section;  /* a section symbol (names the section itself) */
    bool is_function;
} obj_symbol;

/* As ELF's RELA: the value is S + addend, PC-relative ones minus the field's
 * own address. A COFF relocation's addend is the one it keeps in the bytes it
 * patches (and what it measures from: REL32_N from N bytes past the field's
 * end); the reader moves it here and zeroes the field. Mach-O likewise, and
 * its ARM64_RELOC_ADDEND is folded into the relocation it precedes; its type
 * is r_type | r_length << 8 (the field's width is not in the type), a
 * relocation against a section (r_extern 0) names that section's symbol,
 * and the reader resolves the __eh_frame's relocations (SUBTRACTOR pairs)
 * itself, in the object's address space (obj_section.addr). ARM64 COFF has
 * no GOT, but a dllimport symbol's address is loaded from its import slot,
 * __imp_NAME: the reader names the symbol NAME and sets OBJ_COFF_IMPORT_SLOT
 * in the types of the relocations that reach the slot. */
#define OBJ_COFF_IMPORT_SLOT 0x10000u
typedef struct obj_reloc {
    int section; /* index of the section the relocation applies to */
    uint64_t offset;
    uint32_t type;
    char type_name[40]; /* e.g. "R_X86_64_PLT32" */
    int symbol;         /* index into syms, -1 for none */
    int64_t addend;
} obj_reloc;

typedef struct objfile {
    char format[32]; /* e.g. "elf64-x86-64", "COFF-x86-64", "Mach-O arm64" */
    obj_format kind;
    unsigned machine;   /* ELF e_machine (COFF and Mach-O machines are mapped to it) */
    bool is64;          /* 64-bit addresses (ELFCLASS64, PE32+) */
    bool little_endian;
    char rel_section[64]; /* first relocation section without explicit addends (REL), or "" */
    obj_section *secs;
    size_t nsecs;
    obj_symbol *syms;
    size_t nsyms;
    obj_reloc *relocs; /* sorted by (section, offset) */
    size_t nrelocs;
} objfile;

/* Parse an object held in memory (e.g. a cache entry). */
bool objfile_parse(const uint8_t *buf, size_t size, objfile *o, char *err, size_t errsz);
/* Read and parse `path`. On failure writes a message into err. */
bool objfile_load(const char *path, objfile *o, char *err, size_t errsz);
void objfile_free(objfile *o);
/* Whether the object is of format `kind`, made for a 64-bit little-endian
 * machine `machine` (ELF e_machine), and, if ELF, has only RELA relocations
 * (explicit addends, which is all stencilgen reads); otherwise writes what it
 * is into err. */
bool objfile_is_for(const objfile *o, obj_format kind, unsigned machine, char *err,
                    size_t errsz);
/* Index of the symbol named `name` that is defined, or -1. */
int objfile_find_defined(const objfile *o, const char *name);

#endif
