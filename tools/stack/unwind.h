/* unwind.h - one stopped thread's stack from its registers: JIT frames by the
 * registry's rule, native frames by their CFI (libdw), frame pointers where a
 * module has no CFI for a PC. */
#ifndef STENCILRT_STACK_UNWIND_H
#define STENCILRT_STACK_UNWIND_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "procmem.h"
#include "registry_reader.h"
#include "symbols.h"

#define UNWIND_MAX_DEPTH 256

typedef enum frame_kind {
    FRAME_NATIVE,     /* sym (or none) in module (or none) */
    FRAME_JIT,        /* op@executor[index] */
    FRAME_SHIM,       /* in a runtime's shim */
    FRAME_UNRESOLVED, /* JIT code (or an address in no module) that could not be named */
} frame_kind;

/* Names are copied: the reader's and libdwfl's strings do not outlive a snapshot. */
typedef struct frame {
    uint64_t pc;
    frame_kind kind;
    uint64_t id, index;  /* FRAME_JIT */
    char op[64];         /* FRAME_JIT */
    char executor[256];  /* FRAME_JIT (longer names are cut) */
    char sym[256];       /* FRAME_NATIVE: "" when no symbol covers pc */
    char module[128];    /* FRAME_NATIVE: "" when pc is in no module */
    uint64_t offset;     /* FRAME_NATIVE: pc - the symbol's start */
} frame;

typedef struct unwinder {
    symbols *syms;
    srr_reader *reader;  /* NULL: no JIT frames */
    procmem *mem;
    uint64_t pac_mask;
    bool resnapshot;     /* a PC in no module may re-read the registry once per stop */
    long long last_refresh_ns; /* when the module list was last re-read */
    uint64_t jit_frames, unresolved; /* counted over every call */
} unwinder;

/* Fills frames[0..n) innermost first and returns n; *reached_main says a
 * frame's symbol is `main`. The thread must be stopped. */
int unwind_thread(unwinder *u, const regs *start, frame *frames, int max, bool *reached_main);

#endif
