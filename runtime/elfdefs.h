/* elfdefs.h - the few ELF64 definitions the runtime writes (System V gABI):
 * GDB's in-memory objects (gdbjit.c) and the machine field of perf's jitdump
 * header (perf.c). One small set of our own instead of the system's <elf.h>,
 * so both files use the same names and the runtime needs no libc extension.
 * Not named elf.h: runtime/ is on every consumer's include path, and <link.h>
 * includes <elf.h>. Little-endian 64-bit only, like the rest of the runtime. */
#ifndef STENCILRT_ELFDEFS_H
#define STENCILRT_ELFDEFS_H

#include <stdint.h>

typedef struct elf_header {
    uint8_t ident[16]; /* magic, class, data, version, then zeros */
    uint16_t type, machine;
    uint32_t version;
    uint64_t entry, phoff, shoff;
    uint32_t flags;
    uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx;
} elf_header;

typedef struct elf_section {
    uint32_t name, type;
    uint64_t flags, addr, offset, size;
    uint32_t link, info;
    uint64_t addralign, entsize;
} elf_section;

typedef struct elf_symbol {
    uint32_t name;
    uint8_t info, other;
    uint16_t shndx;
    uint64_t value, size;
} elf_symbol;

/* The gABI's sizes: every field is naturally aligned, so there is no padding. */
_Static_assert(sizeof(elf_header) == 64, "Elf64_Ehdr");
_Static_assert(sizeof(elf_section) == 64, "Elf64_Shdr");
_Static_assert(sizeof(elf_symbol) == 24, "Elf64_Sym");

enum { ELFCLASS64 = 2, ELFDATA2LSB = 1, EV_CURRENT = 1, ET_REL = 1 };
enum { EM_NONE = 0, EM_X86_64 = 62, EM_AARCH64 = 183 };
enum { SHT_PROGBITS = 1, SHT_SYMTAB = 2, SHT_STRTAB = 3, SHT_NOBITS = 8 };
enum { SHF_ALLOC = 2, SHF_EXECINSTR = 4 };
enum { STB_LOCAL = 0, STB_GLOBAL = 1, STT_FUNC = 2, STT_FILE = 4 };
enum { SHN_ABS = 0xfff1 };

/* A symbol's info byte: binding in the high nibble, type in the low. */
#define ELF_ST_INFO(bind, type) ((uint8_t)(((bind) << 4) | (type)))

#endif
