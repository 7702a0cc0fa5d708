/* procmem.h - reading another process's memory with process_vm_readv. */
#ifndef STENCILRT_STACK_PROCMEM_H
#define STENCILRT_STACK_PROCMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct procmem {
    pid_t pid;
    int last_errno; /* of the last failed read: ESRCH once the process is gone */
} procmem;

/* An srr_read_fn: ctx is a procmem. Short reads are failures. */
bool procmem_read(void *ctx, uint64_t addr, void *buf, size_t len);

#endif
