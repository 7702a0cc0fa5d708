/* unit_harness.h - what the generator's unit programs (test_cfi.c,
 * test_stencil_blob.c, test_util.c, test_win64_unwind.c) share. A program
 * defines UNIT_ERR (the message its library last gave, shown by a failing
 * CHECK) and unit_reset / unit_cleanup (its per-test state, reset before and
 * freed after each test, so a failing test cannot leak into the next), then
 * includes this file. TEST(name) defines a test that returns 1, or 0 from a
 * failing CHECK; RUN(name) runs it and prints "ok NAME" or "FAIL NAME: why";
 * unit_summary() prints the final "N passed, N failed" line and gives the
 * exit status: 0 iff every test passed. */
#ifndef UNIT_HARNESS_H
#define UNIT_HARNESS_H

#include <stdio.h>

static int n_pass, n_fail;
static char why[1200]; /* room for two formatted rows */

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            snprintf(why, sizeof why, "line %d: %s (err: %s)", __LINE__, #cond, UNIT_ERR); \
            return 0;                                                                      \
        }                                                                                  \
    } while (0)

#define TEST(name) static int test_##name(void)
#define RUN(name) run_test(#name, test_##name)

static void unit_reset(void);
static void unit_cleanup(void);

static void run_test(const char *name, int (*fn)(void))
{
    unit_reset();
    why[0] = '\0';
    if (fn()) {
        n_pass++;
        printf("ok %s\n", name);
    } else {
        n_fail++;
        printf("FAIL %s: %s\n", name, why);
    }
    unit_cleanup();
}

static int unit_summary(void)
{
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail != 0;
}

#endif
