/* make_cfi_seeds.c - write a seed corpus for fuzz_cfi into the directory argv[1].
 *
 * Each seed is one selector byte (see fuzz_cfi.c: bit 0 = 4-byte addresses,
 * bits 1-2 = section address) followed by a hand-built .eh_frame: realistic
 * x86-64 and AArch64 frames plus a few slightly broken variants. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct blob {
    uint8_t b[1024];
    size_t n;
} blob;

static void u8(blob *b, unsigned v) { if (b->n < sizeof b->b) b->b[b->n++] = (uint8_t)v; }
static void uN(blob *b, uint64_t v, unsigned n) { for (unsigned i = 0; i < n; i++) u8(b, (unsigned)(v >> (8 * i)) & 0xff); }
static void u32(blob *b, uint64_t v) { uN(b, v, 4); }
static void raw(blob *b, const char *s, size_t n) { for (size_t i = 0; i < n; i++) u8(b, (uint8_t)s[i]); }
#define RAW(b, lit) raw((b), (lit), sizeof(lit) - 1)

static size_t begin(blob *b, int is64)
{
    size_t at = b->n;
    if (is64)
        RAW(b, "\xff\xff\xff\xff\0\0\0\0\0\0\0\0");
    else
        u32(b, 0);
    return at;
}

static void end(blob *b, size_t at)
{
    int is64 = memcmp(b->b + at, "\xff\xff\xff\xff", 4) == 0;
    size_t body = at + (is64 ? 12 : 4);
    for (unsigned i = 0; i < (is64 ? 8u : 4u); i++)
        b->b[at + (is64 ? 4 : 0) + i] = (uint8_t)((uint64_t)(b->n - body) >> (8 * i));
}

/* CIE: id 0, then `rest` (version, augmentation, factors, aug data, insns). */
static size_t cie(blob *b, const char *rest, size_t n)
{
    size_t at = begin(b, 0);
    u32(b, 0);
    raw(b, rest, n);
    end(b, at);
    return at;
}
#define CIE(b, lit) cie((b), (lit), sizeof(lit) - 1)

/* FDE pointing back at `c`; `rest` is pc_begin, pc_range, aug data, insns. */
static void fde(blob *b, size_t c, int is64, const char *rest, size_t n)
{
    size_t at = begin(b, is64);
    u32(b, b->n - c);
    raw(b, rest, n);
    end(b, at);
}
#define FDE(b, c, lit) fde((b), (c), 0, (lit), sizeof(lit) - 1)

/* x86-64 clang: "zR", R = pcrel|sdata4, CFA = rsp+8, rip at CFA-8. */
#define X86_CIE "\x01zR\0\x01\x78\x10\x01\x1b\x0c\x07\x08\x90\x01\0\0"
/* push rbp; mov rbp,rsp; push rbx; ...; epilogue */
#define X86_FDE "\xe0\xff\xff\xff\x30\0\0\0\0" \
                "\x41\x0e\x10\x86\x02\x43\x0d\x06\x45\x83\x03\x5f\x0c\x07\x08\0"
/* AArch64: code_align 4, data_align -8, ra x30, CFA = sp+0 */
#define A64_CIE "\x01zR\0\x04\x78\x1e\x01\x1b\x0c\x1f\x00"
/* paciasp; stp x29,x30,[sp,-16]!; mov x29,sp; ...; autiasp */
#define A64_FDE "\x00\x00\x00\x00\x40\0\0\0\0" \
                "\x41\x2d\x41\x0e\x10\x9e\x01\x9d\x02\x41\x0c\x1d\x10\x4a\x0c\x1f\x00\xc9\xdd\x41\x2d\0\0"

static int write_seed(const char *dir, int idx, uint8_t selector, const blob *b)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/seed_%02d", dir, idx);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 1;
    }
    int bad = fputc(selector, f) == EOF || fwrite(b->b, 1, b->n, f) != b->n;
    return fclose(f) != 0 || bad;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    blob s[13];
    uint8_t sel[13];
    memset(s, 0, sizeof s);
    size_t c, c2;

    /* 0: x86-64 clang frame at 0x400000 */
    c = CIE(&s[0], X86_CIE);
    FDE(&s[0], c, X86_FDE);
    sel[0] = 2 << 1;
    /* 1: AArch64 with pointer authentication (negate_ra_state) and 'B' */
    c = CIE(&s[1], "\x01zRB\0\x04\x78\x1e\x01\x1b\x0c\x1f\x00");
    FDE(&s[1], c, A64_FDE);
    sel[1] = 1 << 1;
    /* 2: C++ style zPLR: indirect pcrel personality, LSDA */
    c = CIE(&s[2], "\x01zPLR\0\x01\x78\x10\x07\x9b\x10\0\0\0\x1b\x1b\x0c\x07\x08\x90\x01\0");
    FDE(&s[2], c, "\xe0\xff\xff\xff\x20\0\0\0\x04\x40\0\0\0\x41\x0e\x10\x86\x02\x43\x0d\x06");
    sel[2] = 0;
    /* 3: signal frame with expressions (zRS, def_cfa_expression, expression, val_expression) */
    c = CIE(&s[3], "\x01zRS\0\x01\x78\x10\x01\x1b\x0f\x03\x77\xa0\x01\x10\x10\x02\x77\xa8");
    FDE(&s[3], c, "\0\0\0\0\x10\0\0\0\0\x10\x06\x03\x77\x78\x06\x16\x03\x01\x9c\x0a\x41\x0b");
    sel[3] = 1 << 1;
    /* 4: two CIEs, three FDEs, zero terminator */
    c = CIE(&s[4], X86_CIE);
    FDE(&s[4], c, X86_FDE);
    c2 = CIE(&s[4], A64_CIE);
    FDE(&s[4], c2, A64_FDE);
    FDE(&s[4], c, "\x00\x01\0\0\x08\0\0\0\0\x44\x0e\x10");
    u32(&s[4], 0);
    sel[4] = 0;
    /* 5: 64-bit length FDE */
    c = CIE(&s[5], X86_CIE);
    fde(&s[5], c, 1, X86_FDE, sizeof X86_FDE - 1);
    sel[5] = 0;
    /* 6: remember/restore state around an early return, plus GNU_args_size */
    c = CIE(&s[6], X86_CIE);
    FDE(&s[6], c, "\0\0\0\0\x40\0\0\0\0\x41\x0e\x10\x86\x02\x0a\x44\x0e\x08\x41\x0b\x2e\x10\x48\x0e\x20");
    sel[6] = 0;
    /* 7: version 3 and 4 CIEs without augmentation, absolute pointers, 4-byte addresses */
    c = CIE(&s[7], "\x03\0\x01\x7c\x08\x0c\x04\x04\x88\x01");
    FDE(&s[7], c, "\x00\x10\0\0\x20\0\0\0\x41\x0e\x08\x85\x02");
    c2 = CIE(&s[7], "\x04\0\x04\0\x01\x7c\x08\x0c\x04\x04");
    FDE(&s[7], c2, "\x00\x20\0\0\x20\0\0\0\x02\x10\x0e\x10");
    sel[7] = 1;
    /* 8: set_loc and advance_loc1/2/4 with udata4 pointers */
    c = CIE(&s[8], "\x01zR\0\x01\x78\x10\x01\x03\x0c\x07\x08\x90\x01");
    FDE(&s[8], c, "\x00\x10\0\0\x00\x10\0\0\0\x02\x10\x0e\x10\x03\x00\x01\x0e\x18"
                  "\x04\x00\x02\0\0\x0e\x20\x01\x00\x18\0\0\x0e\x08");
    sel[8] = 0;
    /* 9 (broken): FDE length runs past the end of the section */
    c = CIE(&s[9], X86_CIE);
    FDE(&s[9], c, X86_FDE);
    s[9].n -= 3;
    sel[9] = 0;
    /* 10 (broken): second FDE's CIE pointer lands on the first FDE */
    c = CIE(&s[10], X86_CIE);
    c2 = s[10].n;
    FDE(&s[10], c, X86_FDE);
    FDE(&s[10], c2, X86_FDE);
    sel[10] = 0;
    /* 11 (broken): restore_state without remember_state */
    c = CIE(&s[11], X86_CIE);
    FDE(&s[11], c, "\0\0\0\0\x40\0\0\0\0\x41\x0b");
    sel[11] = 0;
    /* 12 (broken): unknown augmentation letter and an unknown opcode */
    c = CIE(&s[12], "\x01zRQ\0\x01\x78\x10\x01\x1b\x0c\x07\x08");
    FDE(&s[12], c, "\0\0\0\0\x40\0\0\0\0\x41\x3f");
    sel[12] = 0;

    int bad = 0;
    for (int i = 0; i < 13; i++)
        bad |= write_seed(argv[1], i, sel[i], &s[i]);
    return bad;
}
