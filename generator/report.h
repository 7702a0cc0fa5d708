/* report.h - `stencilgen report` (report.c; docs/tools.md, "Report"). */
#ifndef STENCILGEN_REPORT_H
#define STENCILGEN_REPORT_H

/* argv[0] is "report". Returns the exit code: 0 written, 1 written but a
 * stencil or target grew past --max-growth (named on stderr), 2 bad input. */
int report_main(int argc, char **argv);

#endif
