/* prebuilt.h - `stencilgen check-prebuilt` (prebuilt.c; docs/build.md,
 * "Prebuilt headers"). */
#ifndef STENCILGEN_PREBUILT_H
#define STENCILGEN_PREBUILT_H

/* argv[0] is "check-prebuilt". Returns the exit code: 0 every header
 * current, 1 some stencils stale (listed on stdout), 2 bad input. */
int prebuilt_main(int argc, char **argv);

#endif
