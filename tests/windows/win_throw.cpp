// win_throw.cpp - a C++ exception thrown in a helper called from JIT code,
// through JIT frames (stencils and the shim), C frames (vm_run, vm_call) and
// re-entered JIT frames, caught in main, on Windows x64 (MinGW-w64's
// libstdc++, whose exceptions are SEH exceptions dispatched and unwound by
// the system's unwinder), under Wine.
//
//   win_throw PROGRAM.tvm DEPTH...
//
// For each DEPTH the program's main runs with local 0 = DEPTH (its `native
// trap` throws once the recursion is that deep); prints one line per run:
//   depth D caught "MESSAGE" cleanups C
// C counts the RAII objects destroyed during unwinding (the helper's own: its
// destructor runs in the unwind's second phase, which walks the same frames).
// A run that does not throw prints "depth D result R".
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "win_glue.h"

static int cleanups;

struct cleanup {
    ~cleanup() { cleanups++; }
};

extern "C" vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    cleanup c;
    if (which == WIN_NATIVE_TRAP && arg <= 0)
        throw std::runtime_error("thrown at depth " + std::to_string(frame->locals[1]));
    return arg;
}

extern "C" vm_value vm_print(vm_frame *frame, vm_value value)
{
    (void)frame;
    return value;
}

extern "C" [[noreturn]] void vm_trap(vm_frame *frame, const char *why)
{
    (void)frame;
    throw std::logic_error(why);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        std::fprintf(stderr, "usage: win_throw PROGRAM DEPTH...\n");
        return 2;
    }
    std::setvbuf(stdout, nullptr, _IONBF, 0);
    struct vm *vm = win_load(argv[1], 1);
    for (int i = 2; i < argc; i++) {
        vm_value depth = std::atoll(argv[i]);
        cleanups = 0;
        win_depth = 0;
        try {
            vm_value r = win_run(vm, "main", 1, &depth);
            std::printf("depth %lld result %lld\n", (long long)depth, (long long)r);
        } catch (const std::exception &e) {
            std::printf("depth %lld caught \"%s\" cleanups %d\n", (long long)depth, e.what(),
                        cleanups);
        }
    }
    win_unload(vm);
    return 0;
}
