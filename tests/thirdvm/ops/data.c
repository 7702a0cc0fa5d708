/* Moves and arithmetic: the accumulator against an immediate or a register. */

OP(ldi) { acc = IMM; CONTINUE(); }              /* acc = imm */
OP(ld) { acc = REG; CONTINUE(); }               /* acc = r */
OP(st) { REG = acc; CONTINUE(); }               /* r = acc */
OP(addi) { acc = (int64_t)((uint64_t)acc + (uint64_t)IMM); CONTINUE(); }
OP(add) { acc = (int64_t)((uint64_t)acc + (uint64_t)REG); CONTINUE(); }
OP(sub) { acc = (int64_t)((uint64_t)acc - (uint64_t)REG); CONTINUE(); }
OP(mul) { acc = (int64_t)((uint64_t)acc * (uint64_t)REG); CONTINUE(); }
/* r += imm, leaving the accumulator alone: two operands. */
OP(inc) { REG = (int64_t)((uint64_t)REG + (uint64_t)IMM1); CONTINUE(); }
