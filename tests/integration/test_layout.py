"""The source layout stays what docs/design.md says it is:

* no cycles: among the generator's objects and among the runtime's, what one
  object file calls or reads from another (its undefined symbols that another
  defines, read with `nm` from the build) forms no cycle, so each module can be
  read after the ones it uses;
* the LLVM boundary is a folder: every file that includes an LLVM or clang
  header is under generator/llvm/, with what is built into the modules the
  generator loads on first use, and no file outside it includes one.
"""
import glob
import os
import re

from sgtest import check

ASAN = False  # reads the build's objects and the sources; runs no generator


def symbols(ctx, obj):
    """(defined, undefined) global symbols of one object file."""
    out = ctx.run(["nm", obj], timeout=60, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRVW":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
    return defined, undefined


def module(obj):
    return re.sub(r"\.(c|cpp)\.o$", "", os.path.basename(obj))


def uses(ctx, objs):
    """module -> the modules it takes a symbol from."""
    syms = {module(o): symbols(ctx, o) for o in objs}
    return {m: {n for n, (d, _) in syms.items() if n != m and u & d}
            for m, (_, u) in syms.items()}


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def objects(ctx, *patterns):
    objs = sorted(o for p in patterns for o in glob.glob(os.path.join(ctx.build, p)))
    check(len(objs) > 10, "too few objects under %s: %s", patterns, objs)
    return objs


def test_generator_modules_form_no_cycle(ctx):
    graph = uses(ctx, objects(ctx, "generator/libstencilgen_core.a.p/*.o",
                              "generator/stencilgen.p/*.o"))
    check(graph.get("pipeline") and "jobs" in graph["pipeline"],
          "the graph lost its spine (pipeline uses no jobs): %s", graph)
    found = cycles(graph)
    check(not found, "generator modules that use each other: %s", found)


def test_runtime_modules_form_no_cycle(ctx):
    graph = uses(ctx, objects(ctx, "runtime/libstencilrt.so.*.p/*.o"))
    check(graph.get("runtime") and "executor" in graph["runtime"],
          "the graph lost its spine (runtime uses no executor): %s", graph)
    found = cycles(graph)
    check(not found, "runtime modules that use each other: %s", found)


def test_only_generator_llvm_includes_llvm_or_clang(ctx):
    inc = re.compile(r'^\s*#\s*include\s*[<"](llvm|llvm-c|clang|clang-c)/', re.M)
    inside, outside = [], []
    for path in glob.glob(ctx.path("generator", "**", "*.*"), recursive=True):
        if not path.endswith((".c", ".cpp", ".h")):
            continue
        with open(path, errors="replace") as f:
            text = f.read()
        rel = os.path.relpath(path, ctx.path("generator"))
        (inside if rel.startswith("llvm" + os.sep) else outside).append((rel, bool(inc.search(text))))
    check(not [r for r, has in outside if has],
          "files outside generator/llvm/ include LLVM or clang: %s",
          [r for r, has in outside if has])
    check(len(inside) >= 6 and sum(has for _, has in inside) >= 3,
          "generator/llvm/ holds %d files, %d of them LLVM's: %s", len(inside),
          sum(has for _, has in inside), inside)
