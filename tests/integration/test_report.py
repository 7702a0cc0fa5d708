"""`stencilgen report` read back from real headers: every stencil, size,
cold part, hole and helper the JSON gives is what the header's own arrays
hold (counted here independently, from the C text); folded variants are
named with their twins; --against names exactly the stencils an edit changed
and --max-growth fails on them; bad input gets a message naming the file and
line, exit 2, and no output file. The page in a real browser:
test_report_browser.py."""
import json
import os
import re
import shutil

from sgtest import BUNDLED_TRIPLES, TRIPLE, check, read, write

ASAN = True  # the header reader reads files from anywhere: run it under ASan too


def report_json(ctx, *args, check_rc=True):
    p = ctx.generator("report", "--format", "json", *args)
    if check_rc:
        check(p.returncode == 0, "report %s: exit %d\n%s", args, p.returncode, p.stderr)
    return json.loads(p.stdout) if p.returncode in (0, 1) else None, p


def header_facts(path):
    """Per stencil, from the header's C text: (code, data, cold, holes) by
    display name, and the symbols its SYMBOL holes name."""
    h = read(path)
    symbols = re.findall(r'^    "(\w+)",$', h.split("sg_symbol_names")[1].split("};")[0], re.M)
    table = h.split("static const sg_stencil sg_stencils[SG_OP__COUNT] = {\n")[1].split("};")[0]
    rows = re.findall(r'^    /\* SG_OP_(\w+) \*/ \{"([^"]+)", sg_code_\w+, (\d+), \S+, (\d+),',
                      table, re.M)
    cold = [int(x) for x in re.findall(r"^    (\d+), /\*",
                                         h.split("sg_cold_sizes[SG_OP__COUNT] = {\n")[1]
                                         .split("};")[0], re.M)]
    facts = {}
    for (cid, name, code, data), c in zip(rows, cold):
        holes, calls = 0, set()
        for which in ("code", "data"):
            m = re.search(r"static const sg_hole sg_%s_holes_%s\[\d+\] = \{\n(.*?)\n\};" %
                          (which, cid), h, re.S)
            for row in (m.group(1).split("\n") if m else []):
                holes += 1
                v = re.match(r"    \{0x[0-9a-f]+, SG_PATCH_\w+, SG_VALUE_(\w+), (\d+),", row)
                if v.group(1) == "SYMBOL":
                    calls.add(symbols[int(v.group(2))])
        facts[name] = (int(code), int(data), c, holes, calls)
    enum = re.findall(r"^    SG_OP_(\w+),$", h.split("enum sg_op {")[1].split("};")[0], re.M)
    check(len(enum) == len(rows) == len(cold), "%s: %d enumerators, %d rows, %d cold sizes",
          path, len(enum), len(rows), len(cold))
    return facts


def test_report_json_is_what_the_bundled_headers_hold(ctx):
    """The bundled stencils' five headers: the report's targets, stencil
    counts, sizes, cold parts, holes and helpers equal the headers' own
    arrays; totals add up; two runs give the same bytes."""
    out = os.path.join(ctx.build, "stencils")
    data, p = report_json(ctx, out)
    check(sorted(t["triple"] for t in data["targets"]) == sorted(BUNDLED_TRIPLES),
          "targets: %s", [t["triple"] for t in data["targets"]])
    check(data["report"] == "stencilgen report 1", "format: %s", data["report"])
    for i, t in enumerate(data["targets"]):
        facts = header_facts(os.path.join(out, t["header"]))
        mine = [s for s in data["stencils"] if s["target"] == i]
        check(t["stencils"] == len(mine) == len(facts), "%s: %d stencils, header %d",
              t["triple"], len(mine), len(facts))
        for s in mine:
            code, dsize, cold, holes, calls = facts[s["name"]]
            got = (s["code"], s["data"], s["cold"], s["holes"], set(s["calls"]))
            check(got == (code, dsize, cold, holes, calls), "%s %s: report %s, header %s",
                  t["triple"], s["name"], got, (code, dsize, cold, holes, calls))
            check(s["hot"] == code - cold and sum(s["kinds"].values()) == holes,
                  "%s %s: hot %d, kinds %s", t["triple"], s["name"], s["hot"], s["kinds"])
        check(t["code"] == sum(s["code"] for s in mine) and
              t["cold"] == sum(s["cold"] for s in mine), "%s: totals", t["triple"])
        check(t["compiler"].startswith("clang") and t["shim"] == "tinyvm_shim" and
              any(f.startswith("#define SG_UNWIND_CFA_OFFSET") for f in t["frame"]),
              "%s: compiler %r, shim %r, frame %s", t["triple"], t["compiler"], t["shim"],
              t["frame"][:3])
    x86 = data["targets"].index(next(t for t in data["targets"] if t["triple"] == TRIPLE))
    split = [s for s in data["stencils"] if s["target"] == x86 and s["cold"]]
    check(split, "no x86-64 stencil has a cold part: the hot/cold layout went unread")
    again = ctx.generator("report", "--format", "json", out).stdout
    check(again == p.stdout, "two reports of the same headers differ")


def test_report_names_folded_variants_with_their_twin(ctx):
    """The variants fixture: pad[width=2] folds into pad[width=1]; the report
    has one stencil for both, names the other, and splits op and variant."""
    man = ctx.fixture_manifest(ctx.path("tests", "fixtures", "variants", "variants.yaml"),
                               os.path.join(ctx.tmp, "variants.yaml"),
                               ("  - ops.c", "  - " + ctx.path("tests", "fixtures", "variants",
                                                               "ops.c")))
    out = os.path.join(ctx.tmp, "out")
    ctx.build_stencils(man, out, "--target", TRIPLE, "-j", "2", timeout=600)
    data, _ = report_json(ctx, out)
    by = {s["name"]: s for s in data["stencils"]}
    check("pad[width=2]" not in by and by["pad[width=1]"]["folded"] == ["pad[width=2]"],
          "pad: %s", {k: v["folded"] for k, v in by.items() if v["op"] == "pad"})
    check(by["add[in=1,out=2]"]["op"] == "add" and by["add[in=1,out=2]"]["variant"] == "in=1,out=2"
          and by["ret"]["variant"] == "", "op and variant: %s", by["add[in=1,out=2]"])
    check(set(by["print[twice=1]"]["calls"]) == {"vm_print"}, "print's helpers: %s",
          by["print[twice=1]"]["calls"])
    check(len(data["stencils"]) == 15, "%d stencils, the build said 15", len(data["stencils"]))


def edited_pair(ctx):
    """The bundled stencils for two targets, before and after an edit that
    grows mul alone; the headers' directories."""
    proj = ctx.bundled_copy()
    man = os.path.join(proj, "stencils", "stencils.yaml")
    before, after = os.path.join(ctx.tmp, "before"), os.path.join(ctx.tmp, "after")
    targets = ["--target", TRIPLE, "--target", "aarch64-unknown-linux-gnu"]
    ctx.build_stencils(man, before, *targets, timeout=600)
    ops = os.path.join(proj, "stencils", "ops", "arith.c")
    text = read(ops)
    body = "BINARY((vm_value)((uint64_t)a * (uint64_t)b));"
    check(text.count(body) == 1, "mul's body not found in %s", ops)
    write(ops, text.replace(body, "BINARY((vm_value)((uint64_t)a * (uint64_t)b * 12345u + 678u));"))
    ctx.build_stencils(man, after, *targets, timeout=600)
    return before, after


def test_report_against_names_the_edited_op_alone_and_budgets_growth(ctx):
    """An edit to one op: --against lists that op alone as grown, on each
    target, with per-target totals; --max-growth 0.1% exits 1 naming it (and
    still writes the report), a budget it fits exits 0; a removed header's
    stencils are "removed"."""
    before, after = edited_pair(ctx)
    data, _ = report_json(ctx, "--against", before, after)
    changes = data["comparison"]["changes"]
    check(changes and all(c["name"] == "mul" and c["change"] == "grown" for c in changes)
          and sorted(c["target"] for c in changes) == sorted([TRIPLE, "aarch64-unknown-linux-gnu"]),
          "changes: %s", changes)
    for t in data["comparison"]["totals"]:
        check(t["grown"] == 1 and t["added"] == t["removed"] == t["shrunk"] == 0 and
              t["delta"] == t["new_bytes"] - t["old_bytes"] > 0, "totals: %s", t)
    out = os.path.join(ctx.tmp, "budget.json")
    p = ctx.generator("report", "--format", "json", "-o", out, "--against", before,
                      "--max-growth", "0.1%", after)
    check(p.returncode == 1 and os.path.exists(out), "over budget: exit %d", p.returncode)
    named = re.findall(r"^stencilgen: error: report: (\S+): (\S+) grew", p.stderr, re.M)
    check(sorted(named) == sorted([(TRIPLE, "mul"), ("aarch64-unknown-linux-gnu", "mul")]),
          "over budget named: %s\n%s", named, p.stderr)
    p = ctx.generator("report", "--format", "json", "--against", before, "--max-growth",
                      "1000%", after)
    check(p.returncode == 0, "a budget the growth fits: exit %d\n%s", p.returncode, p.stderr)
    os.remove(os.path.join(after, "jit_stencils-aarch64-unknown-linux-gnu.h"))
    data, _ = report_json(ctx, "--against", before, after)
    gone = [c for c in data["comparison"]["changes"] if c["change"] == "removed"]
    check(gone and all(c["target"] == "aarch64-unknown-linux-gnu" and c["new"] is None
                       for c in gone), "removed: %s", gone)


def test_report_bad_input_is_named_and_writes_nothing(ctx):
    """A file that is no header, a damaged header, a directory without
    headers, two headers of one target and bad options: exit 2, a message
    naming the file (and line), and no output file left behind."""
    src = os.path.join(ctx.build, "stencils", "jit_stencils-%s.h" % TRIPLE)
    out = os.path.join(ctx.tmp, "r.html")
    bad = os.path.join(ctx.tmp, "bad")
    os.makedirs(bad)

    def fails(args, pattern):
        p = ctx.generator("report", "-o", out, *args)
        check(p.returncode == 2, "%s: exit %d, want 2\n%s", args, p.returncode, p.stderr)
        check(re.search(pattern, p.stderr), "%s: message %r does not match %r", args,
              p.stderr, pattern)
        check(not os.path.exists(out), "%s: an output file was left behind", args)

    other = os.path.join(bad, "jit_stencils-x.h")
    write(other, "int x;\n")
    fails([other], re.escape(other) + r": error: not a stencilgen target header")
    text = read(src)
    cut = text.index("static const sg_stencil sg_stencils")
    damaged = os.path.join(bad, "jit_stencils-damaged.h")
    row = text.index('    /* SG_OP_', cut)
    write(damaged, text[:row] + '    /* SG_OP_ret */ {"ret", sg_code_ret, 999' + text[row:])
    line = text[:row].count("\n") + 1
    fails([damaged], re.escape(damaged) + r":%d:\d+: error: " % line)
    truncated = os.path.join(bad, "jit_stencils-truncated.h")
    write(truncated, text[:text.index("{", text.index("static const sg_hole")) + 40])
    fails([truncated], re.escape(truncated) + r":\d+:\d+: error: ")
    write(os.path.join(bad, "jit_stencils-nul.h"), "\0" * 16)
    fails([os.path.join(bad, "jit_stencils-nul.h")], r"NUL bytes")
    empty = os.path.join(ctx.tmp, "empty")
    os.makedirs(empty)
    fails([empty], re.escape(empty) + r" holds no generated target header")
    fails([src, src], r"a second header for %s" % TRIPLE)
    fails([os.path.join(ctx.tmp, "missing")], r"missing: No such file")
    fails(["--max-growth", "5%", src], r"--max-growth needs --against")
    fails(["--max-growth", "five", "--against", src, src], r"--max-growth wants a percentage")
    fails(["--format", "pdf", src], r"--format wants html or json")
    fails([], r"needs a directory of generated headers")
    p = ctx.generator("report", "-o", os.path.join(ctx.tmp, "no", "such", "dir", "r.html"), src)
    check(p.returncode == 2 and "cannot write" in p.stderr, "unwritable -o: %d %s",
          p.returncode, p.stderr)


def test_report_html_is_self_contained(ctx):
    """The page refers to nothing outside itself (no URL a browser would
    fetch), carries its facts as JSON, and is the same bytes from headers in
    another directory."""
    out = os.path.join(ctx.build, "stencils")
    page = os.path.join(ctx.tmp, "r.html")
    ctx.generator("report", "-o", page, out, check=True)
    html = read(page)
    check(not re.search(r"""(src|href)\s*=\s*["'](https?:|//)""", html) and
          "@import" not in html and "url(" not in html, "the page loads something from outside")
    check(html.count('<script id="sg-data" type="application/json">') == 1, "no data island")
    moved = shutil.copytree(out, os.path.join(ctx.tmp, "elsewhere", "stencils"))
    page2 = os.path.join(ctx.tmp, "r2.html")
    ctx.generator("report", "-o", page2, moved, check=True)
    check(read(page2) == html, "the page depends on where the headers are")


def test_report_needs_no_llvm(ctx):
    """The stencilgen executable alone (no LLVM module beside it or where it
    looks), as on a machine without LLVM: it writes the report and loads no
    LLVM or clang library while it does."""
    d = os.path.join(ctx.tmp, "lone", "bin")
    os.makedirs(d)
    exe = shutil.copy2(ctx.stencilgen, os.path.join(d, "stencilgen"))
    page = os.path.join(ctx.tmp, "r.html")
    p = ctx.run([exe, "report", "-o", page, os.path.join(ctx.build, "stencils")],
                env={"LD_DEBUG": "files"}, timeout=120)
    loaded = re.findall(r"file=(\S+)", p.stderr)
    check(p.returncode == 0 and os.path.getsize(page) > 0, "report: exit %d\n%s",
          p.returncode, p.stderr[-2000:])
    check(loaded and not [f for f in loaded if re.search(r"LLVM|clang|stencilgen-", f)],
          "report loaded %s", loaded)
