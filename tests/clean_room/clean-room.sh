#!/usr/bin/env bash
# clean-room.sh [STEP...]: prove that a new user's first commands work on a bare Debian 12.
#
# Makes a minimal root of this machine's Debian release (mmdebstrap --variant=apt: the base
# system and apt, nothing else) from the apt sources this machine is configured with, keeps it
# as a tarball between runs, unpacks it afresh, clones HEAD of this repository into it and runs
# each STEP there as root, with a clean environment:
#
#   demo        `./run.sh demo` exits 0 and prints what README.md says it prints
#               (tests/demo_output.py compares the two)
#   test-setup  `./run.sh test-setup`: every package of the test list installs and all four
#               build trees configure and compile
#
# Default: both, in that order. Prints the time of each step and a last line
# "N passed, N failed" (one per step). Needs root (chroot, mounts). The root is unmounted and
# removed however the run ends, also on Ctrl-C or SIGTERM.
#
# Environment: CLEAN_ROOM_CACHE (default /var/cache/stencilgen-clean-room) holds the base
# tarball; CLEAN_ROOM_REBUILD=1 makes it anew; CLEAN_ROOM_REV (default HEAD) picks the commit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
rev=$(git -C "$repo" rev-parse "${CLEAN_ROOM_REV:-HEAD}")
cache=${CLEAN_ROOM_CACHE:-/var/cache/stencilgen-clean-room}
(($#)) || set -- demo test-setup
for step in "$@"; do
    case $step in demo | test-setup) ;; *) echo "clean-room: unknown step '$step'" >&2; exit 2 ;; esac
done
[ "$(id -u)" = 0 ] || { echo "clean-room: needs root (chroot, mount)" >&2; exit 2; }
command -v mmdebstrap >/dev/null || { echo "clean-room: needs mmdebstrap" >&2; exit 2; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
timings=()
passed=0 failed=0

# apt_sources: the source files apt reads on this machine (its configuration names where),
# those with an entry left once comments are dropped.
apt_sources() {
    local list parts f
    eval "$(apt-config shell list Dir::Etc::sourcelist/f parts Dir::Etc::sourceparts/d)"
    for f in "$list" "$parts"*.list "$parts"*.sources; do
        [ -f "$f" ] && grep -qv '^[[:space:]]*\(#\|$\)' "$f" && echo "$f"
    done
    return 0
}

# The base root, made once per release and set of sources.
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
mapfile -t sources < <(apt_sources)
((${#sources[@]})) || { echo "clean-room: apt has no sources configured" >&2; exit 2; }
key=$( (echo "$suite apt"; cat "${sources[@]}") | sha256sum | cut -c1-12)
base=$cache/$suite-apt-$key.tar
root="" child=""

cleanup() {
    local rc=$? pid m
    trap - EXIT INT TERM
    set +e # every step below is tried, whatever the one before did
    [ -z "$child" ] || kill -TERM -- "-$child" 2>/dev/null || true
    rm -f "$base.part"
    if [ -n "$root" ] && [ -d "$root" ]; then
        # Whatever still runs inside (a daemon a package started) holds the mounts.
        for pid in /proc/[0-9]*; do
            [ "$(readlink "$pid/root" 2>/dev/null)" != "$root" ] || kill -KILL "${pid#/proc/}" 2>/dev/null
        done
        for m in dev sys proc; do
            mountpoint -q "$root/$m" && { umount -R "$root/$m" 2>/dev/null || umount -R -l "$root/$m"; }
        done
        if grep -qF " $root/" /proc/self/mountinfo; then
            echo "clean-room: mounts left under $root, not removing it:" >&2
            grep -F " $root/" /proc/self/mountinfo >&2
            rc=1
        else
            rm -rf --one-file-system "$root"
        fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "clean-room: interrupted" >&2; exit 130' INT
trap 'echo "clean-room: terminated" >&2; exit 143' TERM

t=$(now)
if [ ! -f "$base" ] || [ "${CLEAN_ROOM_REBUILD:-0}" = 1 ]; then
    mkdir -p "$cache"
    echo "clean-room: making the base root ($suite, variant apt, sources: ${sources[*]})"
    if ! timeout 1800 mmdebstrap --mode=root --variant=apt --format=tar --skip=check/empty \
        "$suite" "$base.part" "${sources[@]}" >"$cache/mmdebstrap.log" 2>&1; then
        echo "clean-room: mmdebstrap failed:" >&2
        tail -20 "$cache/mmdebstrap.log" >&2
        exit 1
    fi
    mv "$base.part" "$base"
    timings+=("base root: $(since "$t") s (made)")
else
    timings+=("base root: $(since "$t") s (cached $(basename "$base"))")
fi

t=$(now)
root=$(mktemp -d /var/tmp/stencilgen-clean-room.XXXXXX)
tar -C "$root" -xf "$base"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
for m in sys dev; do
    mount --rbind "/$m" "$root/$m"
    mount --make-rslave "$root/$m" # unmounting the copy must never reach the host's mounts
done
git clone -q --no-local --no-checkout "$repo" "$root/src/stencilgen"
git -C "$root/src/stencilgen" checkout -q --detach "$rev"
timings+=("unpack, mount, clone $(git -C "$repo" rev-parse --short "$rev"): $(since "$t") s")

# in_root LOG SHOW COMMAND...: run COMMAND in the clone inside the root, as a new user's shell
# would (nothing of this process's environment), output to LOG (and this one's too when SHOW
# is 1), in a process group of its own that cleanup stops. Waited for with `wait`, which a
# signal interrupts, so that Ctrl-C and SIGTERM clean up at once.
in_root() {
    local out=$1 show=$2 rc=0 follow=""
    shift 2
    setsid chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        bash -c 'cd /src/stencilgen && exec "$@"' clean-room "$@" >"$out" 2>&1 </dev/null &
    child=$!
    if ((show)); then
        tail -n +1 -f --pid="$child" "$out" & follow=$!
    fi
    wait "$child" || rc=$?
    child=""
    [ -z "$follow" ] || wait "$follow" || true
    return "$rc"
}

# pass/fail NAME TIME DETAIL: count a step and note its time.
pass() { passed=$((passed + 1)); timings+=("$1: $2 s, passed${3:+ ($3)}"); }
fail() { failed=$((failed + 1)); timings+=("$1: $2 s, FAILED ($3)"); echo "clean-room: $1 FAILED: $3" >&2; }

log=$root/var/tmp/clean-room-step.log
for step in "$@"; do
    t=$(now)
    echo "== clean-room: $step"
    case $step in
    demo)
        rc=0
        in_root "$log" 1 ./run.sh demo || rc=$?
        if ((rc != 0)); then
            fail demo "$(since "$t")" "exit $rc"
        elif ! python3 "$root/src/stencilgen/tests/demo_output.py" \
            "$root/src/stencilgen/README.md" "$log"; then
            fail demo "$(since "$t")" "its output is not what README.md shows"
        else
            pass demo "$(since "$t")" "output as README.md shows"
        fi
        ;;
    test-setup)
        rc=0
        in_root "$log" 0 ./run.sh test-setup || rc=$?
        if ((rc != 0)); then
            tail -40 "$log"
            fail test-setup "$(since "$t")" "exit $rc"
        else
            pass test-setup "$(since "$t")" "$(grep -c '^run.sh: installing' "$log") install steps, 4 build trees"
        fi
        ;;
    esac
done

echo "== clean-room: times"
printf '  %s\n' "${timings[@]}"
echo "clean-room: $passed passed, $failed failed"
((failed == 0))
