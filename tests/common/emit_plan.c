/* emit_plan.c - see emit_plan.h. */
#include "emit_plan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

uintptr_t ep_mapping_end(uintptr_t p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    char line[512];
    uintptr_t result = 0;
    while (fgets(line, sizeof line, f)) {
        uintptr_t lo, hi;
        char perms[8];
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &lo, &hi, perms) == 3 && lo <= p &&
            p < hi && perms[0] == 'r') {
            result = hi;
            break;
        }
    }
    fclose(f);
    return result;
}

void ep_dump(const uint8_t *p, size_t len)
{
    uintptr_t end = ep_mapping_end((uintptr_t)p);
    size_t have = end > (uintptr_t)p ? (size_t)(end - (uintptr_t)p) : 0;
    if (len > have)
        len = have;
    printf("%" PRIxPTR " ", (uintptr_t)p);
    for (size_t i = 0; i < len; i++)
        printf("%02x", p[i]);
    printf("\n");
}

sr_runtime *ep_runtime(const sr_stencil_set *set, const void *const *symbols, int frames)
{
    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.frames = frames;
    cfg.gdb = 0;
    cfg.perf = SR_PERF_OFF;
    sr_runtime *rt = NULL;
    if (sr_runtime_create(set, symbols, &cfg, &rt) != SR_OK) {
        fprintf(stderr, "sr_runtime_create: %s\n", sr_last_error());
        return NULL;
    }
    return rt;
}

/* HEX, or e+HEX / e-HEX relative to entry; false unless text is all of one. */
static int operand(const char *text, uintptr_t entry, uint64_t *out)
{
    int relative = text[0] == 'e' && (text[1] == '+' || text[1] == '-');
    const char *digits = relative ? text + 2 : text;
    char *end;
    errno = 0;
    uint64_t v = strtoull(digits, &end, 16);
    if (end == digits || *end || errno)
        return 0;
    *out = !relative ? v : text[1] == '+' ? entry + v : entry - v;
    return 1;
}

int ep_read_instrs(FILE *in, const char *label, size_t n, uintptr_t entry, sr_instr **code)
{
    sr_instr *grown = realloc(*code, (n ? n : 1) * sizeof *grown);
    if (!grown) {
        fprintf(stderr, "out of memory for the %zu instructions of %s\n", n, label);
        return 2;
    }
    *code = grown;
    for (size_t i = 0; i < n; i++) {
        char line[1024], o[4][40];
        unsigned op, target;
        if (!fgets(line, sizeof line, in) ||
            sscanf(line, "ins %u %u %39s %39s %39s %39s", &op, &target, o[0], o[1], o[2],
                   o[3]) != 6) {
            fprintf(stderr, "bad or missing ins line %zu of %s\n", i, label);
            return 2;
        }
        grown[i] = (sr_instr){op, target, {0}};
        for (int k = 0; k < 4; k++)
            if (!operand(o[k], entry, &grown[i].operand[k])) {
                fprintf(stderr, "ins line %zu of %s: operand %d '%s' is not HEX, e+HEX or "
                        "e-HEX\n", i, label, k, o[k]);
                return 2;
            }
    }
    return 0;
}

sr_executor *ep_emit_and_print(sr_runtime *rt, const sr_instr *code, size_t n, const char *label,
                               size_t dumplen)
{
    sr_executor *ex = NULL;
    sr_status st = sr_emit(rt, code, n, label, &ex);
    if (st != SR_OK) {
        printf("exec %s err %d %s\n", label, (int)st, sr_last_error());
        return NULL;
    }
    printf("exec %s ok %zu %zu\n", label, n, sr_executor_code_size(ex));
    for (size_t i = 0; i <= n; i++)
        printf("addr %zu %" PRIxPTR "\n", i, (uintptr_t)sr_executor_instr(ex, i));
    printf("mem ");
    ep_dump(sr_executor_entry(ex), dumplen);
    return ex;
}
