"""The benchmark table as one self-contained HTML page (./run.sh bench --html
FILE): the text table's rows, and beside them charts of the scale curve, the
CPython-shaped corpus's cold build, no-op rebuild and one-op edit against its
stencil count. No script, no network: inline SVG, works opened from disk.

  scale_curve(stencilgen, sizes)   measures the curve (tests/bench/run.py)
  write(path, machine, rows, curve)
"""
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (key, title, unit, scale from seconds)
SERIES = [("cold", "cold build, 5 triples, -j2", "s", 1.0),
          ("noop", "no-op rebuild, best of 3", "ms", 1e3),
          ("edit", "one-op edit, best of 3", "ms", 1e3)]


def _timed(cmd):
    t = time.monotonic()
    subprocess.run(cmd, check=True, timeout=3600, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE)
    return time.monotonic() - t


def scale_curve(stencilgen, sizes, jobs=2):
    """Per corpus size (generated micro-ops, make_corpus.py --cpython --ops N):
    {"stencils" (per triple), "triples", "cold", "noop", "edit"} (seconds),
    built for the 5 bundled triples."""
    points = []
    tmp = tempfile.mkdtemp(prefix="sgcurve-")
    try:
        for n in sizes:
            corpus = os.path.join(tmp, "c%d" % n)
            subprocess.run([sys.executable, os.path.join(ROOT, "tests", "bench", "make_corpus.py"),
                            corpus, "--cpython", "--ops", str(n)], check=True, timeout=600,
                           stdout=subprocess.DEVNULL)
            out = os.path.join(corpus, "out")
            cmd = [stencilgen, "build", "--manifest", os.path.join(corpus, "corpus.yaml"),
                   "--outdir", out, "-j", str(jobs)]
            cold = _timed(cmd)
            noop = min(_timed(cmd) for _ in range(3))
            src = os.path.join(corpus, "ops", "generated_cases.c")
            with open(src) as f:
                text = f.read()
            at = text.index("CONTINUE();", text.index("\nOP("))
            edits = []
            for k in range(3):
                with open(src, "w") as f:
                    f.write(text[:at] + "frame->ip += %d;\n    " % (k + 1) + text[at:])
                edits.append(_timed(cmd))
            counts = []
            for name in sorted(os.listdir(out)):
                if re.match(r"jit_stencils-.+\.h$", name):
                    with open(os.path.join(out, name)) as f:
                        enum = f.read().split("enum sg_op {")[1].split("};")[0]
                    counts.append(len(re.findall(r"^    SG_OP_\w+,$", enum, re.M)))
            points.append({"ops": n, "stencils": max(counts), "triples": len(counts),
                           "cold": cold, "noop": noop, "edit": min(edits)})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return points


def _chart(points, key, title, unit, scale, width=360, height=220):
    """One line chart (SVG) of points[key] against points["stencils"]."""
    left, bottom, top, right = 52, 34, 26, 16
    xs = [p["stencils"] for p in points]
    ys = [p[key] * scale for p in points]
    xmax, ymax = max(xs) or 1, max(ys) or 1
    def px(x):
        return left + x / xmax * (width - left - right)
    def py(y):
        return height - bottom - y / ymax * (height - bottom - top)
    path = " ".join("%s%.1f,%.1f" % ("M" if i == 0 else "L", px(x), py(y))
                    for i, (x, y) in enumerate(zip(xs, ys)))
    dots = "".join('<circle class="point" cx="%.1f" cy="%.1f" r="3.5"><title>%d stencils: '
                   '%.3g %s</title></circle>' % (px(x), py(y), x, y, unit)
                   for x, y in zip(xs, ys))
    labels = "".join('<text x="%.1f" y="%.1f" text-anchor="middle">%.3g</text>'
                     '<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>' % (
                         px(x), py(y) - 8, y, px(x), height - bottom + 14, x)
                     for x, y in zip(xs, ys))
    return ('<figure><svg width="%d" height="%d" role="img" aria-label="%s">'
            '<text x="%d" y="16" class="title">%s (%s)</text>'
            '<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>'
            '<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>'
            '<text x="%d" y="%d" text-anchor="end">0</text>'
            '<text x="%d" y="%d" text-anchor="end">stencils a triple</text>'
            '<path d="%s" class="line"/>%s%s</svg></figure>') % (
        width, height, html.escape(title), left, html.escape(title), unit,
        left, height - bottom, width - right, height - bottom,
        left, top, left, height - bottom,
        left - 4, height - bottom + 4,
        width - right, height - 2, path, dots, labels)


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>stencilgen benchmarks</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; color: #1d2330; margin: 20px; }}
h1 {{ font-size: 18px; }} h2 {{ font-size: 16px; margin-top: 22px; }}
.charts {{ display: flex; flex-wrap: wrap; gap: 12px; }}
figure {{ margin: 0; border: 1px solid #d9dde4; }}
svg text {{ font: 11px system-ui, sans-serif; fill: #1d2330; }}
svg .title {{ font-weight: 600; }}
.axis {{ stroke: #5d6675; }} .line {{ fill: none; stroke: #4263eb; stroke-width: 2; }}
.point {{ fill: #d9480f; }}
table {{ border-collapse: collapse; font-variant-numeric: tabular-nums; }}
th, td {{ padding: 3px 10px; border-bottom: 1px solid #d9dde4; text-align: left;
          vertical-align: top; }}
th {{ background: #f4f6f9; }}
</style></head><body>
<h1>stencilgen benchmarks</h1>
<p id="machine">{machine}</p>
<h2>The CPython-shaped corpus against its stencil count (built for 5 triples)</h2>
<div class="charts" id="curve">{charts}</div>
<h2>The table</h2>
<table id="bench"><thead><tr><th>measure</th><th>figure</th><th>comparison</th></tr></thead>
<tbody>{rows}</tbody></table>
</body></html>
"""


def write(path, machine, rows, curve):
    charts = "".join(_chart(curve, *s) for s in SERIES) if curve else \
        "<p>No scale curve was measured.</p>"
    body = "".join("<tr><td>%s</td><td>%s</td><td>%s</td></tr>" % tuple(
        html.escape(c) for c in r) for r in rows)
    text = PAGE.format(machine=html.escape(machine), charts=charts, rows=body)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
