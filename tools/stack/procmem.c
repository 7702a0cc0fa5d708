/* procmem.c - process_vm_readv: one system call per copy, no stop needed,
 * which is what lets the registry be read while the JIT runs. */
#include "procmem.h"

#include <errno.h>
#include <sys/uio.h>

bool procmem_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    procmem *m = ctx;
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(m->pid, &local, 1, &remote, 1, 0);
    if (n == (ssize_t)len)
        return true;
    m->last_errno = n < 0 ? errno : EFAULT;
    return false;
}
