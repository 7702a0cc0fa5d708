/* cfi.h - DWARF call-frame information (.eh_frame) parser and row interpreter.
 *
 * The input bytes are treated as hostile: every read is bounds-checked, every
 * loop is bounded by the input size, and every malformation is reported through
 * cfi_error (never an assert, never a crash).
 *
 * Pointer encodings that are pc-relative are resolved against `addr`, the
 * address at which data[0] is assumed to live (0 for an unrelocated object file
 * whose .text also sits at 0, after the caller applied the .eh_frame relocations).
 */
#ifndef STENCILGEN_CFI_H
#define STENCILGEN_CFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* DWARF register numbers above this are rejected (x86-64 and AArch64 need < 128). */
#define CFI_MAX_REGS 128

typedef struct cfi_error {
    size_t offset;  /* byte offset in the section where the problem was found */
    char msg[200];  /* e.g. "FDE at 0x18: CIE pointer 0x40 does not point at a CIE" */
} cfi_error;

typedef struct cfi_section {
    const uint8_t *data;
    size_t size;
    uint64_t addr;     /* address of data[0], for DW_EH_PE_pcrel */
    uint8_t addr_size; /* 4 or 8: size of DW_EH_PE_absptr */
} cfi_section;

typedef struct cfi_cie {
    size_t offset;             /* of the CIE's length field in the section */
    uint8_t version;           /* 1 or 3 (4 accepted with address/segment size) */
    char augmentation[16];     /* e.g. "zR", "zPLR", "zRS" */
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_encoding;      /* 'R' (DW_EH_PE_absptr if absent) */
    uint8_t lsda_encoding;     /* 'L' (DW_EH_PE_omit if absent) */
    uint8_t personality_encoding; /* 'P' (DW_EH_PE_omit if absent) */
    uint64_t personality;      /* decoded 'P' pointer */
    bool signal_frame;         /* 'S' */
    const uint8_t *initial_insns; /* points into the section */
    size_t initial_insns_len;
} cfi_cie;

typedef struct cfi_fde {
    size_t offset;      /* of the FDE's length field */
    size_t cie_offset;  /* of its CIE */
    uint64_t pc_begin;  /* decoded with the CIE's 'R' encoding */
    uint64_t pc_range;
    bool has_lsda;
    uint64_t lsda;
    const uint8_t *insns; /* points into the section */
    size_t insns_len;
} cfi_fde;

/* How the caller's value of one register is recovered. */
typedef enum cfi_reg_kind {
    CFI_REG_UNSPECIFIED = 0, /* no rule: the initial state of every register */
    CFI_REG_UNDEFINED,       /* DW_CFA_undefined */
    CFI_REG_SAME_VALUE,      /* DW_CFA_same_value */
    CFI_REG_OFFSET,          /* saved at [CFA + offset] */
    CFI_REG_VAL_OFFSET,      /* value is CFA + offset */
    CFI_REG_REGISTER,        /* value is in register `reg` */
    CFI_REG_EXPRESSION,      /* saved at the address a DWARF expression computes */
    CFI_REG_VAL_EXPRESSION,  /* value is what a DWARF expression computes */
} cfi_reg_kind;

typedef struct cfi_reg_rule {
    cfi_reg_kind kind;
    uint32_t reg;      /* CFI_REG_REGISTER */
    int64_t offset;    /* CFI_REG_OFFSET / CFI_REG_VAL_OFFSET, in bytes (already * data_align) */
    uint32_t expr_len; /* expression forms: length of the expression block */
    const uint8_t *expr; /* expression forms: points into the section */
} cfi_reg_rule;

typedef enum cfi_cfa_kind {
    CFI_CFA_UNSET = 0,     /* no DW_CFA_def_cfa seen yet */
    CFI_CFA_REG_OFFSET,    /* CFA = reg + offset */
    CFI_CFA_EXPRESSION,    /* DW_CFA_def_cfa_expression */
} cfi_cfa_kind;

typedef struct cfi_cfa_rule {
    cfi_cfa_kind kind;
    uint32_t reg;
    int64_t offset;
    uint32_t expr_len;
    const uint8_t *expr;
} cfi_cfa_rule;

/* One row of the unwind table: valid for loc <= pc < end. */
/* AArch64's RA_SIGN_STATE pseudo-register, kept in cfi_row.ra_signed. */
#define CFI_RA_SIGN_STATE 34

typedef struct cfi_row {
    uint64_t loc;
    uint64_t end;
    cfi_cfa_rule cfa;
    cfi_reg_rule regs[CFI_MAX_REGS];
    /* AArch64's RA_SIGN_STATE pseudo-register (DWARF number 34): whether the
     * saved return address is signed (pointer authentication), flipped by
     * DW_CFA_AARCH64_negate_ra_state; ra_state_set once any instruction did. */
    bool ra_signed, ra_state_set;
} cfi_row;

typedef struct cfi_table {
    cfi_row *rows;
    size_t count;
    size_t cap;
    /* Lengths of the CIE's and the FDE's instructions without their trailing
     * DW_CFA_nop padding (found at instruction boundaries, not by byte value). */
    size_t cie_insns_used;
    size_t fde_insns_used;
} cfi_table;

/* Walk the section entry by entry. *cursor starts at 0. Skips CIEs (parsing and
 * validating them) and zero terminators; on an FDE fills *cie (its parsed CIE)
 * and *fde and returns 1. Returns 0 at the end of the section, -1 on error. */
int cfi_next_fde(const cfi_section *sec, size_t *cursor, cfi_cie *cie, cfi_fde *fde,
                 cfi_error *err);

/* Parse the CIE whose length field is at `offset`. 0 on success, -1 on error. */
int cfi_parse_cie(const cfi_section *sec, size_t offset, cfi_cie *cie, cfi_error *err);

/* Run the CIE's initial instructions then the FDE's instructions; append one
 * row per distinct location to *out (rows cover [pc_begin, pc_begin+pc_range)).
 * 0 on success, -1 on error (*out is then freed and zeroed). */
int cfi_run(const cfi_section *sec, const cfi_cie *cie, const cfi_fde *fde, cfi_table *out,
            cfi_error *err);

void cfi_table_free(cfi_table *t);

/* For the readers of other unwind formats (win64_unwind.h, arm64_unwind.h,
 * fp_chain.h), which build the same rows. cfi_fail sets *err and returns -1.
 * cfi_table_push appends `row` from `loc` on, ending the last row there (a
 * row at the last one's loc replaces it: several codes, one state); 0, or
 * -1 out of memory. */
int cfi_fail(cfi_error *err, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int cfi_table_push(cfi_table *t, const cfi_row *row, uint64_t loc, cfi_error *err);

/* The row whose range contains pc, or NULL. */
const cfi_row *cfi_row_at(const cfi_table *t, uint64_t pc);

/* Register naming, supplied by the target (e.g. 6 -> "rbp"). May return NULL. */
typedef const char *cfi_reg_namer(uint32_t dwarf_reg);

/* Format a row like "CFA=rbp+16 rbx=[CFA-56] rbp=[CFA-16] rip=[CFA-8]": the CFA
 * rule, then every register with a rule in ascending DWARF number, separated by
 * single spaces. Unnamed registers print as "reg17". Offsets always carry a
 * sign (CFA=rsp+0). Rules print as: [CFA+n] (offset), CFA+n (val_offset),
 * undefined, same, rbx=r12 (register), [expr(N)] / expr(N) (expression forms,
 * N bytes), CFA=expr(N), CFA=undefined.
 * Returns the length that would have been written (snprintf semantics). */
size_t cfi_format_row(const cfi_row *row, cfi_reg_namer *names, char *buf, size_t size);

#endif
