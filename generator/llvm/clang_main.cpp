// clang_main.cpp - clang's driver and cc1 from libclang-cpp, run in a forked
// child of the generator (compile.c). Starting clang-22 maps and relocates
// libLLVM and libclang-cpp for every compile, about half of a small unit's
// compile; a child forked from the generator, which has them mapped, skips it.
// This runs what clang's main and cc1_main run for a plain compile; anything
// else they handle (response files, environment overrides, a driver mode or
// target from the program's name, -###, -v, timing reports, -save-temps,
// -mllvm options) execs the executable from the child instead. The objects
// are the executable's, byte for byte (test_in_process).
//
// The child also lists every path the driver and cc1 looked for and did not
// find (ProbeFS): a header added there later (earlier in the search path, a
// __has_include'd file, a config file) changes the compile, and the cache
// (incremental.c) must see that, which the depfile's found files cannot say.
// A command left to the executable is first run here as a preprocess, for
// that list alone (probe_by_preprocess).
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticFrontend.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/Driver/Compilation.h>
#include <clang/Driver/Driver.h>
#include <clang/Driver/Job.h>
#include <clang/Driver/Tool.h>
#include <clang/Driver/ToolChain.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/FrontendTool/Utils.h>
#include <llvm/ADT/StringSet.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Signals.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <string>
#include <vector>

#include "llvm_bridge.h"

using namespace clang;

extern "C" const char *lb_clang_path(void)
{
    return SG_CLANG_PATH;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static bool starts_with(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

// The real file system, remembering each path a lookup failed for, made
// absolute (the next run may start elsewhere). A path found is in the
// depfile already; a directory listed is not recorded (the driver lists
// GCC installations, which a C compile's objects do not depend on).
class ProbeFS : public llvm::RTTIExtends<ProbeFS, llvm::vfs::ProxyFileSystem> {
public:
    static const char ID;
    explicit ProbeFS(llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> fs)
        : RTTIExtends(std::move(fs))
    {
    }
    llvm::ErrorOr<llvm::vfs::Status> status(const llvm::Twine &path) override
    {
        auto r = ProxyFileSystem::status(path);
        if (!r)
            missed(path);
        return r;
    }
    bool exists(const llvm::Twine &path) override
    {
        bool r = ProxyFileSystem::exists(path);
        if (!r)
            missed(path);
        return r;
    }
    llvm::ErrorOr<std::unique_ptr<llvm::vfs::File>>
    openFileForRead(const llvm::Twine &path) override
    {
        auto r = ProxyFileSystem::openFileForRead(path);
        if (!r)
            missed(path);
        return r;
    }
    // One path a line, sorted (none written when a path holds a line break);
    // false when the file cannot be written.
    bool write(const char *file) const
    {
        std::vector<std::string> paths;
        for (const auto &e : seen)
            paths.push_back(e.getKey().str());
        std::sort(paths.begin(), paths.end());
        std::string text;
        for (const std::string &p : paths) {
            // The list is one path a line: with a line break in one it
            // cannot be written, and a compile without it is not cached.
            if (p.find('\n') != std::string::npos)
                return true;
            text += p + "\n";
        }
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == (ssize_t)text.size();
        if (fd >= 0)
            ok &= close(fd) == 0;
        return ok;
    }

private:
    llvm::StringSet<> seen;
    void missed(const llvm::Twine &path)
    {
        llvm::SmallString<256> abs;
        path.toVector(abs);
        if (abs.empty())
            return;
        getUnderlyingFS().makeAbsolute(abs);
        seen.insert(abs);
    }
};
const char ProbeFS::ID = 0;

// What clang's main does before its driver runs, or cc1_main around its
// action, beyond a plain compile: left to the executable.
static bool needs_the_executable(char *const *argv)
{
    static const char *const env[] = {"CCC_OVERRIDE_OPTIONS", "CC_PRINT_OPTIONS",
                                      "CC_PRINT_HEADERS", "CC_LOG_DIAGNOSTICS",
                                      "CC_PRINT_PROC_STAT", "CC_PRINT_INTERNAL_STAT", nullptr};
    static const char *const flags[] = {"-###", "-v", "--verbose", "-save-temps", "--save-temps",
                                        "-ftime-report", "-ftime-trace", "-mllvm", "-print",
                                        "--print", "-no-canonical-prefixes", "-ccc-",
                                        "--driver-mode", "-fcrash-diagnostics", "-gen-reproducer",
                                        nullptr};
    for (const char *const *e = env; *e; e++)
        if (getenv(*e))
            return true;
    for (char *const *a = argv + 1; *a; a++) {
        if (**a == '@')
            return true;
        for (const char *const *f = flags; *f; f++)
            if (!strcmp(*a, *f) || (starts_with(*a, *f) && strcmp(*f, "-v") != 0))
                return true;
    }
    driver::ParsedClangName name = driver::ToolChain::getTargetAndModeFromProgramName(argv[0]);
    return name.DriverMode || name.TargetIsValid;
}

static int run_the_executable(char *const *argv)
{
    execv(argv[0], argv);
    llvm::errs() << base_name(argv[0]) << ": error: cannot run " << argv[0] << ": "
                 << strerror(errno) << "\n";
    return 127;
}

// As cc1's handler: the error through the compile's diagnostics, partial
// outputs removed, exit 70 when a crash report was asked for, else 1.
static void fatal(void *data, const char *reason, bool gen_crash_diag)
{
    static_cast<DiagnosticsEngine *>(data)->Report(diag::err_fe_error_backend) << reason;
    llvm::sys::RunInterruptHandlers();
    _exit(gen_crash_diag ? 70 : 1);
}

// LLVM ends a process with exit() in places (an unknown -mllvm option, say);
// in this child that must not run the generator's exit handlers, nor flush
// what it had buffered: the exit code alone goes to the parent.
static void exit_at_once(int status, void *)
{
    _exit(status);
}

static int compile_here(char *const *argv, const char *probes);

// What makes a command the executable's (needs_the_executable) without
// changing where headers are looked for: left out of its preprocess.
static bool left_out_of_preprocess(const char *a)
{
    static const char *const prefixes[] = {"-###", "-save-temps", "--save-temps", "-ftime-report",
                                           "-ftime-trace", "-print", "--print", "-ccc-",
                                           "-fcrash-diagnostics", "-gen-reproducer",
                                           "--driver-mode", "-no-canonical-prefixes", nullptr};
    for (const char *const *p = prefixes; *p; p++)
        if (starts_with(a, *p))
            return true;
    return !strcmp(a, "-v") || !strcmp(a, "--verbose") || !strcmp(a, "-MD");
}

// A command the executable runs lists no missing paths itself: the same
// command as a preprocess, compiled here in a child of its own whose messages
// go nowhere (the executable prints the compile's), lists them first.
static void probe_by_preprocess(char *const *argv, const char *probes)
{
    std::vector<char *> pp{argv[0]};
    for (char *const *a = argv + 1; *a; a++) {
        bool valued = !strcmp(*a, "-o") || !strcmp(*a, "-MF") || !strcmp(*a, "-mllvm");
        if (valued && !a[1])
            break;
        if (!strcmp(*a, "-o")) {
            pp.push_back(const_cast<char *>("-o"));
            pp.push_back(const_cast<char *>("/dev/null"));
        } else if (!valued && !left_out_of_preprocess(*a)) {
            pp.push_back(strcmp(*a, "-c") ? *a : const_cast<char *>("-E"));
        }
        a += valued;
    }
    pp.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 2);
        _exit(compile_here(pp.data(), probes));
    }
    int status;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        continue;
}

extern "C" int lb_clang_main(char *const *argv, const char *probes)
{
    on_exit(exit_at_once, nullptr);
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
    if (needs_the_executable(argv)) {
        if (probes)
            probe_by_preprocess(argv, probes);
        return run_the_executable(argv);
    }
    return compile_here(argv, probes);
}

// The driver and the one cc1 job of a plain compile, here.
static int compile_here(char *const *argv, const char *probes)
{
    std::vector<const char *> args{SG_CLANG_PATH};
    for (char *const *p = argv + 1; *p; p++)
        args.push_back(*p);
    // The driver's own messages: prefixed, and their warning flags applied,
    // as the executable's driver does.
    llvm::IntrusiveRefCntPtr<ProbeFS> fs =
        llvm::makeIntrusiveRefCnt<ProbeFS>(llvm::vfs::getRealFileSystem());
    std::unique_ptr<DiagnosticOptions> opts = CreateAndPopulateDiagOpts(args);
    auto *printer = new TextDiagnosticPrinter(llvm::errs(), *opts);
    printer->setPrefix(base_name(argv[0]));
    DiagnosticsEngine diags(DiagnosticIDs::create(), *opts, printer);
    ProcessWarningOptions(diags, *opts, *fs, false);
    driver::Driver driver(args[0], llvm::sys::getDefaultTargetTriple(), diags,
                          "clang LLVM compiler", fs);
    std::unique_ptr<driver::Compilation> c(driver.BuildCompilation(args));
    if (!c || diags.hasErrorOccurred())
        return 1;
    const driver::JobList &jobs = c->getJobs();
    if (jobs.size() != 1 || strcmp(jobs.begin()->getCreator().getName(), "clang") != 0)
        return run_the_executable(argv); // not one cc1 job (its driver warnings come twice)
    // Kept to the end, as cc1 keeps it under -disable-free: the child exits.
    CompilerInstance *ci = new CompilerInstance();
    if (!CompilerInvocation::CreateFromArgs(ci->getInvocation(), jobs.begin()->getArguments(),
                                            diags, args[0]))
        return 1;
    ci->createVirtualFileSystem(fs);
    ci->createDiagnostics();
    if (!ci->hasDiagnostics())
        return 1;
    llvm::install_fatal_error_handler(fatal, &ci->getDiagnostics());
    bool ok = ExecuteCompilerInvocation(ci);
    if (ok && probes && !fs->write(probes)) {
        llvm::errs() << base_name(argv[0]) << ": error: cannot write the list of paths probed '"
                     << probes << "'\n";
        ok = false;
    }
    llvm::errs().flush();
    return ok ? 0 : 1;
}
