/* logic.c - AND, OR, NOT, quals, jumps, IS [NOT] NULL and IS [NOT]
 * TRUE/FALSE. An AND or OR is a chain of steps sharing one `anynull` flag:
 * the first step clears it, each step jumps out on the deciding value, the
 * last makes the result NULL when no value decided and one was NULL. */

#define BOOL_STEP(name, decides, first)                                                  \
    OP(name)                                                                             \
    {                                                                                    \
        ExprEvalStep *op = STEP;                                                         \
        if (first)                                                                       \
            *op->d.boolexpr.anynull = false;                                             \
        if (*op->resnull)                                                                \
            *op->d.boolexpr.anynull = true;                                              \
        else if (DatumGetBool(*op->resvalue) == (decides))                               \
            JUMP(); /* the result is that value, already in place */                     \
        CONTINUE();                                                                      \
    }

#define BOOL_STEP_LAST(name, decides)                                                    \
    OP(name)                                                                             \
    {                                                                                    \
        ExprEvalStep *op = STEP;                                                         \
        if (!*op->resnull && DatumGetBool(*op->resvalue) != (decides) &&                 \
            *op->d.boolexpr.anynull) {                                                   \
            *op->resvalue = (Datum)0;                                                    \
            *op->resnull = true;                                                         \
        }                                                                                \
        CONTINUE();                                                                      \
    }

/* EEOP_BOOL_AND_STEP_FIRST, _STEP, _STEP_LAST: false decides */
BOOL_STEP(bool_and_step_first, false, true)
BOOL_STEP(bool_and_step, false, false)
BOOL_STEP_LAST(bool_and_step_last, false)
/* EEOP_BOOL_OR_STEP_FIRST, _STEP, _STEP_LAST: true decides */
BOOL_STEP(bool_or_step_first, true, true)
BOOL_STEP(bool_or_step, true, false)
BOOL_STEP_LAST(bool_or_step_last, true)

/* EEOP_BOOL_NOT_STEP: NULL stays NULL (its value is not looked at). */
OP(bool_not_step)
{
    ExprEvalStep *op = STEP;
    *op->resvalue = BoolGetDatum(!DatumGetBool(*op->resvalue));
    CONTINUE();
}

/* EEOP_QUAL: a WHERE clause's conjunct; NULL or false ends the qual false. */
OP(qual)
{
    ExprEvalStep *op = STEP;
    if (*op->resnull || !DatumGetBool(*op->resvalue)) {
        *op->resnull = false;
        *op->resvalue = BoolGetDatum(false);
        JUMP();
    }
    CONTINUE();
}

/* EEOP_JUMP, EEOP_JUMP_IF_NULL, EEOP_JUMP_IF_NOT_NULL, EEOP_JUMP_IF_NOT_TRUE */
OP(jump)
{
    JUMP();
}

OP(jump_if_null)
{
    if (*STEP->resnull)
        JUMP();
    CONTINUE();
}

OP(jump_if_not_null)
{
    if (!*STEP->resnull)
        JUMP();
    CONTINUE();
}

OP(jump_if_not_true)
{
    ExprEvalStep *op = STEP;
    if (*op->resnull || !DatumGetBool(*op->resvalue))
        JUMP();
    CONTINUE();
}

/* EEOP_NULLTEST_ISNULL, EEOP_NULLTEST_ISNOTNULL (scalars) */
OP(nulltest, VARIANT(negate, 0, 1))
{
    ExprEvalStep *op = STEP;
    bool null = *op->resnull;
    *op->resvalue = BoolGetDatum(STENCIL_V(negate) ? !null : null);
    *op->resnull = false;
    CONTINUE();
}

/* EEOP_NULLTEST_ROWISNULL, EEOP_NULLTEST_ROWISNOTNULL (rows: every field) */
OP(nulltest_rowisnull)
{
    ExecEvalRowNull(state, STEP, econtext);
    CONTINUE();
}

OP(nulltest_rowisnotnull)
{
    ExecEvalRowNotNull(state, STEP, econtext);
    CONTINUE();
}

/* EEOP_BOOLTEST_IS_TRUE, _IS_NOT_TRUE, _IS_FALSE, _IS_NOT_FALSE: `value` is
 * what a NULL counts as, `negate` whether a non-NULL value is inverted. */
#define BOOLTEST(name, value, negate)                                                    \
    OP(name)                                                                             \
    {                                                                                    \
        ExprEvalStep *op = STEP;                                                         \
        if (*op->resnull) {                                                              \
            *op->resvalue = BoolGetDatum(value);                                         \
            *op->resnull = false;                                                        \
        } else if (negate) {                                                             \
            *op->resvalue = BoolGetDatum(!DatumGetBool(*op->resvalue));                  \
        }                                                                                \
        CONTINUE();                                                                      \
    }
BOOLTEST(booltest_is_true, false, false)
BOOLTEST(booltest_is_not_true, true, true)
BOOLTEST(booltest_is_false, false, true)
BOOLTEST(booltest_is_not_false, true, false)
