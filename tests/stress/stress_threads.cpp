// stress_threads.cpp - many threads creating, running and freeing executors of
// one runtime while other threads unwind through JIT code and throw C++
// exceptions through it.
//
//   stress_threads [--seconds S] [--seed N] [--workers N] [--unwinders N]
//                  [--arena-size BYTES] [--no-throw] [--no-backtrace]
//                  [--debug-leak-executor] [--debug-leak-malloc]
//
// Workers (default 8) emit random valid programs over the bundled ops (loops,
// division, helpers, print, re-entry through the shim into "library"
// executors that are themselves replaced at random), run each at least twice
// (after emitting and before freeing), and compare with a reference
// interpreter; now and then one creates, uses and destroys a private runtime
// (libgcc register/deregister while others unwind). Unwinders (default 2) run
// executors whose helper (a) walks the stack with _Unwind_Backtrace and glibc
// backtrace() and checks the chain: every running executor's code, each
// followed by st_run_executor (the shim's C caller), and finally the thread's
// start function; (b) throws a C++ exception through JIT frames (one or two
// JIT levels, with a C++ cleanup frame in between) that is caught below the
// shim; every 50 rounds they also check an sr_runtime_stats() snapshot taken
// while the others churn. At the end every executor is freed: sr_runtime_stats must show none,
// the GDB list must be consistent, libgcc must still know the arenas, and after
// sr_runtime_destroy neither libgcc nor GDB knows any JIT code.
//
// The last stdout line is "stress: key=value ..."; exit status 0 iff no
// check failed. Debug switches are negative controls for the test suite.
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <unwind.h>

#include <atomic>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "stress_common.h"

struct dwarf_eh_bases {
    void *tbase, *dbase, *func;
};
extern "C" const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

namespace {

struct Options {
    double seconds = 4.0;
    uint64_t seed = 20240607;
    int workers = 8;
    int unwinders = 2;
    size_t arena_size = 64 * 1024;
    int no_throw = 0; // flags: int, as st_parse_options sets them
    int no_backtrace = 0;
    int leak_executor = 0;
    int leak_malloc = 0;
} opt;

const st_opt options[] = {
    ST_OPT_SECONDS("--seconds", &opt.seconds), ST_OPT_U64("--seed", &opt.seed),
    ST_OPT_INT("--workers", &opt.workers), ST_OPT_INT("--unwinders", &opt.unwinders),
    ST_OPT_SIZE("--arena-size", &opt.arena_size), ST_OPT_FLAG("--no-throw", &opt.no_throw),
    ST_OPT_FLAG("--no-backtrace", &opt.no_backtrace),
    ST_OPT_FLAG("--debug-leak-executor", &opt.leak_executor),
    ST_OPT_FLAG("--debug-leak-malloc", &opt.leak_malloc)};

struct Counters {
    std::atomic<long> iterations{0}, executors_created{0}, executors_freed{0}, runs{0},
        results_checked{0}, helper_calls{0}, prints{0}, reentries{0}, lib_replacements{0},
        private_runtimes{0}, stats_checked{0}, backtraces_unwind{0}, backtraces_glibc{0}, jit_frames_seen{0},
        max_jit_depth{0}, throws{0}, caught{0}, cleanups_during_unwind{0}, failures{0},
        emit_errors{0};
} cnt;

std::atomic<bool> stop{false};
void *volatile leak_slot; // --debug-leak-malloc
double deadline;
const void *symbols[4];

void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char *fmt, ...)
{
    long n = ++cnt.failures;
    if (n > 20)
        return;
    va_list ap;
    va_start(ap, fmt);
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL: %s\n", buf);
}

void note_max(std::atomic<long> &m, long v)
{
    long cur = m.load();
    while (v > cur && !m.compare_exchange_weak(cur, v)) {
    }
}

struct StressError {
    vm_value value;
};

struct Exec {
    sr_executor *ex = nullptr;
    std::vector<sr_instr> code;
    uintptr_t lo = 0, hi = 0; // code range in JIT memory
};

struct Active {
    uintptr_t lo, hi;
};

} // namespace

// frame->vm points at one of these: the thread's runtime, library and state.
struct vm {
    sr_runtime *rt = nullptr;
    st_shim_fn *shim = nullptr;
    enum { NLIB = 6 };
    Exec *lib[NLIB] = {};
    int lib_argc[NLIB] = {};
    int nlib = 0;
    st_rng rng{0};
    const void *start_fn = nullptr; // the thread's start function
    std::vector<Active> active;     // executors running now, outermost first
    int id = 0;
};

extern "C" {
vm_value st_run_executor(struct vm *c, Exec *e, vm_frame *f);
void *st_worker_main(void *arg);
void *st_unwinder_main(void *arg);
}

namespace {

// ---- emitting and checking

Exec *emit(struct vm *c, std::vector<sr_instr> code, const char *what)
{
    Exec *e = new Exec;
    e->code = std::move(code);
    char name[64];
    snprintf(name, sizeof name, "%s-t%d-%ld", what, c->id, cnt.executors_created.load());
    sr_status st = sr_emit(c->rt, e->code.data(), e->code.size(), name, &e->ex);
    if (st != SR_OK) {
        ++cnt.emit_errors;
        fail("sr_emit(%s, %zu instructions): %s: %s", name, e->code.size(), sr_strerror(st),
             sr_last_error());
        st_dump_program(e->code.data(), e->code.size());
        delete e;
        return nullptr;
    }
    e->lo = (uintptr_t)sr_executor_entry(e->ex);
    e->hi = e->lo + sr_executor_code_size(e->ex);
    if ((uintptr_t)sr_executor_instr(e->ex, e->code.size()) != e->hi)
        fail("sr_executor_instr(n) != entry + code size");
    ++cnt.executors_created;
    return e;
}

std::atomic<uintptr_t> last_freed_pc{0};

void release(Exec *e)
{
    if (!e)
        return;
    last_freed_pc = e->lo;
    sr_executor_free(e->ex);
    ++cnt.executors_freed;
    delete e;
}

int interp_call(void *ctx, vm_value fn, vm_value argc, const vm_value *args, vm_value *result)
{
    struct vm *c = (struct vm *)ctx;
    if (fn < 0 || fn >= c->nlib || !c->lib[fn])
        return -1;
    const std::vector<sr_instr> &code = c->lib[fn]->code;
    return st_interpret(nullptr, code.data(), code.size(), args, (int)argc, result);
}

// Run e (with arguments) and compare with the reference interpreter.
bool run_and_check(struct vm *c, Exec *e, const vm_value *args = nullptr, int argc = 0)
{
    st_interp_env env = {c, interp_call};
    vm_value want;
    int want_st = st_interpret(&env, e->code.data(), e->code.size(), args, argc, &want);
    if (want_st < 0) {
        fail("generator produced an invalid program (thread %d)", c->id);
        st_dump_program(e->code.data(), e->code.size());
        return false;
    }
    vm_frame f;
    memset(&f, 0, sizeof f);
    f.vm = c;
    for (int i = 0; i < argc; i++)
        f.locals[i] = args[i];
    vm_value got = 0;
    int got_st = 0;
    size_t depth = c->active.size();
    try {
        got = st_run_executor(c, e, &f);
    } catch (StressError &x) { // thrown by a helper, through JIT frames
        got = x.value;
        got_st = 1;
        ++cnt.caught;
    }
    ++cnt.runs;
    if (c->active.size() != depth)
        fail("thread %d: cleanup of st_run_executor frames did not run (%zu active, want %zu)",
             c->id, c->active.size(), depth);
    if (got_st != want_st || got != want) {
        fail("thread %d: executor returned %s %" PRId64 ", the interpreter %s %" PRId64, c->id,
             got_st ? "(threw)" : "", (int64_t)got, want_st ? "(threw)" : "", (int64_t)want);
        st_dump_program(e->code.data(), e->code.size());
        return false;
    }
    ++cnt.results_checked;
    return true;
}

// ---- the unwinding check

struct Trace {
    uintptr_t ip[256];
    int n;
};

_Unwind_Reason_Code collect(struct _Unwind_Context *ctx, void *arg)
{
    Trace *t = (Trace *)arg;
    if (t->n >= 256)
        return _URC_END_OF_STACK;
    t->ip[t->n++] = (uintptr_t)_Unwind_GetIP(ctx);
    return _URC_NO_REASON;
}

const void *function_of(uintptr_t ip)
{
    Dl_info info;
    if (!dladdr((void *)ip, &info) || !info.dli_saddr)
        return nullptr;
    return info.dli_saddr;
}

void print_chain(struct vm *c, const char *how, const Trace &t)
{
    fprintf(stderr, "  %s chain (%d frames), %zu executors running:\n", how, t.n,
            c->active.size());
    for (int i = 0; i < t.n; i++) {
        uintptr_t pc = t.ip[i] - 1;
        Dl_info info;
        const char *jit = "";
        for (const Active &a : c->active)
            if (pc >= a.lo && pc < a.hi)
                jit = " [JIT executor]";
        const char *name = dladdr((void *)pc, &info) && info.dli_sname ? info.dli_sname : "??";
        fprintf(stderr, "    #%d %#lx %s%s\n", i, (unsigned long)t.ip[i], name, jit);
    }
}

// The chain must contain, innermost first, for every running executor: a PC in
// its code, then st_run_executor; then the thread's start function.
bool chain_ok(struct vm *c, const Trace &t, const char *how)
{
    int pos = 0;
    long jit = 0;
    const char *missing = nullptr;
    size_t level = c->active.size();
    for (size_t l = level; l-- > 0 && !missing;) {
        const Active &a = c->active[l];
        while (pos < t.n && !(t.ip[pos] - 1 >= a.lo && t.ip[pos] - 1 < a.hi))
            pos++;
        if (pos == t.n) {
            missing = "a JIT frame of a running executor";
            break;
        }
        jit++;
        pos++;
        while (pos < t.n && function_of(t.ip[pos] - 1) != (const void *)st_run_executor)
            pos++;
        if (pos == t.n)
            missing = "st_run_executor (the shim's caller)";
        pos++;
    }
    if (!missing) {
        while (pos < t.n && function_of(t.ip[pos] - 1) != c->start_fn)
            pos++;
        if (pos >= t.n)
            missing = "the thread's start function";
    }
    if (missing) {
        fail("thread %d: %s chain does not reach %s", c->id, how, missing);
        if (cnt.failures <= 3)
            print_chain(c, how, t);
        return false;
    }
    cnt.jit_frames_seen += jit;
    note_max(cnt.max_jit_depth, jit);
    return true;
}

void check_backtraces(struct vm *c)
{
    Trace t;
    t.n = 0;
    _Unwind_Backtrace(collect, &t);
    if (chain_ok(c, t, "_Unwind_Backtrace"))
        ++cnt.backtraces_unwind;
    void *pcs[256];
    int n = backtrace(pcs, 256);
    t.n = n;
    for (int i = 0; i < n; i++)
        t.ip[i] = (uintptr_t)pcs[i];
    if (chain_ok(c, t, "backtrace()"))
        ++cnt.backtraces_glibc;
}

} // namespace

// ---- the helpers the stencils call

extern "C" {

vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc, vm_value *args)
{
    struct vm *c = caller->vm;
    if (function < 0 || function >= c->nlib || !c->lib[function] || argc > VM_MAX_LOCALS) {
        fail("vm_call: bad function %" PRId64, (int64_t)function);
        return 0;
    }
    vm_frame f;
    memset(&f, 0, sizeof f);
    f.vm = c;
    f.function = (int32_t)function;
    for (vm_value i = 0; i < argc; i++)
        f.locals[i] = args[i];
    ++cnt.reentries;
    return st_run_executor(c, c->lib[function], &f);
}

vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    ++cnt.prints;
    return value ^ 0x5a;
}

vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    struct vm *c = frame->vm;
    switch (which) {
    case ST_NATIVE_MIX: ++cnt.helper_calls; return (vm_value)((uint64_t)arg * 3 + 1);
    case ST_NATIVE_BACKTRACE: check_backtraces(c); return arg;
    case ST_NATIVE_THROW: ++cnt.throws; throw StressError{arg};
    default: fail("vm_native: unknown helper %" PRId64, (int64_t)which); return arg;
    }
}

void vm_trap(vm_frame *frame, const char *why)
{
    (void)frame;
    fprintf(stderr, "FAIL: vm_trap called: %s\n", why);
    abort();
}

// Runs e through the shim; the guard keeps `active` right even when an
// exception unwinds through this frame (a C++ cleanup between JIT frames).
__attribute__((noinline)) vm_value st_run_executor(struct vm *c, Exec *e, vm_frame *f)
{
    struct Guard {
        struct vm *c;
        ~Guard()
        {
            c->active.pop_back();
            if (std::uncaught_exceptions() > 0)
                ++cnt.cleanups_during_unwind;
        }
    } guard{c};
    c->active.push_back(Active{e->lo, e->hi});
    vm_value stack[1024];
    vm_value v = c->shim(f, stack, sr_executor_entry(e->ex));
    __asm__ volatile("" ::: "memory");
    return v;
}

} // extern "C"

namespace {

std::vector<sr_instr> gen(struct vm *c, bool library, int nparams)
{
    static thread_local sr_instr buf[600];
    st_gen_opts o;
    memset(&o, 0, sizeof o);
    o.max_instrs = 600;
    o.nlib = library ? 0 : c->nlib;
    o.lib_argc = c->lib_argc;
    o.nparams = nparams;
    o.allow_native_mix = 1;
    o.allow_print = 1;
    o.allow_backtrace = !opt.no_backtrace && st_below(&c->rng, 8) == 0;
    o.allow_throw = !opt.no_throw && st_below(&c->rng, 8) == 0;
    o.allow_loops = 1;
    size_t n = st_gen_program(&c->rng, &o, buf);
    return std::vector<sr_instr>(buf, buf + n);
}

void replace_lib(struct vm *c, int slot)
{
    Exec *old = c->lib[slot];
    if (old) {
        vm_value args[3] = {1, 2, 3};
        run_and_check(c, old, args, c->lib_argc[slot]);
        c->lib[slot] = nullptr;
        release(old);
    }
    Exec *e = emit(c, gen(c, true, c->lib_argc[slot]), "lib");
    c->lib[slot] = e;
    if (e) {
        vm_value args[3] = {(vm_value)st_next(&c->rng), -5, 77};
        run_and_check(c, e, args, c->lib_argc[slot]);
    }
    ++cnt.lib_replacements;
}

bool time_up()
{
    return stop.load(std::memory_order_relaxed) || st_now() >= deadline;
}

// A private runtime: created, used and destroyed by one thread while the others
// run (libgcc registration and deregistration under concurrent unwinding).
void private_runtime(struct vm *parent)
{
    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.arena_size = 16384;
    struct vm c;
    c.id = parent->id;
    c.rng.s = st_next(&parent->rng);
    c.start_fn = parent->start_fn;
    if (sr_runtime_create(&st_stencil_set, symbols, &cfg, &c.rt) != SR_OK) {
        fail("private sr_runtime_create: %s", sr_last_error());
        return;
    }
    c.shim = (st_shim_fn *)sr_shim_entry(c.rt);
    std::vector<Exec *> live;
    for (int i = 0, n = 1 + (int)st_below(&c.rng, 4); i < n; i++) {
        Exec *e = emit(&c, gen(&c, false, 0), "private");
        if (e) {
            run_and_check(&c, e);
            live.push_back(e);
        }
    }
    // Free all but the last; sr_runtime_destroy must free that one.
    for (size_t i = 0; i + 1 < live.size(); i++)
        release(live[i]);
    sr_stats s = sr_runtime_stats(c.rt);
    if (s.executors != (live.empty() ? 0 : 1))
        fail("private runtime: %zu executors alive, expected %d", s.executors,
             live.empty() ? 0 : 1);
    if (!live.empty()) {
        ++cnt.executors_freed; // by sr_runtime_destroy
        delete live.back();
    }
    sr_runtime_destroy(c.rt);
    ++cnt.private_runtimes;
}

} // namespace

extern "C" void *st_worker_main(void *arg)
{
    struct vm *c = (struct vm *)arg;
    c->start_fn = (const void *)st_worker_main;
    for (int i = 0; i < c->nlib; i++)
        replace_lib(c, i);
    std::vector<Exec *> ring;
    size_t keep = 4 + st_below(&c->rng, 9);
    while (!time_up()) {
        ++cnt.iterations;
        if (st_below(&c->rng, 16) == 0)
            replace_lib(c, (int)st_below(&c->rng, (uint64_t)c->nlib));
        Exec *e = emit(c, gen(c, false, 0), "w");
        if (e) {
            run_and_check(c, e);
            ring.push_back(e);
        }
        while (ring.size() > keep) {
            size_t k = st_below(&c->rng, ring.size());
            Exec *victim = ring[k];
            ring.erase(ring.begin() + (long)k);
            run_and_check(c, victim); // still intact after others' churn
            release(victim);
        }
        if (st_below(&c->rng, 64) == 0)
            private_runtime(c);
    }
    if (opt.leak_executor && c->id == 0 && !ring.empty()) {
        fprintf(stderr, "debug: leaving one executor of thread 0 alive\n");
        delete ring.back(); // the executor itself stays registered
        ring.pop_back();
    }
    for (Exec *e : ring) {
        run_and_check(c, e);
        release(e);
    }
    for (int i = 0; i < c->nlib; i++) {
        release(c->lib[i]);
        c->lib[i] = nullptr;
    }
    return nullptr;
}

namespace {

std::vector<sr_instr> prog(std::initializer_list<sr_instr> l)
{
    return std::vector<sr_instr>(l);
}

sr_instr I(uint32_t op, uint64_t a = 0, uint64_t b = 0)
{
    sr_instr in;
    memset(&in, 0, sizeof in);
    in.op = op;
    in.operand[0] = a;
    in.operand[1] = b;
    return in;
}

} // namespace

// Unwinder: fixed programs whose helper walks the stack or throws, one or two
// JIT levels deep, re-emitted now and then; plus random ones that may do both.
extern "C" void *st_unwinder_main(void *arg)
{
    struct vm *c = (struct vm *)arg;
    c->start_fn = (const void *)st_unwinder_main;
    // Library functions (called with `call`): only the enabled kinds.
    int lib_bt = -1, lib_throw = -1;
    c->nlib = 0;
    if (!opt.no_backtrace)
        lib_bt = c->nlib++;
    if (!opt.no_throw)
        lib_throw = c->nlib++;
    for (int i = 0; i < c->nlib; i++)
        c->lib_argc[i] = 1;
    std::vector<Exec *> progs;
    auto rebuild = [&]() {
        for (Exec *e : progs)
            release(e);
        progs.clear();
        for (int i = 0; i < c->nlib; i++)
            release(c->lib[i]);
        uint64_t k = st_below(&c->rng, 1000);
        if (lib_bt >= 0)
            c->lib[lib_bt] = emit(c, prog({I(ST_load, 0), I(ST_native, ST_NATIVE_BACKTRACE),
                                           I(ST_addi, 1), I(ST_ret)}), "lib_bt");
        if (lib_throw >= 0)
            c->lib[lib_throw] = emit(c, prog({I(ST_load, 0), I(ST_addi, 1),
                                              I(ST_native, ST_NATIVE_THROW), I(ST_ret)}),
                                     "lib_throw");
        if (!opt.no_backtrace) {
            progs.push_back(emit(c, prog({I(ST_push, k), I(ST_native, ST_NATIVE_BACKTRACE),
                                          I(ST_ret)}), "bt1"));
            progs.push_back(emit(c, prog({I(ST_push, k), I(ST_call, (uint64_t)lib_bt, 1),
                                          I(ST_addi, 2), I(ST_ret)}), "bt2"));
        }
        if (!opt.no_throw) {
            progs.push_back(emit(c, prog({I(ST_push, k), I(ST_native, ST_NATIVE_THROW),
                                          I(ST_ret)}), "throw1"));
            progs.push_back(emit(c, prog({I(ST_push, k), I(ST_call, (uint64_t)lib_throw, 1),
                                          I(ST_addi, 5), I(ST_ret)}), "throw2"));
        }
        progs.push_back(emit(c, gen(c, false, 0), "mixed"));
    };
    long round = 0;
    bool frames = sr_runtime_config(c->rt).frames;
    do {
        if (round++ % 50 == 0) {
            rebuild();
            // Stats taken while the others emit and free: consistent snapshots.
            sr_stats s = sr_runtime_stats(c->rt);
            ++cnt.stats_checked;
            if (s.arenas < 1 || (frames && s.frames_registered != s.arenas + 1))
                fail("sr_runtime_stats: %zu arenas, %zu libgcc registrations (expected "
                     "arenas + 1 for the shim)", s.arenas, s.frames_registered);
        }
        for (Exec *e : progs)
            if (e)
                run_and_check(c, e);
    } while (!time_up());
    for (Exec *e : progs)
        release(e);
    for (int i = 0; i < c->nlib; i++) {
        release(c->lib[i]);
        c->lib[i] = nullptr;
    }
    return nullptr;
}

namespace {

bool fde_known(uintptr_t pc)
{
    struct dwarf_eh_bases b;
    return _Unwind_Find_FDE((void *)pc, &b) != nullptr;
}

} // namespace

int main(int argc, char **argv)
{
    if (ST_PARSE_OPTIONS(argc, argv, options))
        return 2;
    setvbuf(stdout, nullptr, _IOLBF, 0);
    symbols[0] = (const void *)vm_call;
    symbols[1] = (const void *)vm_print;
    symbols[2] = (const void *)vm_native;
    symbols[3] = (const void *)vm_trap;

    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.arena_size = opt.arena_size;
    sr_runtime *rt;
    if (sr_runtime_create(&st_stencil_set, symbols, &cfg, &rt) != SR_OK) {
        fprintf(stderr, "FAIL: sr_runtime_create: %s\n", sr_last_error());
        return 1;
    }
    st_shim_fn *shim = (st_shim_fn *)sr_shim_entry(rt);
    uintptr_t shim_pc = (uintptr_t)shim;
    sr_config eff = sr_runtime_config(rt);
    double t0 = st_now();
    deadline = t0 + opt.seconds;

    int nthreads = opt.workers + opt.unwinders;
    std::vector<struct vm> ctx((size_t)nthreads);
    std::vector<pthread_t> tids((size_t)nthreads);
    for (int i = 0; i < nthreads; i++) {
        struct vm &c = ctx[(size_t)i];
        c.rt = rt;
        c.shim = shim;
        c.id = i;
        c.rng.s = opt.seed * 1000003u + (uint64_t)i;
        if (i < opt.workers) {
            c.nlib = 4;
            for (int k = 0; k < c.nlib; k++)
                c.lib_argc[k] = k % 3;
        }
    }
    // Unwinders first, so they are busy for the whole run.
    for (int i = nthreads - 1; i >= 0; i--) {
        void *(*fn)(void *) = i < opt.workers ? st_worker_main : st_unwinder_main;
        if (pthread_create(&tids[(size_t)i], nullptr, fn, &ctx[(size_t)i]) != 0) {
            fprintf(stderr, "FAIL: pthread_create\n");
            return 1;
        }
    }
    for (int i = 0; i < opt.workers; i++)
        pthread_join(tids[(size_t)i], nullptr);
    stop = true; // unwinders stop once the workers are done
    for (int i = opt.workers; i < nthreads; i++)
        pthread_join(tids[(size_t)i], nullptr);
    double elapsed = st_now() - t0;

    // Everything was freed: the runtime must agree, and so must GDB's list.
    sr_stats s = sr_runtime_stats(rt);
    if (s.executors != 0)
        fail("%zu executors still alive after every executor was freed", s.executors);
    if (cnt.executors_created != cnt.executors_freed + (opt.leak_executor ? 1 : 0))
        fail("created %ld executors, freed %ld", cnt.executors_created.load(),
             cnt.executors_freed.load());
    size_t entries = 0, exec_syms = 0;
    char msg[256];
    if (st_check_gdb_list(&entries, &exec_syms, msg, sizeof msg) != 0)
        fail("%s", msg);
    if (eff.gdb && entries != s.gdb_entries)
        fail("GDB list has %zu entries, sr_runtime_stats says %zu", entries, s.gdb_entries);
    if (exec_syms != s.executors)
        fail("GDB symbols name %zu executors, sr_runtime_stats says %zu", exec_syms,
             s.executors);
    // libgcc still covers the arenas (one FDE per arena) and the shim ...
    uintptr_t freed_pc = last_freed_pc;
    if (eff.frames && !fde_known(shim_pc))
        fail("libgcc has no FDE for the shim before sr_runtime_destroy");
    if (eff.frames && freed_pc && !fde_known(freed_pc))
        fail("libgcc has no FDE for a live arena before sr_runtime_destroy");
    sr_runtime_destroy(rt);
    // ... and nothing after the runtime is gone.
    if (fde_known(shim_pc))
        fail("libgcc still has an FDE for the shim after sr_runtime_destroy");
    if (freed_pc && fde_known(freed_pc))
        fail("libgcc still has an FDE for an arena after sr_runtime_destroy");
    if (__jit_debug_descriptor.first_entry)
        fail("GDB list not empty after sr_runtime_destroy");
    if (cnt.throws != cnt.caught)
        fail("%ld exceptions thrown, %ld caught", cnt.throws.load(), cnt.caught.load());
    if (opt.leak_malloc) {
        leak_slot = malloc(4321);
        leak_slot = nullptr;
        fprintf(stderr, "debug: leaked 4321 bytes\n");
    }

    printf("stress: seed=%" PRIu64 " workers=%d unwinders=%d seconds=%.2f iterations=%ld "
           "executors_created=%ld executors_freed=%ld runs=%ld results_checked=%ld "
           "helper_calls=%ld prints=%ld reentries=%ld lib_replacements=%ld "
           "private_runtimes=%ld stats_checked=%ld backtraces_unwind=%ld backtraces_glibc=%ld "
           "jit_frames_seen=%ld max_jit_depth=%ld throws=%ld caught=%ld "
           "cleanups_during_unwind=%ld arenas=%zu gdb_entries=%zu final_executors=%zu "
           "emit_errors=%ld failures=%ld\n",
           opt.seed, opt.workers, opt.unwinders, elapsed, cnt.iterations.load(),
           cnt.executors_created.load(), cnt.executors_freed.load(), cnt.runs.load(),
           cnt.results_checked.load(), cnt.helper_calls.load(), cnt.prints.load(),
           cnt.reentries.load(), cnt.lib_replacements.load(), cnt.private_runtimes.load(), cnt.stats_checked.load(),
           cnt.backtraces_unwind.load(), cnt.backtraces_glibc.load(),
           cnt.jit_frames_seen.load(), cnt.max_jit_depth.load(), cnt.throws.load(),
           cnt.caught.load(), cnt.cleanups_during_unwind.load(), s.arenas, s.gdb_entries,
           s.executors, cnt.emit_errors.load(), cnt.failures.load());
    return cnt.failures ? 1 : 0;
}
