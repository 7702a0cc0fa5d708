#!/usr/bin/env bash
# demo.sh BUILD OUTDIR: the demo's main job, over a built tree (`./run.sh demo` installs and
# builds first). Generates the bundled stencils into OUTDIR, runs tinyvm interpreted and
# JIT-compiled, takes a GDB backtrace inside JIT code, reads a running tinyvm's stack with
# stencilrt-stack and shows one PostgreSQL query's JIT section under llvmjit and pgstencil.
# README.md shows what it prints; tests/integration/test_demo.py holds the two to each other.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: stencils/demo.sh BUILD OUTDIR}
outdir=${2:?usage: stencils/demo.sh BUILD OUTDIR}

echo "== stencilgen: generate the bundled stencils (stencils/stencils.yaml)"
"$build/generator/stencilgen" build --manifest stencils/stencils.yaml --outdir "$outdir"
echo
echo "== tinyvm: stencils/programs/loop.tvm, interpreted, then JIT-compiled with the cached"
echo "   ops' variants (the top of stack in registers), then without (--no-variants)"
tinyvm=$build/stencils/tinyvm
interp=$(timeout 120 "$tinyvm" --interp --time --repeat 5 stencils/programs/loop.tvm 2>&1)
jit=$(timeout 120 "$tinyvm" --jit --time --repeat 5 stencils/programs/loop.tvm 2>&1)
plain=$(timeout 120 "$tinyvm" --jit --no-variants --time --repeat 5 stencils/programs/loop.tvm 2>&1)
echo "interpreter:         $(echo "$interp" | tr '\n' ' ')"
echo "JIT:                 $(echo "$jit" | tr '\n' ' ')"
echo "JIT, no variants:    $(echo "$plain" | tr '\n' ' ')"
ms() { sed -n 's/^time: \([0-9.]*\) ms.*/\1/p' <<<"$1"; }
awk -v i="$(ms "$interp")" -v j="$(ms "$jit")" -v p="$(ms "$plain")" \
    'BEGIN { if (j > 0 && p > 0) printf "JIT speed-up: %.1fx (%.1fx without variants)\n", i / j, i / p }'
echo
echo "== GDB: backtrace taken in a C helper called from JIT code (stencils/programs/reenter.tvm)"
echo "   op@function[instruction] frames are stencils in JIT memory; vm_run is the VM's C code."
timeout 120 gdb -batch -nx -ex 'break tinyvm_breakpoint' -ex run -ex bt \
    --args "$tinyvm" stencils/programs/reenter.tvm 2>&1 | grep -E '^#[0-9]'
echo
echo "== stencilrt-stack: the same kind of stack, read from another process while tinyvm runs"
echo "   (tests/gdb/spin.tvm loops in JIT code; the registry names its frames)"
"$tinyvm" --jit tests/gdb/spin.tvm & spin=$!
# spin.tvm never ends: stopped however this script ends.
trap 'kill "$spin" 2>/dev/null || true' EXIT
sleep 0.5
timeout 60 "$build/tools/stack/stencilrt-stack" "$spin" || true
kill "$spin"; wait "$spin" 2>/dev/null || true
echo
echo "== PostgreSQL 15: one TPC-H Q1-shaped query's EXPLAIN (ANALYZE) JIT section, llvmjit"
echo "   (inlining and optimization) beside pgstencil, every expression compiled (jit_above_cost=0)"
timeout 300 python3 pgstencil/demo.py "$build"
echo
echo "== stencilgen report: the bundled stencils' sizes, holes, listings and frames, one page"
"$build/generator/stencilgen" report -o "$outdir/report.html" "$outdir"
echo "open $(cd "$outdir" && pwd)/report.html (self-contained: works from disk)"
