// throw.cpp - C++ exceptions thrown by a helper that JIT code called, through
// JIT frames and re-entry, caught below the outermost shim call.
//
//   catcher -> shim -> outer -> vm_call -> shim -> mid -> vm_call -> shim
//           -> inner -> vm_native: throw VmError
//
// The JIT code and the shim have no compiled unwind tables: only the FDEs the
// runtime registered describe them. Checked:
//  A. the exception reaches catcher's handler with its payload intact, every
//     RAII guard in the C++ frames between the JIT frames was destroyed, and
//     six values catcher kept in registers across the call (callee-saved,
//     restored by the unwinder from the shim's save slots through the
//     executor rule) are intact; repeated with many seeds.
//  B. vm_call catches and rethrows (`throw;`) at every level: two rethrows,
//     each starting a new search through the JIT frames below.
//  C. vm_call catches the exception of the inner executor and returns a value
//     to the JIT code that called it, which goes on computing with its operand
//     stack, locals and frame: their registers (callee-saved in the C ABI)
//     must have been restored by the unwinder.
//  D. afterwards, JIT code runs normally.
//  E. runtimes created (registered) after the first throws, thrown through,
//     destroyed; the first runtime's frames are still found afterwards.
//  F. vm_trap throws, called from div's cold part (its trap path, placed after
//     every hot part of the executor: docs/runtime.md, "Hot and cold parts"):
//     caught below the shim, the call's return address in the cold part.
// Prints "unwind_throw: PASS" and exits 0 when all hold. With
// STENCILRT_FRAMES=0 the first throw finds no handler: std::terminate, SIGABRT.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "glue.h"

namespace {

enum { F_INNER, F_MID, F_OUTER, F_CATCH, F_PLAIN, F_DIV0, NPROGS };

// inner(x) = throws VmError(x + 1) from native 1
const char SRC_INNER[] =
    "    load 0\n"
    "    addi 1\n"
    "    native 1\n"
    "    addi 5\n"
    "    ret\n";
// mid(x) = inner(3x) + 1000
const char SRC_MID[] =
    "    load 0\n"
    "    push 3\n"
    "    mul\n"
    "    call 0 1\n"
    "    addi 1000\n"
    "    ret\n";
// outer(x) = 11 + mid(x)
const char SRC_OUTER[] =
    "    push 11\n"
    "    load 0\n"
    "    call 1 1\n"
    "    add\n"
    "    ret\n";
// catch_mid(x) = 11 + vm_call(inner, x) + local3, local3 = x + 2; the call
// returns (x + 1) * 10 when vm_call catches inner's exception (mode C).
const char SRC_CATCH[] =
    "    load 0\n"
    "    addi 2\n"
    "    store 3\n"
    "    push 11\n"
    "    load 0\n"
    "    call 0 1\n"
    "    add\n"
    "    load 3\n"
    "    add\n"
    "    ret\n";
// plain(x) = native 2 (identity) + 1
const char SRC_PLAIN[] =
    "    load 0\n"
    "    native 2\n"
    "    addi 1\n"
    "    ret\n";

// div0() traps: div's cold path calls vm_trap
const char SRC_DIV0[] =
    "    push 1\n"
    "    push 0\n"
    "    div\n"
    "    ret\n";

const long MAGIC = 0x5eed1e55;

// Scenario F: vm_trap throws instead of exiting, and keeps its return address.
bool trap_throws = false;
uintptr_t trap_ra = 0;

struct VmError : std::exception {
    long magic;
    vm_value value; // the value that reached the helper
    int guards;     // RAII guards alive when it was thrown
    int rethrows;   // how many vm_call levels caught and rethrew it
    char where[32];
    VmError(vm_value v, int g) : magic(MAGIC), value(v), guards(g), rethrows(0)
    {
        std::snprintf(where, sizeof where, "vm_native");
    }
    const char *what() const noexcept override { return "VmError from vm_native"; }
};

struct vm VM;
glue_prog progs[NPROGS];
int live_guards, destroyed_guards, failures;
enum Mode { PROPAGATE, RETHROW, CATCH_IN_CALL } mode = PROPAGATE;
int caught_in_call;

struct Guard {
    Guard() { live_guards++; }
    ~Guard()
    {
        live_guards--;
        destroyed_guards++;
    }
    Guard(const Guard &) = delete;
    Guard &operator=(const Guard &) = delete;
};

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            std::printf("FAIL: %s: ", #cond);                                              \
            std::printf(__VA_ARGS__);                                                      \
            std::printf("\n");                                                             \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

} // namespace

// A fresh VM frame for executor fn. Every function that catches calls the
// shim itself, so the registers its handler gets back were saved by the shim
// alone and restored through the runtime's rules only (no C++ frame between
// saves them); those functions are not sanitizer-instrumented, which keeps
// their register use the same in every build.
#define NO_SANITIZE __attribute__((noinline, no_sanitize("address", "undefined")))

struct Run {
    vm_frame frame;
    vm_value stack[GLUE_STACK];
    void *code;
    glue_shim_fn *shim;
    Run(struct vm *vm, size_t fn, vm_value argc, const vm_value *args)
    {
        std::memset(&frame, 0, sizeof frame);
        frame.vm = vm;
        frame.function = (int32_t)fn;
        for (vm_value i = 0; i < argc && i < VM_MAX_LOCALS; i++)
            frame.locals[i] = args[i];
        code = sr_executor_entry(vm->ex[fn]);
        shim = vm->shim;
    }
    vm_value go() { return shim(&frame, stack, code); }
};

// Re-entry; the guard object lives between JIT frames, so unwinding must run
// its destructor.
NO_SANITIZE vm_value vm_call(vm_frame *caller, vm_value function, vm_value argc,
                             vm_value *args)
{
    Guard guard;
    Run run(caller->vm, (size_t)function, argc, args);
    if (mode == RETHROW) {
        try {
            return run.go();
        } catch (VmError &e) {
            e.rethrows++;
            throw;
        }
    }
    if (mode == CATCH_IN_CALL && function == F_INNER) {
        try {
            return run.go();
        } catch (const VmError &e) {
            caught_in_call++;
            return e.value * 10;
        }
    }
    vm_value r = run.go();
    __asm__ volatile("" ::: "memory");
    return r;
}

vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    return value;
}

vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    if (which == 1)
        throw VmError(arg, live_guards);
    if (which == 2)
        return arg;
    vm_trap(frame, "unknown native");
}

[[noreturn]] void vm_trap(vm_frame *frame, const char *why)
{
    if (trap_throws) {
        trap_ra = (uintptr_t)__builtin_return_address(0);
        throw VmError(-1, live_guards);
    }
    std::fprintf(stderr, "unwind_throw: trap in %s: %s\n", VM.progs[frame->function].name, why);
    std::exit(3);
}

namespace {

// Scenario A (and B): values held in callee-saved registers across the throw.
NO_SANITIZE int catcher(struct vm *vm, long seed, int expect_rethrows)
{
    volatile long vseed = seed; // in memory: the reference after the catch
    long a = seed * 3 + 1, b = seed ^ 0x5a5a5a5a, c = seed * seed + 7, d = seed + 77,
         e = ~seed, f = (seed << 5) - seed;
    // Opaque: the compiler cannot recompute them, it must keep them somewhere
    // (callee-saved registers, live across the call into JIT code).
    __asm__ volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(e), "+r"(f));
    int before = failures;
    destroyed_guards = 0;
    vm_value x = seed;
    Run run(vm, F_OUTER, 1, &x);
    try {
        vm_value r = run.go();
        CHECK(false, "seed %ld: no exception, outer returned %lld", seed, (long long)r);
    } catch (const VmError &err) {
        __asm__ volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(e), "+r"(f));
        long s = vseed;
        CHECK(err.magic == MAGIC, "seed %ld: payload magic %#lx", s, err.magic);
        CHECK(err.value == s * 3 + 1, "seed %ld: payload value %lld", s, (long long)err.value);
        CHECK(!std::strcmp(err.what(), "VmError from vm_native"), "what() = %s", err.what());
        CHECK(err.guards == 2, "seed %ld: %d guards alive at the throw, expected 2 (the "
              "vm_calls)", s, err.guards);
        CHECK(err.rethrows == expect_rethrows, "seed %ld: %d rethrows, expected %d", s,
              err.rethrows, expect_rethrows);
        CHECK(live_guards == 0 && destroyed_guards == 2,
              "seed %ld: %d guards alive, %d destroyed after the catch (expected 0, 2)", s,
              live_guards, destroyed_guards);
        CHECK(a == s * 3 + 1, "seed %ld: a = %ld", s, a);
        CHECK(b == (s ^ 0x5a5a5a5a), "seed %ld: b = %ld", s, b);
        CHECK(c == s * s + 7, "seed %ld: c = %ld", s, c);
        CHECK(d == s + 77, "seed %ld: d = %ld", s, d);
        CHECK(e == ~s, "seed %ld: e = %ld", s, e);
        CHECK(f == (s << 5) - s, "seed %ld: f = %ld", s, f);
    } catch (...) {
        CHECK(false, "seed %ld: caught something that is not a VmError", (long)vseed);
    }
    return failures == before;
}

} // namespace

int main()
{
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    glue_asm(&progs[F_INNER], "inner", SRC_INNER);
    glue_asm(&progs[F_MID], "mid", SRC_MID);
    glue_asm(&progs[F_OUTER], "outer", SRC_OUTER);
    glue_asm(&progs[F_CATCH], "catch_mid", SRC_CATCH);
    glue_asm(&progs[F_PLAIN], "plain", SRC_PLAIN);
    glue_asm(&progs[F_DIV0], "div0", SRC_DIV0);
    if (!glue_init(&VM, progs, NPROGS, nullptr, (const void *)vm_call, (const void *)vm_print,
                   (const void *)vm_native, (const void *)vm_trap))
        return 2;
    sr_config cfg = sr_runtime_config(VM.rt);
    std::printf("config: frames=%d gdb=%d\n", cfg.frames, cfg.gdb);

    // A: propagate through three JIT levels, caught in catcher.
    int ok_a = 0;
    for (long seed = 1; seed <= 200; seed++)
        ok_a += catcher(&VM, seed * 7919 - 100, 0);
    std::printf("A: %d of 200 exceptions through 3 JIT levels caught intact below the shim\n",
                ok_a);

    // B: vm_call catches and rethrows at both re-entry levels.
    mode = RETHROW;
    int ok_b = 0;
    for (long seed = 1; seed <= 50; seed++)
        ok_b += catcher(&VM, seed * 31 + 5, 2);
    std::printf("B: %d of 50 exceptions rethrown at 2 levels caught intact\n", ok_b);

    // C: caught between JIT frames; the outer JIT code goes on.
    mode = CATCH_IN_CALL;
    int ok_c = 0;
    for (vm_value x = -5; x < 45; x++) {
        int before = failures;
        caught_in_call = 0;
        Run run(&VM, F_CATCH, 1, &x);
        vm_value r = run.go();
        vm_value want = 11 + (x + 1) * 10 + (x + 2);
        CHECK(caught_in_call == 1, "x=%lld: vm_call caught %d exceptions", (long long)x,
              caught_in_call);
        CHECK(r == want, "x=%lld: catch_mid returned %lld, expected %lld (JIT state after the "
              "catch)", (long long)x, (long long)r, (long long)want);
        CHECK(live_guards == 0, "x=%lld: %d guards alive", (long long)x, live_guards);
        ok_c += failures == before;
    }
    std::printf("C: %d of 50 runs caught in vm_call between JIT frames and continued "
                "correctly\n", ok_c);

    // D: normal execution afterwards.
    mode = PROPAGATE;
    vm_value x = 41;
    Run run(&VM, F_PLAIN, 1, &x);
    vm_value r = run.go();
    CHECK(r == 42, "plain(41) = %lld after the exceptions", (long long)r);
    std::printf("D: plain(41) = %lld\n", (long long)r);

    // F: thrown on a cold path. ret (instruction 3) follows div's hot part; the
    // cold parts come after every hot part, so after ret's start. Only on an
    // unwinder that passed A-D: after a broken restore the catcher's registers
    // are garbage, and the controls (UNWIND_TEST_MUTATE) want their exit 1.
    trap_throws = failures == 0;
    int ok_f = 0;
    for (int k = 0; k < 8 && trap_throws; k++) {
        Run div0(&VM, F_DIV0, 0, nullptr);
        try {
            div0.go();
            CHECK(false, "div0 returned");
        } catch (const VmError &err) {
            ok_f += err.value == -1 && err.magic == MAGIC;
        }
    }
    trap_throws = false;
    sr_executor *at_ex = nullptr;
    size_t at_instr = 0;
    bool in_div = sr_lookup_pc(VM.rt, (const void *)(trap_ra - 1), &at_ex, &at_instr) &&
                  at_ex == VM.ex[F_DIV0] && at_instr == 2;
    bool cold = trap_ra > (uintptr_t)sr_executor_instr(VM.ex[F_DIV0], 3);
    if (failures == 0) {
        CHECK(ok_f == 8 && in_div && cold, "F: %d of 8 throws caught; return address %#lx in "
              "div: %d, after the hot parts: %d", ok_f, (unsigned long)trap_ra, in_div, cold);
        std::printf("F: %d of 8 throws from div's cold part caught\n", ok_f);
    }

    // E: runtimes registered after libgcc has already sorted the first one's
    // frames, thrown through, destroyed (deregistered); the first one still
    // works afterwards. One-page arenas: one registration per executor.
    int ok_e = 0;
    sr_config small = SR_CONFIG_DEFAULT;
    small.arena_size = 4096;
    for (int round = 0; round < 20; round++) {
        struct vm other;
        if (!glue_init(&other, progs, NPROGS, &small, (const void *)vm_call,
                       (const void *)vm_print, (const void *)vm_native, (const void *)vm_trap))
            return 2;
        ok_e += catcher(&other, round * 13 + 1, 0);
        glue_fini(&other);
        ok_e += catcher(&VM, round * 17 + 2, 0);
    }
    std::printf("E: %d of 40 exceptions caught through runtimes created and destroyed "
                "meanwhile\n", ok_e);

    glue_fini(&VM);
    for (auto &p : progs)
        glue_asm_free(&p);
    std::printf("unwind_throw: %s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
