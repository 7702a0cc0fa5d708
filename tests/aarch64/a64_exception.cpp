// a64_exception.cpp - a C++ exception thrown in a helper called from JIT code,
// through JIT frames (stencils and the shim), C frames (vm_run, vm_call) and
// re-entered JIT frames, caught below the shim, on AArch64 (under qemu-user).
//
//   a64_exception PROGRAM.tvm DEPTH...
//
// For each DEPTH the program's main runs with local 0 = DEPTH (its `native
// trap` throws once the recursion is that deep); prints one line per run:
//   depth D caught "MESSAGE" cleanups C result R
// C counts the RAII objects destroyed during unwinding (one per helper frame
// the exception passed). A run that does not throw prints "depth D result R".
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "a64_glue.h"

static int cleanups;

struct cleanup {
    ~cleanup() { cleanups++; }
};

extern "C" vm_value vm_native(vm_frame *frame, vm_value which, vm_value arg)
{
    cleanup c;
    (void)frame;
    if (which == A64_NATIVE_TRAP && arg <= 0)
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
        std::fprintf(stderr, "usage: a64_exception PROGRAM DEPTH...\n");
        return 2;
    }
    struct vm *vm = a64_load(argv[1], 1);
    for (int i = 2; i < argc; i++) {
        vm_value depth = std::atoll(argv[i]);
        cleanups = 0;
        try {
            vm_value r = tvm_run(vm, "main", 1, &depth);
            std::printf("depth %lld result %lld\n", (long long)depth, (long long)r);
        } catch (const std::exception &e) {
            std::printf("depth %lld caught \"%s\" cleanups %d\n", (long long)depth, e.what(),
                        cleanups);
        }
    }
    tvm_unload(vm);
    return 0;
}
