/* llvm_loader.c - llvm_bridge.h and discover_ops for the stencilgen
 * executable: the first call loads the LLVM module (llvm_plugin.h), every
 * call forwards to it. A module that is missing or not this stencilgen's is
 * a toolchain failure like a missing compiler: the callers' error paths say
 * so (exit 3). */
#define _GNU_SOURCE /* readlink, PATH_MAX */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag.h"
#include "llvm_plugin.h"
#include "util.h"

/* Loaded once, from the main thread (discovery and object reading run
 * there); or why it could not be. */
static const gen_llvm_api *api;
static char *api_error;

/* Directory of the running executable, with a trailing slash. */
static bool exe_dir(char *buf, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 1);
    if (n <= 0 || (size_t)n >= size - 1)
        return false;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash)
        return false;
    slash[1] = '\0';
    return true;
}

static void *open_module(const char *name, strbuf *why)
{
    char dir[PATH_MAX];
    if (!exe_dir(dir, sizeof dir)) {
        sb_printf(why, "cannot find the stencilgen executable (/proc/self/exe)");
        return NULL;
    }
    const char *places[] = {"", SG_LLVM_PLUGIN_DIR "/"};
    strbuf tried = {0};
    for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
        strbuf path = {0};
        sb_printf(&path, "%s%s%s", places[i][0] == '/' ? "" : dir, places[i], name);
        void *h = dlopen(path.data, RTLD_NOW | RTLD_LOCAL);
        bool there = !h && access(path.data, F_OK) == 0;
        if (there) /* it exists but does not load: say why */
            sb_printf(why, "%s", dlerror());
        sb_printf(&tried, "%s%s", tried.len ? ", " : "", path.data);
        sb_free(&path);
        if (h || there) {
            sb_free(&tried);
            return h;
        }
    }
    sb_printf(why, "not found (tried %s)", tried.data);
    sb_free(&tried);
    return NULL;
}

static const gen_llvm_api *load(void)
{
    if (api || api_error)
        return api;
    strbuf why = {0}, msg = {0};
    void *h = open_module(SG_LLVM_PLUGIN_NAME, &why);
    sg_llvm_api_get_fn *get = h ? (sg_llvm_api_get_fn *)dlsym(h, SG_LLVM_API_SYMBOL) : NULL;
    const gen_llvm_api *a = get ? get() : NULL;
    if (!h)
        sb_printf(&msg, "cannot load stencilgen's LLVM module %s: %s", SG_LLVM_PLUGIN_NAME,
                  why.data);
    else if (!a || a->version != SG_LLVM_API_VERSION || strcmp(a->llvm_version, lb_llvm_version()))
        sb_printf(&msg, "stencilgen's LLVM module %s is not this stencilgen's (LLVM %s, table "
                  "version %d; want LLVM %s, version %d): reinstall stencilgen",
                  SG_LLVM_PLUGIN_NAME, a ? a->llvm_version : "?", a ? a->version : 0,
                  lb_llvm_version(), SG_LLVM_API_VERSION);
    else
        api = a;
    api_error = api ? NULL : xstrdup(msg.data);
    sb_free(&why);
    sb_free(&msg);
    return api;
}

bool lb_read_object(const uint8_t *buf, size_t size, objfile *out, char *err, size_t errsz)
{
    if (load())
        return api->read_object(buf, size, out, err, errsz);
    snprintf(err, errsz, "%s", api_error);
    return false;
}

lb_disasm *lb_disasm_create(const char *triple, uint32_t fp_dwarf_reg,
                            const char *const *fp_writers, char *err, size_t errsz)
{
    if (load())
        return api->disasm_create(triple, fp_dwarf_reg, fp_writers, err, errsz);
    snprintf(err, errsz, "%s", api_error);
    return NULL;
}

/* Only ever given a disassembler lb_disasm_create made: the module is loaded. */
void lb_disasm_one(lb_disasm *d, const uint8_t *code, size_t size, uint64_t pc, lb_insn *out)
{
    api->disasm_one(d, code, size, pc, out);
}

void lb_disasm_destroy(lb_disasm *d)
{
    if (d)
        api->disasm_destroy(d);
}

/* The clang module, or NULL: compiles then start the clang executable, as
 * they would for any other compiler (jobs.c), so a missing module costs time,
 * not the build. Loaded once, by the main thread or by the preload thread,
 * which the main thread joins before it reads this. */
static const gen_clang_api *capi;
static bool capi_tried;
static pthread_t preload_thread;
static bool preloading;

static void *load_clang(void *unused)
{
    (void)unused;
    strbuf why = {0};
    void *h = open_module(SG_CLANG_PLUGIN_NAME, &why);
    sg_clang_api_get_fn *get = h ? (sg_clang_api_get_fn *)dlsym(h, SG_CLANG_API_SYMBOL) : NULL;
    const gen_clang_api *a = get ? get() : NULL;
    if (a && a->version == SG_CLANG_API_VERSION && !strcmp(a->llvm_version, lb_llvm_version()))
        capi = a;
    sb_free(&why);
    return NULL;
}

void lb_clang_preload(void)
{
    if (capi_tried || preloading)
        return;
    preloading = pthread_create(&preload_thread, NULL, load_clang, NULL) == 0;
}

void lb_clang_preload_done(void)
{
    if (preloading) {
        pthread_join(preload_thread, NULL);
        preloading = false;
        capi_tried = true;
    }
}

static const gen_clang_api *clang_api(void)
{
    lb_clang_preload_done();
    if (!capi_tried) {
        load_clang(NULL);
        capi_tried = true;
    }
    return capi;
}

const char *lb_clang_path(void)
{
    return clang_api() ? clang_api()->clang_path() : NULL;
}

/* Only called once lb_clang_path() has answered: the module is loaded. */
int lb_clang_main(char *const *argv, const char *probes)
{
    return clang_api()->clang_main(argv, probes);
}

int discover_ops(const char *source, const char *const *args, size_t nargs, gen_oplist *out,
                 gen_pathlist *deps)
{
    static bool reported; /* once, not once per op source */
    if (load()) {
        /* libclang parses on this thread, not on one it starts: that thread
         * took 11-14 ms over a 10-op source that parses in 5-6 here while the
         * clang module loaded beside it. Set before the preload thread starts
         * (later calls change nothing); the parse gets this thread's stack. */
        setenv("LIBCLANG_NOTHREADS", "1", 0);
        int rc = api->discover_ops(source, args, nargs, out, deps);
        /* A source changed: something is likely to compile. The clang module
         * loads after the LLVM module (the two would take turns at the
         * loader's lock) and after the parse, beside the reading of cached
         * stencils that comes next. */
        lb_clang_preload();
        return rc;
    }
    if (!reported)
        diag_error("%s", api_error);
    reported = true;
    return SG_EXIT_TOOLCHAIN;
}
