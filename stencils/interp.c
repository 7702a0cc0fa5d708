/* interp.c - the reference interpreter: the same semantics as the op sources
 * in ops/, one switch case per op, the top of stack kept in `tos` likewise. */
#include "vm.h"

#define POP() (*--sp)

vm_value vm_interpret(vm_frame *frame, vm_value *sp)
{
    const vm_function *fn = &frame->vm->functions[frame->function];
    vm_value tos = 0;
    for (size_t pc = 0;;) {
        const sr_instr *in = &fn->code[pc++];
        vm_value a;
        switch (in->op) {
        case SG_OP_push: *sp++ = tos; tos = (vm_value)in->operand[0]; break;
        case SG_OP_pop: tos = POP(); break;
        case SG_OP_dup: *sp++ = tos; break;
        case SG_OP_load: *sp++ = tos; tos = frame->locals[in->operand[0]]; break;
        case SG_OP_store: frame->locals[in->operand[0]] = tos; tos = POP(); break;
        case SG_OP_add: a = POP(); tos = (vm_value)((uint64_t)a + (uint64_t)tos); break;
        case SG_OP_sub: a = POP(); tos = (vm_value)((uint64_t)a - (uint64_t)tos); break;
        case SG_OP_mul: a = POP(); tos = (vm_value)((uint64_t)a * (uint64_t)tos); break;
        case SG_OP_div:
        case SG_OP_mod:
            if (tos == 0 || (tos == -1 && sp[-1] == INT64_MIN))
                vm_trap(frame, in->op == SG_OP_div ? "division by zero or overflow"
                                                   : "modulo by zero or overflow");
            a = POP();
            tos = in->op == SG_OP_div ? a / tos : a % tos;
            break;
        case SG_OP_addi: tos = (vm_value)((uint64_t)tos + in->operand[0]); break;
        case SG_OP_lt: a = POP(); tos = a < tos; break;
        case SG_OP_le: a = POP(); tos = a <= tos; break;
        case SG_OP_eq: a = POP(); tos = a == tos; break;
        case SG_OP_jump: pc = in->target; break;
        case SG_OP_jump_if_zero:
        case SG_OP_jump_if_nonzero:
            a = tos;
            tos = POP();
            if ((a == 0) == (in->op == SG_OP_jump_if_zero))
                pc = in->target;
            break;
        case SG_OP_ret: return tos;
        case SG_OP_call:
            *sp++ = tos;
            sp -= in->operand[1];
            tos = vm_call(frame, (vm_value)in->operand[0], (vm_value)in->operand[1], sp);
            break;
        case SG_OP_print: tos = vm_print(frame, tos); break;
        case SG_OP_native: tos = vm_native(frame, (vm_value)in->operand[0], tos); break;
        default: vm_trap(frame, "unknown op");
        }
    }
}
