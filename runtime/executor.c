/* executor.c - the executor record: where records live, what one holds
 * besides its code (names, offsets, ops), and the calls that read it.
 *
 * Records live in slabs owned by their runtime, never returned to malloc
 * before sr_runtime_destroy, so an sr_executor pointer stays readable after
 * sr_executor_free and every call given one can tell that it was freed (its
 * state is no longer EXECUTOR_LIVE) instead of reading freed memory. Freed
 * records are reused oldest first, and only once more than RECORD_QUARANTINE
 * of them wait: a freed executor is recognised until at least that many
 * executors of its runtime have been freed after it (stencilrt.h, "Rules of
 * use"). Only the record's fixed part stays; its names, offsets and ops (the
 * body, one malloc per emit) are freed with the executor. Everything but the
 * getters runs with the registry lock held. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- the pool of records */

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

/* A record, not live: the oldest freed one if more than RECORD_QUARANTINE
 * wait, else a fresh one; NULL when out of memory. */
static sr_executor *record_get(sr_record_pool *p)
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

/* Queue a freed record (its body already released) for reuse. */
static void record_put(sr_record_pool *p, sr_executor *e)
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

/* ---- a record's life */

/* Decimal digits of v. */
static size_t digits(size_t v)
{
    size_t d = 1;
    for (; v >= 10; v /= 10)
        d++;
    return d;
}

static const char *op_name(const sr_runtime *rt, uint32_t op)
{
    return op < rt->set->count ? rt->set->stencils[op].name : NULL;
}

/* Bytes of instruction i's name with its terminator (see put_symbol). */
static size_t symbol_size(const char *op, size_t name_len, size_t i)
{
    return op ? strlen(op) + 1 + name_len + 1 + digits(i) + 2 : 2;
}

/* Instruction i's name at `at`: "<op>@<executor>[<i>]", what debuggers and
 * profilers call it ("?" for an op out of range, which the emit refuses).
 * Returns the byte after its terminator. */
static char *put_symbol(char *at, const char *op, const char *name, size_t name_len, size_t i)
{
    if (!op)
        return memcpy(at, "?", 2), at + 2;
    size_t op_len = strlen(op), d = digits(i);
    memcpy(at, op, op_len);
    at += op_len;
    *at++ = '@';
    memcpy(at, name, name_len);
    at += name_len;
    *at++ = '[';
    for (size_t k = d; k-- > 0; i /= 10)
        at[k] = (char)('0' + i % 10);
    at += d;
    *at++ = ']';
    *at++ = '\0';
    return at;
}

/* The executor's record, from the runtime's pool, and its body
 * in one allocation: its instruction names' pointers, offsets and ops, then
 * the names themselves (one malloc per emit, not one per instruction: most of
 * an emit's time went there). n is at most SR_MAX_INSTRUCTIONS (sr_emit_batch). */
sr_status executor_new(sr_runtime *rt, const sr_instr *code, size_t n,
                              const char *name, sr_executor **out)
{
    name = name && *name ? name : "executor";
    size_t name_len = strlen(name), chars = name_len + 1;
    /* Every instruction's name holds the executor's: their bytes must not
     * wrap (checked as they add up: each name is far below SIZE_MAX / 2). */
    if (name_len > SIZE_MAX / 4 / (n + 1))
        return sr_fail(SR_ENOMEM, "executor '%.64s...': a %zu-byte name in each of %zu "
                       "instruction names does not fit in memory", name, name_len, n);
    for (size_t i = 0; i < n && chars <= SIZE_MAX / 2; i++)
        chars += symbol_size(op_name(rt, code[i].op), name_len, i);
    if (chars > SIZE_MAX / 2)
        return sr_fail(SR_ENOMEM, "executor '%.64s': its instruction names do not fit in "
                       "memory", name);
    size_t at_offsets = n * sizeof(char *);
    size_t at_ops = at_offsets + (n + 1) * sizeof(uint32_t), at_chars = at_ops + n * sizeof(uint32_t);
    sr_executor *e = record_get(&rt->records);
    uint8_t *block = e ? malloc(at_chars + chars) : NULL;
    if (!block) {
        if (e)
            record_put(&rt->records, e);
        return sr_fail(SR_ENOMEM, "out of memory");
    }
    /* Not live (state 0) until emit_one is done with it. */
    *e = (sr_executor){.rt = rt, .n = n, .body = block};
    e->symbols = (char **)block;
    e->offsets = (uint32_t *)(block + at_offsets);
    e->ops = (uint32_t *)(block + at_ops);
    e->name = (char *)(block + at_chars);
    memcpy(e->name, name, name_len + 1);
    e->names_size = chars;
    char *next = e->name + name_len + 1;
    for (size_t i = 0; i < n; i++) {
        e->ops[i] = code[i].op;
        e->symbols[i] = next;
        next = put_symbol(next, op_name(rt, code[i].op), name, name_len, i);
    }
    *out = e;
    return SR_OK;
}

void executor_unlink(sr_executor *e)
{
    sr_arena *a = e->arena;
    if (e->prev)
        e->prev->next = e->next;
    else
        a->executors = e->next;
    if (e->next)
        e->next->prev = e->prev;
    a->nexecutors--;
}

void executor_destroy(sr_executor *e)
{
    atomic_store(&e->state, 0);
    free(e->body); /* its names, offsets and ops (executor_new) */
    e->body = NULL;
    record_put(&e->rt->records, e);
}

bool executor_live(const sr_executor *ex)
{
    return ex && atomic_load(&ex->state) == EXECUTOR_LIVE;
}

sr_status executor_check(const char *call, const sr_executor *ex)
{
    if (!ex)
        return sr_fail(SR_EINVAL, "%s: the executor is NULL", call);
    if (!executor_live(ex))
        return sr_fail(SR_EINVAL, "%s: the executor (id %llu) was freed", call,
                       (unsigned long long)ex->id);
    return SR_OK;
}

/* ---- the getters */

/* Getters run without the lock. Fields of the record itself stay readable
 * after a free: a freed executor reads as NULL or 0. */
void *sr_executor_entry(const sr_executor *ex)
{
    return executor_live(ex) ? ex->mem : NULL;
}

size_t sr_executor_code_size(const sr_executor *ex)
{
    return executor_live(ex) ? ex->code_size : 0;
}

/* The body is freed with the executor: a getter that reads it counts itself
 * among the lookups in flight (lookup.c), so that a free on another thread
 * leaves the body until it is done, and reads it only if ex is still live. */
static bool pin(const sr_executor *ex)
{
    if (!ex)
        return false;
    atomic_fetch_add(&ex->rt->lookups, 1);
    if (executor_live(ex))
        return true;
    atomic_fetch_sub(&ex->rt->lookups, 1);
    return false;
}

static void unpin(const sr_executor *ex)
{
    atomic_fetch_sub(&ex->rt->lookups, 1);
}

void *sr_executor_instr(const sr_executor *ex, size_t i)
{
    if (!pin(ex))
        return NULL;
    /* n: the end of the code, cold parts included (emit.c's layout). */
    void *p = i < ex->n ? ex->mem + ex->offsets[i] : i == ex->n ? ex->mem + ex->code_size : NULL;
    unpin(ex);
    return p;
}

const char *sr_executor_name(const sr_executor *ex)
{
    if (!pin(ex))
        return NULL;
    const char *name = ex->name;
    unpin(ex);
    return name;
}

const char *sr_executor_instr_name(const sr_executor *ex, size_t i)
{
    if (!pin(ex))
        return NULL;
    const char *name = i < ex->n ? ex->symbols[i] : NULL;
    unpin(ex);
    return name;
}

uint64_t sr_executor_id(const sr_executor *ex)
{
    return executor_live(ex) ? ex->id : 0;
}
