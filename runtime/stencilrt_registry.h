/* stencilrt_registry.h - the registry of JIT code that other processes read.
 *
 * A profiler, debugger or crash reporter in another process cannot call into
 * the JIT; it copies memory (process_vm_readv, /proc/PID/mem) while the JIT's
 * threads run. This header is the layout it copies: a contract between
 * stencilrt and such readers, versioned, and the same on every 64-bit
 * little-endian target the runtime supports (x86-64, AArch64).
 *
 * Finding it: the dynamic symbol `stencilrt_registry` (in .dynsym, so a
 * stripped executable or a dlopen'ed library still has it) is an
 * sr_registry_root. Every pointer in the registry is an address in the JIT's
 * process, stored as a uint64_t.
 *
 * Versioning: `magic` says what this is; `version` changes only when a field
 * changes meaning, and a reader refuses any version it was not written for.
 * Fields may be added without a new version: the root lists every field of
 * every struct with its offset and size (`fields`, sr_registry_field), and a
 * reader takes each field it needs from there, refusing cleanly when one is
 * missing or has another size. The C structs below are this version's layout.
 *
 * Consistency, for readers that copy while the JIT runs:
 * - Each slot (one executor) has its own sequence counter, odd while the slot
 *   is being written. Read it, copy the slot, read it again (three separate
 *   copies: one copy has no order within it); keep the slot only if both reads
 *   are the same even number, else retry it.
 * - Each live slot has a `generation`, unique in the process and never zero:
 *   it changes whenever the slot is given to another executor, so a reader that
 *   caches what it read of an executor (names, instruction map) keys the cache
 *   by generation, and an address freed and reused is never named after its
 *   old code. An executor's name and instruction map do not change while its
 *   generation is live; a reader that copies them checks afterwards that the
 *   slot still has that generation (they are freed only after it changes).
 * - The list of runtimes changes under the root's `seq` (odd while it
 *   changes); walk it, then check `seq` is the same even number. A runtime's
 *   directory of blocks only grows: blocks[i] is set before block_count
 *   passes i, and blocks and the directory never move while the runtime lives.
 * Writers pay O(1) per emit and free and never allocate while a counter is odd.
 */
#ifndef STENCILRT_REGISTRY_H
#define STENCILRT_REGISTRY_H

#include <stdint.h>

#define SR_REGISTRY_MAGIC 0x3147455254494a53ull /* "SJITREG1", little-endian */
#define SR_REGISTRY_VERSION 1
#define SR_REGISTRY_SYMBOL "stencilrt_registry"
#define SR_REGISTRY_BLOCK_SLOTS 256 /* slots per block */

/* One entry of the root's field table. */
typedef struct sr_registry_field {
    uint16_t type;   /* SR_REGISTRY_T_* */
    uint16_t field;  /* SR_REGISTRY_F_* */
    uint16_t offset; /* in that struct */
    uint16_t size;   /* bytes */
} sr_registry_field;

enum sr_registry_type {
    SR_REGISTRY_T_ROOT = 1,
    SR_REGISTRY_T_RUNTIME = 2,
    SR_REGISTRY_T_BLOCK = 3,
    SR_REGISTRY_T_SLOT = 4,
};

/* Field ids are unique across all structs; a new field takes a new id. */
enum sr_registry_field_id {
    /* root */
    SR_REGISTRY_F_SEQ = 1,
    SR_REGISTRY_F_RUNTIMES = 2,
    /* runtime */
    SR_REGISTRY_F_RT_NEXT = 10,
    SR_REGISTRY_F_RT_ELF_MACHINE,
    SR_REGISTRY_F_RT_CFA_REGISTER,
    SR_REGISTRY_F_RT_CFA_OFFSET,
    SR_REGISTRY_F_RT_FP_REGISTER,
    SR_REGISTRY_F_RT_FP_OFFSET,
    SR_REGISTRY_F_RT_RA_OFFSET,
    SR_REGISTRY_F_RT_RA_SIGNED,
    SR_REGISTRY_F_RT_SHIM_START,
    SR_REGISTRY_F_RT_SHIM_SIZE,
    SR_REGISTRY_F_RT_SHIM_RULE_START,
    SR_REGISTRY_F_RT_SHIM_RULE_END,
    SR_REGISTRY_F_RT_OP_NAMES,
    SR_REGISTRY_F_RT_OP_COUNT,
    SR_REGISTRY_F_RT_BLOCKS,
    SR_REGISTRY_F_RT_BLOCK_COUNT,
    SR_REGISTRY_F_RT_BLOCK_MAX,
    SR_REGISTRY_F_RT_COLD_SIZES, /* added after version 1 shipped: optional to readers */
    /* block */
    SR_REGISTRY_F_BLOCK_SEQ = 40,
    SR_REGISTRY_F_BLOCK_SLOT,
    /* slot */
    SR_REGISTRY_F_SLOT_GENERATION = 50,
    SR_REGISTRY_F_SLOT_CODE_START,
    SR_REGISTRY_F_SLOT_CODE_SIZE,
    SR_REGISTRY_F_SLOT_NAME,
    SR_REGISTRY_F_SLOT_NAME_LEN,
    SR_REGISTRY_F_SLOT_COUNT,
    SR_REGISTRY_F_SLOT_OFFSETS,
    SR_REGISTRY_F_SLOT_OPS,
};

/* An executor: valid when its block's seq for it is even and generation != 0. */
typedef struct sr_registry_slot {
    uint64_t generation; /* 0: empty; else unique in the process */
    uint64_t code_start; /* where its code runs */
    uint64_t code_size;  /* bytes that execute: hot parts, cold parts, then veneers */
    uint64_t name;       /* char[name_len], not NUL-terminated */
    uint64_t name_len;
    uint64_t count;      /* instructions */
    uint64_t offsets;    /* uint32_t[count + 1]: instruction i's hot part is code_start +
                          * offsets[i]; offsets[count] is where the cold parts start */
    uint64_t ops;        /* uint32_t[count]: instruction i's op, an index into op_names */
} sr_registry_slot;

/* Slots in blocks that never move; the counters first, apart from the slots,
 * so that a reader checks a whole block in three copies. */
typedef struct sr_registry_block {
    uint64_t seq[SR_REGISTRY_BLOCK_SLOTS]; /* per slot: odd while it is written */
    sr_registry_slot slot[SR_REGISTRY_BLOCK_SLOTS];
} sr_registry_block;

/* One sr_runtime: how to step out of its JIT frames, and its executors.
 *
 * The unwind rule holds at every instruction of every executor, and in the
 * shim from shim_rule_start to shim_rule_end (offsets from shim_start): the
 * frame's canonical frame address is CFA = cfa_register + cfa_offset; the
 * caller's frame pointer is saved at CFA + fp_offset and the return address
 * at CFA + ra_offset; the caller's stack pointer is the CFA. Registers are
 * DWARF numbers (x86-64: 6 is rbp; AArch64: 29 is x29). With ra_signed, the
 * saved return address carries a pointer authentication code (AArch64, key A,
 * modifier the CFA): strip it before use. A JIT frame's caller is the shim's
 * caller: executors run in the shim's frame.
 *
 * An executor's code is its instructions' hot parts (slot offsets), then
 * their cold parts in instruction order from offsets[count], instruction i's
 * being cold_sizes[ops[i]] bytes, then veneers up to code_size. A reader that
 * finds no cold_sizes in the field table (a runtime older than hot and cold
 * parts) reads every byte past offsets[count] as veneers, as those runtimes
 * laid code out. */
typedef struct sr_registry_runtime {
    uint64_t next;        /* sr_registry_runtime, 0 at the end */
    uint32_t elf_machine; /* EM_X86_64 62, EM_AARCH64 183 */
    uint32_t cfa_register;
    int64_t cfa_offset;
    uint32_t fp_register;
    uint32_t ra_signed;
    int64_t fp_offset;
    int64_t ra_offset;
    uint64_t shim_start, shim_size;
    uint64_t shim_rule_start, shim_rule_end;
    uint64_t op_names;    /* const char *[op_count], NUL-terminated */
    uint64_t op_count;
    uint64_t blocks;      /* sr_registry_block *[block_max]; the first block_count are set */
    uint64_t block_count;
    uint64_t block_max;
    uint64_t cold_sizes;  /* uint64_t[op_count], 0: no op has a cold part */
} sr_registry_runtime;

typedef struct sr_registry_root {
    uint64_t magic;   /* SR_REGISTRY_MAGIC */
    uint32_t version; /* SR_REGISTRY_VERSION */
    uint32_t size;    /* of this struct */
    uint64_t fields;  /* sr_registry_field[field_count] */
    uint64_t field_count;
    uint64_t seq;      /* odd while the runtime list changes */
    uint64_t runtimes; /* sr_registry_runtime, 0: none */
} sr_registry_root;

#endif
