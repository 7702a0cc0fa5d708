"""The report's page in a real browser (headless Chromium over the DevTools
protocol, tests/common/browser.py): opened from disk, its table has a row per
stencil of the headers, sorting by size orders the rows, the filter narrows
them, a stencil's page shows its listing with the holes and the shim's frame,
the size chart has a bar per op and target, the comparison of an edit names
the edited op alone; each view's screenshot is drawn, not blank. At CPython's
scale too (1,100 stencils x 5 triples), where the page must stay under 5 MB."""
import os
import re
import sys
import time

import sgtest
from sgtest import BUNDLED_TRIPLES, TRIPLE, check, read, write

sys.path.insert(0, os.path.join(sgtest.ROOT, "tests", "common"))
import browser  # noqa: E402

ASAN = False  # the browser is the subject here; the reader runs under ASan in test_report.py
MAX_PAGE_BYTES = 5 * 1024 * 1024
READY = "document.body.dataset.ready"
ROWS = "[...document.querySelectorAll('#stencil-table tbody tr')]"


def header_counts(out):
    """Stencils per target header, from each header's enum sg_op."""
    counts = {}
    for name in sorted(os.listdir(out)):
        m = re.match(r"jit_stencils-(.+)\.h$", name)
        if m:
            enum = read(os.path.join(out, name)).split("enum sg_op {")[1].split("};")[0]
            counts[m.group(1)] = len(re.findall(r"^    SG_OP_\w+,$", enum, re.M))
    return counts


def chromium(ctx):
    check(browser.available(), "%s is missing: ./run.sh installs Debian's chromium",
          browser.CHROMIUM)
    return browser.Browser(ctx.tmp)


def check_drawn(b, what):
    frac, colors = browser.drawn_fraction(b.screenshot(scale=0.25))
    check(frac > 0.02 and colors > 8, "%s: the screenshot looks blank (%.3f drawn, %d colours)",
          what, frac, colors)


def report(ctx, name, *args):
    page = os.path.join(ctx.tmp, name)
    ctx.generator("report", "-o", page, *args, check=True, timeout=300)
    return page


def column(b, key):
    """The table's values in column `key`, in row order."""
    return b.eval("(() => { const i = [...document.querySelectorAll('#stencil-table th')]"
                  ".findIndex((th) => th.dataset.key === %r); return %s.map((tr) => "
                  "tr.children[i].textContent); })()" % (key, ROWS))


def set_filter(b, text):
    b.eval("(() => { const f = document.getElementById('filter'); f.value = %r; "
           "f.dispatchEvent(new Event('input')); })()" % text)
    return b.eval("%s.length" % ROWS)


def test_report_page_of_the_bundled_stencils_in_chromium(ctx):
    out = os.path.join(ctx.build, "stencils")
    counts = header_counts(out)
    check(sorted(counts) == sorted(BUNDLED_TRIPLES), "headers: %s", counts)
    page = report(ctx, "bundled.html", out)
    with chromium(ctx) as b:
        b.open("file://" + page, READY)
        total = sum(counts.values())
        check(b.eval("%s.length" % ROWS) == total, "rows: %s, headers: %d stencils",
              b.eval("%s.length" % ROWS), total)
        check_drawn(b, "the table")
        b.eval("document.querySelector('#stencil-table th[data-key=code]').click()")
        codes = [int(x) for x in column(b, "code")]
        check(codes == sorted(codes, reverse=True) and codes[0] > codes[-1],
              "sorted by code, largest first: %s", codes[:12])
        b.eval("document.querySelector('#stencil-table th[data-key=code]').click()")
        codes = [int(x) for x in column(b, "code")]
        check(codes == sorted(codes), "sorted by code, smallest first: %s", codes[:12])
        n = set_filter(b, "div")
        names = b.eval("%s.map((tr) => tr.dataset.name)" % ROWS)
        check(n == len(counts) and set(names) == {"div"},
              "filter div: %d rows %s", n, names)
        n = set_filter(b, "aarch64-unknown-linux-gnu div")
        check(n == 1 and set(b.eval("%s.map((tr) => tr.dataset.target)" % ROWS)) ==
              {"aarch64-unknown-linux-gnu"}, "two words narrow further: %d rows", n)
        check(set_filter(b, "") == total, "an empty filter shows every row again")
        set_filter(b, "div " + TRIPLE)
        b.eval("%s[0].querySelector('a').click()" % ROWS)
        b.wait("document.body.dataset.view === 'stencil' && "
               "document.getElementById('listing') !== null")
        listing = b.eval("document.getElementById('listing').textContent")
        frame = b.eval("document.getElementById('frame').textContent")
        check(b.eval("document.getElementById('stencil-title').textContent").startswith(
              "div") and "^ hole +0x" in listing and "---- cold part" in listing,
              "div's page:\n%s", listing)
        check("SG_UNWIND_CFA_OFFSET" in frame and "CFA=rbp+16" in frame, "frame:\n%s", frame)
        check(b.eval("document.querySelectorAll('#listing .hole').length") ==
              listing.count("^ hole"), "the holes are not marked in the listing")
        check_drawn(b, "a stencil's page")
        b.eval("document.querySelector('nav a[data-view=sizes]').click()")
        b.wait("document.body.dataset.view === 'sizes'")
        ops = len(set(re.findall(r"^    SG_OP_(\w+),$", read(os.path.join(
            out, "jit_stencils-%s.h" % TRIPLE)).split("enum sg_op {")[1].split("};")[0], re.M)))
        bars = b.eval("document.querySelectorAll('#chart rect.bar').length")
        check(bars == min(ops, 40) * len(counts), "size chart: %d bars for %d ops x %d targets",
              bars, ops, len(counts))
        check(b.eval("[...document.querySelectorAll('#histogram rect.bin')].reduce("
                     "(a, r) => a + (r.getAttribute('height') > 0), 0)") > 0,
              "the size distribution draws nothing")
        check_drawn(b, "the size charts")
        check(not b.eval("document.getElementById('nav-changes').offsetParent"),
              "a report without --against offers a Changes view")


def edit_and_compare(ctx, man, edit_file, old, new, outs, *build_args):
    before, after = outs
    ctx.build_stencils(man, before, *build_args, timeout=1200)
    text = read(edit_file)
    check(text.count(old) == 1, "%r not found once in %s", old, edit_file)
    write(edit_file, text.replace(old, new))
    ctx.build_stencils(man, after, *build_args, timeout=1200)
    return report(ctx, "compare.html", "--against", before, after)


def check_changes_view(b, page, op, targets):
    b.open("file://" + page + "#changes", READY + " && document.body.dataset.view === 'changes'")
    names = b.eval("[...document.querySelectorAll('#change-table tbody tr')].map((tr) => "
                   "tr.dataset.name)")
    ops = {re.sub(r"\[.*\]$", "", n) for n in names}
    check(names and ops == {op}, "the comparison names %s, the edit changed %s alone", ops, op)
    shown = b.eval("[...document.querySelectorAll('#change-table tbody tr')].map((tr) => "
                   "tr.children[1].textContent)")
    check(set(shown) == set(targets), "changed on %s, want %s", set(shown), targets)
    check(b.eval("document.querySelectorAll('#totals tbody tr').length") == len(targets),
          "a totals row per target")
    check_drawn(b, "the comparison")


def test_report_comparison_of_an_edited_op_in_chromium(ctx):
    """The bundled stencils before and after an edit to mul: the Changes view
    lists mul alone, on each target built."""
    proj = ctx.bundled_copy()
    targets = [TRIPLE, "x86_64-w64-windows-gnu"]
    page = edit_and_compare(ctx, os.path.join(proj, "stencils", "stencils.yaml"),
                            os.path.join(proj, "stencils", "ops", "arith.c"),
                            "BINARY((vm_value)((uint64_t)a * (uint64_t)b));",
                            "BINARY((vm_value)((uint64_t)a * (uint64_t)b * 12345u + 678u));",
                            (os.path.join(ctx.tmp, "before"), os.path.join(ctx.tmp, "after")),
                            "--target", targets[0], "--target", targets[1])
    with chromium(ctx) as b:
        check_changes_view(b, page, "mul", targets)


def test_report_of_cpythons_scale_in_chromium(ctx):
    """The CPython-shaped corpus, 1,100 stencils x 5 triples: the page stays
    under 5 MB, has a row per stencil, sorts and filters; an edit to one op
    (pop_top_012) is the only change the comparison names. The time the page
    took to open is printed (./run.sh bench measures it)."""
    corpus = os.path.join(ctx.tmp, "cpython")
    ctx.run([sys.executable, ctx.path("tests", "bench", "make_corpus.py"), corpus, "--cpython"],
            check=True)
    man = os.path.join(corpus, "corpus.yaml")
    before, after = os.path.join(corpus, "before"), os.path.join(corpus, "after")
    page = edit_and_compare(ctx, man, os.path.join(corpus, "ops", "generated_cases.c"),
                            "OP(pop_top_012)\n{\n", "OP(pop_top_012)\n{\n    frame->ip += 3;\n",
                            (before, after), "-j", "2")
    counts = header_counts(after)
    check(len(counts) == 5 and min(counts.values()) > 1000, "corpus: %s", counts)
    plain = report(ctx, "cpython.html", after)
    for p in (plain, page):
        check(os.path.getsize(p) < MAX_PAGE_BYTES, "%s: %d bytes, over 5 MB", p,
              os.path.getsize(p))
    with chromium(ctx) as b:
        t0 = time.monotonic()
        ready_ms = float(b.open("file://" + plain, READY, timeout=120))
        print("    the 5-triple page: %.1f MB, ready %.0f ms after navigation (%.2f s wall)" % (
            os.path.getsize(plain) / 1e6, ready_ms, time.monotonic() - t0))
        total = sum(counts.values())
        check(b.eval("%s.length" % ROWS) == total, "rows %s, stencils %d",
              b.eval("%s.length" % ROWS), total)
        b.eval("document.querySelector('#stencil-table th[data-key=holes]').click()")
        holes = [int(x) for x in column(b, "holes")]
        check(holes == sorted(holes, reverse=True), "sorted by holes: %s", holes[:10])
        n = set_filter(b, "pop_top_012")
        check(n == 5, "filter pop_top_012: %d rows, want one per triple", n)
        check_drawn(b, "the 5-triple table")
        check_changes_view(b, page, "pop_top_012", sorted(counts))


def test_bench_html_page_in_chromium(ctx):
    """./run.sh bench --html's page (tests/bench/bench_html.py) from a real,
    small scale curve (two corpus sizes, 5 triples): a chart per series with a
    point per size at the measured values, the table's rows, drawn."""
    sys.path.insert(0, ctx.path("tests", "bench"))
    import bench_html
    curve = bench_html.scale_curve(ctx.stencilgen, (8, 16))
    check([p["triples"] for p in curve] == [5, 5] and curve[0]["stencils"] < curve[1]["stencils"],
          "the curve: %s", curve)
    rows = [("curve, %d stencils a triple: cold" % p["stencils"], "%.2f s" % p["cold"], "")
            for p in curve]
    page = os.path.join(ctx.tmp, "bench.html")
    bench_html.write(page, "this machine", rows, curve)
    with chromium(ctx) as b:
        b.open("file://" + page, "document.getElementById('bench') !== null")
        figures = b.eval("[...document.querySelectorAll('#curve figure')].map((f) => "
                         "f.querySelectorAll('circle.point').length)")
        check(figures == [2, 2, 2], "charts and their points: %s", figures)
        titles = b.eval("[...document.querySelectorAll('#curve circle.point title')]"
                        ".map((t) => t.textContent)")
        want = "%d stencils: %.3g s" % (curve[1]["stencils"], curve[1]["cold"])
        check(want in titles, "the cold chart's last point: %s not in %s", want, titles)
        check(b.eval("document.querySelectorAll('#bench tbody tr').length") == len(rows),
              "the table's rows")
        check_drawn(b, "the benchmark page")
