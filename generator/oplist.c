/* oplist.c - freeing the lists discover.h fills, without libclang loaded. */
#include <stdlib.h>

#include "discover.h"

void pathlist_free(gen_pathlist *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->items[i]);
    free(l->items);
    *l = (gen_pathlist){0};
}

void gen_op_free_variant(gen_op *op)
{
    for (size_t i = 0; i < op->naxes; i++)
        free(op->axes[i].name);
    free(op->axes);
    free(op->base);
    free(op->display);
    op->axes = NULL;
    op->naxes = 0;
    op->base = op->display = NULL;
}

void oplist_free(gen_oplist *l)
{
    for (size_t i = 0; i < l->count; i++) {
        free(l->items[i].name);
        free(l->items[i].source);
        gen_op_free_variant(&l->items[i]);
    }
    free(l->items);
    *l = (gen_oplist){0};
}
