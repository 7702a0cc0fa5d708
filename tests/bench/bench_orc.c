/* bench_orc.c - stencilrt against LLVM's ORC LLJIT on the same tinyvm programs.
 *
 *     bench_orc [--check] [--rounds N] [--repeat R] PROGRAM
 *
 * Loads PROGRAM with tinyvm's loader, then compiles it three ways and runs
 * `main` each way, checking every result against the interpreter's:
 *   stencilrt  sr_emit_batch of every function, as tinyvm --jit does;
 *   ORC -O0    the bytecode translated to LLVM IR (below), no IR passes,
 *              CodeGen at CodeGenOptLevel::None;
 *   ORC -O2    the same IR through "default<O2>", CodeGen at Default.
 * "Compile" is what a JIT pays per program: for stencilrt the emit, for ORC
 * building the IR, the passes, adding the module and the lookup that makes
 * LLJIT generate and link the code. Creating the runtime / the LLJIT instance
 * is a one-time cost and is left out of both.
 *
 * Prints one line of key=value figures (best/worst over the rounds):
 *   bench_orc PROGRAM instrs=N result=V compile_us_per_instr_sr=B/W ...
 * --check compiles and runs each version once and prints nothing to time.
 * The exit status is 1 if any version's result differs from the interpreter's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "vm.h"

/* vm_run gives every activation a fresh operand stack of this many values
 * (natives.c); the translated functions do the same. */
#define OPERAND_STACK 1024

/* A translated tinyvm function: its arguments as vm_call passes them. */
typedef vm_value orc_fn(const vm_value *args, vm_value argc);

enum version { V_INTERP, V_SR, V_O0, V_O2, V__COUNT };
static const char *const version_keys[V__COUNT] = {"interp", "sr", "o0", "o2"};
static const char *const version_names[V__COUNT] = {"interpreter", "stencilrt", "ORC -O0",
                                                    "ORC -O2"};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Prints and frees an LLVM error; true if there was one. */
static bool llvm_failed(LLVMErrorRef err, const char *what)
{
    if (!err)
        return false;
    char *msg = LLVMGetErrorMessage(err);
    fprintf(stderr, "bench_orc: %s: %s\n", what, msg);
    LLVMDisposeErrorMessage(msg);
    return true;
}

/* ---- the IR translation ------------------------------------------------ */

/* What every translated function needs while its body is being built. */
typedef struct irgen {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef i64, i32, i8, ptr, fn_ty;
    LLVMTypeRef print_ty, native_ty, trap_ty;
    LLVMValueRef print_fn, native_fn, trap_fn; /* the C helpers, as constant addresses */
    LLVMValueRef *functions;                   /* one LLVM function per tinyvm function */
    const struct vm *vm;
    /* the function being translated */
    LLVMValueRef frame, sp, tos; /* a vm_frame, and the allocas holding sp and tos */
} irgen;

static LLVMValueRef const64(irgen *g, uint64_t v)
{
    return LLVMConstInt(g->i64, v, 0);
}

/* A host address as an IR constant: the helpers are called where they are,
 * with no symbol lookup (tinyvm's JIT patches the same addresses in). */
static LLVMValueRef host_address(irgen *g, const void *p)
{
    return LLVMConstIntToPtr(const64(g, (uint64_t)(uintptr_t)p), g->ptr);
}

static LLVMValueRef get_tos(irgen *g)
{
    return LLVMBuildLoad2(g->b, g->i64, g->tos, "tos");
}

static void set_tos(irgen *g, LLVMValueRef v)
{
    LLVMBuildStore(g->b, v, g->tos);
}

/* *sp++ = v */
static void push(irgen *g, LLVMValueRef v)
{
    LLVMValueRef sp = LLVMBuildLoad2(g->b, g->ptr, g->sp, "sp");
    LLVMBuildStore(g->b, v, sp);
    LLVMValueRef one = const64(g, 1);
    LLVMBuildStore(g->b, LLVMBuildGEP2(g->b, g->i64, sp, &one, 1, "sp1"), g->sp);
}

/* *--sp */
static LLVMValueRef pop(irgen *g)
{
    LLVMValueRef sp = LLVMBuildLoad2(g->b, g->ptr, g->sp, "sp");
    LLVMValueRef minus1 = const64(g, (uint64_t)-1);
    LLVMValueRef below = LLVMBuildGEP2(g->b, g->i64, sp, &minus1, 1, "sp0");
    LLVMBuildStore(g->b, below, g->sp);
    return LLVMBuildLoad2(g->b, g->i64, below, "v");
}

/* &frame->locals[k] (the locals are at the start of vm_frame) */
static LLVMValueRef local(irgen *g, uint64_t k)
{
    LLVMValueRef idx = const64(g, k);
    return LLVMBuildGEP2(g->b, g->i64, g->frame, &idx, 1, "local");
}

/* vm_trap(frame, why), which does not return */
static void trap(irgen *g, const char *why)
{
    LLVMValueRef args[] = {g->frame, LLVMBuildGlobalString(g->b, why, "why")};
    LLVMBuildCall2(g->b, g->trap_ty, g->trap_fn, args, 2, "");
    LLVMBuildUnreachable(g->b);
}

/* The activation vm_run sets up: a zeroed vm_frame naming the VM and the
 * function, min(argc, VM_MAX_LOCALS) arguments in its locals, a fresh
 * operand stack, tos = 0. */
static void prologue(irgen *g, size_t index, LLVMValueRef fn)
{
    LLVMValueRef args = LLVMGetParam(fn, 0), argc = LLVMGetParam(fn, 1);
    g->frame = LLVMBuildAlloca(g->b, LLVMArrayType2(g->i8, sizeof(vm_frame)), "frame");
    LLVMSetAlignment(g->frame, _Alignof(vm_frame));
    LLVMValueRef stack = LLVMBuildAlloca(g->b, LLVMArrayType2(g->i64, OPERAND_STACK), "stack");
    g->sp = LLVMBuildAlloca(g->b, g->ptr, "spvar");
    g->tos = LLVMBuildAlloca(g->b, g->i64, "tosvar");
    LLVMBuildMemSet(g->b, g->frame, LLVMConstInt(g->i8, 0, 0), const64(g, sizeof(vm_frame)),
                    _Alignof(vm_frame));
    LLVMValueRef off = const64(g, offsetof(vm_frame, vm));
    LLVMBuildStore(g->b, host_address(g, g->vm), LLVMBuildGEP2(g->b, g->i8, g->frame, &off, 1, ""));
    off = const64(g, offsetof(vm_frame, function));
    LLVMBuildStore(g->b, LLVMConstInt(g->i32, index, 0),
                   LLVMBuildGEP2(g->b, g->i8, g->frame, &off, 1, ""));
    LLVMValueRef max = const64(g, VM_MAX_LOCALS);
    LLVMValueRef n = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntULT, argc, max, ""), argc,
                                     max, "nargs");
    LLVMBuildMemCpy(g->b, g->frame, 8, args, 8, LLVMBuildMul(g->b, n, const64(g, 8), ""));
    LLVMBuildStore(g->b, stack, g->sp);
    set_tos(g, const64(g, 0));
}

/* a = *--sp; tos = a OP tos, with the interpreter's wrap-around and 0/1 results */
static void binary(irgen *g, uint32_t op)
{
    LLVMValueRef a = pop(g), t = get_tos(g), r = NULL;
    switch (op) {
    case SG_OP_add: r = LLVMBuildAdd(g->b, a, t, ""); break;
    case SG_OP_sub: r = LLVMBuildSub(g->b, a, t, ""); break;
    case SG_OP_mul: r = LLVMBuildMul(g->b, a, t, ""); break;
    case SG_OP_div: r = LLVMBuildSDiv(g->b, a, t, ""); break;
    case SG_OP_mod: r = LLVMBuildSRem(g->b, a, t, ""); break;
    case SG_OP_lt: r = LLVMBuildICmp(g->b, LLVMIntSLT, a, t, ""); break;
    case SG_OP_le: r = LLVMBuildICmp(g->b, LLVMIntSLE, a, t, ""); break;
    case SG_OP_eq: r = LLVMBuildICmp(g->b, LLVMIntEQ, a, t, ""); break;
    }
    if (LLVMGetTypeKind(LLVMTypeOf(r)) == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(LLVMTypeOf(r)) == 1)
        r = LLVMBuildZExt(g->b, r, g->i64, "");
    set_tos(g, r);
}

/* div and mod trap first, as the interpreter does: on a zero divisor, and on
 * INT64_MIN / -1 (undefined in C, poison in IR). */
static void divide(irgen *g, LLVMValueRef fn, uint32_t op)
{
    LLVMValueRef t = get_tos(g);
    LLVMValueRef sp = LLVMBuildLoad2(g->b, g->ptr, g->sp, "sp");
    LLVMValueRef minus1 = const64(g, (uint64_t)-1);
    LLVMValueRef a = LLVMBuildLoad2(g->b, g->i64, LLVMBuildGEP2(g->b, g->i64, sp, &minus1, 1, ""),
                                    "a");
    LLVMValueRef zero = LLVMBuildICmp(g->b, LLVMIntEQ, t, const64(g, 0), "");
    LLVMValueRef overflow = LLVMBuildAnd(
        g->b, LLVMBuildICmp(g->b, LLVMIntEQ, t, minus1, ""),
        LLVMBuildICmp(g->b, LLVMIntEQ, a, const64(g, (uint64_t)INT64_MIN), ""), "");
    LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(g->ctx, fn, "trap");
    LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(g->ctx, fn, "divide");
    LLVMBuildCondBr(g->b, LLVMBuildOr(g->b, zero, overflow, ""), bad, ok);
    LLVMPositionBuilderAtEnd(g->b, bad);
    trap(g, op == SG_OP_div ? "division by zero or overflow" : "modulo by zero or overflow");
    LLVMPositionBuilderAtEnd(g->b, ok);
    binary(g, op);
}

/* *sp++ = tos; sp -= argc; tos = <function>(sp, argc): a direct call of the
 * callee's own compiled code, which sets up its frame as vm_run does. */
static void call(irgen *g, const sr_instr *in)
{
    push(g, get_tos(g));
    LLVMValueRef sp = LLVMBuildLoad2(g->b, g->ptr, g->sp, "sp");
    LLVMValueRef back = const64(g, (uint64_t)-(int64_t)in->operand[1]);
    LLVMValueRef args = LLVMBuildGEP2(g->b, g->i64, sp, &back, 1, "args");
    LLVMBuildStore(g->b, args, g->sp);
    LLVMValueRef callargs[] = {args, const64(g, in->operand[1])};
    set_tos(g, LLVMBuildCall2(g->b, g->fn_ty, g->functions[in->operand[0]], callargs, 2, ""));
}

/* One instruction, into the builder's current block. Returns true if it
 * ended the block (a jump or return). */
static bool instruction(irgen *g, LLVMValueRef fn, const sr_instr *in, LLVMBasicBlockRef target,
                        LLVMBasicBlockRef next)
{
    LLVMValueRef t, cond;
    switch (in->op) {
    case SG_OP_push: push(g, get_tos(g)); set_tos(g, const64(g, in->operand[0])); break;
    case SG_OP_pop: set_tos(g, pop(g)); break;
    case SG_OP_dup: push(g, get_tos(g)); break;
    case SG_OP_load:
        push(g, get_tos(g));
        set_tos(g, LLVMBuildLoad2(g->b, g->i64, local(g, in->operand[0]), ""));
        break;
    case SG_OP_store:
        LLVMBuildStore(g->b, get_tos(g), local(g, in->operand[0]));
        set_tos(g, pop(g));
        break;
    case SG_OP_add: case SG_OP_sub: case SG_OP_mul:
    case SG_OP_lt: case SG_OP_le: case SG_OP_eq: binary(g, in->op); break;
    case SG_OP_div: case SG_OP_mod: divide(g, fn, in->op); break;
    case SG_OP_addi: set_tos(g, LLVMBuildAdd(g->b, get_tos(g), const64(g, in->operand[0]), "")); break;
    case SG_OP_jump: LLVMBuildBr(g->b, target); return true;
    case SG_OP_jump_if_zero:
    case SG_OP_jump_if_nonzero:
        t = get_tos(g);
        set_tos(g, pop(g));
        cond = LLVMBuildICmp(g->b, in->op == SG_OP_jump_if_zero ? LLVMIntEQ : LLVMIntNE, t,
                             const64(g, 0), "");
        LLVMBuildCondBr(g->b, cond, target, next);
        return true;
    case SG_OP_ret: LLVMBuildRet(g->b, get_tos(g)); return true;
    case SG_OP_call: call(g, in); break;
    case SG_OP_print: {
        LLVMValueRef args[] = {g->frame, get_tos(g)};
        set_tos(g, LLVMBuildCall2(g->b, g->print_ty, g->print_fn, args, 2, ""));
        break;
    }
    case SG_OP_native: {
        LLVMValueRef args[] = {g->frame, const64(g, in->operand[0]), get_tos(g)};
        set_tos(g, LLVMBuildCall2(g->b, g->native_ty, g->native_fn, args, 3, ""));
        break;
    }
    default: trap(g, "unknown op"); return true;
    }
    return false;
}

/* A function's body: a basic block starts at every jump target and after
 * every instruction that ends one. */
static void translate_function(irgen *g, size_t index)
{
    const vm_function *f = &g->vm->functions[index];
    LLVMValueRef fn = g->functions[index];
    LLVMBasicBlockRef *blocks = calloc(f->n + 1, sizeof *blocks);
    if (!blocks) {
        fputs("bench_orc: out of memory\n", stderr);
        exit(1);
    }
    for (size_t pc = 0; pc < f->n; pc++) {
        uint32_t op = f->code[pc].op;
        if (op == SG_OP_jump || op == SG_OP_jump_if_zero || op == SG_OP_jump_if_nonzero)
            blocks[f->code[pc].target] = (LLVMBasicBlockRef)1;
        if (op == SG_OP_jump || op == SG_OP_jump_if_zero || op == SG_OP_jump_if_nonzero ||
            op == SG_OP_ret)
            blocks[pc + 1] = (LLVMBasicBlockRef)1;
    }
    blocks[0] = (LLVMBasicBlockRef)1;
    /* The allocas' block first, then the marks become blocks in program order. */
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
    for (size_t pc = 0; pc < f->n; pc++)
        if (blocks[pc])
            blocks[pc] = LLVMAppendBasicBlockInContext(g->ctx, fn, "");
    prologue(g, index, fn);
    bool ended = false;
    for (size_t pc = 0; pc < f->n; pc++) {
        if (blocks[pc]) {
            if (!ended)
                LLVMBuildBr(g->b, blocks[pc]);
            LLVMPositionBuilderAtEnd(g->b, blocks[pc]);
        } else if (ended) { /* unreachable code after an unknown op's trap */
            LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, ""));
        }
        const sr_instr *in = &f->code[pc];
        bool jumps = in->op == SG_OP_jump || in->op == SG_OP_jump_if_zero ||
                     in->op == SG_OP_jump_if_nonzero;
        ended = instruction(g, fn, in, jumps ? blocks[in->target] : NULL, blocks[pc + 1]);
    }
    free(blocks); /* the loader guarantees the last instruction is a ret or jump */
}

/* The module: every tinyvm function as `i64 tvm_N(ptr args, i64 argc)`. */
static LLVMModuleRef translate(LLVMContextRef ctx, const struct vm *vm, LLVMOrcLLJITRef jit)
{
    irgen g = {.ctx = ctx, .vm = vm};
    g.mod = LLVMModuleCreateWithNameInContext("tinyvm", ctx);
    LLVMSetTarget(g.mod, LLVMOrcLLJITGetTripleString(jit));
    LLVMSetDataLayout(g.mod, LLVMOrcLLJITGetDataLayoutStr(jit));
    g.b = LLVMCreateBuilderInContext(ctx);
    g.i64 = LLVMInt64TypeInContext(ctx);
    g.i32 = LLVMInt32TypeInContext(ctx);
    g.i8 = LLVMInt8TypeInContext(ctx);
    g.ptr = LLVMPointerTypeInContext(ctx, 0);
    g.fn_ty = LLVMFunctionType(g.i64, (LLVMTypeRef[]){g.ptr, g.i64}, 2, 0);
    g.print_ty = LLVMFunctionType(g.i64, (LLVMTypeRef[]){g.ptr, g.i64}, 2, 0);
    g.native_ty = LLVMFunctionType(g.i64, (LLVMTypeRef[]){g.ptr, g.i64, g.i64}, 3, 0);
    g.trap_ty = LLVMFunctionType(LLVMVoidTypeInContext(ctx), (LLVMTypeRef[]){g.ptr, g.ptr}, 2, 0);
    g.print_fn = host_address(&g, (const void *)vm_print);
    g.native_fn = host_address(&g, (const void *)vm_native);
    g.trap_fn = host_address(&g, (const void *)vm_trap);
    g.functions = calloc(vm->nfunctions, sizeof *g.functions);
    if (!g.functions) {
        fputs("bench_orc: out of memory\n", stderr);
        exit(1);
    }
    for (size_t i = 0; i < vm->nfunctions; i++) {
        char name[32];
        snprintf(name, sizeof name, "tvm_%zu", i);
        g.functions[i] = LLVMAddFunction(g.mod, name, g.fn_ty);
    }
    for (size_t i = 0; i < vm->nfunctions; i++)
        translate_function(&g, i);
    free(g.functions);
    LLVMDisposeBuilder(g.b);
    return g.mod;
}

/* ---- compiling with LLJIT ---------------------------------------------- */

/* A target machine for this host at the given CodeGen level (LLVM 22's C API
 * sets the JIT's CodeGen level through the machine it is built from). */
static LLVMTargetMachineRef host_machine(LLVMCodeGenOptLevel level)
{
    char *triple = LLVMGetDefaultTargetTriple();
    char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
    LLVMTargetRef target;
    char *err = NULL;
    LLVMTargetMachineRef tm = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &err)) {
        fprintf(stderr, "bench_orc: %s\n", err);
        LLVMDisposeMessage(err);
    } else {
        /* PIC, small code model: what LLJIT picks for JITLink on ELF */
        tm = LLVMCreateTargetMachine(target, triple, cpu, features, level, LLVMRelocPIC,
                                     LLVMCodeModelSmall);
    }
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
    return tm;
}

static LLVMOrcLLJITRef create_jit(LLVMCodeGenOptLevel level)
{
    LLVMTargetMachineRef tm = host_machine(level);
    if (!tm)
        return NULL;
    LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
        builder, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm)); /* takes tm */
    LLVMOrcLLJITRef jit;
    if (llvm_failed(LLVMOrcCreateLLJIT(&jit, builder), "cannot create LLJIT")) /* takes builder */
        return NULL;
    return jit;
}

/* One LLJIT per CodeGen level, made once (like stencilrt's runtime); every
 * round's module goes in under its own resource tracker, removed before the
 * next round, so each compile meets a warmed-up JIT as a real one would. */
typedef struct orc {
    LLVMOrcLLJITRef jit;
    LLVMOrcResourceTrackerRef rt; /* the module of the last round */
    LLVMTargetMachineRef passes_tm; /* -O2 only: what the passes optimize for */
    bool o2;
    orc_fn *entry;
} orc;

static bool orc_create(orc *o, bool o2)
{
    o->o2 = o2;
    o->jit = create_jit(o2 ? LLVMCodeGenLevelDefault : LLVMCodeGenLevelNone);
    o->passes_tm = o2 ? host_machine(LLVMCodeGenLevelDefault) : NULL;
    return o->jit && (!o2 || o->passes_tm);
}

/* Drops the last round's code (untimed: freeing is not compiling). */
static void orc_release(orc *o)
{
    if (!o->rt)
        return;
    llvm_failed(LLVMOrcResourceTrackerRemove(o->rt), "cannot remove the module");
    LLVMOrcReleaseResourceTracker(o->rt);
    o->rt = NULL;
    o->entry = NULL;
}

static void orc_destroy(orc *o)
{
    orc_release(o);
    if (o->jit)
        llvm_failed(LLVMOrcDisposeLLJIT(o->jit), "cannot dispose of LLJIT");
    if (o->passes_tm)
        LLVMDisposeTargetMachine(o->passes_tm);
}

/* -O2's IR passes; false after printing LLVM's error. */
static bool optimize(orc *o, LLVMModuleRef mod)
{
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    bool ok = !llvm_failed(LLVMRunPasses(mod, "default<O2>", o->passes_tm, opts), "default<O2>");
    LLVMDisposePassBuilderOptions(opts);
    return ok;
}

/* Translates, optimizes (at -O2), adds and looks up the program's `main_fn`:
 * the lookup makes LLJIT generate and link the module. Returns the compile
 * time in seconds (IR verification, with `verify`, excluded), or < 0. */
static double orc_compile(orc *o, const struct vm *vm, size_t main_fn, bool verify)
{
    orc_release(o);
    LLVMContextRef ctx = LLVMContextCreate();
    double t0 = now();
    LLVMModuleRef mod = translate(ctx, vm, o->jit);
    double built = now() - t0;
    char *msg = NULL;
    bool ok = !verify || !LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg);
    if (!ok)
        fprintf(stderr, "bench_orc: invalid IR: %s\n", msg);
    LLVMDisposeMessage(msg);
    t0 = now();
    ok = ok && (!o->o2 || optimize(o, mod));
    LLVMOrcThreadSafeContextRef tsctx = LLVMOrcCreateNewThreadSafeContextFromLLVMContext(ctx);
    LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(mod, tsctx);
    LLVMOrcDisposeThreadSafeContext(tsctx); /* the module keeps it alive */
    LLVMOrcJITTargetAddress addr = 0;
    char name[32];
    snprintf(name, sizeof name, "tvm_%zu", main_fn);
    if (!ok) {
        LLVMOrcDisposeThreadSafeModule(tsm);
    } else {
        o->rt = LLVMOrcJITDylibCreateResourceTracker(LLVMOrcLLJITGetMainJITDylib(o->jit));
        ok = !llvm_failed(LLVMOrcLLJITAddLLVMIRModuleWithRT(o->jit, o->rt, tsm),
                          "cannot add the module") &&
             !llvm_failed(LLVMOrcLLJITLookup(o->jit, &addr, name), "lookup");
    }
    double rest = now() - t0;
    o->entry = (orc_fn *)(uintptr_t)addr;
    return ok ? built + rest : -1;
}

/* ---- stencilrt ----------------------------------------------------------- */

/* Emits every function as one batch (as vm_jit_init does); returns seconds. */
static double sr_compile(struct vm *vm)
{
    sr_program *progs = calloc(vm->nfunctions, sizeof *progs);
    sr_executor **out = calloc(vm->nfunctions, sizeof *out);
    if (!progs || !out) {
        fputs("bench_orc: out of memory\n", stderr);
        exit(1);
    }
    for (size_t i = 0; i < vm->nfunctions; i++)
        progs[i] = (sr_program){vm->functions[i].code, vm->functions[i].n, vm->functions[i].name};
    double t0 = now();
    sr_status s = sr_emit_batch(vm->rt, progs, vm->nfunctions, out);
    double t = now() - t0;
    if (s != SR_OK) {
        fprintf(stderr, "bench_orc: sr_emit_batch: %s\n", sr_last_error());
        t = -1;
    }
    for (size_t i = 0; s == SR_OK && i < vm->nfunctions; i++) {
        vm->functions[i].executor = out[i];
        vm->functions[i].entry = sr_executor_entry(out[i]);
    }
    free(progs);
    free(out);
    return t;
}

static void sr_release(struct vm *vm)
{
    for (size_t i = 0; i < vm->nfunctions; i++) {
        sr_executor_free(vm->functions[i].executor);
        vm->functions[i].executor = NULL;
        vm->functions[i].entry = NULL;
    }
}

/* ---- the benchmark ------------------------------------------------------- */

typedef struct figure {
    double best, worst;
} figure;

static void record(figure *f, double v)
{
    if (v < f->best)
        f->best = v;
    if (v > f->worst)
        f->worst = v;
}

typedef struct bench {
    struct vm vm;
    size_t main_fn, instrs;
    orc orc[V__COUNT]; /* [V_O0] and [V_O2] */
    figure compile[V__COUNT], run[V__COUNT]; /* seconds */
    vm_value result[V__COUNT];
} bench;

/* One compile of every version; the previous round's code is released. */
static bool compile_round(bench *b, bool verify)
{
    sr_release(&b->vm);
    double t = sr_compile(&b->vm);
    if (t < 0)
        return false;
    record(&b->compile[V_SR], t);
    for (int v = V_O0; v <= V_O2; v++) {
        t = orc_compile(&b->orc[v], &b->vm, b->main_fn, verify);
        if (t < 0)
            return false;
        record(&b->compile[v], t);
    }
    return true;
}

/* `repeat` runs of main in one version; returns seconds per run. */
static double run_version(bench *b, int v, long repeat)
{
    vm_value r = 0;
    double t0 = now();
    for (long i = 0; i < repeat; i++) {
        if (v == V_O0 || v == V_O2) {
            r = b->orc[v].entry(NULL, 0);
        } else {
            b->vm.mode = v == V_SR ? VM_JIT : VM_INTERP;
            r = vm_run(&b->vm, b->main_fn, 0, NULL);
        }
    }
    double t = (now() - t0) / (double)repeat;
    b->result[v] = r;
    return t;
}

/* Every version's result against the interpreter's; false on a difference. */
static bool results_agree(const bench *b, const char *path)
{
    bool ok = true;
    for (int v = V_SR; v < V__COUNT; v++)
        if (b->result[v] != b->result[V_INTERP]) {
            fprintf(stderr, "bench_orc: %s: %s returned %" PRId64 ", the interpreter %" PRId64 "\n",
                    path, version_names[v], b->result[v], b->result[V_INTERP]);
            ok = false;
        }
    return ok;
}

static void print_figures(const bench *b, const char *path)
{
    const char *base = strrchr(path, '/');
    printf("bench_orc %s functions=%zu instrs=%zu result=%" PRId64, base ? base + 1 : path,
           b->vm.nfunctions, b->instrs, b->result[V_INTERP]);
    for (int v = V_SR; v < V__COUNT; v++)
        printf(" compile_us_per_instr_%s=%.4f/%.4f", version_keys[v],
               b->compile[v].best * 1e6 / (double)b->instrs,
               b->compile[v].worst * 1e6 / (double)b->instrs);
    for (int v = 0; v < V__COUNT; v++)
        printf(" run_us_%s=%.4f/%.4f", version_keys[v], b->run[v].best * 1e6,
               b->run[v].worst * 1e6);
    printf("\n");
}

static int usage(void)
{
    fputs("usage: bench_orc [--check] [--rounds N] [--repeat R] PROGRAM\n", stderr);
    return 2;
}

static bool setup(bench *b, const char *path)
{
    if (!vm_load(&b->vm, path))
        return false;
    b->main_fn = b->vm.nfunctions;
    for (size_t i = 0; i < b->vm.nfunctions; i++) {
        if (!strcmp(b->vm.functions[i].name, "main"))
            b->main_fn = i;
        b->instrs += b->vm.functions[i].n;
    }
    if (b->main_fn == b->vm.nfunctions) {
        fprintf(stderr, "%s: error: no function 'main'\n", path);
        return false;
    }
    for (int v = 0; v < V__COUNT; v++)
        b->compile[v] = b->run[v] = (figure){1e30, 0};
    return vm_jit_runtime(&b->vm) && orc_create(&b->orc[V_O0], false) &&
           orc_create(&b->orc[V_O2], true);
}

int main(int argc, char **argv)
{
    bool check = false;
    long rounds = 10, repeat = 1;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check"))
            check = true;
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc && (rounds = atol(argv[++i])) > 0)
            continue;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc && (repeat = atol(argv[++i])) > 0)
            continue;
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else
            return usage();
    }
    if (!path || rounds < 1 || repeat < 1)
        return usage();
    if (check)
        rounds = repeat = 1;
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    static bench b; /* zeroed: no executors, no JITs yet */
    if (!setup(&b, path))
        return 1;
    bool ok = true;
    /* Compiles first, then runs, each version alternating with the others
     * round by round: the machine's speed wanders. */
    for (long r = 0; ok && r < rounds; r++)
        ok = compile_round(&b, r == 0);
    for (long r = 0; ok && r < rounds; r++) {
        for (int v = 0; v < V__COUNT; v++)
            record(&b.run[v], run_version(&b, v, repeat));
        ok = results_agree(&b, path);
    }
    if (ok && check)
        printf("bench_orc: %s: %" PRId64 " from the interpreter, stencilrt, ORC -O0 and ORC -O2\n",
               path, b.result[V_INTERP]);
    else if (ok)
        print_figures(&b, path);
    for (int v = V_O0; v <= V_O2; v++)
        orc_destroy(&b.orc[v]);
    if (b.vm.rt)
        vm_jit_fini(&b.vm);
    vm_unload(&b.vm);
    LLVMShutdown();
    return ok ? 0 : 1;
}
