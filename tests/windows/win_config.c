/* win_config.c - sr_config on Windows: a Linux-only feature asked for in the
 * struct is refused (SR_EUNSUPPORTED, the field named), whatever the
 * environment says; left to the environment it is off, with a warning only
 * when the variable turned it on (test_windows checks stderr). Also: a set
 * whose op reaches a veneer by a jmp instead of a call is refused (Windows
 * would unwind the veneer as an epilog). Prints a line per case; exit 0 when
 * every case is as expected, 1 otherwise. */
#include <stdio.h>
#include <string.h>

#include "jit_stencils-x86_64-w64-windows-gnu.h"
#include "stencilrt.h"

static const sr_stencil_set set = SR_STENCIL_SET_FROM_HEADER;
static int wrong;

static void expect(const char *what, sr_config cfg, sr_status want, const char *named)
{
    sr_runtime *rt = NULL;
    sr_status st = sr_runtime_create(&set, NULL, &cfg, &rt);
    const char *msg = st == SR_OK ? "created" : sr_last_error();
    bool ok = st == want && (!named || strstr(msg, named));
    printf("win_config: %s: %s: status %d: %s\n", what, ok ? "ok" : "WRONG", (int)st, msg);
    wrong += !ok;
    sr_runtime_destroy(rt);
}

/* The set with one op's call of a helper (E8, through a veneer when out of
 * reach) turned into a jmp (E9): must be refused. */
static void veneer_by_jump(void)
{
    static sg_stencil ops[SG_OP__COUNT];
    static uint8_t code[4096];
    memcpy(ops, sg_stencils, sizeof ops);
    for (size_t op = 0; op < SG_OP__COUNT; op++)
        for (size_t i = 0; i < ops[op].code_hole_count; i++) {
            const sg_hole *h = &ops[op].code_holes[i];
            if (h->value != SG_VALUE_SYMBOL || h->patch != SG_PATCH_X86_BRANCH32 ||
                ops[op].code_size > sizeof code || ops[op].code[h->offset - 1] != 0xe8)
                continue;
            memcpy(code, ops[op].code, ops[op].code_size);
            code[h->offset - 1] = 0xe9;
            ops[op].code = code;
            sr_stencil_set jumps = set;
            jumps.stencils = ops;
            sr_runtime *rt = NULL;
            sr_status st = sr_runtime_create(&jumps, NULL, NULL, &rt);
            const char *msg = st == SR_OK ? "created" : sr_last_error();
            bool ok = st == SR_EUNSUPPORTED && strstr(msg, "is not a call");
            printf("win_config: %s's call made a jmp: %s: status %d: %s\n", ops[op].name,
                   ok ? "ok" : "WRONG", (int)st, msg);
            wrong += !ok;
            sr_runtime_destroy(rt);
            return;
        }
    printf("win_config: WRONG: no op calls a helper\n");
    wrong++;
}

int main(void)
{
    sr_config gdb = SR_CONFIG_DEFAULT, perf = SR_CONFIG_DEFAULT, reg = SR_CONFIG_DEFAULT,
              views = SR_CONFIG_DEFAULT, off = SR_CONFIG_DEFAULT;
    gdb.gdb = 1;
    perf.perf = SR_PERF_JITDUMP;
    reg.registry = 1;
    views.code_views = 2;
    expect("gdb 1", gdb, SR_EUNSUPPORTED, "sr_config: gdb 1: the GDB JIT interface is not on");
    expect("perf jitdump", perf, SR_EUNSUPPORTED, "sr_config: perf: ");
    expect("registry 1", reg, SR_EUNSUPPORTED, "sr_config: registry 1: the registry is not on");
    expect("code_views 2", views, SR_EUNSUPPORTED, "sr_config: code_views 2: a second code");
    off.gdb = 0, off.perf = SR_PERF_OFF, off.registry = 2, off.code_views = 1;
    expect("all off", off, SR_OK, NULL);
    expect("the environment", (sr_config)SR_CONFIG_DEFAULT, SR_OK, NULL);
    veneer_by_jump();
    printf("win_config: %d wrong\n", wrong);
    return wrong ? 1 : 0;
}
