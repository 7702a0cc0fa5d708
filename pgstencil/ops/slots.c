/* slots.c - values from tuple slots, constants, assignments to the result
 * slot, and the end of an expression. `slot` variants: 0 inner, 1 outer,
 * 2 scan (stencil_template.h, SLOT_OF), the interpreter's three ops each. */

/* EEOP_DONE: the expression's value. */
OP(done)
{
    (void)econtext;
    *isnull = state->resnull;
    return state->resvalue;
}

/* EEOP_*_FETCHSOME: deform the slot's tuple up to the last attribute used. */
OP(fetchsome, VARIANT(slot, 0, 2))
{
    ExprEvalStep *op = STEP;
    TupleTableSlot *slot = SLOT_OF(STENCIL_V(slot));
    if (slot->tts_nvalid < op->d.fetch.last_var)
        slot_getsomeattrs_int(slot, op->d.fetch.last_var);
    CONTINUE();
}

/* EEOP_*_VAR: an attribute of a deformed slot. */
OP(var, VARIANT(slot, 0, 2))
{
    ExprEvalStep *op = STEP;
    TupleTableSlot *slot = SLOT_OF(STENCIL_V(slot));
    int attnum = op->d.var.attnum;
    *op->resvalue = slot->tts_values[attnum];
    *op->resnull = slot->tts_isnull[attnum];
    CONTINUE();
}

/* EEOP_*_SYSVAR: a system column (ctid, xmin, ...). */
OP(sysvar, VARIANT(slot, 0, 2))
{
    ExecEvalSysVar(state, STEP, econtext, SLOT_OF(STENCIL_V(slot)));
    CONTINUE();
}

/* EEOP_WHOLEROW: the row as a composite datum. */
OP(wholerow)
{
    ExecEvalWholeRowVar(state, STEP, econtext);
    CONTINUE();
}

/* EEOP_ASSIGN_*_VAR: an attribute copied straight into the result slot. */
OP(assign_var, VARIANT(slot, 0, 2))
{
    ExprEvalStep *op = STEP;
    TupleTableSlot *slot = SLOT_OF(STENCIL_V(slot));
    TupleTableSlot *result = state->resultslot;
    int attnum = op->d.assign_var.attnum;
    int resultnum = op->d.assign_var.resultnum;
    result->tts_values[resultnum] = slot->tts_values[attnum];
    result->tts_isnull[resultnum] = slot->tts_isnull[attnum];
    CONTINUE();
}

/* EEOP_ASSIGN_TMP: the expression's working value into the result slot. */
OP(assign_tmp)
{
    TupleTableSlot *result = state->resultslot;
    int resultnum = STEP->d.assign_tmp.resultnum;
    result->tts_values[resultnum] = state->resvalue;
    result->tts_isnull[resultnum] = state->resnull;
    CONTINUE();
}

/* EEOP_ASSIGN_TMP_MAKE_RO: the same, an expanded object made read-only. */
OP(assign_tmp_make_ro)
{
    TupleTableSlot *result = state->resultslot;
    int resultnum = STEP->d.assign_tmp.resultnum;
    result->tts_isnull[resultnum] = state->resnull;
    result->tts_values[resultnum] =
        state->resnull ? state->resvalue : MakeExpandedObjectReadOnlyInternal(state->resvalue);
    CONTINUE();
}

/* EEOP_CONST */
OP(constant)
{
    ExprEvalStep *op = STEP;
    *op->resnull = op->d.constval.isnull;
    *op->resvalue = op->d.constval.value;
    CONTINUE();
}
