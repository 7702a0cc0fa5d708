/* cache_command.h - `stencilgen cache`: what a cache directory holds, and
 * emptying it (docs/build.md, "Incremental builds and the cache"). */
#ifndef STENCILGEN_CACHE_COMMAND_H
#define STENCILGEN_CACHE_COMMAND_H

/* argv[0] is "cache". Returns an exit code. */
int cache_command_main(int argc, char **argv);

#endif
