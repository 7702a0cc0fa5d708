// clang_main.cpp - clang's driver and cc1 from libclang-cpp, run in a forked
// child of the generator (compile.c). Starting clang-22 maps and relocates
// libLLVM and libclang-cpp for every compile, about half of a small unit's
// compile; a child forked from the generator, which has them mapped, skips it.
// The objects are the clang executable's, byte for byte (test_in_process).
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/Driver/Compilation.h>
#include <clang/Driver/Driver.h>
#include <clang/Driver/Job.h>
#include <clang/Driver/Tool.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/FrontendTool/Utils.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>

#include <cstring>
#include <unistd.h>
#include <vector>

#include "llvm_bridge.h"

using namespace clang;

extern "C" const char *lb_clang_path(void)
{
    return SG_CLANG_PATH;
}

// As clang's own handler: say why and end with 70 (an internal compiler
// error); _exit, for the parent's exit handlers are not the child's.
static void fatal(void *, const char *reason, bool)
{
    llvm::errs() << "error: " << reason << "\n";
    llvm::errs().flush();
    _exit(70);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

extern "C" int lb_clang_main(char *const *argv)
{
    llvm::install_fatal_error_handler(fatal, nullptr);
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
    std::vector<const char *> args{SG_CLANG_PATH};
    for (char *const *p = argv + 1; *p; p++)
        args.push_back(*p);
    // The driver's own messages, prefixed as the executable prefixes them.
    DiagnosticOptions opts;
    auto *printer = new TextDiagnosticPrinter(llvm::errs(), opts);
    printer->setPrefix(base_name(argv[0]));
    DiagnosticsEngine diags(DiagnosticIDs::create(), opts, printer);
    driver::Driver driver(args[0], llvm::sys::getDefaultTargetTriple(), diags);
    std::unique_ptr<driver::Compilation> c(driver.BuildCompilation(args));
    if (!c || diags.hasErrorOccurred())
        return 1;
    const driver::JobList &jobs = c->getJobs();
    if (jobs.size() != 1 || strcmp(jobs.begin()->getCreator().getName(), "clang") != 0) {
        execv(argv[0], argv); // not one cc1 job: the executable knows what to do
        llvm::errs() << base_name(argv[0]) << ": error: cannot run " << argv[0] << "\n";
        return 127;
    }
    auto ci = std::make_unique<CompilerInstance>();
    if (!CompilerInvocation::CreateFromArgs(ci->getInvocation(), jobs.begin()->getArguments(),
                                            diags, args[0]))
        return 1;
    ci->createDiagnostics();
    if (!ci->hasDiagnostics())
        return 1;
    bool ok = ExecuteCompilerInvocation(ci.get());
    llvm::errs().flush();
    return ok ? 0 : 1;
}
