/* registry_reader.h - reads stencilrt's registry of JIT code (stencilrt_registry.h)
 * from memory that another thread or process keeps changing.
 *
 * The reader sees memory only through a callback, so the same code reads
 * another process (process_vm_readv) or its own (memcpy). It has no ptrace
 * and no libdw: it builds for every target the runtime supports.
 *
 *     srr_reader *r;
 *     if (srr_open(read, ctx, root_address, &r, err, sizeof err) != SRR_OK) ...
 *     srr_snapshot(r);                       // while the JIT runs
 *     srr_pc pc;
 *     srr_lookup(r, address, &pc);           // validated by the slot's generation
 *     srr_close(r);
 */
#ifndef STENCILRT_REGISTRY_READER_H
#define STENCILRT_REGISTRY_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Copies len bytes at addr (in the JIT's process) to buf; false if it cannot. */
typedef bool srr_read_fn(void *ctx, uint64_t addr, void *buf, size_t len);

typedef enum srr_status {
    SRR_OK = 0,
    SRR_EFORMAT,  /* not a registry, another version, or a layout this reader cannot read */
    SRR_EREAD,    /* the memory could not be read (the process exited, say) */
    SRR_ENOMEM,
    SRR_EBUSY,    /* a counter stayed odd (a writer stopped mid-write) past the retries */
} srr_status;

/* How to step out of one runtime's JIT frames (see sr_registry_runtime). */
typedef struct srr_rule {
    uint32_t elf_machine;
    uint32_t cfa_register, fp_register;
    int64_t cfa_offset, fp_offset, ra_offset;
    bool ra_signed;
    uint64_t shim_start, shim_size;
    uint64_t shim_rule_start, shim_rule_end; /* offsets from shim_start */
} srr_rule;

typedef enum srr_kind {
    SRR_NOT_JIT = 0, /* in no executor and no shim of the snapshot */
    SRR_EXECUTOR,    /* in a live executor: named below */
    SRR_SHIM,        /* in a runtime's shim */
    SRR_UNRESOLVED,  /* in an executor's range, but it could not be read consistently */
} srr_kind;

/* What a code address is. Strings belong to the reader and stay valid until
 * the next srr_snapshot (executor details are cached by generation and
 * dropped when a snapshot no longer holds them; op names per runtime). */
typedef struct srr_pc {
    srr_kind kind;
    const srr_rule *rule; /* the runtime's, for every kind but SRR_NOT_JIT */
    uint64_t id;          /* the executor's generation */
    uint64_t index;       /* the instruction holding the address */
    const char *op;       /* that instruction's op ("?" if out of op_names) */
    const char *executor; /* the executor's name */
} srr_pc;

typedef struct srr_reader srr_reader;

/* Reads and checks the root at root_addr: magic, version, and that the field
 * table lists every field this reader uses with the size it expects. On
 * failure *out is NULL and err says what and why ("registry version 2, this
 * reader reads 1"). */
srr_status srr_open(srr_read_fn *read, void *ctx, uint64_t root_addr, srr_reader **out, char *err,
                    size_t errlen);
void srr_close(srr_reader *r);

/* Copies the runtimes and every live slot, by the seqlock protocol, while
 * the JIT may be writing. A torn slot is counted and its block re-read (a
 * bounded number of times; a slot still torn after that is left out). */
srr_status srr_snapshot(srr_reader *r);

/* Names addr from the latest snapshot, first re-reading the generation word
 * of the slot that covers it: an executor freed and replaced since the
 * snapshot is re-read, never named after its old code. */
srr_status srr_lookup(srr_reader *r, uint64_t addr, srr_pc *out);

/* The message of the last failure. */
const char *srr_error(const srr_reader *r);

size_t srr_runtime_count(const srr_reader *r);
const srr_rule *srr_runtime_rule(const srr_reader *r, size_t i);
size_t srr_executor_count(const srr_reader *r); /* live slots in the snapshot */
uint64_t srr_torn_reads(const srr_reader *r);   /* torn slots retried, since srr_open */

#endif
