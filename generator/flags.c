/* flags.c - see flags.h. */
#define _GNU_SOURCE /* utimensat */
#include "flags.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "diag.h"
#include "util.h"

const char *const sg_elf_pic_cflags[] = {
    /* A stencil runs wherever the runtime copies it. */
    "-fPIC",
    /* Calls to run-time symbols go through GOT slots the runtime fills: there is no PLT. */
    "-fno-plt", NULL,
};

/* templates/stencil_op.h, embedded at build time (embed.py). */
extern const char sg_stencil_op_h[];
extern const size_t sg_stencil_op_h_size;

char *flags_op_template_dir(const char *workdir)
{
    char *dir = path_join(workdir, "include");
    char *path = path_join(dir, "stencil_op.h");
    uint8_t *old = NULL;
    size_t size = 0;
    /* Rewritten only when it differs: concurrent runs sharing the directory
     * then never touch it, and its mtime stays older than every compile
     * (the cache stores nothing whose inputs changed after it started). A
     * fresh copy is dated at the epoch, for the same reason: its content is
     * the generator's own, and this run's first discovery reads it at once. */
    bool same = read_file(path, &old, &size) && size == sg_stencil_op_h_size &&
                !memcmp(old, sg_stencil_op_h, size);
    free(old);
    static const struct timespec epoch[2] = {{0, UTIME_OMIT}, {0, 0}}; /* atime, mtime */
    if (!same && (!mkdir_p(dir) ||
                  !write_file_atomic(path, sg_stencil_op_h, sg_stencil_op_h_size) ||
                  utimensat(AT_FDCWD, path, epoch, 0) != 0)) {
        diag_error("cannot write '%s': %s", path, strerror(errno));
        free(dir);
        dir = NULL;
    }
    free(path);
    return dir;
}

/* Every op, whatever the target. */
static const char *const op_flags[] = {
    "-x", "c", "-std=c11",
    /* Stencils are the JIT's code: as fast as clang makes them. */
    "-O3", NULL,
};
/* Then the target's position-independence flags (gen_target.pic_cflags), then: */
static const char *const op_flags_rest[] = {
    /* A jump table would be data with a relocation per entry for every switch. */
    "-fno-jump-tables",
    /* The canary is read from TLS, and the check calls __stack_chk_fail. */
    "-fno-stack-protector",
    /* An executor unwinds by the shim's rule: stencils need no .eh_frame of their own. */
    "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
    /* No .comment and no .llvm_addrsig: sections that are not code or data. */
    "-fno-ident", "-fno-addrsig",
    /* Keep the frame-pointer register away from the register allocator: the
     * unwind rule of every JIT frame rests on it (fp_check proves it held). */
    "-Xclang", "-mframe-pointer=reserved",
    /* No assert() in stencils: it would call a C library function by name. */
    "-DNDEBUG", NULL,
};

/* The shim: an ordinary C function whose unwind tables are the source of truth. */
static const char *const shim_flags[] = {
    "-x", "c", "-std=c11", "-O2", NULL,
};
/* Then the target's position-independence flags (the shim is copied into JIT
 * memory like a stencil), then: */
static const char *const shim_flags_rest[] = {
    /* A jump table would be data with a relocation per entry. */
    "-fno-jump-tables",
    /* The canary is read from TLS, and the check calls __stack_chk_fail. */
    "-fno-stack-protector",
    /* The shim's .eh_frame is what the unwind facts are derived from. */
    "-fasynchronous-unwind-tables",
    /* A frame-pointer-based frame, even in a leaf: the rule JIT frames share. */
    "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer",
    /* No .comment and no .llvm_addrsig. */
    "-fno-ident", "-fno-addrsig",
    "-DNDEBUG", NULL,
};

static void add_list(gen_argv *a, const char *const *flags)
{
    for (; *flags; flags++)
        argv_add(a, *flags);
}

static void add_strlist(gen_argv *a, const gen_strlist *l, const char *prefix)
{
    for (size_t i = 0; i < l->count; i++)
        argv_addf(a, "%s%s", prefix, l->items[i]);
}

/* Shared by all three: the target, the template, the manifest's -I and -D. */
static void add_common(gen_argv *a, const gen_flag_inputs *in)
{
    const gen_manifest *m = in->manifest;
    argv_addf(a, "--target=%s", in->target->triple);
    argv_add(a, "-include");
    argv_add(a, m->template_path);
    add_strlist(a, &m->include_dirs, "-I");
    /* After every directory of the VM's, which may carry its own copy. */
    argv_add(a, "-idirafter");
    argv_add(a, in->op_template_dir);
    add_strlist(a, &m->defines, "-D");
    /* Objects, and so headers, must not depend on where the checkout is. */
    argv_addf(a, "-ffile-prefix-map=%s=.", m->dir);
}

void flags_discover(gen_argv *a, const gen_flag_inputs *in)
{
    argv_add(a, "-x");
    argv_add(a, "c");
    argv_add(a, "-std=c11");
    /* The template marks ops only while they are being looked for. */
    argv_add(a, "-DSTENCILGEN_DISCOVER");
    add_common(a, in);
    add_list(a, in->target->op_cflags); /* e.g. which system headers the target has */
    add_strlist(a, &in->manifest->cflags, "");
    if (in->extra_cflags)
        argv_add_split(a, in->extra_cflags);
    /* Errors only: bodies are skipped here, so a static helper or table used
     * only inside ops looks unused, and -Werror would make that an error. The
     * op compiles report every warning. */
    argv_add(a, "-w");
}

/* The template makes _JIT_ENTRY an alias of this op. */
static void add_op_name(gen_argv *a, const gen_op *op)
{
    argv_addf(a, "-DSTENCILGEN_OP=%s", op->name);
}

/* What an op's unit and a batch's have in common; `source` is their file. */
static void add_op_common(gen_argv *a, const gen_flag_inputs *in, const char *source)
{
    /* The unit is compiled from the run directory: quoted includes must still
     * find what they find beside the op's own source, first. */
    char *srcdir = path_dirname(source);
    argv_add(a, "-iquote");
    argv_add(a, srcdir);
    free(srcdir);
    add_list(a, op_flags);
    add_list(a, in->target->pic_cflags);
    add_list(a, op_flags_rest);
    add_list(a, in->target->op_cflags);
    add_common(a, in);
    add_strlist(a, &in->manifest->cflags, "");
    if (in->mt)
        add_strlist(a, &in->mt->cflags, "");
    if (in->extra_cflags)
        argv_add_split(a, in->extra_cflags);
    /* Last, so no -Wall undoes them: an op's unit keeps the file's static
     * helpers and tables, and those another op uses look unused in it. */
    argv_add(a, "-Wno-unused-function");
    argv_add(a, "-Wno-unused-const-variable");
}

void flags_op(gen_argv *a, const gen_flag_inputs *in, const gen_op *op)
{
    add_op_common(a, in, op->source);
    add_op_name(a, op);
}

void flags_batch(gen_argv *a, const gen_flag_inputs *in, const char *source)
{
    add_op_common(a, in, source);
    /* ELF: each section below is named as the op's own unit names the one
     * it folds into (.text, .rodata, .data.rel.ro), not .rodata.<name>, which
     * a section named in the source (section(".rodata.tb")) can be too:
     * split.c keeps every ELF name as it is. */
    argv_add(a, "-fno-unique-section-names");
    /* Each function and each object in a section of its own: an op's stencil
     * is then the sections its function reaches (split.c). Neither changes
     * the code: sections are the assembler's business, not the optimizer's. */
    argv_add(a, "-ffunction-sections");
    argv_add(a, "-fdata-sections");
    /* Not needed by the unit (it makes its own entries), but templates
     * written for earlier releases may test it. */
    argv_add(a, "-DSTENCILGEN_BATCH");
}

void flags_shim(gen_argv *a, const gen_flag_inputs *in)
{
    add_list(a, shim_flags);
    add_list(a, in->target->pic_cflags);
    add_list(a, shim_flags_rest);
    add_list(a, in->target->shim_cflags);
    add_common(a, in);
    if (in->mt)
        add_strlist(a, &in->mt->shim_cflags, "");
    if (in->extra_shim_cflags)
        argv_add_split(a, in->extra_shim_cflags);
}

/* ---- whole command lines */

gen_flag_inputs flags_inputs(const gen_run *run, const gen_target_result *r)
{
    return (gen_flag_inputs){&run->manifest, r->target, r->mt, run->opt.extra_cflags,
                            run->opt.extra_shim_cflags, run->op_template_dir};
}

char **flags_command_shared(const gen_run *run, const gen_target_result *r, const gen_op *op,
                           bool batch)
{
    gen_argv a = {0};
    if (run->opt.launcher)
        argv_add(&a, run->opt.launcher);
    argv_add(&a, run->clang);
    gen_flag_inputs in = flags_inputs(run, r);
    if (op && batch)
        flags_batch(&a, &in, op->source);
    else if (op)
        add_op_common(&a, &in, op->source);
    else
        flags_shim(&a, &in);
    return argv_finish(&a);
}

/* The job's own part of a command (flags_command_after). */
static void add_own(gen_argv *a, const gen_run *run, const gen_op *op, bool batch,
                    const char *output, const char *unit)
{
    if (op && !batch)
        add_op_name(a, op);
    /* The headers it read, for the cache's key and the build's depfile. */
    argv_add(a, "-MD");
    argv_add(a, "-MF");
    argv_addf(a, "%s.d", output);
    argv_add(a, "-c");
    argv_add(a, op ? unit : run->manifest.shim_source);
    argv_add(a, "-o");
    argv_add(a, output);
}

char **flags_command_after(char *const *shared, size_t n, const gen_run *run, const gen_op *op,
                           bool batch, const char *output, const char *unit)
{
    gen_argv a = {0};
    grow_array((void **)&a.items, &a.cap, n + 10, sizeof *a.items);
    memcpy(a.items, shared, n * sizeof *a.items);
    a.count = n;
    add_own(&a, run, op, batch, output, unit);
    return argv_finish(&a);
}

char **flags_command(const gen_run *run, const gen_target_result *r, const gen_op *op, bool batch,
                     const char *output, const char *unit)
{
    char **shared = flags_command_shared(run, r, op, batch);
    size_t n = 0;
    while (shared[n])
        n++;
    char **argv = flags_command_after(shared, n, run, op, batch, output, unit);
    free(shared); /* its strings are argv's now */
    return argv;
}

char **flags_preprocess(char *const *argv, bool launcher, const char *clang)
{
    gen_argv a = {0};
    argv_add(&a, clang);
    for (char *const *p = argv + (launcher ? 2 : 1); *p; p++) {
        if (!strcmp(*p, "-MF") || !strcmp(*p, "-o")) {
            if (!p[1])
                break;
            if (!strcmp(*p, "-o")) {
                argv_add(&a, "-o");
                argv_add(&a, "/dev/null");
            }
            p++;
        } else if (strcmp(*p, "-MD") != 0) {
            argv_add(&a, strcmp(*p, "-c") ? *p : "-E");
        }
    }
    return argv_finish(&a);
}
