/* values.c - parameters, the values CASE and domain checks test, aggregate
 * and window function results, and the steps the interpreter itself leaves to
 * its out-of-line functions (execExpr.h's ExecEval*), called the same way. */

/* EEOP_PARAM_EXEC, EEOP_PARAM_EXTERN, EEOP_PARAM_CALLBACK */
OP(param_exec)
{
    ExecEvalParamExec(state, STEP, econtext);
    CONTINUE();
}

OP(param_extern)
{
    ExecEvalParamExtern(state, STEP, econtext);
    CONTINUE();
}

OP(param_callback)
{
    ExprEvalStep *op = STEP;
    op->d.cparam.paramfunc(state, op, econtext);
    CONTINUE();
}

/* EEOP_CASE_TESTVAL and EEOP_DOMAIN_TESTVAL: the value being tested, from
 * the step when it has one, else from the expression context's `field`. */
#define TESTVAL(name, field)                                                             \
    OP(name)                                                                             \
    {                                                                                    \
        ExprEvalStep *op = STEP;                                                         \
        if (op->d.casetest.value) {                                                      \
            *op->resvalue = *op->d.casetest.value;                                       \
            *op->resnull = *op->d.casetest.isnull;                                       \
        } else {                                                                         \
            *op->resvalue = econtext->field##_datum;                                     \
            *op->resnull = econtext->field##_isNull;                                     \
        }                                                                                \
        CONTINUE();                                                                      \
    }
TESTVAL(case_testval, caseValue)
TESTVAL(domain_testval, domainValue)

/* EEOP_MAKE_READONLY */
OP(make_readonly)
{
    ExprEvalStep *op = STEP;
    bool null = *op->d.make_readonly.isnull;
    if (!null)
        *op->resvalue = MakeExpandedObjectReadOnlyInternal(*op->d.make_readonly.value);
    *op->resnull = null;
    CONTINUE();
}

/* EEOP_AGGREF and EEOP_WINDOW_FUNC: results their nodes computed. */
OP(aggref)
{
    ExprEvalStep *op = STEP;
    int aggno = op->d.aggref.aggno;
    *op->resvalue = econtext->ecxt_aggvalues[aggno];
    *op->resnull = econtext->ecxt_aggnulls[aggno];
    CONTINUE();
}

OP(window_func)
{
    ExprEvalStep *op = STEP;
    int wfuncno = op->d.window_func.wfstate->wfuncno;
    *op->resvalue = econtext->ecxt_aggvalues[wfuncno];
    *op->resnull = econtext->ecxt_aggnulls[wfuncno];
    CONTINUE();
}

/* EEOP_SBSREF_SUBSCRIPTS: false (a NULL subscript) ends the reference. */
OP(sbsref_subscripts)
{
    ExprEvalStep *op = STEP;
    if (!op->d.sbsref_subscript.subscriptfunc(state, op, econtext))
        JUMP();
    CONTINUE();
}

/* EEOP_SBSREF_OLD, EEOP_SBSREF_ASSIGN, EEOP_SBSREF_FETCH: the subscripting
 * method's own functions. */
OP(sbsref)
{
    ExprEvalStep *op = STEP;
    op->d.sbsref.subscriptfunc(state, op, econtext);
    CONTINUE();
}

/* Steps the interpreter evaluates out of line, by their ExecEval* function:
 * with the expression context (CALL3) or without (CALL2). */
#define CALL2(name, fn)                                                                  \
    OP(name)                                                                             \
    {                                                                                    \
        fn(state, STEP);                                                                 \
        CONTINUE();                                                                      \
    }
#define CALL3(name, fn)                                                                  \
    OP(name)                                                                             \
    {                                                                                    \
        fn(state, STEP, econtext);                                                       \
        CONTINUE();                                                                      \
    }
CALL2(sqlvaluefunction, ExecEvalSQLValueFunction)
CALL2(currentofexpr, ExecEvalCurrentOfExpr)
CALL2(nextvalueexpr, ExecEvalNextValueExpr)
CALL2(arrayexpr, ExecEvalArrayExpr)
CALL3(arraycoerce, ExecEvalArrayCoerce)
CALL2(row, ExecEvalRow)
CALL2(minmax, ExecEvalMinMax)
CALL3(fieldselect, ExecEvalFieldSelect)
CALL3(fieldstore_deform, ExecEvalFieldStoreDeForm)
CALL3(fieldstore_form, ExecEvalFieldStoreForm)
CALL3(convert_rowtype, ExecEvalConvertRowtype)
CALL2(scalararrayop, ExecEvalScalarArrayOp)
CALL3(hashed_scalararrayop, ExecEvalHashedScalarArrayOp)
CALL2(domain_notnull, ExecEvalConstraintNotNull)
CALL2(domain_check, ExecEvalConstraintCheck)
CALL2(xmlexpr, ExecEvalXmlExpr)
CALL2(grouping_func, ExecEvalGroupingFunc)
CALL3(subplan, ExecEvalSubPlan)
CALL3(agg_ordered_trans_datum, ExecEvalAggOrderedTransDatum)
CALL3(agg_ordered_trans_tuple, ExecEvalAggOrderedTransTuple)
