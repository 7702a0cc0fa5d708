/* target.c - the registry of supported targets. */
#include "target.h"

#include <string.h>

#include "util.h"

static const gen_target *const registry[] = {
    &sg_target_x86_64_linux,
    &sg_target_aarch64_linux,
    &sg_target_x86_64_windows,
    &sg_target_x86_64_msvc,
    &sg_target_i686_windows,
    &sg_target_x86_64_darwin,
    &sg_target_aarch64_darwin,
    &sg_target_aarch64_windows,
};

const gen_target *target_lookup(const char *triple)
{
    for (size_t i = 0; i < sizeof registry / sizeof *registry; i++) {
        if (!strcmp(registry[i]->triple, triple))
            return registry[i];
    }
    return NULL;
}

char *target_supported_list(void)
{
    strbuf sb = {0};
    for (size_t i = 0; i < sizeof registry / sizeof *registry; i++)
        sb_printf(&sb, "%s%s", i ? ", " : "", registry[i]->triple);
    return sb.data;
}
