#!/usr/bin/env python3
"""Take docs/tools.md's pictures of `stencilgen report`'s views, in headless
Chromium, from the bundled stencils of a built tree (and, for the comparison,
the same stencils after an edit that grows mul):

  tests/tools/report_screenshots.py BUILD OUTDIR

Writes OUTDIR/report-{stencils,sizes,stencil,changes}.png."""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import browser  # noqa: E402

MUL = "BINARY((vm_value)((uint64_t)a * (uint64_t)b));"
GROWN = "BINARY((vm_value)((uint64_t)a * (uint64_t)b * 12345u + 678u));"


def run(cmd):
    subprocess.run(cmd, check=True, timeout=900, stdout=subprocess.DEVNULL)


def main():
    build, outdir = (os.path.abspath(a) for a in sys.argv[1:3])
    stencilgen = os.path.join(build, "generator", "stencilgen")
    tmp = tempfile.mkdtemp(prefix="sgshots-")
    try:
        proj = os.path.join(tmp, "proj")
        for d in ("stencils", "templates"):
            shutil.copytree(os.path.join(ROOT, d), os.path.join(proj, d), symlinks=True)
        man = os.path.join(proj, "stencils", "stencils.yaml")
        before, after = os.path.join(tmp, "before"), os.path.join(tmp, "after")
        run([stencilgen, "build", "--manifest", man, "--outdir", before])
        ops = os.path.join(proj, "stencils", "ops", "arith.c")
        with open(ops) as f:
            text = f.read()
        with open(ops, "w") as f:
            f.write(text.replace(MUL, GROWN))
        run([stencilgen, "build", "--manifest", man, "--outdir", after])
        page = os.path.join(tmp, "report.html")
        run([stencilgen, "report", "-o", page, "--against", before, after])
        os.makedirs(outdir, exist_ok=True)
        views = [("stencils", "#stencils", "document.querySelector('#stencil-table th[data-key=code]')"
                  ".click()"),
                 ("sizes", "#sizes", ""),
                 ("stencil", "#stencil/3/div", ""),
                 ("changes", "#changes", "")]
        with browser.Browser(tmp, width=1200, height=760) as b:
            for name, frag, action in views:
                b.open("file://" + page + frag, "document.body.dataset.ready && "
                       "document.body.dataset.view === %r" % name)
                if action:
                    b.eval(action)
                with open(os.path.join(outdir, "report-%s.png" % name), "wb") as f:
                    f.write(b.screenshot())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
