/* calls.c - function calls: plain and strict (by argument count: 1 and 2
 * tested inline, any other count in a loop), with usage statistics, the
 * comparisons built on an equality function (IS DISTINCT FROM, NULLIF), I/O
 * coercions and row comparisons. */

/* EEOP_FUNCEXPR: a non-strict function. */
OP(funcexpr)
{
    pgs_call_function(STEP);
    CONTINUE();
}

/* EEOP_FUNCEXPR_STRICT: NULL without a call when an argument is NULL.
 * nargs 1 and 2 are the common cases; 0 is any count. */
OP(funcexpr_strict, VARIANT(nargs, 0, 2))
{
    ExprEvalStep *op = STEP;
    NullableDatum *args = op->d.func.fcinfo_data->args;
#if STENCIL_V(nargs) == 1
    if (args[0].isnull)
        goto null;
#elif STENCIL_V(nargs) == 2
    if (args[0].isnull | args[1].isnull)
        goto null;
#else
    for (int i = 0; i < op->d.func.nargs; i++)
        if (args[i].isnull)
            goto null;
#endif
    pgs_call_function(op);
    CONTINUE();
null:
    *op->resnull = true;
    CONTINUE();
}

/* EEOP_FUNCEXPR_FUSAGE, EEOP_FUNCEXPR_STRICT_FUSAGE (track_functions on) */
OP(funcexpr_fusage)
{
    ExecEvalFuncExprFusage(state, STEP, econtext);
    CONTINUE();
}

OP(funcexpr_strict_fusage)
{
    ExecEvalFuncExprStrictFusage(state, STEP, econtext);
    CONTINUE();
}

/* EEOP_DISTINCT and EEOP_NOT_DISTINCT: two NULLs are not distinct, one NULL
 * is; otherwise the equality function decides. */
OP(distinct, VARIANT(negate, 0, 1))
{
    ExprEvalStep *op = STEP;
    FunctionCallInfo fcinfo = op->d.func.fcinfo_data;
    bool distinct;
    if (fcinfo->args[0].isnull || fcinfo->args[1].isnull) {
        distinct = fcinfo->args[0].isnull != fcinfo->args[1].isnull;
        *op->resnull = false;
    } else {
        fcinfo->isnull = false;
        distinct = !DatumGetBool(op->d.func.fn_addr(fcinfo));
        *op->resnull = fcinfo->isnull;
    }
    *op->resvalue = BoolGetDatum(STENCIL_V(negate) ? !distinct : distinct);
    CONTINUE();
}

/* EEOP_NULLIF: NULL when both arguments are equal, else the first. */
OP(nullif)
{
    ExprEvalStep *op = STEP;
    FunctionCallInfo fcinfo = op->d.func.fcinfo_data;
    Datum first = fcinfo->args[0].value;
    if (!fcinfo->args[0].isnull && !fcinfo->args[1].isnull) {
        /* the comparison sees a read-only expanded object; the result is
         * the argument as it was */
        if (op->d.func.make_ro)
            fcinfo->args[0].value = MakeExpandedObjectReadOnlyInternal(first);
        fcinfo->isnull = false;
        Datum equal = op->d.func.fn_addr(fcinfo);
        if (!fcinfo->isnull && DatumGetBool(equal)) {
            *op->resvalue = (Datum)0;
            *op->resnull = true;
            CONTINUE();
        }
    }
    *op->resvalue = first;
    *op->resnull = fcinfo->args[0].isnull;
    CONTINUE();
}

/* EEOP_IOCOERCE: the value through its type's output function, then the
 * target type's input function (not called for NULL when strict). */
OP(iocoerce)
{
    ExprEvalStep *op = STEP;
    char *str = NULL;
    if (!*op->resnull) {
        FunctionCallInfo out = op->d.iocoerce.fcinfo_data_out;
        out->args[0].value = *op->resvalue;
        out->args[0].isnull = false;
        out->isnull = false;
        str = DatumGetCString(FunctionCallInvoke(out));
    }
    if (str != NULL || !op->d.iocoerce.finfo_in->fn_strict) {
        FunctionCallInfo in = op->d.iocoerce.fcinfo_data_in;
        in->args[0].value = PointerGetDatum(str);
        in->args[0].isnull = *op->resnull;
        in->isnull = false;
        *op->resvalue = FunctionCallInvoke(in);
    }
    CONTINUE();
}

/* EEOP_ROWCOMPARE_STEP: one column of a row comparison. A NULL goes on to
 * the next instruction, which jit.c makes a jump_if_null to the step's
 * jumpnull (an instruction has one target); a difference jumps to jumpdone. */
OP(rowcompare_step)
{
    ExprEvalStep *op = STEP;
    FunctionCallInfo fcinfo = op->d.rowcompare_step.fcinfo_data;
    if (op->d.rowcompare_step.finfo->fn_strict &&
        (fcinfo->args[0].isnull || fcinfo->args[1].isnull)) {
        *op->resnull = true;
        CONTINUE();
    }
    fcinfo->isnull = false;
    *op->resvalue = op->d.rowcompare_step.fn_addr(fcinfo);
    if (fcinfo->isnull) {
        *op->resnull = true;
        CONTINUE();
    }
    *op->resnull = false;
    if (DatumGetInt32(*op->resvalue) != 0)
        JUMP();
    CONTINUE();
}

/* EEOP_ROWCOMPARE_FINAL: the first difference's sign against the operator. */
OP(rowcompare_final)
{
    ExprEvalStep *op = STEP;
    int32 cmp = DatumGetInt32(*op->resvalue);
    bool result = false;
    switch (op->d.rowcompare_final.rctype) {
    case ROWCOMPARE_LT: result = cmp < 0; break;
    case ROWCOMPARE_LE: result = cmp <= 0; break;
    case ROWCOMPARE_GE: result = cmp >= 0; break;
    case ROWCOMPARE_GT: result = cmp > 0; break;
    default: break; /* EQ and NE never get here (ExecInitExprRec) */
    }
    *op->resvalue = BoolGetDatum(result);
    *op->resnull = false;
    CONTINUE();
}
