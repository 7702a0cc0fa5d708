/* failing_alloc.h - force-included into a test build of the runtime's sources
 * (test_alloc_failures): every malloc, calloc, realloc and strdup of the
 * runtime goes through a counter that can make the n-th one fail. */
#ifndef FAILING_ALLOC_H
#define FAILING_ALLOC_H

#include <stddef.h>

void *fa_malloc(size_t n);
void *fa_calloc(size_t n, size_t size);
void *fa_realloc(void *p, size_t n);
char *fa_strdup(const char *s);

#define malloc fa_malloc
#define calloc fa_calloc
#define realloc fa_realloc
#define strdup fa_strdup

#endif
