/* symbols.h - the target's modules through libdwfl: finding a symbol by name
 * (.symtab, or .dynsym when stripped), naming an address, and the CFI row
 * that holds at an address. */
#ifndef STENCILRT_STACK_SYMBOLS_H
#define STENCILRT_STACK_SYMBOLS_H

#include <elfutils/libdw.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct symbols symbols;

/* Reports the modules mapped in pid (/proc/PID/maps). NULL with err set on failure. */
symbols *symbols_open(pid_t pid, char *err, size_t errlen);
void symbols_close(symbols *s);

/* Reports the modules again (after a dlopen, say). */
bool symbols_refresh(symbols *s);

/* The address of a defined symbol called name in any module, and that module's basename. */
bool symbols_find(symbols *s, const char *name, uint64_t *addr, const char **module);

typedef struct sym_info {
    const char *module; /* basename; NULL: in no module */
    bool has_elf;       /* the module's ELF file could be read */
    const char *name;   /* NULL: no symbol covers it */
    uint64_t offset;    /* from the symbol's start */
} sym_info;

/* Names addr (a return address's caller is named by passing its pc - 1). */
void symbols_describe(symbols *s, uint64_t addr, sym_info *out);

/* The CFI row at addr (pc - 1 for return addresses): .eh_frame, else
 * .debug_frame. The frame is malloc'ed: free() it. */
Dwarf_Frame *symbols_frame(symbols *s, uint64_t addr);

#endif
