/* stress_common.c - see stress_common.h. */
#include "stress_common.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jit_stencils.h"

const sr_stencil_set st_stencil_set = SR_STENCIL_SET_FROM_HEADER;
const size_t st_shim_code_size = sizeof sg_code_shim;

#define SAME(op) _Static_assert((int)ST_##op == (int)SG_OP_##op, "op number of " #op)
SAME(push); SAME(pop); SAME(dup); SAME(load); SAME(store); SAME(add); SAME(sub); SAME(mul);
SAME(div); SAME(mod); SAME(addi); SAME(lt); SAME(le); SAME(eq); SAME(jump);
SAME(jump_if_zero); SAME(jump_if_nonzero); SAME(ret); SAME(call); SAME(print); SAME(native);
SAME(side_exit);
_Static_assert((int)ST__COUNT == (int)SG_OP__COUNT, "op count");
_Static_assert(SG_SYM_vm_call == 0 && SG_SYM_vm_print == 1 && SG_SYM_vm_native == 2 &&
                   SG_SYM_vm_trap == 3 && SG_SYM__COUNT == 4, "run-time symbols");

/* ---- run-time symbols for programs without calls */

static vm_value leaf_call(vm_frame *f, vm_value fn, vm_value argc, vm_value *args)
{
    (void)f, (void)fn, (void)argc, (void)args;
    fputs("FAIL: unexpected vm_call\n", stderr);
    abort();
}

static vm_value leaf_print(vm_frame *f, vm_value v)
{
    (void)f;
    return v ^ 0x5a;
}

static vm_value leaf_native(vm_frame *f, vm_value which, vm_value arg)
{
    (void)f;
    if (which != ST_NATIVE_MIX) {
        fputs("FAIL: unexpected vm_native\n", stderr);
        abort();
    }
    return (vm_value)((uint64_t)arg * 3 + 1);
}

static void leaf_trap(vm_frame *f, const char *why)
{
    (void)f;
    fprintf(stderr, "FAIL: vm_trap: %s\n", why);
    abort();
}

const void *const st_leaf_symbols[4] = {(const void *)leaf_call, (const void *)leaf_print,
                                        (const void *)leaf_native, (const void *)leaf_trap};

/* ---- RNG */

uint64_t st_next(st_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t st_below(st_rng *r, uint64_t n)
{
    return n ? st_next(r) % n : 0;
}

/* ---- program generator */

enum { LOOP_COUNTER = 8, ACC = 12, MAX_NEST = 2 };

typedef struct gen {
    st_rng *r;
    const st_gen_opts *o;
    sr_instr *out;
    size_t n;
    int nest;
    size_t cap;
} gen;

static size_t put(gen *g, uint32_t op, uint64_t a, uint64_t b)
{
    if (g->n >= g->cap) { /* room() keeps a margin: this is a generator bug */
        fprintf(stderr, "stress_common: program generator overflowed %zu instructions\n",
                g->cap);
        abort();
    }
    sr_instr in = {op, 0, {a, b, 0, 0}};
    g->out[g->n] = in;
    return g->n++;
}

static int room(gen *g, size_t need)
{
    return g->n + need + 8 < g->o->max_instrs;
}

static vm_value constant(gen *g)
{
    switch (st_below(g->r, 6)) {
    case 0: return (vm_value)st_next(g->r);          /* any 64-bit value */
    case 1: return -(vm_value)st_below(g->r, 1000);
    default: return (vm_value)st_below(g->r, 100);
    }
}

static void expr(gen *g, int depth);

static void leaf(gen *g)
{
    if (st_below(g->r, 3) == 0)
        put(g, ST_load, st_below(g->r, 16), 0);
    else
        put(g, ST_push, (uint64_t)constant(g), 0);
}

static void expr(gen *g, int depth)
{
    if (depth > 4 || !room(g, 40)) {
        leaf(g);
        return;
    }
    switch (st_below(g->r, 10)) {
    case 0:
    case 1: leaf(g); return;
    case 2: { /* unary */
        expr(g, depth + 1);
        uint64_t k = st_below(g->r, 7);
        if (k == 0 && g->o->allow_native_mix)
            put(g, ST_native, ST_NATIVE_MIX, 0);
        else if (k == 1 && g->o->allow_print)
            put(g, ST_print, 0, 0);
        else if (k == 2 && g->o->allow_backtrace)
            put(g, ST_native, ST_NATIVE_BACKTRACE, 0);
        else if (k == 3 && g->o->allow_throw && st_below(g->r, 4) == 0)
            put(g, ST_native, ST_NATIVE_THROW, 0);
        else if (k == 4) {
            put(g, ST_dup, 0, 0);
            put(g, st_below(g->r, 2) ? ST_add : ST_mul, 0, 0);
        } else
            put(g, ST_addi, (uint64_t)constant(g), 0);
        return;
    }
    case 3:
    case 4:
    case 5: { /* binary */
        static const uint32_t ops[] = {ST_add, ST_sub, ST_mul, ST_lt, ST_le, ST_eq};
        expr(g, depth + 1);
        expr(g, depth + 1);
        put(g, ops[st_below(g->r, 6)], 0, 0);
        return;
    }
    case 6: { /* division by a constant that cannot trap (never 0 or -1) */
        expr(g, depth + 1);
        vm_value c = constant(g);
        if (c == 0 || c == -1)
            c = 7;
        put(g, ST_push, (uint64_t)c, 0);
        put(g, st_below(g->r, 2) ? ST_div : ST_mod, 0, 0);
        return;
    }
    default:
        if (g->o->nlib > 0) { /* re-entry: a library function through the shim */
            int f = (int)st_below(g->r, (uint64_t)g->o->nlib);
            int argc = g->o->lib_argc[f];
            for (int i = 0; i < argc; i++)
                expr(g, depth + 1);
            put(g, ST_call, (uint64_t)f, (uint64_t)argc);
            return;
        }
        expr(g, depth + 1);
        put(g, ST_addi, 1, 0);
        return;
    }
}

static void stmt(gen *g)
{
    if (!room(g, 60)) {
        return;
    }
    switch (st_below(g->r, 6)) {
    case 0:
    case 1: /* acc = expr */
        expr(g, 1);
        put(g, ST_store, ACC + st_below(g->r, 4), 0);
        return;
    case 2: /* expr; pop */
        expr(g, 1);
        put(g, ST_pop, 0, 0);
        return;
    case 3: { /* if expr then stmt else stmt */
        expr(g, 2);
        size_t jz = put(g, ST_jump_if_zero, 0, 0);
        stmt(g);
        size_t j = put(g, ST_jump, 0, 0);
        g->out[jz].target = (uint32_t)g->n;
        stmt(g);
        /* a statement may be empty: the target is then the next instruction */
        g->out[j].target = (uint32_t)g->n;
        return;
    }
    default: { /* bounded loops, two shapes */
        if (!g->o->allow_loops || g->nest >= MAX_NEST) {
            expr(g, 1);
            put(g, ST_store, ACC + st_below(g->r, 4), 0);
            return;
        }
        uint64_t c = LOOP_COUNTER + (uint64_t)g->nest;
        uint64_t count = st_below(g->r, g->nest ? 5 : 13);
        g->nest++;
        if (st_below(g->r, 2)) { /* for (c = 0; c < count; c++) */
            put(g, ST_push, 0, 0);
            put(g, ST_store, c, 0);
            size_t top = put(g, ST_load, c, 0);
            put(g, ST_push, count, 0);
            put(g, ST_lt, 0, 0);
            size_t jz = put(g, ST_jump_if_zero, 0, 0);
            for (uint64_t i = 1 + st_below(g->r, 3); i > 0; i--)
                stmt(g);
            put(g, ST_load, c, 0);
            put(g, ST_addi, 1, 0);
            put(g, ST_store, c, 0);
            g->out[put(g, ST_jump, 0, 0)].target = (uint32_t)top;
            g->out[jz].target = (uint32_t)g->n;
        } else { /* c = count + 1; do { ... } while (--c) */
            put(g, ST_push, count + 1, 0);
            put(g, ST_store, c, 0);
            size_t top = g->n;
            for (uint64_t i = 1 + st_below(g->r, 3); i > 0; i--)
                stmt(g);
            put(g, ST_load, c, 0);
            put(g, ST_addi, (uint64_t)-1, 0);
            put(g, ST_dup, 0, 0);
            put(g, ST_store, c, 0);
            g->out[put(g, ST_jump_if_nonzero, 0, 0)].target = (uint32_t)top;
        }
        g->nest--;
        return;
    }
    }
}

size_t st_gen_program(st_rng *r, const st_gen_opts *o, sr_instr *out)
{
    gen g = {r, o, out, 0, 0, o->max_instrs};
    for (uint64_t i = st_below(r, 5); i > 0; i--)
        stmt(&g);
    expr(&g, 0);
    put(&g, ST_ret, 0, 0);
    return g.n;
}

size_t st_gen_big(st_rng *r, size_t n, sr_instr *out, vm_value *expect)
{
    gen g = {r, NULL, out, 0, 0, n};
    uint64_t v = (uint64_t)st_next(r);
    put(&g, ST_push, v, 0);
    while (g.n + 3 <= n) {
        uint64_t k = st_next(r);
        switch (st_below(r, 3)) {
        case 0: put(&g, ST_push, k, 0); put(&g, ST_add, 0, 0); v += k; break;
        case 1: put(&g, ST_push, k, 0); put(&g, ST_sub, 0, 0); v -= k; break;
        default: put(&g, ST_addi, k, 0); v += k; break;
        }
    }
    put(&g, ST_ret, 0, 0);
    *expect = (vm_value)v;
    return g.n;
}

/* ---- reference interpreter */

#define STACK 1024

int st_interpret(const st_interp_env *env, const sr_instr *code, size_t n, const vm_value *args,
                 int argc, vm_value *result)
{
    vm_value locals[VM_MAX_LOCALS] = {0};
    vm_value stack[STACK];
    size_t d = 0, pc = 0;
    vm_value tos = 0;
    for (int i = 0; i < argc && i < VM_MAX_LOCALS; i++)
        locals[i] = args[i];
#define POP() (d == 0 ? -1 : (tos_tmp = stack[--d], 0))
    for (long steps = 0; steps < 10000000; steps++) {
        if (pc >= n)
            return -1;
        const sr_instr *in = &code[pc++];
        vm_value a, cond, tos_tmp;
        uint64_t ua, ub;
        switch (in->op) {
        case ST_push:
            if (d >= STACK)
                return -1;
            stack[d++] = tos;
            tos = (vm_value)in->operand[0];
            break;
        case ST_pop:
            if (POP())
                return -1;
            tos = tos_tmp;
            break;
        case ST_dup:
            if (d >= STACK)
                return -1;
            stack[d++] = tos;
            break;
        case ST_load:
            if (d >= STACK || in->operand[0] >= VM_MAX_LOCALS)
                return -1;
            stack[d++] = tos;
            tos = locals[in->operand[0]];
            break;
        case ST_store:
            if (in->operand[0] >= VM_MAX_LOCALS || POP())
                return -1;
            locals[in->operand[0]] = tos;
            tos = tos_tmp;
            break;
        case ST_add: case ST_sub: case ST_mul: case ST_div: case ST_mod:
        case ST_lt: case ST_le: case ST_eq:
            if (POP())
                return -1;
            a = tos_tmp;
            ua = (uint64_t)a;
            ub = (uint64_t)tos;
            switch (in->op) {
            case ST_add: tos = (vm_value)(ua + ub); break;
            case ST_sub: tos = (vm_value)(ua - ub); break;
            case ST_mul: tos = (vm_value)(ua * ub); break;
            case ST_div:
            case ST_mod:
                if (tos == 0 || (tos == -1 && a == INT64_MIN))
                    return -1; /* would trap: the generator never does this */
                tos = in->op == ST_div ? a / tos : a % tos;
                break;
            case ST_lt: tos = a < tos; break;
            case ST_le: tos = a <= tos; break;
            default: tos = a == tos; break;
            }
            break;
        case ST_addi: tos = (vm_value)((uint64_t)tos + in->operand[0]); break;
        case ST_jump:
            if (in->target >= n)
                return -1;
            pc = in->target;
            break;
        case ST_jump_if_zero:
        case ST_jump_if_nonzero:
            if (in->target >= n || POP())
                return -1;
            cond = tos;
            tos = tos_tmp;
            if ((cond == 0) == (in->op == ST_jump_if_zero))
                pc = in->target;
            break;
        case ST_ret: *result = tos; return 0;
        case ST_call: {
            if (d >= STACK)
                return -1;
            stack[d++] = tos;
            size_t k = (size_t)in->operand[1];
            if (k > d || !env || !env->call)
                return -1;
            d -= k;
            int st = env->call(env->ctx, (vm_value)in->operand[0], (vm_value)k, &stack[d], &tos);
            if (st != 0) {
                *result = tos;
                return st;
            }
            break;
        }
        case ST_print: tos ^= 0x5a; break;
        case ST_native:
            switch (in->operand[0]) {
            case ST_NATIVE_MIX: tos = (vm_value)((uint64_t)tos * 3 + 1); break;
            case ST_NATIVE_BACKTRACE: break;
            case ST_NATIVE_THROW: *result = tos; return 1;
            default: return -1;
            }
            break;
        default: return -1;
        }
    }
#undef POP
    return -1; /* did not terminate */
}

void st_dump_program(const sr_instr *code, size_t n)
{
    static const char *const names[ST__COUNT] = {
        "push", "pop", "dup", "load", "store", "add", "sub", "mul", "div", "mod", "addi", "lt",
        "le", "eq", "jump", "jump_if_zero", "jump_if_nonzero", "ret", "call", "print", "native",
        "side_exit"};
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "    %3zu: %s %" PRId64 " %" PRId64 " ->%u\n", i,
                code[i].op < ST__COUNT ? names[code[i].op] : "?", (int64_t)code[i].operand[0],
                (int64_t)code[i].operand[1], code[i].target);
}

/* ---- /proc/self/maps */

int st_read_maps(char *buf, size_t cap, size_t *len)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t n = 0;
    for (;;) {
        if (n + 1 >= cap) {
            close(fd);
            return 0;
        }
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            close(fd);
            return 0;
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    buf[n] = 0;
    if (len)
        *len = n;
    return 1;
}

int st_next_mapping(const char **p, st_mapping *m, const char **line, size_t *line_len)
{
    const char *s = *p;
    if (!*s)
        return 0;
    const char *end = strchr(s, '\n');
    if (!end)
        end = s + strlen(s);
    char *q;
    m->lo = (uintptr_t)strtoull(s, &q, 16);
    m->hi = (uintptr_t)strtoull(q + 1, &q, 16);
    memcpy(m->perms, q + 1, 4);
    m->perms[4] = 0;
    if (line)
        *line = s;
    if (line_len)
        *line_len = (size_t)(end - s);
    *p = *end ? end + 1 : end;
    return 1;
}

int st_range_has_perms(const char *maps, uintptr_t lo, uintptr_t hi, const char *perms,
                       char *found, size_t found_cap)
{
    const char *p = maps;
    st_mapping m;
    uintptr_t at = lo;
    size_t used = 0;
    int ok = 1;
    found[0] = 0;
    while (at < hi && st_next_mapping(&p, &m, NULL, NULL)) {
        if (m.hi <= at)
            continue;
        if (m.lo > at) { /* a hole: not mapped at all */
            ok = 0;
            used += (size_t)snprintf(found + used, used < found_cap ? found_cap - used : 0,
                                     "%#lx-%#lx unmapped; ", (unsigned long)at,
                                     (unsigned long)m.lo);
            if (used >= found_cap)
                used = found_cap - 1;
        }
        if (strcmp(m.perms, perms) != 0) {
            ok = 0;
            used += (size_t)snprintf(found + used, used < found_cap ? found_cap - used : 0,
                                     "%#lx-%#lx %s; ", (unsigned long)m.lo, (unsigned long)m.hi,
                                     m.perms);
            if (used >= found_cap)
                used = found_cap - 1;
        }
        at = m.hi;
    }
    if (at < hi) {
        ok = 0;
        snprintf(found + used, used < found_cap ? found_cap - used : 0, "%#lx-%#lx unmapped",
                 (unsigned long)at, (unsigned long)hi);
    }
    return ok;
}

/* ---- GDB list */

int st_check_gdb_list(size_t *entries, size_t *executor_symbols, char *msg, size_t cap)
{
    size_t n = 0, execs = 0;
    struct jit_code_entry *prev = NULL;
    for (struct jit_code_entry *e = __jit_debug_descriptor.first_entry; e; e = e->next_entry) {
        if (++n > 1000000) {
            snprintf(msg, cap, "GDB list: more than 1e6 entries (a cycle?)");
            return -1;
        }
        if (e->prev_entry != prev) {
            snprintf(msg, cap, "GDB list: entry %zu's prev_entry is %p, expected %p", n,
                     (void *)e->prev_entry, (void *)prev);
            return -1;
        }
        const unsigned char *img = (const unsigned char *)e->symfile_addr;
        if (!img || e->symfile_size < 64 || memcmp(img, "\x7f" "ELF", 4) != 0) {
            snprintf(msg, cap, "GDB list: entry %zu is not an ELF image (size %" PRIu64 ")", n,
                     e->symfile_size);
            return -1;
        }
        uint64_t shoff;
        uint16_t shentsize, shnum;
        memcpy(&shoff, img + 0x28, 8);
        memcpy(&shentsize, img + 0x3a, 2);
        memcpy(&shnum, img + 0x3c, 2);
        if (shoff + (uint64_t)shentsize * shnum > e->symfile_size || shentsize < 64) {
            snprintf(msg, cap, "GDB list: entry %zu: section headers out of bounds", n);
            return -1;
        }
        for (uint16_t s = 0; s < shnum; s++) {
            const unsigned char *sh = img + shoff + (uint64_t)s * shentsize;
            uint32_t type;
            uint64_t off, size, entsize;
            memcpy(&type, sh + 4, 4);
            memcpy(&off, sh + 0x18, 8);
            memcpy(&size, sh + 0x20, 8);
            memcpy(&entsize, sh + 0x38, 8);
            if (type != 2 /* SHT_SYMTAB */)
                continue;
            if (off + size > e->symfile_size || entsize != 24) {
                snprintf(msg, cap, "GDB list: entry %zu: bad symbol table", n);
                return -1;
            }
            for (uint64_t k = 0; k < size / 24; k++) {
                const unsigned char *sym = img + off + k * 24;
                uint64_t ssize;
                memcpy(&ssize, sym + 16, 8);
                if ((sym[4] & 0xf) == 2 /* STT_FUNC */ && ssize == 0)
                    execs++;
            }
        }
        prev = e;
    }
    *entries = n;
    *executor_symbols = execs;
    return 0;
}

double st_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- command-line options */

static const char *program_name(const char *argv0)
{
    const char *slash = strrchr(argv0, '/');
    return slash ? slash + 1 : argv0;
}

static void usage(const char *prog, const st_opt *opts, size_t n)
{
    fprintf(stderr, "usage: %s", prog);
    for (size_t i = 0; i < n; i++) {
        static const char *const meta[] = {"", " N", " N", " N", " S"};
        fprintf(stderr, " [%s%s]", opts[i].name, meta[opts[i].kind]);
    }
    fputc('\n', stderr);
}

/* A whole number >= 0: decimal, or hexadecimal after 0x. */
static int whole(const char *text, uint64_t max, uint64_t *out)
{
    int hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    const char *digits = hex ? text + 2 : text;
    char *end;
    /* strtoull would take a sign or blanks first: only digits here */
    if (!(hex ? isxdigit((unsigned char)*digits) : isdigit((unsigned char)*digits)))
        return 0;
    errno = 0;
    unsigned long long v = strtoull(digits, &end, hex ? 16 : 10);
    if (*end || errno || v > max)
        return 0;
    *out = v;
    return 1;
}

/* Stores text into the option's variable; false if it is not a valid value. */
static int set_value(const st_opt *o, const char *text)
{
    uint64_t v;
    switch (o->kind) {
    case ST_OPT_KIND_INT:
        if (!whole(text, INT_MAX, &v))
            return 0;
        *(int *)o->value = (int)v;
        return 1;
    case ST_OPT_KIND_SIZE:
        if (!whole(text, SIZE_MAX, &v))
            return 0;
        *(size_t *)o->value = (size_t)v;
        return 1;
    case ST_OPT_KIND_U64:
        return whole(text, UINT64_MAX, (uint64_t *)o->value);
    case ST_OPT_KIND_SECONDS: {
        char *end;
        errno = 0;
        double d = strtod(text, &end);
        if (end == text || *end || errno || !isfinite(d) || d < 0)
            return 0;
        *(double *)o->value = d;
        return 1;
    }
    default: /* flags take no value */
        return 0;
    }
}

int st_parse_options(int argc, char **argv, const st_opt *opts, size_t n)
{
    const char *prog = program_name(argc > 0 ? argv[0] : "stress");
    for (int i = 1; i < argc; i++) {
        const st_opt *o = NULL;
        for (size_t k = 0; k < n && !o; k++)
            if (!strcmp(argv[i], opts[k].name))
                o = &opts[k];
        if (!o) {
            fprintf(stderr, "%s: unknown argument '%s'\n", prog, argv[i]);
        } else if (o->kind == ST_OPT_KIND_FLAG) {
            *(int *)o->value = 1;
            continue;
        } else if (i + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value\n", prog, o->name);
        } else if (!set_value(o, argv[++i])) {
            fprintf(stderr, "%s: %s: '%s' is not %s\n", prog, o->name, argv[i],
                    o->kind == ST_OPT_KIND_SECONDS ? "a number of seconds >= 0"
                                                   : "a whole number >= 0 (or 0x...) in range");
        } else {
            continue;
        }
        usage(prog, opts, n);
        return 2;
    }
    return 0;
}
