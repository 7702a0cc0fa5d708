"""Generated headers: byte-identical across runs, -j values and checkout paths;
they compile cleanly as C11; the dispatcher picks the host's header."""
import os
import re

from sgtest import BUNDLED_OPS, BUNDLED_TRIPLES, TRIPLE, check, read, write

ASAN = True
HEADERS = ["jit_stencils.h", "jit_stencils-%s.h" % TRIPLE]


def headers(outdir):
    return {h: read(os.path.join(outdir, h), "rb") for h in HEADERS}


def test_deterministic_across_jobs_and_paths(ctx):
    # Two checkouts at different depths and names, built with -j1 and -j2.
    a = ctx.bundled_copy("a")
    b = ctx.bundled_copy(os.path.join("deeper", "checkout-b"))
    out_a = os.path.join(a, "out")
    out_b = os.path.join(ctx.tmp, "elsewhere", "out")
    ctx.build_stencils(os.path.join(a, "stencils", "stencils.yaml"), out_a, "-j", "1")
    ctx.build_stencils(os.path.join(b, "stencils", "stencils.yaml"), out_b, "-j", "2")
    ha, hb = headers(out_a), headers(out_b)
    for h in HEADERS:
        check(ha[h] == hb[h], "%s differs between the two builds", h)
        for path in (a, b):
            check(path.encode() not in ha[h] and path.encode() not in hb[h],
                  "%s contains the checkout path", h)
    # And once more in place: a rebuild changes nothing.
    ctx.build_stencils(os.path.join(a, "stencils", "stencils.yaml"), out_a, "-j", "2")
    check(headers(out_a) == ha, "a second build in place changed the headers")


def test_header_compiles_as_c11_and_cxx17(ctx):
    """The header is strict C11 and C++17 (a C++ VM includes it too): no array
    designators, each entry at its SG_OP_ index."""
    out = os.path.join(ctx.tmp, "out")
    ctx.build_stencils(ctx.path("stencils", "stencils.yaml"), out)
    src = os.path.join(ctx.tmp, "use.c")
    write(src, """#include "jit_stencils.h"
#include <stdio.h>
#include <string.h>
int main(void)
{
    size_t code = 0, holes = 0;
    for (int i = 0; i < SG_OP__COUNT; i++) {
        code += sg_stencils[i].code_size;
        holes += sg_stencils[i].code_hole_count + sg_stencils[i].data_hole_count;
        for (size_t h = 0; h < sg_stencils[i].code_hole_count; h++)
            if (sg_stencils[i].code_holes[h].offset + 4 > sg_stencils[i].code_size)
                return 1;
    }
    const char *add = sg_stencils[SG_OP_add].name, *native = sg_stencils[SG_OP_native].name;
    if (strcmp(add, "add") != 0)
        return 2;
    if (strcmp(native, "native") != 0)
        return 3;
    printf("%d %zu %zu %s %zu\\n", SG_OP__COUNT, code, holes, sg_symbol_names[SG_SYM_vm_call],
           sg_shim.code_size);
    return 0;
}
""")
    for cc, lang in (("gcc", ["-std=c11"]), ("clang-22", ["-std=c11"]),
                     ("g++", ["-x", "c++", "-std=c++17"]),
                     ("clang++-22", ["-x", "c++", "-std=c++17"])):
        exe = os.path.join(ctx.tmp, "use-" + cc)
        ctx.run([cc] + lang + ["-Wall", "-Wextra", "-Werror", "-pedantic", "-I", out,
                               "-I", ctx.path("runtime"), src, "-o", exe], check=True)
        p = ctx.run([exe], check=True)
        fields = p.stdout.split()
        check(fields[0] == str(BUNDLED_OPS) and fields[3] == "vm_call", "unexpected: %s", p.stdout)
        check(int(fields[1]) > 0 and int(fields[2]) > 0 and int(fields[4]) > 0,
              "empty stencils: %s", p.stdout)


def test_each_host_gets_its_targets_header(ctx):
    """The dispatcher picks each bundled target's header on that target, and
    the header compiles there as strict C11 (macOS against a stand-in
    <string.h>: there is no SDK here)."""
    out = os.path.join(ctx.tmp, "out")
    ctx.build_stencils(ctx.path("stencils", "stencils.yaml"), out)
    stub = os.path.join(ctx.tmp, "sdk")
    os.makedirs(stub)
    write(os.path.join(stub, "string.h"), "void *memcpy(void *, const void *, __SIZE_TYPE__);\n")
    src = os.path.join(ctx.tmp, "use.c")
    for triple in BUNDLED_TRIPLES:
        write(src, '#include "jit_stencils.h"\n'
                   '_Static_assert(__builtin_strcmp(SG_TARGET_TRIPLE, "%s") == 0, "target");\n'
                   'int ops = SG_OP__COUNT;\n' % triple)
        flags = ["-nostdlibinc", "-isystem", stub] if "-apple-" in triple else []
        p = ctx.run(["clang-22", "--target=%s" % triple, "-ffreestanding", "-std=c11", "-Wall",
                     "-Wextra", "-Werror", "-pedantic", "-fsyntax-only", "-I", out, "-I",
                     ctx.path("runtime")] + flags + [src], timeout=120)
        check(p.returncode == 0, "%s: the header does not compile for its host:\n%s", triple,
              p.stderr)


def test_dispatcher_rejects_unknown_host(ctx):
    out = os.path.join(ctx.tmp, "out")
    ctx.build_stencils(ctx.path("stencils", "stencils.yaml"), out)
    src = os.path.join(ctx.tmp, "use.c")
    write(src, '#include "jit_stencils.h"\n')
    p = ctx.run(["clang-22", "--target=riscv64-unknown-linux-gnu", "-fsyntax-only", "-I", out,
                 src])
    check(p.returncode != 0 and "no stencils were generated for this host" in p.stderr,
          "riscv64 include did not #error: %s", p.stderr)


def test_dispatcher_picks_msvc_before_mingw(ctx):
    """A manifest listing MinGW-w64's Windows x64 triple before MSVC's: an
    MSVC-environment compile (clang's x86_64-pc-windows-msvc, _MSC_VER) takes
    MSVC's header and a MinGW one MinGW's, though `_WIN32` holds for both."""
    base = ctx.bundled_copy()
    manifest = os.path.join(base, "stencils", "stencils.yaml")
    text = read(manifest)
    mingw = "  - triple: x86_64-w64-windows-gnu\n"
    check(mingw in text, "the bundled manifest lists no %s", mingw.strip())
    write(manifest, text.replace(mingw, mingw + "  - triple: x86_64-pc-windows-msvc\n", 1))
    out = os.path.join(ctx.tmp, "out")
    ctx.build_stencils(manifest, out, "--target", "x86_64-w64-windows-gnu", "--target",
                       "x86_64-pc-windows-msvc", timeout=300)
    src = os.path.join(ctx.tmp, "use.c")
    write(src, '#include "jit_stencils.h"\n#pragma message("picked " SG_TARGET_TRIPLE)\n')
    # Preprocessed only, against an empty <string.h>: there is no Windows SDK
    # here for MSVC's environment.
    stub = os.path.join(ctx.tmp, "stub")
    write(os.path.join(stub, "string.h"), "")
    for triple in ("x86_64-pc-windows-msvc", "x86_64-w64-windows-gnu"):
        p = ctx.run(["clang-22", "--target=%s" % triple, "-std=c11", "-E", "-o", os.devnull,
                     "-isystem", stub, "-I", out, "-I", ctx.path("runtime"), src], timeout=120)
        check(p.returncode == 0 and "picked %s" % triple in p.stderr, "%s took another header:\n%s", triple, p.stderr)


def test_depfile_and_compile_commands(ctx):
    base = ctx.bundled_copy()
    out = os.path.join(base, "out")
    dep = os.path.join(base, "stencils.d")
    cc = os.path.join(base, "compile_commands.json")
    ctx.build_stencils(os.path.join(base, "stencils", "stencils.yaml"), out, "--depfile", dep,
                       "--compile-commands", cc)
    text = read(dep)
    check(text.startswith(os.path.join(out, "jit_stencils.h") + ":"), "depfile target: %s",
          text[:200])
    for f in ("stencils/stencils.yaml", "stencils/stencil_template.h", "stencils/shim.c",
              "stencils/ops/arith.c", "stencils/tinyvm.h"):
        check(os.path.join(base, f) in text, "depfile misses %s", f)
    import json
    entries = json.loads(read(cc))
    files = {e["file"] for e in entries}
    check(os.path.join(base, "stencils", "ops", "calls.c") in files, "no entry for calls.c")
    per_target = [e for e in entries if "--target=" + TRIPLE in e["arguments"]]
    check(len(per_target) == BUNDLED_OPS + 1, "%d %s compile commands, want %d ops + shim",
          len(per_target), BUNDLED_OPS,
          TRIPLE)
    # The recorded command really compiles (what clangd relies on).
    e = next(e for e in entries if e["file"].endswith("arith.c"))
    args = [a for a in e["arguments"] if a not in ("-MD",)]
    i = args.index("-MF")
    del args[i:i + 2]
    args[args.index("-o") + 1] = os.path.join(ctx.tmp, "x.o")
    ctx.run(args, cwd=e["directory"], check=True)


def test_header_refuses_another_abi_version(ctx):
    """A generated header takes its ABI from the runtime's stencilrt_abi.h and
    compiles only against the version it was generated for: a header from an
    older stencilgen, or a runtime from a newer one, is a compile error that
    says what to do, never stencils read with the wrong layout."""
    out = os.path.join(ctx.tmp, "out")
    ctx.build_stencils(ctx.path("stencils", "stencils.yaml"), out, "--target", TRIPLE)
    src = os.path.join(ctx.tmp, "use.c")
    write(src, '#include "jit_stencils.h"\nint main(void) { return SG_OP__COUNT == 0; }\n')
    abi = read(ctx.path("runtime", "stencilrt_abi.h"))
    version = int(re.search(r"^#define SG_ABI_VERSION (\d+)$", abi, re.M).group(1))
    other = os.path.join(ctx.tmp, "other-abi")
    os.makedirs(other)
    write(os.path.join(other, "stencilrt_abi.h"),
          abi.replace("#define SG_ABI_VERSION %d" % version,
                      "#define SG_ABI_VERSION %d" % (version + 1)))
    cmd = ["gcc", "-std=c11", "-fsyntax-only", "-I", out]
    p = ctx.run(cmd + ["-I", ctx.path("runtime"), src])
    check(p.returncode == 0, "the header does not compile with its own ABI: %s", p.stderr)
    p = ctx.run(cmd + ["-I", other, src])
    check(p.returncode != 0 and "stencilrt_abi.h is another ABI version; regenerate this "
          "header" in p.stderr, "another ABI version was not refused: %s", p.stderr)


def test_verbosity_levels(ctx):
    """-v: counts and the time of each phase, no commands; -vv: every command too."""
    manifest = ctx.path("stencils", "stencils.yaml")
    p = ctx.build_stencils(manifest, os.path.join(ctx.tmp, "v"), "--target", TRIPLE, "-v")
    check("stencilgen: discovery " in p.stderr and "-DSTENCILGEN_" not in p.stderr,
          "-v: want phase times and no commands:\n%s", p.stderr[-2000:])
    # Batched units (the default): a command per batch and per op compiled alone.
    p = ctx.build_stencils(manifest, os.path.join(ctx.tmp, "vv"), "--target", TRIPLE, "-vv")
    runs = re.search(r"^stencilgen: discovery .*, (\d+) compiler runs", p.stderr, re.M)
    commands = len(re.findall(r"^\S*clang-22 .* -o \S+\.o$", p.stderr, re.M))
    check(runs and commands == int(runs.group(1)) and "-DSTENCILGEN_BATCH" in p.stderr,
          "-vv: want every compiler command (%d printed) and phase times:\n%s", commands,
          p.stderr[-2000:])
    p = ctx.build_stencils(manifest, os.path.join(ctx.tmp, "vv-per-op"), "--target", TRIPLE,
                           "-vv", "--units", "per-op")
    check(p.stderr.count("-DSTENCILGEN_OP=") == BUNDLED_OPS and "stencilgen: discovery " in p.stderr,
          "-vv, per-op units: want every op's command and phase times:\n%s", p.stderr[-2000:])


def test_diagnostics_come_in_manifest_order(ctx):
    """Three ops in three files fail to compile, the first of them last; with
    parallel compiles the messages still come in manifest order, the same on
    every run: op by op with per-op units, batch by batch with batched units
    (whose notes name each error's op)."""
    base = ctx.bundled_copy()
    ops = os.path.join(base, "stencils", "ops")
    for fname, op in (("stack.c", "push"), ("arith.c", "mul"), ("calls.c", "native")):
        path = os.path.join(ops, fname)
        text = read(path)
        i = text.index("OP(%s)" % op)
        j = text.index("{", i) + 1
        write(path, text[:j] + "\n    broken_%s_here;" % op + text[j:])
    # push, the first to fail, is the last to finish (compiled alone or in a batch).
    slow = os.path.join(ctx.tmp, "slow.sh")
    write(slow, '#!/bin/sh\ncase " $* " in *" -DSTENCILGEN_OP=push "*) sleep 1 ;; esac\n'
                'for a; do case $a in */unit.c) grep -q " _JIT_ENTRY_push " "$a" && sleep 1 ;; '
                'esac; done\n'
                'exec clang-22 "$@"\n')
    os.chmod(slow, 0o755)
    for units in ("batched", "per-op"):
        runs = []
        for k in range(3):
            p = ctx.build_stencils(os.path.join(base, "stencils", "stencils.yaml"),
                                   os.path.join(ctx.tmp, "%s-out%d" % (units, k)), "--target",
                                   TRIPLE, "-j", "2", "--clang", slow, "--units", units,
                                   check=False, timeout=240)
            check(p.returncode == 3, "%s: expected exit 3: %d\n%s", units, p.returncode,
                  p.stderr[-2000:])
            runs.append(p.stderr)
        if units == "per-op":
            labels = re.findall(r"error: op (\w+) \(", runs[0])
            under = [r"error: op %s \(" % op for op in ("push", "mul", "native")]
        else:  # a batch per file, and a note naming each error's op
            labels = re.findall(r"note: this error is in op (\w+) ", runs[0])
            under = [r"error: ops \w+\.\.\w+ of ops/%s \(" % re.escape(f)
                     for f in ("stack.c", "arith.c", "calls.c")]
        check(labels == ["push", "mul", "native"], "%s: ops in this order: %s\n%s", units,
              labels, runs[0])
        for label, op in zip(under, ("push", "mul", "native")):  # clang's message right after
            check(re.search(label + r".*\n.*broken_%s_here" % op, runs[0]),
                  "%s: clang's message for %s is not under its label:\n%s", units, op, runs[0])
        check(runs[0] == runs[1] == runs[2], "%s: the messages differ between runs", units)


def test_dump_shows_a_shim_that_fails_its_checks(ctx):
    """dump is what one runs to debug a shim: when its frame is refused, the
    shim's code and CFI rows are still printed, then the error; exit 1."""
    p = ctx.generator("dump", "--manifest", ctx.path("stencils", "stencils.yaml"), "--target",
                      TRIPLE, "--extra-shim-cflags", "-fomit-frame-pointer", timeout=240)
    check(p.returncode == 1, "expected exit 1: %d\n%s", p.returncode, p.stderr[-2000:])
    check("callq *%rdx" in p.stdout and "CFI rows of the shim" in p.stdout and
          re.search(r"0x[0-9a-f]{4}-0x[0-9a-f]{4}: CFA=rsp\+\d+", p.stdout),
          "the shim's code and rows are missing:\n%s", p.stdout[-3000:])
    check("is not frame-pointer based" in p.stderr, "no error:\n%s", p.stderr)
