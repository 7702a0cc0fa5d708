/* records.c - where executor records live: in slabs owned by their runtime,
 * never returned to malloc before sr_runtime_destroy.
 *
 * An sr_executor pointer therefore stays readable after sr_executor_free,
 * and every call given one can tell that it was freed (its state is no
 * longer EXECUTOR_LIVE) instead of reading freed memory. Freed records are
 * reused oldest first, and only once more than RECORD_QUARANTINE of them
 * wait: a freed executor is recognised until at least that many executors of
 * its runtime have been freed after it (stencilrt.h, "Rules of use"). Only
 * the record's fixed part stays; its names, offsets and ops (the body, one
 * malloc per emit) are freed with the executor. Every call is made with the
 * registry lock held. */
#include <stdlib.h>

#include "internal.h"

enum { RECORDS_PER_SLAB = 64 };

struct sr_record_slab {
    struct sr_record_slab *next;
    size_t used;
    sr_executor records[RECORDS_PER_SLAB];
};

/* The oldest freed record, if enough wait behind it. */
static sr_executor *reuse(sr_record_pool *p)
{
    if (p->waiting <= RECORD_QUARANTINE)
        return NULL;
    sr_executor *e = p->head;
    p->head = e->next;
    if (!p->head)
        p->tail = NULL;
    p->waiting--;
    return e;
}

sr_executor *record_get(sr_record_pool *p)
{
    sr_executor *e = reuse(p);
    if (e)
        return e;
    if (!p->slabs || p->slabs->used == RECORDS_PER_SLAB) {
        /* calloc: a record never handed out reads as not live. */
        struct sr_record_slab *s = calloc(1, sizeof *s);
        if (!s)
            return NULL;
        s->next = p->slabs;
        p->slabs = s;
    }
    return &p->slabs->records[p->slabs->used++];
}

void record_put(sr_record_pool *p, sr_executor *e)
{
    e->next = NULL;
    if (p->tail)
        p->tail->next = e;
    else
        p->head = e;
    p->tail = e;
    p->waiting++;
}

void record_pool_fini(sr_record_pool *p)
{
    for (struct sr_record_slab *s = p->slabs, *next; s; s = next) {
        next = s->next;
        free(s);
    }
    *p = (sr_record_pool){0};
}
