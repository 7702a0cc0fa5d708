/* stress_common.h - shared by the stress, fork and W^X test programs: the
 * bundled stencil set, a deterministic RNG, a generator of random valid tinyvm
 * programs and a reference interpreter that computes what they must return.
 *
 * The program generator only produces programs that are valid for the bundled
 * ops: no stack underflow, bounded loops, divisors that cannot trap, calls only
 * to "library" functions that make no calls themselves. */
#ifndef STRESS_COMMON_H
#define STRESS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define _Noreturn [[noreturn]]
extern "C" {
#endif

#include "stencilrt.h"
#include "tinyvm.h"

/* The op numbers of the bundled header (stress_common.c checks they match
 * SG_OP_* with static assertions; C++ cannot include the header portably). */
enum st_op {
    ST_push = 0, ST_pop, ST_dup, ST_load, ST_store, ST_add, ST_sub, ST_mul, ST_div, ST_mod,
    ST_addi, ST_lt, ST_le, ST_eq, ST_jump, ST_jump_if_zero, ST_jump_if_nonzero, ST_ret,
    ST_call, ST_print, ST_native, ST_side_exit, ST__COUNT
};

/* What our vm_native(which, arg) does. */
enum st_native {
    ST_NATIVE_MIX = 0,       /* arg * 3 + 1 */
    ST_NATIVE_BACKTRACE = 1, /* check the unwinder's chain, return arg */
    ST_NATIVE_THROW = 2,     /* throw a C++ exception carrying arg (C++ program only) */
};

/* The run-time symbols (SG_SYM_* order) for programs that make no calls and
 * use no native but ST_NATIVE_MIX (st_gen_opts with nlib 0, no backtrace, no
 * throw): print and native compute what st_interpret does; a call, another
 * native or a trap prints FAIL and aborts. */
extern const void *const st_leaf_symbols[4];

/* The shim's C type (stencils/shim.c). */
typedef vm_value st_shim_fn(vm_frame *frame, vm_value *sp, void *code);

extern const sr_stencil_set st_stencil_set;
extern const size_t st_shim_code_size; /* bytes of the shim in JIT memory */

/* splitmix64: small, deterministic, good enough. */
typedef struct st_rng {
    uint64_t s;
} st_rng;
uint64_t st_next(st_rng *r);
uint64_t st_below(st_rng *r, uint64_t n); /* 0 <= x < n */

/* What the generator may use. */
typedef struct st_gen_opts {
    size_t max_instrs;       /* capacity of the output array */
    int nlib;                /* library functions callable with `call` (0: no calls) */
    const int *lib_argc;     /* argc of each library function */
    int nparams;             /* locals 0..nparams-1 hold arguments (library functions) */
    int allow_native_mix;    /* native 0 */
    int allow_print;         /* print (our vm_print returns value ^ 0x5a) */
    int allow_backtrace;     /* native 1 */
    int allow_throw;         /* native 2 */
    int allow_loops;
} st_gen_opts;

/* A random valid program ending in `ret`; returns its length (> 0). */
size_t st_gen_program(st_rng *r, const st_gen_opts *o, sr_instr *out);

/* A long straight-line program (n >= 4 instructions) returning a known value. */
size_t st_gen_big(st_rng *r, size_t n, sr_instr *out, vm_value *expect);

/* Reference semantics of the bundled ops. Calls and natives go through the
 * callbacks. Returns 0 (value in *result), 1 if a native threw (the thrown
 * value in *result), -1 if the program is invalid (a generator bug). */
typedef struct st_interp_env {
    void *ctx;
    /* Interpret library function fn (argc, args); same return convention. */
    int (*call)(void *ctx, vm_value fn, vm_value argc, const vm_value *args, vm_value *result);
} st_interp_env;
int st_interpret(const st_interp_env *env, const sr_instr *code, size_t n, const vm_value *args,
                 int argc, vm_value *result);

/* Print an executor's program (for failure reports). */
void st_dump_program(const sr_instr *code, size_t n);

/* ---- /proc/self/maps */

typedef struct st_mapping {
    uintptr_t lo, hi;
    char perms[5];
} st_mapping;

/* Read /proc/self/maps into `buf` (NUL-terminated); false on error. */
int st_read_maps(char *buf, size_t cap, size_t *len);
/* Parse one line starting at *p (advances *p); false at the end. */
int st_next_mapping(const char **p, st_mapping *m, const char **line, size_t *line_len);
/* Permissions ("r-xp", "---p", ...) of every page of [lo, hi): true if all
 * pages are covered by mappings with exactly `perms`; else writes what was
 * found into `found` (size >= 64). */
int st_range_has_perms(const char *maps, uintptr_t lo, uintptr_t hi, const char *perms,
                       char *found, size_t found_cap);

/* ---- GDB JIT interface, as the runtime exports it */

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
extern struct jit_descriptor __jit_debug_descriptor;

/* Walk the GDB list: check the links both ways and that each entry is an ELF
 * image; count entries and zero-sized FUNC symbols (one per executor, see
 * gdbgroup.c register_group). Returns 0 if consistent, else writes a message. */
int st_check_gdb_list(size_t *entries, size_t *executor_symbols, char *msg, size_t cap);

double st_now(void);

/* ---- command-line options
 *
 * Every stress program takes `--name VALUE` options and `--name` flags and
 * nothing else. It lists them once, next to the variables they set, and
 * st_parse_options reads argv and writes the usage line from that list:
 *
 *     static const st_opt options[] = {
 *         ST_OPT_SECONDS("--seconds", &seconds),  // double, >= 0
 *         ST_OPT_U64("--seed", &seed),            // uint64_t (0x... allowed)
 *         ST_OPT_INT("--workers", &workers),      // int, >= 0
 *         ST_OPT_SIZE("--arena-size", &arena),    // size_t
 *         ST_OPT_FLAG("--debug-leak", &leak),     // int, set to 1
 *     };
 *     ...
 *     if (ST_PARSE_OPTIONS(argc, argv, options))  // in main
 *         return 2;
 *
 * The macros check each pointer's type at compile time. */
typedef enum st_opt_kind {
    ST_OPT_KIND_FLAG,
    ST_OPT_KIND_INT,
    ST_OPT_KIND_SIZE,
    ST_OPT_KIND_U64,
    ST_OPT_KIND_SECONDS
} st_opt_kind;
typedef struct st_opt {
    const char *name; /* "--seconds" */
    st_opt_kind kind;
    void *value;      /* int, size_t, uint64_t or double, by kind */
} st_opt;
#define ST_OPT_(name, kind, type, p) {name, kind, (void *)(1 ? (p) : (type *)0)}
#define ST_OPT_FLAG(name, p) ST_OPT_(name, ST_OPT_KIND_FLAG, int, p)
#define ST_OPT_INT(name, p) ST_OPT_(name, ST_OPT_KIND_INT, int, p)
#define ST_OPT_SIZE(name, p) ST_OPT_(name, ST_OPT_KIND_SIZE, size_t, p)
#define ST_OPT_U64(name, p) ST_OPT_(name, ST_OPT_KIND_U64, uint64_t, p)
#define ST_OPT_SECONDS(name, p) ST_OPT_(name, ST_OPT_KIND_SECONDS, double, p)

/* Reads argv[1..argc) into opts[0..n). Numbers are whole (base 10, or 16
 * after 0x) and not negative; seconds are decimal, finite and not negative.
 * Returns 0, or 2 after printing on stderr what was wrong (an unknown
 * argument, a missing or bad value, naming the option) and the usage line. */
int st_parse_options(int argc, char **argv, const st_opt *opts, size_t n);
/* st_parse_options on a whole array. */
#define ST_PARSE_OPTIONS(argc, argv, array) \
    st_parse_options(argc, argv, array, sizeof(array) / sizeof((array)[0]))

#ifdef __cplusplus
}
#endif

#endif
