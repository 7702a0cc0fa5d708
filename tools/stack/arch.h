/* arch.h - a thread's registers by DWARF number, for the host's architecture.
 * The tool reads processes of its own architecture only; both x86-64 and
 * AArch64 are written out. */
#ifndef STENCILRT_STACK_ARCH_H
#define STENCILRT_STACK_ARCH_H

#include <stdbool.h>
#include <stdint.h>

#define ARCH_NREGS 33 /* DWARF numbers 0..32 cover both targets' integer registers */

#if defined(__x86_64__)
#define ARCH_ELF_MACHINE 62
#define ARCH_SP 7  /* rsp */
#define ARCH_FP 6  /* rbp */
#define ARCH_RA 16 /* the return-address column: rip */
#elif defined(__aarch64__)
#define ARCH_ELF_MACHINE 183
#define ARCH_SP 31 /* sp */
#define ARCH_FP 29 /* x29 */
#define ARCH_RA 30 /* the return-address column: x30 */
#else
#error "stencilrt-stack reads x86-64 and AArch64 processes only"
#endif

/* One frame's registers: value and whether it is known. */
typedef struct regs {
    uint64_t pc;
    uint64_t r[ARCH_NREGS];
    uint64_t known; /* bit n: r[n] is known */
    bool exact;     /* pc was interrupted (innermost, or below a signal frame), not a return address */
} regs;

static inline bool regs_has(const regs *g, unsigned n)
{
    return n < ARCH_NREGS && (g->known >> n & 1);
}

static inline void regs_set(regs *g, unsigned n, uint64_t v)
{
    if (n < ARCH_NREGS) {
        g->r[n] = v;
        g->known |= 1ull << n;
    }
}

/* A return address as code: AArch64 return addresses may carry a pointer
 * authentication code in their top bits (pac_mask, from the kernel, or the
 * bits above a 48-bit address space); x86-64 has none. */
static inline uint64_t arch_strip_pac(uint64_t addr, uint64_t pac_mask)
{
#if defined(__aarch64__)
    return addr & ~(pac_mask ? pac_mask : 0xffff000000000000ull);
#else
    (void)pac_mask;
    return addr;
#endif
}

#endif
