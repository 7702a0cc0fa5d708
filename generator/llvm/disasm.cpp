// disasm.cpp - the MC disassembler half of the LLVM bridge (llvm_bridge.h):
// LLVM's C API cannot say which registers an instruction writes, so this file
// decodes through the C++ MC layer (lb_disasm_*). objreader.cpp is the other
// half.
#include "llvm_bridge.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "llvm/MC/MCAsmInfo.h"
#include "llvm/MC/MCContext.h"
#include "llvm/MC/MCDisassembler/MCDisassembler.h"
#include "llvm/MC/MCInst.h"
#include "llvm/MC/MCInstPrinter.h"
#include "llvm/MC/MCInstrAnalysis.h"
#include "llvm/MC/MCInstrInfo.h"
#include "llvm/MC/MCRegisterInfo.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/MCTargetOptions.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Triple.h"

using namespace llvm;

namespace {

void init_llvm_once()
{
    static std::once_flag once;
    std::call_once(once, [] {
        InitializeAllTargetInfos();
        InitializeAllTargetMCs();
        InitializeAllDisassemblers();
    });
}

} // namespace

struct lb_disasm {
    Triple triple;
    std::unique_ptr<MCRegisterInfo> mri;
    std::unique_ptr<MCAsmInfo> mai;
    std::unique_ptr<MCSubtargetInfo> sti;
    std::unique_ptr<MCInstrInfo> mii;
    std::unique_ptr<MCContext> ctx;
    std::unique_ptr<MCDisassembler> dis;
    std::unique_ptr<MCInstPrinter> printer;
    std::unique_ptr<MCInstrAnalysis> mia;
    MCRegister fp;
    std::vector<std::string> fp_writers;
};

extern "C" lb_disasm *lb_disasm_create(const char *triple, uint32_t fp_dwarf_reg,
                                       const char *const *fp_writers, char *err, size_t errsz)
{
    init_llvm_once();
    auto d = std::make_unique<lb_disasm>();
    d->triple = Triple(triple);
    std::string error;
    const Target *t = TargetRegistry::lookupTarget(d->triple, error);
    if (!t) {
        snprintf(err, errsz, "LLVM has no target for '%s': %s", triple, error.c_str());
        return nullptr;
    }
    d->mri.reset(t->createMCRegInfo(d->triple));
    d->mai.reset(t->createMCAsmInfo(*d->mri, d->triple, MCTargetOptions()));
    // Name the hardening instructions hardened builds put in code (bti c,
    // paciasp) rather than as the hints they decode to on older cores.
    const char *features = d->triple.isAArch64() ? "+bti,+pauth" : "";
    d->sti.reset(t->createMCSubtargetInfo(d->triple, "", features));
    d->mii.reset(t->createMCInstrInfo());
    if (!d->mri || !d->mai || !d->sti || !d->mii) {
        snprintf(err, errsz, "LLVM cannot describe target '%s'", triple);
        return nullptr;
    }
    d->ctx = std::make_unique<MCContext>(d->triple, d->mai.get(), d->mri.get(), d->sti.get());
    d->dis.reset(t->createMCDisassembler(*d->sti, *d->ctx));
    d->printer.reset(t->createMCInstPrinter(d->triple, 0, *d->mai, *d->mii, *d->mri));
    d->mia.reset(t->createMCInstrAnalysis(d->mii.get()));
    std::optional<MCRegister> fp = d->mri->getLLVMRegNum(fp_dwarf_reg, true);
    if (!d->dis || !d->printer || !d->mia || !fp) {
        snprintf(err, errsz, "LLVM has no disassembler for '%s'", triple);
        return nullptr;
    }
    d->fp = *fp;
    for (; fp_writers && *fp_writers; fp_writers++)
        d->fp_writers.push_back(*fp_writers);
    d->printer->setPrintBranchImmAsAddress(true); /* "je 0x3a", not "je 11" */
    return d.release();
}

static bool writes_register(const lb_disasm *d, const MCInst &inst, MCRegister reg)
{
    const MCInstrDesc &desc = d->mii->get(inst.getOpcode());
    for (unsigned i = 0; i < desc.getNumDefs() && i < inst.getNumOperands(); i++) {
        const MCOperand &op = inst.getOperand(i);
        if (op.isReg() && op.getReg() && d->mri->regsOverlap(op.getReg(), reg))
            return true;
    }
    for (MCPhysReg r : desc.implicit_defs()) {
        if (d->mri->regsOverlap(r, reg))
            return true;
    }
    StringRef name = d->mii->getName(inst.getOpcode());
    for (const std::string &w : d->fp_writers) {
        if (name.starts_with(w))
            return true;
    }
    return false;
}

/* The DWARF number of reg, or of the nearest register containing it (w8 is
 * part of x8, eax of rax); -1 if none. */
static int dwarf_number(const lb_disasm *d, MCRegister reg)
{
    for (MCPhysReg r : d->mri->superregs_inclusive(reg)) {
        int n = d->mri->getDwarfRegNum(r, false);
        if (n >= 0)
            return n;
    }
    return -1;
}

static uint64_t written_registers(const lb_disasm *d, const MCInst &inst)
{
    const MCInstrDesc &desc = d->mii->get(inst.getOpcode());
    uint64_t mask = 0;
    auto add = [&](MCRegister reg) {
        int n = dwarf_number(d, reg);
        if (n >= 0 && n < 64)
            mask |= (uint64_t)1 << n;
    };
    for (unsigned i = 0; i < desc.getNumDefs() && i < inst.getNumOperands(); i++) {
        if (inst.getOperand(i).isReg() && inst.getOperand(i).getReg())
            add(inst.getOperand(i).getReg());
    }
    for (MCPhysReg r : desc.implicit_defs())
        add(r);
    return mask;
}

static std::string print(const lb_disasm *d, const MCInst &inst, uint64_t address)
{
    std::string text;
    raw_string_ostream os(text);
    d->printer->printInst(&inst, address, "", *d->sti, os);
    os.flush();
    return text;
}

extern "C" void lb_disasm_one(lb_disasm *d, const uint8_t *code, size_t size, uint64_t pc,
                              lb_insn *out)
{
    *out = lb_insn{};
    out->call_reg = -1;
    MCInst inst;
    uint64_t len = 0;
    ArrayRef<uint8_t> bytes(code, size);
    if (d->dis->getInstruction(inst, len, bytes, pc, nulls()) != MCDisassembler::Success ||
        len == 0) {
        snprintf(out->text, sizeof out->text, "<undecodable>");
        return;
    }
    out->size = (unsigned)len;
    out->is_call = d->mia->isCall(inst);
    out->is_branch = !out->is_call && d->mia->isBranch(inst);
    /* hotcold.c's flow graph: what never falls through (a barrier, as LLVM's
     * block layout names it: unconditional jumps, returns, traps). */
    const MCInstrDesc &flow = d->mii->get(inst.getOpcode());
    out->is_return = d->mia->isReturn(inst);
    out->ends_flow = flow.isBarrier() || out->is_return || d->mia->isUnconditionalBranch(inst);
    uint64_t target = 0;
    if (out->is_call || out->is_branch) {
        out->is_indirect = !d->mia->evaluateBranch(inst, pc, len, target);
        out->target = target;
    }
    if (std::optional<uint64_t> a = d->mia->evaluateMemoryOperandAddress(inst, d->sti.get(), pc,
                                                                         len)) {
        out->has_address = true;
        out->address = *a;
    }
    std::string text = print(d, inst, pc);
    // Printers differ on what a PC-relative immediate is relative to (x86:
    // the next instruction; AArch64: this one); print the target LLVM's own
    // analysis computes, as llvm-objdump does.
    char want[32];
    snprintf(want, sizeof want, "0x%" PRIx64, target);
    if ((out->is_call || out->is_branch) && !out->is_indirect &&
        text.find(want) == std::string::npos) {
        std::string next = print(d, inst, pc + len);
        if (next.find(want) != std::string::npos)
            text = next;
    }
    size_t start = text.find_first_not_of(" \t");
    std::string trimmed = start == std::string::npos ? text : text.substr(start);
    for (char &c : trimmed) {
        if (c == '\t')
            c = ' ';
    }
    snprintf(out->text, sizeof out->text, "%s", trimmed.c_str());
    out->writes_fp = writes_register(d, inst, d->fp);
    out->defs = written_registers(d, inst);
    /* `call *%rax`, `blr x8`: the register is the instruction's one operand
     * (a memory operand has several). */
    if (out->is_call && out->is_indirect && inst.getNumOperands() == 1 &&
        inst.getOperand(0).isReg())
        out->call_reg = dwarf_number(d, inst.getOperand(0).getReg());
}

extern "C" void lb_disasm_destroy(lb_disasm *d)
{
    delete d;
}

