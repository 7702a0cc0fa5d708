/* hot_cold_emit.c - emit time per instruction for the hot/cold bench rows
 * (tests/bench/hot_cold_bench.py), built once against a header with cold
 * parts and once against one without (stencilgen --no-hot-cold).
 *
 *   hot_cold_emit   prints "emit_ns_per_instr X hot_bytes Y code_bytes Z"
 *
 * The executor is 1000 straight-line tinyvm instructions, a quarter of them
 * div and mod (the ops with a cold part), ending in ret; nothing runs it. */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "jit_stencils.h"
#include "stencilrt.h"

enum { N = 1000, ROUNDS = 7, EMITS = 200 };

static const sr_stencil_set set = SR_STENCIL_SET_FROM_HEADER;

static void fill(sr_instr *code)
{
    static const uint32_t pattern[] = {SG_OP_push, SG_OP_push, SG_OP_div, SG_OP_push,
                                       SG_OP_mod,  SG_OP_add,  SG_OP_addi, SG_OP_dup};
    for (size_t i = 0; i < N - 1; i++)
        code[i] = (sr_instr){pattern[i % 8], 0, {i + 1}};
    code[N - 1] = (sr_instr){SG_OP_ret, 0, {0}};
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void dummy(void)
{
}

int main(void)
{
    const void *symbols[SG_SYM__COUNT + 1];
    for (size_t k = 0; k < SG_SYM__COUNT + 1; k++)
        symbols[k] = (const void *)(uintptr_t)dummy;
    sr_runtime *rt;
    if (sr_runtime_create(&set, symbols, NULL, &rt) != SR_OK)
        return fprintf(stderr, "%s\n", sr_last_error()), 1;
    static sr_instr code[N];
    fill(code);
    double best = 1e30;
    size_t code_bytes = 0;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now();
        for (int k = 0; k < EMITS; k++) {
            sr_executor *ex;
            if (sr_emit(rt, code, N, "bench", &ex) != SR_OK)
                return fprintf(stderr, "%s\n", sr_last_error()), 1;
            code_bytes = sr_executor_code_size(ex);
            sr_executor_free(ex);
        }
        double t = (now() - t0) / EMITS / N;
        best = t < best ? t : best;
    }
    size_t hot = 0;
    for (size_t i = 0; i < N; i++)
        hot += set.stencils[code[i].op].code_size - (set.cold_sizes ? set.cold_sizes[code[i].op] : 0);
    printf("emit_ns_per_instr %.2f hot_bytes %zu code_bytes %zu\n", best * 1e9, hot, code_bytes);
    sr_runtime_destroy(rt);
    return 0;
}
