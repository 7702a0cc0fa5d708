// win_throw.cpp - a C++ exception thrown in a helper called from JIT code,
// through JIT frames (stencils and the shim), C frames (vm_run, vm_call) and
// re-entered JIT frames, caught in main, on Windows x64 (MinGW-w64's
// libstdc++, whose exceptions are SEH exceptions dispatched and unwound by
// the system's unwinder), under Wine.
//
//   win_throw PROGRAM.tvm DEPTH...
//
// For each DEPTH the program's main runs with local 0 = DEPTH (its `native
// trap` throws once the recursion is that deep; cold.tvm's div by 0 calls
// vm_trap, which throws); prints one line per run:
//   depth D caught "MESSAGE" cleanups C outer O registers kept
// C counts the throwing helper's RAII object destroyed during unwinding (its
// destructor runs in the unwind's second phase, which walks the same frames);
// O the same for a C++ frame between JIT frames (nested.tvm only, where
// `native backtrace` calls back into tinyvm); "registers kept": main's
// values in nonvolatile registers came back (else WRONG). A run that does
// not throw prints "depth D result R registers ...". Exit 1 unless every run
// threw and kept its registers.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "win_glue.h"

static int cleanups, outer_cleanups;

struct cleanup {
    int *count;
    ~cleanup() { (*count)++; }
};

// `native backtrace` (nested.tvm): tinyvm entered again from a C++ frame
// with a destructor, which the unwind must run when the exception crosses it
// on its way from the inner JIT frames to the outer one.
static vm_value call_back_into_tinyvm(vm_frame *frame, vm_value arg)
{
    cleanup outer{&outer_cleanups};
    vm_value args[2] = {arg, 0};
    return win_run(frame->vm, "recurse", 2, args);
}

extern "C" vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    if (which == WIN_NATIVE_BACKTRACE)
        return call_back_into_tinyvm(frame, arg);
    cleanup c{&cleanups};
    if (which == WIN_NATIVE_TRAP && arg <= 0)
        throw std::runtime_error("thrown at depth " + std::to_string(frame->locals[1]));
    return arg;
}

extern "C" vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    return value;
}

// The message names the instruction that called (cold.tvm: div's trap path,
// "in its cold part" when the op was split, docs/runtime.md "Hot and cold
// parts"), from the call's return address.
extern "C" [[noreturn]] void vm_trap(vm_frame *frame, const char *why)
{
    win_code from = win_locate(frame->vm, (uintptr_t)__builtin_return_address(0) - 1);
    throw std::logic_error(std::string(why) + " at " + (from.instr ? from.instr : "no executor") +
                           (from.cold ? " in its cold part" : " in its hot part"));
}

// A value the compiler cannot know or fold: the same for the same i.
__attribute__((noinline)) static long long opaque(long long i)
{
    __asm__ volatile("" : "+r"(i));
    return i * 0x9E3779B97F4A7C15ll + 12345;
}

// Seven values live across the try and read in the catch, so clang keeps
// them in nonvolatile registers (rbx, rsi, rdi, r12-r15): the unwind must
// restore each from the frame that saved it, which for the frames under main
// is what the JIT frames' unwind information says. Prints the run's line,
// ending in whether they all came back.
static bool run_one(struct vm *vm, vm_value depth)
{
    long long v0 = opaque(0), v1 = opaque(1), v2 = opaque(2), v3 = opaque(3), v4 = opaque(4),
              v5 = opaque(5), v6 = opaque(6);
    cleanups = outer_cleanups = 0;
    win_depth = 0;
    bool caught = false;
    try {
        vm_value r = win_run(vm, "main", 1, &depth);
        std::printf("depth %lld result %lld", (long long)depth, (long long)r);
    } catch (const std::exception &e) {
        std::printf("depth %lld caught \"%s\" cleanups %d outer %d", (long long)depth,
                    e.what(), cleanups, outer_cleanups);
        caught = true;
    }
    bool kept = v0 == opaque(0) && v1 == opaque(1) && v2 == opaque(2) && v3 == opaque(3) &&
                v4 == opaque(4) && v5 == opaque(5) && v6 == opaque(6);
    std::printf(" registers %s\n", kept ? "kept" : "WRONG");
    return caught && kept;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        std::fprintf(stderr, "usage: win_throw PROGRAM DEPTH...\n");
        return 2;
    }
    std::setvbuf(stdout, nullptr, _IONBF, 0);
    struct vm *vm = win_load(argv[1], 1);
    int failed = 0;
    for (int i = 2; i < argc; i++)
        failed += !run_one(vm, std::atoll(argv[i]));
    tvm_unload(vm);
    return failed ? 1 : 0;
}
