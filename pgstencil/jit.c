/* jit.c - pgstencil's JIT: an ExprState's steps become one executor, one
 * instruction per step, entered through the shim that stencilrt placed in JIT
 * memory. */
#include "pgstencil.h"

#include "portability/instr_time.h"
#include "storage/ipc.h"
#include "utils/expandeddatum.h"

static const sr_stencil_set stencil_set = SR_STENCIL_SET_FROM_HEADER;

static sr_runtime *runtime;
static shim_fn *shim;
static bool runtime_failed; /* warned once; interpret from now on */

/* The server's functions and variables the stencils use (stencils.yaml). */
static const void *const symbols[SG_SYM__COUNT] = {
    [SG_SYM_slot_getsomeattrs_int] = (const void *)slot_getsomeattrs_int,
    [SG_SYM_MakeExpandedObjectReadOnlyInternal] = (const void *)MakeExpandedObjectReadOnlyInternal,
    [SG_SYM_CurrentMemoryContext] = (const void *)&CurrentMemoryContext,
    [SG_SYM_ExecAggInitGroup] = (const void *)ExecAggInitGroup,
    [SG_SYM_ExecAggTransReparent] = (const void *)ExecAggTransReparent,
    [SG_SYM_ExecEvalSysVar] = (const void *)ExecEvalSysVar,
    [SG_SYM_ExecEvalWholeRowVar] = (const void *)ExecEvalWholeRowVar,
    [SG_SYM_ExecEvalFuncExprFusage] = (const void *)ExecEvalFuncExprFusage,
    [SG_SYM_ExecEvalFuncExprStrictFusage] = (const void *)ExecEvalFuncExprStrictFusage,
    [SG_SYM_ExecEvalParamExec] = (const void *)ExecEvalParamExec,
    [SG_SYM_ExecEvalParamExtern] = (const void *)ExecEvalParamExtern,
    [SG_SYM_ExecEvalRowNull] = (const void *)ExecEvalRowNull,
    [SG_SYM_ExecEvalRowNotNull] = (const void *)ExecEvalRowNotNull,
    [SG_SYM_ExecEvalSQLValueFunction] = (const void *)ExecEvalSQLValueFunction,
    [SG_SYM_ExecEvalCurrentOfExpr] = (const void *)ExecEvalCurrentOfExpr,
    [SG_SYM_ExecEvalNextValueExpr] = (const void *)ExecEvalNextValueExpr,
    [SG_SYM_ExecEvalArrayExpr] = (const void *)ExecEvalArrayExpr,
    [SG_SYM_ExecEvalArrayCoerce] = (const void *)ExecEvalArrayCoerce,
    [SG_SYM_ExecEvalRow] = (const void *)ExecEvalRow,
    [SG_SYM_ExecEvalMinMax] = (const void *)ExecEvalMinMax,
    [SG_SYM_ExecEvalFieldSelect] = (const void *)ExecEvalFieldSelect,
    [SG_SYM_ExecEvalFieldStoreDeForm] = (const void *)ExecEvalFieldStoreDeForm,
    [SG_SYM_ExecEvalFieldStoreForm] = (const void *)ExecEvalFieldStoreForm,
    [SG_SYM_ExecEvalConvertRowtype] = (const void *)ExecEvalConvertRowtype,
    [SG_SYM_ExecEvalScalarArrayOp] = (const void *)ExecEvalScalarArrayOp,
    [SG_SYM_ExecEvalHashedScalarArrayOp] = (const void *)ExecEvalHashedScalarArrayOp,
    [SG_SYM_ExecEvalConstraintNotNull] = (const void *)ExecEvalConstraintNotNull,
    [SG_SYM_ExecEvalConstraintCheck] = (const void *)ExecEvalConstraintCheck,
    [SG_SYM_ExecEvalXmlExpr] = (const void *)ExecEvalXmlExpr,
    [SG_SYM_ExecEvalGroupingFunc] = (const void *)ExecEvalGroupingFunc,
    [SG_SYM_ExecEvalSubPlan] = (const void *)ExecEvalSubPlan,
    [SG_SYM_ExecEvalAggOrderedTransDatum] = (const void *)ExecEvalAggOrderedTransDatum,
    [SG_SYM_ExecEvalAggOrderedTransTuple] = (const void *)ExecEvalAggOrderedTransTuple,
};

/* At backend exit (on_proc_exit: after the resource owners have released
 * every JIT context): every registration undone. */
static void runtime_destroy(int code, Datum arg)
{
    (void)code;
    (void)arg;
    sr_runtime_destroy(runtime);
    runtime = NULL;
    shim = NULL;
}

sr_runtime *pgs_runtime(void)
{
    if (runtime || runtime_failed)
        return runtime;
    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.frames = 1; /* backtrace_functions' backtrace() needs it, whatever the switches */
    cfg.gdb = jit_debugging_support;
    cfg.perf = jit_profiling_support ? SR_PERF_MAP : SR_PERF_OFF;
    if (sr_runtime_create(&stencil_set, symbols, &cfg, &runtime) != SR_OK) {
        runtime_failed = true;
        runtime = NULL;
        ereport(WARNING, (errmsg("pgstencil: %s", sr_last_error()),
                          errdetail("Expressions are interpreted in this session.")));
        return NULL;
    }
    shim = (shim_fn *)sr_shim_entry(runtime);
    on_proc_exit(runtime_destroy, (Datum)0);
    return runtime;
}

sr_runtime *pgs_runtime_if_created(void)
{
    return runtime;
}

/* ExprState's evalfunc: the expression's executor, entered through the shim. */
static Datum eval_compiled(ExprState *state, ExprContext *econtext, bool *isnull)
{
    return shim(state, econtext, isnull, state->evalfunc_private);
}

/* The first evaluation checks, as the interpreter's does, that the slots'
 * tuple descriptors still match the plan (CheckExprStillValid), then goes
 * straight to the executor from then on. */
static Datum eval_first(ExprState *state, ExprContext *econtext, bool *isnull)
{
    CheckExprStillValid(state, econtext);
    state->evalfunc = eval_compiled;
    return eval_compiled(state, econtext, isnull);
}

void pgs_install(ExprState *state, sr_executor *ex)
{
    state->evalfunc = eval_first;
    state->evalfunc_private = sr_executor_entry(ex);
}

/* The stencil of step `op`, for every ExprEvalOp: the switch has no default,
 * so -Wswitch (an error here) names any step kind a new PostgreSQL adds. */
static uint32_t stencil_of(const ExprEvalStep *op, ExprEvalOp kind)
{
    switch (kind) {
    case EEOP_DONE: return SG_OP_done;
    case EEOP_INNER_FETCHSOME: return SG_OP_VARIANT_fetchsome(0);
    case EEOP_OUTER_FETCHSOME: return SG_OP_VARIANT_fetchsome(1);
    case EEOP_SCAN_FETCHSOME: return SG_OP_VARIANT_fetchsome(2);
    case EEOP_INNER_VAR: return SG_OP_VARIANT_var(0);
    case EEOP_OUTER_VAR: return SG_OP_VARIANT_var(1);
    case EEOP_SCAN_VAR: return SG_OP_VARIANT_var(2);
    case EEOP_INNER_SYSVAR: return SG_OP_VARIANT_sysvar(0);
    case EEOP_OUTER_SYSVAR: return SG_OP_VARIANT_sysvar(1);
    case EEOP_SCAN_SYSVAR: return SG_OP_VARIANT_sysvar(2);
    case EEOP_WHOLEROW: return SG_OP_wholerow;
    case EEOP_ASSIGN_INNER_VAR: return SG_OP_VARIANT_assign_var(0);
    case EEOP_ASSIGN_OUTER_VAR: return SG_OP_VARIANT_assign_var(1);
    case EEOP_ASSIGN_SCAN_VAR: return SG_OP_VARIANT_assign_var(2);
    case EEOP_ASSIGN_TMP: return SG_OP_assign_tmp;
    case EEOP_ASSIGN_TMP_MAKE_RO: return SG_OP_assign_tmp_make_ro;
    case EEOP_CONST: return SG_OP_constant;
    case EEOP_FUNCEXPR: return SG_OP_funcexpr;
    case EEOP_FUNCEXPR_STRICT: {
        int nargs = op->d.func.nargs;
        return SG_OP_VARIANT_funcexpr_strict(nargs == 1 || nargs == 2 ? nargs : 0);
    }
    case EEOP_FUNCEXPR_FUSAGE: return SG_OP_funcexpr_fusage;
    case EEOP_FUNCEXPR_STRICT_FUSAGE: return SG_OP_funcexpr_strict_fusage;
    case EEOP_BOOL_AND_STEP_FIRST: return SG_OP_bool_and_step_first;
    case EEOP_BOOL_AND_STEP: return SG_OP_bool_and_step;
    case EEOP_BOOL_AND_STEP_LAST: return SG_OP_bool_and_step_last;
    case EEOP_BOOL_OR_STEP_FIRST: return SG_OP_bool_or_step_first;
    case EEOP_BOOL_OR_STEP: return SG_OP_bool_or_step;
    case EEOP_BOOL_OR_STEP_LAST: return SG_OP_bool_or_step_last;
    case EEOP_BOOL_NOT_STEP: return SG_OP_bool_not_step;
    case EEOP_QUAL: return SG_OP_qual;
    case EEOP_JUMP: return SG_OP_jump;
    case EEOP_JUMP_IF_NULL: return SG_OP_jump_if_null;
    case EEOP_JUMP_IF_NOT_NULL: return SG_OP_jump_if_not_null;
    case EEOP_JUMP_IF_NOT_TRUE: return SG_OP_jump_if_not_true;
    case EEOP_NULLTEST_ISNULL: return SG_OP_VARIANT_nulltest(0);
    case EEOP_NULLTEST_ISNOTNULL: return SG_OP_VARIANT_nulltest(1);
    case EEOP_NULLTEST_ROWISNULL: return SG_OP_nulltest_rowisnull;
    case EEOP_NULLTEST_ROWISNOTNULL: return SG_OP_nulltest_rowisnotnull;
    case EEOP_BOOLTEST_IS_TRUE: return SG_OP_booltest_is_true;
    case EEOP_BOOLTEST_IS_NOT_TRUE: return SG_OP_booltest_is_not_true;
    case EEOP_BOOLTEST_IS_FALSE: return SG_OP_booltest_is_false;
    case EEOP_BOOLTEST_IS_NOT_FALSE: return SG_OP_booltest_is_not_false;
    case EEOP_PARAM_EXEC: return SG_OP_param_exec;
    case EEOP_PARAM_EXTERN: return SG_OP_param_extern;
    case EEOP_PARAM_CALLBACK: return SG_OP_param_callback;
    case EEOP_CASE_TESTVAL: return SG_OP_case_testval;
    case EEOP_MAKE_READONLY: return SG_OP_make_readonly;
    case EEOP_IOCOERCE: return SG_OP_iocoerce;
    case EEOP_DISTINCT: return SG_OP_VARIANT_distinct(0);
    case EEOP_NOT_DISTINCT: return SG_OP_VARIANT_distinct(1);
    case EEOP_NULLIF: return SG_OP_nullif;
    case EEOP_SQLVALUEFUNCTION: return SG_OP_sqlvaluefunction;
    case EEOP_CURRENTOFEXPR: return SG_OP_currentofexpr;
    case EEOP_NEXTVALUEEXPR: return SG_OP_nextvalueexpr;
    case EEOP_ARRAYEXPR: return SG_OP_arrayexpr;
    case EEOP_ARRAYCOERCE: return SG_OP_arraycoerce;
    case EEOP_ROW: return SG_OP_row;
    case EEOP_ROWCOMPARE_STEP: return SG_OP_rowcompare_step;
    case EEOP_ROWCOMPARE_FINAL: return SG_OP_rowcompare_final;
    case EEOP_MINMAX: return SG_OP_minmax;
    case EEOP_FIELDSELECT: return SG_OP_fieldselect;
    case EEOP_FIELDSTORE_DEFORM: return SG_OP_fieldstore_deform;
    case EEOP_FIELDSTORE_FORM: return SG_OP_fieldstore_form;
    case EEOP_SBSREF_SUBSCRIPTS: return SG_OP_sbsref_subscripts;
    case EEOP_SBSREF_OLD:
    case EEOP_SBSREF_ASSIGN:
    case EEOP_SBSREF_FETCH: return SG_OP_sbsref;
    case EEOP_DOMAIN_TESTVAL: return SG_OP_domain_testval;
    case EEOP_DOMAIN_NOTNULL: return SG_OP_domain_notnull;
    case EEOP_DOMAIN_CHECK: return SG_OP_domain_check;
    case EEOP_CONVERT_ROWTYPE: return SG_OP_convert_rowtype;
    case EEOP_SCALARARRAYOP: return SG_OP_scalararrayop;
    case EEOP_HASHED_SCALARARRAYOP: return SG_OP_hashed_scalararrayop;
    case EEOP_XMLEXPR: return SG_OP_xmlexpr;
    case EEOP_AGGREF: return SG_OP_aggref;
    case EEOP_GROUPING_FUNC: return SG_OP_grouping_func;
    case EEOP_WINDOW_FUNC: return SG_OP_window_func;
    case EEOP_SUBPLAN: return SG_OP_subplan;
    case EEOP_AGG_STRICT_DESERIALIZE: return SG_OP_VARIANT_agg_deserialize(1);
    case EEOP_AGG_DESERIALIZE: return SG_OP_VARIANT_agg_deserialize(0);
    case EEOP_AGG_STRICT_INPUT_CHECK_ARGS: return SG_OP_agg_strict_input_check_args;
    case EEOP_AGG_STRICT_INPUT_CHECK_NULLS: return SG_OP_agg_strict_input_check_nulls;
    case EEOP_AGG_PLAIN_PERGROUP_NULLCHECK: return SG_OP_agg_plain_pergroup_nullcheck;
    case EEOP_AGG_PLAIN_TRANS_INIT_STRICT_BYVAL: return SG_OP_VARIANT_agg_plain_trans(2, 0);
    case EEOP_AGG_PLAIN_TRANS_STRICT_BYVAL: return SG_OP_VARIANT_agg_plain_trans(1, 0);
    case EEOP_AGG_PLAIN_TRANS_BYVAL: return SG_OP_VARIANT_agg_plain_trans(0, 0);
    case EEOP_AGG_PLAIN_TRANS_INIT_STRICT_BYREF: return SG_OP_VARIANT_agg_plain_trans(2, 1);
    case EEOP_AGG_PLAIN_TRANS_STRICT_BYREF: return SG_OP_VARIANT_agg_plain_trans(1, 1);
    case EEOP_AGG_PLAIN_TRANS_BYREF: return SG_OP_VARIANT_agg_plain_trans(0, 1);
    case EEOP_AGG_ORDERED_TRANS_DATUM: return SG_OP_agg_ordered_trans_datum;
    case EEOP_AGG_ORDERED_TRANS_TUPLE: return SG_OP_agg_ordered_trans_tuple;
    case EEOP_LAST: break;
    }
    return UINT32_MAX; /* EEOP_LAST, or a corrupt step: the interpreter takes it */
}

/* The step the step jumps to, or -1 for steps that never jump. */
static int jump_of(const ExprEvalStep *op, ExprEvalOp kind)
{
    switch (kind) {
    case EEOP_BOOL_AND_STEP_FIRST:
    case EEOP_BOOL_AND_STEP:
    case EEOP_BOOL_OR_STEP_FIRST:
    case EEOP_BOOL_OR_STEP: return op->d.boolexpr.jumpdone;
    case EEOP_QUAL: return op->d.qualexpr.jumpdone;
    case EEOP_JUMP:
    case EEOP_JUMP_IF_NULL:
    case EEOP_JUMP_IF_NOT_NULL:
    case EEOP_JUMP_IF_NOT_TRUE: return op->d.jump.jumpdone;
    case EEOP_ROWCOMPARE_STEP: return op->d.rowcompare_step.jumpdone;
    case EEOP_SBSREF_SUBSCRIPTS: return op->d.sbsref_subscript.jumpdone;
    case EEOP_AGG_STRICT_DESERIALIZE: return op->d.agg_deserialize.jumpnull;
    case EEOP_AGG_STRICT_INPUT_CHECK_ARGS:
    case EEOP_AGG_STRICT_INPUT_CHECK_NULLS: return op->d.agg_strict_input_check.jumpnull;
    case EEOP_AGG_PLAIN_PERGROUP_NULLCHECK: return op->d.agg_plain_pergroup_nullcheck.jumpnull;
    default: return -1;
    }
}

/* Instructions per step: a row comparison's column has two exits besides
 * the next step (NULL, and a difference), one instruction one target, so a
 * jump_if_null to its jumpnull follows it (ops/calls.c, rowcompare_step). */
static int width_of(ExprEvalOp kind)
{
    return kind == EEOP_ROWCOMPARE_STEP ? 2 : 1;
}

sr_executor *pgs_compile_steps(ExprState *state, const char *name, JitInstrumentation *instr,
                               const char **error)
{
    instr_time start, emitting, end;
    INSTR_TIME_SET_CURRENT(start);
    int nsteps = state->steps_len;
    ExprEvalOp *kinds = palloc(nsteps * sizeof *kinds);
    uint32 *first = palloc((nsteps + 1) * sizeof *first); /* step -> its first instruction */
    uint32 n = 0;
    for (int i = 0; i < nsteps; i++) {
        kinds[i] = ExecEvalStepOp(state, &state->steps[i]);
        first[i] = n;
        n += width_of(kinds[i]);
    }
    first[nsteps] = n;
    sr_instr *code = palloc0(n * sizeof *code);
    sr_executor *ex = NULL;
    *error = NULL;
    for (int i = 0; i < nsteps && !*error; i++) {
        ExprEvalStep *op = &state->steps[i];
        sr_instr *in = &code[first[i]];
        int target = jump_of(op, kinds[i]);
        in->op = stencil_of(op, kinds[i]);
        in->operand[0] = (uint64_t)(uintptr_t)op;
        if (in->op == UINT32_MAX)
            *error = "a step of an unknown kind";
        else if (target >= nsteps)
            *error = "a step jumps outside its expression";
        else if (target >= 0)
            in->target = first[target];
        if (kinds[i] == EEOP_ROWCOMPARE_STEP) {
            int null_target = op->d.rowcompare_step.jumpnull;
            in[1] = (sr_instr){SG_OP_jump_if_null, 0, {(uint64_t)(uintptr_t)op}};
            if (null_target < 0 || null_target >= nsteps)
                *error = "a step jumps outside its expression";
            else
                in[1].target = first[null_target];
        }
    }
    INSTR_TIME_SET_CURRENT(emitting);
    if (!*error && sr_emit(runtime, code, n, name, &ex) != SR_OK)
        *error = sr_last_error();
    INSTR_TIME_SET_CURRENT(end);
    INSTR_TIME_ACCUM_DIFF(instr->generation_counter, emitting, start);
    INSTR_TIME_ACCUM_DIFF(instr->emission_counter, end, emitting);
    pfree(code);
    pfree(first);
    pfree(kinds);
    return *error ? NULL : ex;
}
