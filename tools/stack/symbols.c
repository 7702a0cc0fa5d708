/* symbols.c - libdwfl over a live process, without its ptrace helpers:
 * dwfl_linux_proc_report reads the memory map, and modules' files are opened
 * from disk (or, when deleted, read from the process's memory). */
#include "symbols.h"

#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* libdwfl finds an address's symbol by a linear search over the module's
 * symbols; a sampler asks about the same return addresses again and again,
 * so answers are kept (names stay valid as long as the Dwfl does). */
enum { MEMO_SLOTS = 1 << 16 };

typedef struct memo {
    uint64_t addr; /* 0: empty */
    sym_info info;
} memo;

struct symbols {
    pid_t pid;
    Dwfl *dwfl;
    memo *memo;
    size_t memo_len;
};

static char *debuginfo_path = NULL;

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

static Dwfl *report(pid_t pid, char *err, size_t errlen)
{
    Dwfl *d = dwfl_begin(&callbacks);
    if (!d) {
        snprintf(err, errlen, "libdwfl: %s", dwfl_errmsg(-1));
        return NULL;
    }
    dwfl_report_begin(d);
    int rc = dwfl_linux_proc_report(d, pid);
    dwfl_report_end(d, NULL, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "cannot read the memory map of process %d: %s", (int)pid,
                 rc > 0 ? strerror(rc) : dwfl_errmsg(-1));
        dwfl_end(d);
        return NULL;
    }
    return d;
}

symbols *symbols_open(pid_t pid, char *err, size_t errlen)
{
    symbols *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->pid = pid;
    /* A process in the middle of an exec has a memory map libdwfl cannot
     * read (ENOEXEC): give it a moment, a few times. */
    for (int attempt = 0; attempt < 5 && !s->dwfl; attempt++) {
        if (attempt) {
            struct timespec pause = {0, 20000000};
            nanosleep(&pause, NULL);
        }
        s->dwfl = report(pid, err, errlen);
    }
    s->memo = calloc(MEMO_SLOTS, sizeof *s->memo);
    if (!s->dwfl || !s->memo) {
        if (s->dwfl) { /* report() said why it failed; this failure is ours */
            dwfl_end(s->dwfl);
            snprintf(err, errlen, "out of memory");
        }
        free(s->memo);
        free(s);
        return NULL;
    }
    return s;
}

void symbols_close(symbols *s)
{
    if (s) {
        dwfl_end(s->dwfl);
        free(s->memo);
        free(s);
    }
}

bool symbols_refresh(symbols *s)
{
    char err[256];
    Dwfl *d = report(s->pid, err, sizeof err);
    if (!d)
        return false;
    dwfl_end(s->dwfl);
    s->dwfl = d;
    memset(s->memo, 0, MEMO_SLOTS * sizeof *s->memo);
    s->memo_len = 0;
    return true;
}

static const char *basename_of(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path;
}

typedef struct find_ctx {
    const char *name;
    uint64_t addr;
    const char *module;
    bool found;
} find_ctx;

static int find_in_module(Dwfl_Module *mod, void **user, const char *modname, Dwarf_Addr start,
                          void *arg)
{
    (void)user;
    (void)start;
    find_ctx *c = arg;
    int n = dwfl_module_getsymtab(mod);
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        GElf_Word shndx;
        const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
        if (name && sym.st_shndx != SHN_UNDEF && !strcmp(name, c->name)) {
            c->addr = addr;
            c->module = basename_of(modname);
            c->found = true;
            return DWARF_CB_ABORT;
        }
    }
    return DWARF_CB_OK;
}

bool symbols_find(symbols *s, const char *name, uint64_t *addr, const char **module)
{
    find_ctx c = {name, 0, NULL, false};
    dwfl_getmodules(s->dwfl, find_in_module, &c, 0);
    if (c.found) {
        *addr = c.addr;
        *module = c.module;
    }
    return c.found;
}

static void describe(symbols *s, uint64_t addr, sym_info *out)
{
    memset(out, 0, sizeof *out);
    Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, addr);
    if (!mod)
        return;
    const char *modname = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    out->module = basename_of(modname);
    Dwarf_Addr bias;
    out->has_elf = dwfl_module_getelf(mod, &bias) != NULL;
    if (!out->has_elf)
        return;
    GElf_Off off;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL);
    if (name) {
        out->name = name;
        out->offset = off;
    }
}

void symbols_describe(symbols *s, uint64_t addr, sym_info *out)
{
    size_t i = (size_t)(addr * 0x9e3779b97f4a7c15ull >> 48) & (MEMO_SLOTS - 1);
    while (s->memo[i].addr && s->memo[i].addr != addr)
        i = (i + 1) & (MEMO_SLOTS - 1);
    if (s->memo[i].addr) {
        *out = s->memo[i].info;
        return;
    }
    describe(s, addr, out);
    if (!addr)
        return;
    if (s->memo_len * 2 >= MEMO_SLOTS) { /* full enough: start again */
        memset(s->memo, 0, MEMO_SLOTS * sizeof *s->memo);
        s->memo_len = 0;
        i = (size_t)(addr * 0x9e3779b97f4a7c15ull >> 48) & (MEMO_SLOTS - 1);
    }
    s->memo[i] = (memo){addr, *out};
    s->memo_len++;
}

static Dwarf_Frame *frame_from(Dwarf_CFI *cfi, Dwarf_Addr bias, uint64_t addr)
{
    Dwarf_Frame *f = NULL;
    if (cfi && dwarf_cfi_addrframe(cfi, addr - bias, &f) == 0)
        return f;
    return NULL;
}

Dwarf_Frame *symbols_frame(symbols *s, uint64_t addr)
{
    Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, addr);
    if (!mod)
        return NULL;
    /* Each CFI is fetched before its bias is read: they are set together. */
    Dwarf_Addr bias = 0;
    Dwarf_CFI *cfi = dwfl_module_eh_cfi(mod, &bias);
    Dwarf_Frame *f = frame_from(cfi, bias, addr);
    if (!f) {
        cfi = dwfl_module_dwarf_cfi(mod, &bias);
        f = frame_from(cfi, bias, addr);
    }
    return f;
}
