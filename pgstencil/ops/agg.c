/* agg.c - aggregate transitions (an Agg node's per-input-row expression):
 * deserialization, strict input checks and the plain transition steps. The
 * transition calls are PostgreSQL's ExecAggPlainTransByVal/ByRef, static in
 * execExprInterp.c, written again here to the letter: the same fields set in
 * the same order, the call in the per-input-tuple memory context. */

/* EEOP_AGG_STRICT_DESERIALIZE and EEOP_AGG_DESERIALIZE (strict: a NULL
 * input jumps past the aggregate) */
OP(agg_deserialize, VARIANT(strict, 0, 1))
{
    ExprEvalStep *op = STEP;
    FunctionCallInfo fcinfo = op->d.agg_deserialize.fcinfo_data;
    if (STENCIL_V(strict) && fcinfo->args[0].isnull)
        JUMP();
    AggState *aggstate = castNode(AggState, state->parent);
    MemoryContext old = MemoryContextSwitchTo(aggstate->tmpcontext->ecxt_per_tuple_memory);
    fcinfo->isnull = false;
    *op->resvalue = FunctionCallInvoke(fcinfo);
    *op->resnull = fcinfo->isnull;
    MemoryContextSwitchTo(old);
    CONTINUE();
}

/* EEOP_AGG_STRICT_INPUT_CHECK_ARGS, _NULLS: a NULL input skips the row. */
OP(agg_strict_input_check_args)
{
    ExprEvalStep *op = STEP;
    NullableDatum *args = op->d.agg_strict_input_check.args;
    for (int i = 0; i < op->d.agg_strict_input_check.nargs; i++)
        if (args[i].isnull)
            JUMP();
    CONTINUE();
}

OP(agg_strict_input_check_nulls)
{
    ExprEvalStep *op = STEP;
    bool *nulls = op->d.agg_strict_input_check.nulls;
    for (int i = 0; i < op->d.agg_strict_input_check.nargs; i++)
        if (nulls[i])
            JUMP();
    CONTINUE();
}

/* EEOP_AGG_PLAIN_PERGROUP_NULLCHECK: no group states for this grouping set. */
OP(agg_plain_pergroup_nullcheck)
{
    ExprEvalStep *op = STEP;
    AggState *aggstate = castNode(AggState, state->parent);
    if (aggstate->all_pergroups[op->d.agg_plain_pergroup_nullcheck.setoff] == NULL)
        JUMP();
    CONTINUE();
}

/* One call of the transition function, as ExecAggPlainTransByVal/ByRef:
 * byref copies a new pass-by-reference value into the aggregate's context
 * (ExecAggTransReparent) unless the function returned its first argument. */
static inline __attribute__((always_inline)) void
pgs_agg_trans(AggState *aggstate, ExprEvalStep *op, AggStatePerGroup pergroup, bool byref)
{
    AggStatePerTrans pertrans = op->d.agg_trans.pertrans;
    FunctionCallInfo fcinfo = pertrans->transfn_fcinfo;
    aggstate->curaggcontext = op->d.agg_trans.aggcontext;
    aggstate->current_set = op->d.agg_trans.setno;
    aggstate->curpertrans = pertrans;
    MemoryContext old = MemoryContextSwitchTo(aggstate->tmpcontext->ecxt_per_tuple_memory);
    fcinfo->args[0].value = pergroup->transValue;
    fcinfo->args[0].isnull = pergroup->transValueIsNull;
    fcinfo->isnull = false;
    Datum value = FunctionCallInvoke(fcinfo);
    if (byref && DatumGetPointer(value) != DatumGetPointer(pergroup->transValue))
        value = ExecAggTransReparent(aggstate, pertrans, value, fcinfo->isnull,
                                     pergroup->transValue, pergroup->transValueIsNull);
    pergroup->transValue = value;
    pergroup->transValueIsNull = fcinfo->isnull;
    MemoryContextSwitchTo(old);
}

/* EEOP_AGG_PLAIN_TRANS_{INIT_STRICT_,STRICT_,}{BYVAL,BYREF}. `check` 0:
 * always call; 1 (STRICT): not with a NULL state, as a strict transition
 * function's is until its first non-NULL input; 2 (INIT_STRICT): besides,
 * a group without a state starts from its first input. `byref`: the state's
 * kind. */
OP(agg_plain_trans, VARIANT(check, 0, 2), VARIANT(byref, 0, 1))
{
    ExprEvalStep *op = STEP;
    AggState *aggstate = castNode(AggState, state->parent);
    AggStatePerGroup pergroup =
        &aggstate->all_pergroups[op->d.agg_trans.setoff][op->d.agg_trans.transno];
    if (STENCIL_V(check) == 2 && pergroup->noTransValue)
        ExecAggInitGroup(aggstate, op->d.agg_trans.pertrans, pergroup,
                         op->d.agg_trans.aggcontext);
    else if (STENCIL_V(check) == 0 || likely(!pergroup->transValueIsNull))
        pgs_agg_trans(aggstate, op, pergroup, STENCIL_V(byref));
    CONTINUE();
}
