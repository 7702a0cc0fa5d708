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

void oplist_free(gen_oplist *l)
{
    for (size_t i = 0; i < l->count; i++) {
        free(l->items[i].name);
        free(l->items[i].source);
    }
    free(l->items);
    *l = (gen_oplist){0};
}
