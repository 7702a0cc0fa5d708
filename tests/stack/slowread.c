/* slowread.c - an LD_PRELOAD library for stencilrt-stack (test_stack) that
 * makes its remote copies slow and backwards: a reader preempted mid-copy,
 * which is what a profiler on a loaded machine is, and which the registry's
 * contract allows (stencilrt_registry.h: "one copy has no order within it").
 * A real process_vm_readv copies forward and fast, so a slot copied while its
 * writer frees and reuses it almost never mixes two executors, and a writer
 * without the slot counters (churn_noseq) goes unseen; under this library it
 * is caught, while the real writer must still give no wrong name.
 *
 *     LD_PRELOAD=libslowread.so stencilrt-stack ...
 *
 * What it does to a process_vm_readv of one local and one remote buffer of
 * the same length (anything else passes through):
 *   - up to 64 bytes (one registry slot, or a smaller word): copied
 *     backwards, 8 bytes at a time, each piece its own process_vm_readv, with
 *     a pause of SLOWREAD_PAUSE_US microseconds (default 30) once the upper
 *     half is copied. The tool makes such copies of a slot only while the
 *     target's threads are stopped, so these never overlap a writer (none
 *     of 30,000 to 300,000 a run changed while copied, measured): they cost
 *     time only.
 *   - longer copies (the tool's snapshot copies a whole block of 256 slots,
 *     16 KiB, in one call while the target runs: this is where the writers
 *     are overlapped): SLOWREAD_LARGE=halves (default) copies them backwards
 *     64 bytes (one slot) at a time, each as two calls, its upper half then
 *     its lower half, with the pause between them when the upper half holds
 *     data (there is nothing to tear in empty memory, and pausing in each of
 *     a block's 256 slots made a sample take 0.2 s); "back" copies them
 *     backwards 8 bytes at a time without pauses; "pass" leaves them alone.
 *     Neither of those two catches churn_noseq (0 wrong frames in 264 and in
 *     727 samples): they are there to see test_slow_reader fail.
 * A copy whose piece fails is redone as one call, so errors and short
 * counts are the kernel's own.
 * SLOWREAD_STATS=1: every copy it made slow is copied again at once, fast,
 * and compared 64 bytes at a time; at exit one line on stderr counts the
 * copies and the pieces that differed (memory that changed while, or just
 * after, it was copied: where a copy can have been torn). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <time.h>

enum { PIECE = 8, SLOT = 64, COMPARE_MAX = 1 << 20 };

typedef ssize_t readv_fn(pid_t, const struct iovec *, unsigned long, const struct iovec *,
                         unsigned long, unsigned long);

enum large_mode { LARGE_HALVES, LARGE_BACK, LARGE_PASS };

/* Settings, read once from the environment, and the SLOWREAD_STATS counters
 * (the tool reads from one thread, so plain counters are enough). */
static struct {
    bool ready;
    readv_fn *real;
    long pause_ns;
    enum large_mode large;
    bool stats;
    unsigned long long n_small, n_small_changed, n_large, n_passed, n_pieces_changed;
} cfg;

static long env_long(const char *name, long dflt, long lo, long hi)
{
    const char *s = getenv(name);
    char *end;
    if (!s || !*s)
        return dflt;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "slowread: %s=%s is not a number from %ld to %ld\n", name, s, lo, hi);
        exit(2);
    }
    return v;
}

static void setup(void)
{
    if (cfg.ready)
        return;
    cfg.real = (readv_fn *)dlsym(RTLD_NEXT, "process_vm_readv");
    if (!cfg.real) {
        fprintf(stderr, "slowread: no process_vm_readv after this library: %s\n", dlerror());
        exit(2);
    }
    cfg.pause_ns = env_long("SLOWREAD_PAUSE_US", 30, 0, 1000000) * 1000;
    const char *large = getenv("SLOWREAD_LARGE");
    if (!large || !*large || !strcmp(large, "halves"))
        cfg.large = LARGE_HALVES;
    else if (!strcmp(large, "back"))
        cfg.large = LARGE_BACK;
    else if (!strcmp(large, "pass"))
        cfg.large = LARGE_PASS;
    else {
        fprintf(stderr, "slowread: SLOWREAD_LARGE=%s: expected halves, back or pass\n", large);
        exit(2);
    }
    cfg.stats = env_long("SLOWREAD_STATS", 0, 0, 1) == 1;
    /* A pause lasts what it says, not 50 us more (the default timer slack). */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    cfg.ready = true;
}

/* The reader preempted: sleeping gives the CPU to the writers, as a
 * preemption would. Bounded: resumed after a signal at most 100 times. */
static void pause_now(void)
{
    struct timespec ts = {0, cfg.pause_ns};
    for (int i = 0; cfg.pause_ns && i < 100 && nanosleep(&ts, &ts) != 0 && errno == EINTR; i++)
        ;
}

static bool copy_piece(pid_t pid, uint8_t *dst, uint64_t src, size_t len)
{
    struct iovec l = {dst, len}, r = {(void *)(uintptr_t)src, len};
    return cfg.real(pid, &l, 1, &r, 1, 0) == (ssize_t)len;
}

static bool all_zero(const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i])
            return false;
    return true;
}

/* Backwards in 8-byte pieces (the lowest may be shorter); with pause, one
 * pause once the upper half is copied. */
static bool copy_back(pid_t pid, uint8_t *dst, uint64_t src, size_t len, bool pause)
{
    size_t end = len;
    while (end > 0) {
        size_t start = end > PIECE ? end - PIECE : 0;
        if (pause && end < len && end <= len / 2) {
            pause_now();
            pause = false;
        }
        if (!copy_piece(pid, dst + start, src + start, end - start))
            return false;
        end = start;
    }
    return true;
}

/* Backwards a slot at a time, each in two calls (upper half, lower half),
 * the pause between them when the upper half holds data. */
static bool copy_halves(pid_t pid, uint8_t *dst, uint64_t src, size_t len)
{
    size_t end = len;
    while (end > 0) {
        size_t start = end > SLOT ? end - SLOT : 0, mid = start + (end - start) / 2;
        if (!copy_piece(pid, dst + mid, src + mid, end - mid))
            return false;
        if (!all_zero(dst + mid, end - mid))
            pause_now();
        if (mid > start && !copy_piece(pid, dst + start, src + start, mid - start))
            return false;
        end = start;
    }
    return true;
}

/* SLOWREAD_STATS: the 64-byte pieces that differ from a fast copy made now. */
static void compare(pid_t pid, const uint8_t *got, uint64_t src, size_t len, bool small)
{
    static uint8_t again[COMPARE_MAX];
    if (len > sizeof again || !copy_piece(pid, again, src, len))
        return;
    unsigned long long changed = 0;
    for (size_t off = 0; off < len; off += SLOT)
        changed += memcmp(got + off, again + off, len - off < SLOT ? len - off : SLOT) != 0;
    cfg.n_pieces_changed += changed;
    cfg.n_small_changed += small && changed;
}

ssize_t process_vm_readv(pid_t pid, const struct iovec *local, unsigned long liovcnt,
                         const struct iovec *remote, unsigned long riovcnt, unsigned long flags)
{
    setup();
    bool one = liovcnt == 1 && riovcnt == 1 && flags == 0 && local[0].iov_len == remote[0].iov_len;
    size_t len = one ? local[0].iov_len : 0;
    bool small = len && len <= SLOT;
    if (!len || (!small && cfg.large == LARGE_PASS)) {
        cfg.n_passed++;
        return cfg.real(pid, local, liovcnt, remote, riovcnt, flags);
    }
    uint8_t *dst = local[0].iov_base;
    uint64_t src = (uint64_t)(uintptr_t)remote[0].iov_base;
    bool ok = small                     ? copy_back(pid, dst, src, len, true)
              : cfg.large == LARGE_BACK ? copy_back(pid, dst, src, len, false)
                                        : copy_halves(pid, dst, src, len);
    if (!ok) /* redone as one call: its error or short count is the kernel's */
        return cfg.real(pid, local, liovcnt, remote, riovcnt, flags);
    if (small)
        cfg.n_small++;
    else
        cfg.n_large++;
    if (cfg.stats)
        compare(pid, dst, src, len, small);
    return (ssize_t)len;
}

__attribute__((destructor)) static void report(void)
{
    if (cfg.ready && cfg.stats)
        fprintf(stderr, "slowread: %llu small copies (%llu changed while copied), %llu large "
                "copies, %llu passed through, %llu 64-byte pieces changed while copied\n",
                cfg.n_small, cfg.n_small_changed, cfg.n_large, cfg.n_passed, cfg.n_pieces_changed);
}
