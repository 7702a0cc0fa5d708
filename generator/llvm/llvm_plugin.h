/* llvm_plugin.h - the generator's LLVM and libclang half (objreader.cpp, disasm.cpp,
 * discover.c) is a module loaded on first use, so that a run with nothing to
 * discover, compile or read never maps libLLVM and libclang (loading them
 * was about half of a no-op rebuild). llvm_loader.c forwards llvm_bridge.h's
 * calls and discover_ops to this table. */
#ifndef STENCILGEN_LLVM_PLUGIN_H
#define STENCILGEN_LLVM_PLUGIN_H

#include "discover.h"
#include "llvm_bridge.h"

/* Bumped with any change to the table or to the types it passes. */
#define SG_LLVM_API_VERSION 1

typedef struct gen_llvm_api {
    int version;
    const char *llvm_version; /* the LLVM the module was built with */
    bool (*read_object)(const uint8_t *buf, size_t size, objfile *out, char *err, size_t errsz);
    lb_disasm *(*disasm_create)(const char *triple, uint32_t fp_dwarf_reg,
                                const char *const *fp_writers, char *err, size_t errsz);
    void (*disasm_one)(lb_disasm *d, const uint8_t *code, size_t size, uint64_t pc,
                       lb_insn *out);
    void (*disasm_destroy)(lb_disasm *d);
    int (*discover_ops)(const char *source, const char *const *args, size_t nargs,
                        gen_oplist *out, gen_pathlist *deps);
} gen_llvm_api;

/* The module's one exported symbol. */
#define SG_LLVM_API_SYMBOL "sg_llvm_api_get"
typedef const gen_llvm_api *sg_llvm_api_get_fn(void);

/* The module's file name: beside the executable in a build tree, else in
 * SG_LLVM_PLUGIN_DIR (set by meson: the install's libdir/stencilgen, relative
 * to the executable's directory unless absolute). */
#define SG_LLVM_PLUGIN_NAME "stencilgen-llvm.so"

/* The second module, clang's driver and cc1 (clang_main.cpp), found the same
 * way and loaded by the first compile that runs in a forked child. */
#define SG_CLANG_API_VERSION 2

typedef struct gen_clang_api {
    int version;
    const char *llvm_version;
    const char *(*clang_path)(void);
    int (*clang_main)(char *const *argv, const char *probes);
} gen_clang_api;

#define SG_CLANG_API_SYMBOL "sg_clang_api_get"
typedef const gen_clang_api *sg_clang_api_get_fn(void);
#define SG_CLANG_PLUGIN_NAME "stencilgen-clang.so"

#endif
