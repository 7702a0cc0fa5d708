#!/usr/bin/env bash
# run.sh - install what is missing, build, and run one of:
#   demo        generate the bundled stencils and show what they contain
#   test        every test suite (also under ASan+UBSan, AArch64 under qemu, Windows
#               x64 under Wine); last line "N passed, N failed"
#   test-setup  what `test` does before its suites: install and build all six trees
#   clean-room  the demo and test-setup in a new minimal Debian 12 root (root only;
#               tests/clean_room/clean-room.sh)
#   bench       benchmarks (ratios measured side by side in one run); --scale-only
#               [--baseline REV]: the CPython-shaped rows, also as git revision REV builds;
#               --pg-only: the PostgreSQL rows (pgstencil beside llvmjit and jit off);
#               --html FILE: also the table as a page, with charts of the scale curve
#   fuzz        longer fuzzing of the parsers of untrusted bytes (FUZZ_SECONDS, default 600),
#               then pgstencil's differential corpus (FUZZ_QUERIES, default 50,000, today's seed)
set -euo pipefail
cd "$(dirname "$0")"

# What the demo needs: the generator (clang, LLVM, libclang, libyaml), the AArch64
# C library (tinyvm's stencils are made for every triple; clang finds the
# AArch64 headers through the cross GCC's crtbegin.o, libgcc-12-dev-arm64-cross,
# and without them reads the host's <stdint.h>), tinyvm, GDB and stencilrt-stack
# (libdw), OpenSSL's libcrypto (the cache's SHA-256), PostgreSQL 15's server
# and headers (pgstencil, the PostgreSQL JIT provider, beside llvmjit). The
# tests need the rest: other compilers and unwinders, perf, valgrind, qemu and
# the AArch64 cross toolchain, Wine and MinGW-w64, LLDB, and Debian's headless
# Chromium (the report's browser tests).
# tests/clean_room/clean-room.sh proves both lists on a bare Debian 12.
DEMO_PACKAGES=(clang-22 llvm-22 llvm-22-dev libclang-22-dev libclang-cpp22-dev libyaml-dev
               libc6-dev-arm64-cross libgcc-12-dev-arm64-cross meson ninja-build pkg-config
               gcc g++ python3 gdb libdw-dev libssl-dev postgresql-15 postgresql-server-dev-15)
TEST_PACKAGES=("${DEMO_PACKAGES[@]}" clang-14 clang-19 libclang-rt-22-dev lld-22 valgrind linux-perf
               qemu-user gcc-aarch64-linux-gnu g++-aarch64-linux-gnu
               gdb-multiarch binutils elfutils libunwind-22-dev libc++-22-dev libc++abi-22-dev
               lldb-22 python3-lldb-22 wine64 mingw-w64-x86-64-dev g++-mingw-w64-x86-64-win32
               distcc icecc ccache sccache cmake make chromium)

# ensure_packages PACKAGE...: install those that are missing.
ensure_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    echo "run.sh: installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    timeout 900 $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive timeout 1800 \
        $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# LLVM's libunwind, libc++abi and libc++ for arm64, which test_aarch64_llvm_libunwind links
# statically into programs run under qemu. Their -dev packages conflict with the amd64 ones
# (apt would remove those), so they are downloaded and extracted into $A64_LLVM, not
# installed; apt sees arm64 packages only once the architecture is added. Done once: a
# failure (no network) stops `./run.sh test`.
A64_LLVM=build-aarch64-llvm
A64_LLVM_PACKAGES=(libunwind-22-dev:arm64 libc++abi-22-dev:arm64 libc++-22-dev:arm64)
ensure_aarch64_llvm() {
    local lib=$A64_LLVM/usr/lib/aarch64-linux-gnu f
    if [ -f "$lib/libunwind.a" ] && [ -f "$lib/libc++abi.a" ] && [ -f "$lib/libc++.a" ] &&
        [ -d "$A64_LLVM/usr/lib/llvm-22/include/c++/v1" ]; then
        return 0
    fi
    echo "run.sh: downloading ${A64_LLVM_PACKAGES[*]} into $A64_LLVM"
    local sudo="" updated=0
    [ "$(id -u)" = 0 ] || sudo="sudo"
    local archs
    archs=$(dpkg --print-foreign-architectures)
    if ! grep -qx arm64 <<<"$archs"; then
        $sudo dpkg --add-architecture arm64
        timeout 900 $sudo apt-get update -q
        updated=1
    fi
    local tmp
    tmp=$(mktemp -d)
    chmod 777 "$tmp" # apt-get download fetches as _apt when it can
    if ! (cd "$tmp" && timeout 600 apt-get download -q "${A64_LLVM_PACKAGES[@]}"); then
        # The arm64 lists may be missing or stale: update once and retry.
        if ((updated)) || ! timeout 900 $sudo apt-get update -q ||
            ! (cd "$tmp" && timeout 600 apt-get download -q "${A64_LLVM_PACKAGES[@]}"); then
            rm -rf "$tmp"
            echo "run.sh: cannot download ${A64_LLVM_PACKAGES[*]} (network? apt sources?)" >&2
            exit 1
        fi
    fi
    rm -rf "$A64_LLVM" "$A64_LLVM.part"
    for f in "$tmp"/*.deb; do
        dpkg-deb -x "$f" "$A64_LLVM.part" || { rm -rf "$tmp"; exit 1; }
    done
    rm -rf "$tmp"
    mv "$A64_LLVM.part" "$A64_LLVM"
    [ -f "$lib/libunwind.a" ] && [ -f "$lib/libc++abi.a" ] && [ -f "$lib/libc++.a" ] || {
        echo "run.sh: ${A64_LLVM_PACKAGES[*]} hold no static libraries under $lib" >&2
        exit 1
    }
}

# Meson puts ccache or sccache in front of the compiler when it finds one and
# CC is unset; the tests install both (as launchers under test), and a build
# should neither leave a compile server running nor depend on a cache. A cross
# build reads the build machine's compilers from the *_FOR_BUILD variables (an
# sccache that could not start its server once left build-aarch64 with no C
# compiler for the generator).
export CC=${CC:-gcc} CXX=${CXX:-g++}
export CC_FOR_BUILD=${CC_FOR_BUILD:-$CC} CXX_FOR_BUILD=${CXX_FOR_BUILD:-$CXX}

# build DIR [meson options...] [-- ninja targets...]: configure once, then let
# ninja decide what to redo (every target unless some are named).
build() {
    local dir=$1 options=() targets=()
    shift
    while (($#)) && [ "$1" != -- ]; do options+=("$1"); shift; done
    (($#)) && shift && targets=("$@")
    local log
    log=$(mktemp)
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" "${options[@]}" >"$log" 2>&1 || { cat "$log"; rm -f "$log"; exit 1; }
    fi
    ninja -C "$dir" "${targets[@]}" >"$log" 2>&1 || { cat "$log"; rm -f "$log"; exit 1; }
    rm -f "$log"
}

cmd=${1:-}
case "$cmd" in
demo)
    ensure_packages "${DEMO_PACKAGES[@]}"
    build build -- generator/stencilgen stencils/tinyvm tools/stack/stencilrt-stack \
        pgstencil/pgstencil.so
    exec stencils/demo.sh build build/demo
    ;;
test|test-setup)
    ensure_packages "${TEST_PACKAGES[@]}"
    ensure_aarch64_llvm
    build build
    build build-asan -Db_sanitize=address,undefined -Db_lundef=false
    build build-aarch64 --cross-file cross/aarch64-linux-gnu.ini   # run under qemu-aarch64
    build build-windows --cross-file cross/x86_64-w64-mingw32.ini  # run under wine64
    # The bundled stencils compiled by Debian's clang-19, and the programs the
    # unwinding suite runs on them (tinyvm's own set needs clang 22 on x86-64:
    # docs/build.md, "Which clang"); the AArch64 cross build all of it.
    build build-clang19 -Dstencil_clang=clang-19 -- generator/stencilgen \
        tests/unwind/unwind_step tests/unwind/unwind_bt tests/unwind/unwind_throw
    build build-clang19-aarch64 -Dstencil_clang=clang-19 --cross-file cross/aarch64-linux-gnu.ini
    [ "$cmd" = test-setup ] && exit 0
    exec python3 tests/run.py --build build --asan-build build-asan --clang19-build build-clang19
    ;;
clean-room)
    shift
    ensure_packages mmdebstrap git python3
    exec tests/clean_room/clean-room.sh "$@"
    ;;
bench)  # [--scale-only [--baseline REV] | --pg-only] [--html FILE]
    shift
    ensure_packages "${TEST_PACKAGES[@]}"
    build build
    exec python3 tests/bench/run.py --build build "$@"
    ;;
fuzz)
    ensure_packages "${TEST_PACKAGES[@]}"
    build build
    python3 tests/fuzz/run.py --build build --seconds "${FUZZ_SECONDS:-600}"
    exec python3 tests/pgstencil/fuzz_corpus.py --build build --queries "${FUZZ_QUERIES:-50000}"
    ;;
*)
    echo "usage: ./run.sh demo|test|test-setup|clean-room|bench|fuzz" >&2
    exit 2
    ;;
esac
