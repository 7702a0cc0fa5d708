// objreader.cpp - the object reader half of the LLVM bridge (llvm_bridge.h):
// LLVM's C API has no relocation addends, section flags or symbol binding, so
// this file reads ELF, COFF and Mach-O through the C++ API and hands plain C
// structs back (lb_read_object). disasm.cpp is the other half.
#include "llvm_bridge.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "llvm/ADT/SmallString.h"
#include "llvm/BinaryFormat/COFF.h"
#include "llvm/BinaryFormat/ELF.h"
#include "llvm/BinaryFormat/MachO.h"
#include "llvm/Object/COFF.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/MachO.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace llvm;
using namespace llvm::object;

namespace {

char *dup_string(StringRef s)
{
    char *p = static_cast<char *>(malloc(s.size() + 1));
    if (!p) {
        fputs("stencilgen: error: out of memory\n", stderr);
        exit(3);
    }
    if (!s.empty())
        memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
    return p;
}

template <typename T> T *alloc_array(size_t n)
{
    T *p = static_cast<T *>(calloc(n ? n : 1, sizeof(T)));
    if (!p) {
        fputs("stencilgen: error: out of memory\n", stderr);
        exit(3);
    }
    return p;
}

bool fail(char *err, size_t errsz, const std::string &what, Error e)
{
    snprintf(err, errsz, "%s: %s", what.c_str(), toString(std::move(e)).c_str());
    return false;
}

obj_sec_kind classify_elf_section(const SectionRef &s, StringRef name)
{
    if (name == ".eh_frame")
        return OBJ_SEC_EH_FRAME;
    ELFSectionRef es(s);
    uint64_t flags = es.getFlags();
    // .note.gnu.property (BTI, PAC, IBT) is allocated, but it describes the
    // object to the linker; it is not the stencil's data.
    if (!(flags & ELF::SHF_ALLOC) || es.getType() == ELF::SHT_NOTE)
        return OBJ_SEC_OTHER;
    if (flags & ELF::SHF_EXECINSTR)
        return OBJ_SEC_CODE;
    if (es.getType() == ELF::SHT_NOBITS)
        return OBJ_SEC_BSS;
    // .data.rel.ro holds const data with relocations (pointer tables under
    // PIC): writable only until the loader has relocated it, as the runtime
    // patches data before sealing it. Read-only data with holes.
    if (name == ".data.rel.ro" || name.starts_with(".data.rel.ro."))
        return OBJ_SEC_RODATA;
    return (flags & ELF::SHF_WRITE) ? OBJ_SEC_DATA : OBJ_SEC_RODATA;
}

// A COFF section's name may carry a "$suffix" (grouping for the linker, as
// -ffunction-sections makes .text$op_add, .pdata$op_add): the kind is the
// part before it, and the characteristics.
bool coff_named(StringRef name, StringRef kind)
{
    return name == kind || (name.starts_with(kind) && name[kind.size()] == '$');
}

obj_sec_kind classify_coff_section(const COFFObjectFile &coff, const SectionRef &s,
                                   StringRef name)
{
    uint32_t ch = coff.getCOFFSection(s)->Characteristics;
    if (coff_named(name, ".pdata"))
        return OBJ_SEC_PDATA;
    if (coff_named(name, ".xdata"))
        return OBJ_SEC_XDATA;
    // Linker directives, debug info, the address-significance table: read
    // by the linker, never loaded.
    if (ch & (COFF::IMAGE_SCN_LNK_INFO | COFF::IMAGE_SCN_LNK_REMOVE |
              COFF::IMAGE_SCN_MEM_DISCARDABLE))
        return OBJ_SEC_OTHER;
    if (ch & (COFF::IMAGE_SCN_CNT_CODE | COFF::IMAGE_SCN_MEM_EXECUTE))
        return OBJ_SEC_CODE;
    if (ch & COFF::IMAGE_SCN_CNT_UNINITIALIZED_DATA)
        return OBJ_SEC_BSS;
    if (!(ch & COFF::IMAGE_SCN_CNT_INITIALIZED_DATA))
        return OBJ_SEC_OTHER;
    return (ch & COFF::IMAGE_SCN_MEM_WRITE) ? OBJ_SEC_DATA : OBJ_SEC_RODATA;
}

// A Mach-O section's kind is in its flags (type and attributes) and its
// segment: __TEXT and __DATA_CONST are read-only, and so is __DATA,__const
// (pointer tables, writable only until the loader has relocated them).
obj_sec_kind classify_macho_section(uint32_t flags, StringRef seg, StringRef sect)
{
    uint32_t type = flags & MachO::SECTION_TYPE;
    if (flags & MachO::S_ATTR_DEBUG) // DWARF, and __LD,__compact_unwind
        return OBJ_SEC_OTHER;
    if (seg == "__TEXT" && sect == "__eh_frame")
        return OBJ_SEC_EH_FRAME;
    if (flags & (MachO::S_ATTR_PURE_INSTRUCTIONS | MachO::S_ATTR_SOME_INSTRUCTIONS))
        return OBJ_SEC_CODE;
    if (type == MachO::S_ZEROFILL || type == MachO::S_GB_ZEROFILL ||
        type == MachO::S_THREAD_LOCAL_ZEROFILL)
        return OBJ_SEC_BSS;
    if (seg == "__TEXT" || seg == "__DATA_CONST" || sect == "__const")
        return OBJ_SEC_RODATA;
    return OBJ_SEC_DATA;
}

obj_sec_kind classify_section(const ObjectFile &obj, const SectionRef &s, StringRef name)
{
    if (const auto *coff = dyn_cast<COFFObjectFile>(&obj))
        return classify_coff_section(*coff, s, name);
    return classify_elf_section(s, name);
}

// A Mach-O section is named "segment,section", as its assembler directive is.
void read_macho_section(const MachOObjectFile &m, const SectionRef &s, StringRef sect,
                        obj_section *o)
{
    StringRef seg = m.getSectionFinalSegmentName(s.getRawDataRefImpl());
    uint32_t flags = m.is64Bit() ? m.getSection64(s.getRawDataRefImpl()).flags : 0;
    uint32_t type = flags & MachO::SECTION_TYPE;
    o->name = dup_string((seg + "," + sect).str());
    o->kind = classify_macho_section(flags, seg, sect);
    o->addr = s.getAddress();
    o->strings = type == MachO::S_CSTRING_LITERALS;
    o->merge = o->strings || type == MachO::S_4BYTE_LITERALS ||
               type == MachO::S_8BYTE_LITERALS || type == MachO::S_16BYTE_LITERALS;
}

bool read_sections(const ObjectFile &obj, objfile *out, std::vector<uint64_t> &index_of,
                   char *err, size_t errsz)
{
    std::vector<SectionRef> secs(obj.section_begin(), obj.section_end());
    out->secs = alloc_array<obj_section>(secs.size());
    for (const SectionRef &s : secs) {
        Expected<StringRef> name = s.getName();
        if (!name)
            return fail(err, errsz, "section name", name.takeError());
        obj_section *o = &out->secs[out->nsecs++];
        index_of.push_back(s.getIndex());
        o->size = s.getSize();
        o->align = s.getAlignment().value();
        if (const auto *macho = dyn_cast<MachOObjectFile>(&obj)) {
            read_macho_section(*macho, s, *name, o);
        } else {
            o->name = dup_string(*name);
            o->kind = classify_section(obj, s, *name);
        }
        if (const auto *coff = dyn_cast<COFFObjectFile>(&obj))
            o->comdat = (coff->getCOFFSection(s)->Characteristics &
                         COFF::IMAGE_SCN_LNK_COMDAT) != 0;
        if (isa<ELFObjectFileBase>(obj)) { // COFF has no mergeable sections
            uint64_t flags = ELFSectionRef(s).getFlags();
            o->merge = (flags & ELF::SHF_MERGE) != 0;
            o->strings = (flags & ELF::SHF_STRINGS) != 0;
        }
        // Of the sections not loaded, only the property note's bytes are
        // read (property_notes.h: what the object was built with).
        if (o->kind == OBJ_SEC_BSS ||
            (o->kind == OBJ_SEC_OTHER && *name != OBJ_PROPERTY_NOTE))
            continue;
        Expected<StringRef> contents = s.getContents();
        if (!contents)
            return fail(err, errsz, "section " + name->str(), contents.takeError());
        // The COFF and Mach-O addends below, and every later stage, read
        // bytes[0, size): a loaded section without them in the file (COFF
        // PointerToRawData 0, ELF SHT_NOBITS, Mach-O zerofill) is malformed.
        if (contents->size() != o->size) {
            snprintf(err, errsz, "section %s: %zu bytes in the file for a size of %" PRIu64,
                     o->name, contents->size(), o->size);
            return false;
        }
        o->bytes = alloc_array<uint8_t>(contents->size());
        if (!contents->empty())
            memcpy(o->bytes, contents->data(), contents->size());
    }
    return true;
}

int section_position(const std::vector<uint64_t> &index_of, uint64_t index)
{
    for (size_t i = 0; i < index_of.size(); i++) {
        if (index_of[i] == index)
            return (int)i;
    }
    return -1;
}

// C's names on 32-bit x86 COFF: an underscore before each, and regcall's
// functions (the stencils' convention there) a __regcall3__ before that.
void c_name_i386(char *name)
{
    static const char regcall[] = "__regcall3__";
    if (name[0] == '_')
        memmove(name, name + 1, strlen(name));
    if (!strncmp(name, regcall, sizeof regcall - 1) && name[sizeof regcall - 1])
        memmove(name, name + sizeof regcall - 1, strlen(name + sizeof regcall - 1) + 1);
}

bool read_symbols(const ObjectFile &obj, objfile *out, const std::vector<uint64_t> &index_of,
                  std::vector<SymbolRef> &syms, char *err, size_t errsz)
{
    syms.assign(obj.symbol_begin(), obj.symbol_end());
    bool macho = isa<MachOObjectFile>(obj); // and a symbol per section, below
    out->syms = alloc_array<obj_symbol>(syms.size() + (macho ? out->nsecs : 0));
    for (const SymbolRef &s : syms) {
        obj_symbol *o = &out->syms[out->nsyms++];
        Expected<StringRef> name = s.getName();
        Expected<uint64_t> value = s.getValue();
        Expected<uint32_t> flags = s.getFlags();
        Expected<section_iterator> sec = s.getSection();
        if (!name)
            return fail(err, errsz, "symbol name", name.takeError());
        if (!value)
            return fail(err, errsz, "symbol " + name->str(), value.takeError());
        if (!flags)
            return fail(err, errsz, "symbol " + name->str(), flags.takeError());
        if (!sec)
            return fail(err, errsz, "symbol " + name->str(), sec.takeError());
        o->name = dup_string(*name);
        o->value = *value;
        o->undefined = (*flags & SymbolRef::SF_Undefined) != 0;
        o->global = (*flags & SymbolRef::SF_Global) != 0;
        o->section = *sec == obj.section_end() ? -1 : section_position(index_of, (*sec)->getIndex());
        if (const auto *coff = dyn_cast<COFFObjectFile>(&obj)) {
            COFFSymbolRef cs = coff->getCOFFSymbol(s);
            o->is_section = cs.isSectionDefinition();
            o->is_function = cs.isFunctionDefinition() ||
                             cs.getComplexType() == COFF::IMAGE_SYM_DTYPE_FUNCTION;
            if (coff->getMachine() == COFF::IMAGE_FILE_MACHINE_I386 && !o->is_section)
                c_name_i386(o->name);
        } else if (macho) {
            // C's names: Mach-O prefixes an underscore (temporaries such as
            // ltmp0 and l_.str have none). Values are addresses.
            if (o->name[0] == '_')
                memmove(o->name, o->name + 1, strlen(o->name));
            if (o->section >= 0)
                o->value -= out->secs[o->section].addr;
            o->is_function = o->section >= 0 && out->secs[o->section].kind == OBJ_SEC_CODE;
        } else {
            ELFSymbolRef es(s);
            o->size = es.getSize();
            o->global = es.getBinding() != ELF::STB_LOCAL;
            o->is_section = es.getELFType() == ELF::STT_SECTION;
            o->is_function = es.getELFType() == ELF::STT_FUNC;
        }
    }
    // Mach-O has no section symbols, but a relocation may name a section
    // (r_extern 0): one per section, after the symbol table's.
    for (size_t i = 0; macho && i < out->nsecs; i++)
        out->syms[out->nsyms++] = obj_symbol{dup_string(out->secs[i].name), (int)i, 0, 0, false,
                                             false, true, false};
    return true;
}

// A relocated field's implicit addend (4 or 8 bytes, sign-extended), or false
// if it is not all inside the section. COFF and Mach-O keep addends there.
bool read_field(const obj_section *sec, uint64_t offset, unsigned width, int64_t *value)
{
    if (!sec->bytes || offset > sec->size || sec->size - offset < width)
        return false;
    uint64_t v = 0;
    for (unsigned i = 0; i < width; i++)
        v |= (uint64_t)sec->bytes[offset + i] << (8 * i);
    *value = width == 4 ? (int64_t)(int32_t)v : (int64_t)v;
    return true;
}

void write_field(obj_section *sec, uint64_t offset, unsigned width, uint64_t v)
{
    for (unsigned i = 0; i < width; i++)
        sec->bytes[offset + i] = (uint8_t)(v >> (8 * i));
}

// An x86-64 COFF relocation keeps its addend in the field it patches, and a
// PC-relative one measures from the field's end (REL32_N: N bytes further,
// past an immediate). Moved into the explicit RELA form objfile.h promises,
// the field zeroed as an ELF object has it.
bool coff_addend(objfile *out, obj_reloc *o, char *err, size_t errsz)
{
    unsigned width = 0, pc_bias = 0;
    switch (o->type) {
    case COFF::IMAGE_REL_AMD64_ADDR64: width = 8; break;
    case COFF::IMAGE_REL_AMD64_ADDR32:
    case COFF::IMAGE_REL_AMD64_ADDR32NB:
    case COFF::IMAGE_REL_AMD64_SECREL: width = 4; break;
    case COFF::IMAGE_REL_AMD64_REL32:
    case COFF::IMAGE_REL_AMD64_REL32_1:
    case COFF::IMAGE_REL_AMD64_REL32_2:
    case COFF::IMAGE_REL_AMD64_REL32_3:
    case COFF::IMAGE_REL_AMD64_REL32_4:
    case COFF::IMAGE_REL_AMD64_REL32_5:
        width = 4;
        pc_bias = 4 + (o->type - COFF::IMAGE_REL_AMD64_REL32);
        break;
    default: return true; // unknown to stencilgen: classify_reloc refuses it by name
    }
    obj_section *sec = o->section >= 0 ? &out->secs[o->section] : nullptr;
    int64_t implicit;
    if (!sec || !read_field(sec, o->offset, width, &implicit)) {
        snprintf(err, errsz, "relocation %s at offset 0x%" PRIx64 " of section %s is past its end",
                 o->type_name, o->offset, sec ? sec->name : "?");
        return false;
    }
    write_field(sec, o->offset, width, 0);
    o->addend = implicit - (int64_t)pc_bias;
    return true;
}

// A 32-bit x86 COFF relocation keeps its addend in the 4 bytes it patches,
// REL32 measured from their end.
bool coff_i386_addend(objfile *out, obj_reloc *o, char *err, size_t errsz)
{
    unsigned pc_bias = 0;
    switch (o->type) {
    case COFF::IMAGE_REL_I386_DIR32:
    case COFF::IMAGE_REL_I386_DIR32NB:
    case COFF::IMAGE_REL_I386_SECREL: break;
    case COFF::IMAGE_REL_I386_REL32: pc_bias = 4; break;
    default: return true; // unknown to stencilgen: classify_reloc refuses it by name
    }
    obj_section *sec = o->section >= 0 ? &out->secs[o->section] : nullptr;
    int64_t implicit;
    if (!sec || !read_field(sec, o->offset, 4, &implicit)) {
        snprintf(err, errsz, "relocation %s at offset 0x%" PRIx64 " of section %s is past its end",
                 o->type_name, o->offset, sec ? sec->name : "?");
        return false;
    }
    write_field(sec, o->offset, 4, 0);
    o->addend = implicit - (int64_t)pc_bias;
    return true;
}

// An ARM64 COFF relocation keeps its addend in the immediate of the
// instruction it patches (or in the data field), as lld-link reads it: ADRP
// and ADR their 21 bits in bytes, ADD its 12 bits, a load or store its 12
// bits scaled by the access size, a branch its word offset. Moved into the
// explicit RELA form, the immediate zeroed.
bool coff_arm64_addend(objfile *out, obj_reloc *o, char *err, size_t errsz)
{
    unsigned width = 4, pc_bias = 0;
    switch (o->type) {
    case COFF::IMAGE_REL_ARM64_ADDR64: width = 8; break;
    case COFF::IMAGE_REL_ARM64_ADDR32:
    case COFF::IMAGE_REL_ARM64_ADDR32NB:
    case COFF::IMAGE_REL_ARM64_SECREL: break;
    case COFF::IMAGE_REL_ARM64_REL32: pc_bias = 4; break;
    case COFF::IMAGE_REL_ARM64_BRANCH26:
    case COFF::IMAGE_REL_ARM64_BRANCH19:
    case COFF::IMAGE_REL_ARM64_BRANCH14:
    case COFF::IMAGE_REL_ARM64_PAGEBASE_REL21:
    case COFF::IMAGE_REL_ARM64_REL21:
    case COFF::IMAGE_REL_ARM64_PAGEOFFSET_12A:
    case COFF::IMAGE_REL_ARM64_PAGEOFFSET_12L: width = 0; break; // in the instruction
    default: return true; // unknown to stencilgen: classify_reloc refuses it by name
    }
    obj_section *sec = o->section >= 0 ? &out->secs[o->section] : nullptr;
    int64_t field;
    if (!sec || !read_field(sec, o->offset, width ? width : 4, &field)) {
        snprintf(err, errsz, "relocation %s at offset 0x%" PRIx64 " of section %s is past its end",
                 o->type_name, o->offset, sec ? sec->name : "?");
        return false;
    }
    if (width) {
        write_field(sec, o->offset, width, 0);
        o->addend = field - (int64_t)pc_bias;
        return true;
    }
    uint32_t insn = (uint32_t)field, mask;
    switch (o->type) {
    case COFF::IMAGE_REL_ARM64_BRANCH26:
        mask = 0x03ffffffu;
        o->addend = SignExtend64<28>((uint64_t)(insn & mask) << 2);
        break;
    case COFF::IMAGE_REL_ARM64_BRANCH19:
        mask = 0x7ffffu << 5;
        o->addend = SignExtend64<21>((uint64_t)((insn & mask) >> 5) << 2);
        break;
    case COFF::IMAGE_REL_ARM64_BRANCH14:
        mask = 0x3fffu << 5;
        o->addend = SignExtend64<16>((uint64_t)((insn & mask) >> 5) << 2);
        break;
    case COFF::IMAGE_REL_ARM64_PAGEBASE_REL21:
    case COFF::IMAGE_REL_ARM64_REL21:
        mask = 3u << 29 | 0x7ffffu << 5;
        o->addend = SignExtend64<21>((insn >> 29 & 3) | (insn >> 3 & 0x1ffffc));
        break;
    default: { // PAGEOFFSET_12A and _12L
        mask = 0xfffu << 10;
        unsigned scale = 0;
        if (o->type == COFF::IMAGE_REL_ARM64_PAGEOFFSET_12L) {
            scale = insn >> 30;
            if ((insn & 0x04800000u) == 0x04800000u) // a 128-bit SIMD access
                scale += 4;
        }
        o->addend = (int64_t)((insn & mask) >> 10) << scale;
        break;
    }
    }
    write_field(sec, o->offset, 4, insn & ~mask);
    return true;
}

// The symbol of an ARM64 COFF import slot, __imp_NAME, is named NAME: its
// relocations carry OBJ_COFF_IMPORT_SLOT, so the slot is NAME's GOT entry.
const char COFF_IMPORT_PREFIX[] = "__imp_";

void name_import_slots(objfile *out)
{
    size_t n = strlen(COFF_IMPORT_PREFIX);
    for (size_t i = 0; i < out->nsyms; i++) {
        char *name = out->syms[i].name;
        if (out->syms[i].undefined && !strncmp(name, COFF_IMPORT_PREFIX, n) && name[n])
            memmove(name, name + n, strlen(name + n) + 1);
    }
}

// objfile.h's order: by section, then offset.
void store_relocations(objfile *out, std::vector<obj_reloc> &relocs)
{
    std::stable_sort(relocs.begin(), relocs.end(), [](const obj_reloc &a, const obj_reloc &b) {
        return a.section != b.section ? a.section < b.section : a.offset < b.offset;
    });
    out->relocs = alloc_array<obj_reloc>(relocs.size());
    if (!relocs.empty())
        std::copy(relocs.begin(), relocs.end(), out->relocs);
    out->nrelocs = relocs.size();
}

bool read_relocations(const ObjectFile &obj, objfile *out, const std::vector<uint64_t> &index_of,
                      const std::vector<SymbolRef> &syms, char *err, size_t errsz)
{
    std::vector<obj_reloc> relocs;
    for (const SectionRef &s : obj.sections()) {
        Expected<section_iterator> target = s.getRelocatedSection();
        if (!target)
            return fail(err, errsz, "relocation section", target.takeError());
        if (*target == obj.section_end())
            continue;
        int applies_to = section_position(index_of, (*target)->getIndex());
        // REL relocations keep their addends in the patched bytes; they are
        // refused (objfile_is_for), never read as if the addend were 0.
        if (isa<ELFObjectFileBase>(obj) && ELFSectionRef(s).getType() == ELF::SHT_REL &&
            !out->rel_section[0]) {
            Expected<StringRef> name = s.getName();
            snprintf(out->rel_section, sizeof out->rel_section, "%s",
                     name ? name->str().c_str() : "?");
            if (!name)
                consumeError(name.takeError());
        }
        for (const RelocationRef &r : s.relocations()) {
            obj_reloc o{};
            o.section = applies_to;
            o.offset = r.getOffset();
            o.type = (uint32_t)r.getType();
            SmallString<40> tn;
            r.getTypeName(tn);
            snprintf(o.type_name, sizeof o.type_name, "%s", tn.c_str());
            o.symbol = -1;
            symbol_iterator sym = r.getSymbol();
            for (size_t i = 0; sym != obj.symbol_end() && i < syms.size(); i++) {
                if (syms[i] == *sym)
                    o.symbol = (int)i;
            }
            if (isa<COFFObjectFile>(obj)) {
                // Other machines number their relocations otherwise; they are
                // refused as another machine's objects (objfile_is_for).
                if (out->machine == ELF::EM_X86_64 && !coff_addend(out, &o, err, errsz))
                    return false;
                if (out->machine == ELF::EM_AARCH64 && !coff_arm64_addend(out, &o, err, errsz))
                    return false;
                if (out->machine == ELF::EM_386 && !coff_i386_addend(out, &o, err, errsz))
                    return false;
                if (out->machine == ELF::EM_AARCH64 && o.symbol >= 0 &&
                    !strncmp(out->syms[o.symbol].name, COFF_IMPORT_PREFIX,
                             strlen(COFF_IMPORT_PREFIX)))
                    o.type |= OBJ_COFF_IMPORT_SLOT;
            } else {
                Expected<int64_t> addend = ELFRelocationRef(r).getAddend(); // fails for REL
                if (addend)
                    o.addend = *addend;
                else
                    consumeError(addend.takeError());
            }
            relocs.push_back(o);
        }
    }
    store_relocations(out, relocs);
    if (isa<COFFObjectFile>(obj) && out->machine == ELF::EM_AARCH64)
        name_import_slots(out);
    return true;
}

// Mach-O relocations leave implicit what objfile.h makes explicit. They are
// read one section at a time, in table order: an ARM64_RELOC_ADDEND or a
// SUBTRACTOR precedes the relocation it belongs to, at the same offset.
struct macho_relocs {
    const MachOObjectFile &m;
    objfile *out;
    const std::vector<uint64_t> &index_of;
    size_t section_syms; // index of the first section symbol (read_symbols)
    char *err;
    size_t errsz;
};

bool macho_fail(const macho_relocs &mr, const obj_section *sec, uint64_t offset,
                const char *what, const char *name)
{
    snprintf(mr.err, mr.errsz, "%s %s at offset 0x%" PRIx64 " of section %s", what, name, offset,
             sec->name);
    return false;
}

// The object address of what a relocation names, for the unwind tables.
bool macho_address(const objfile *out, int symbol, uint64_t *addr)
{
    const obj_symbol *y = symbol >= 0 ? &out->syms[symbol] : nullptr;
    if (!y || y->section < 0)
        return false;
    *addr = out->secs[y->section].addr + y->value;
    return true;
}

// __eh_frame is only read, never patched at run time: its relocations (an
// FDE's pc_begin as a SUBTRACTOR pair "target - here" on arm64, none on
// x86-64, where the assembler resolves it) are applied here, in the object's
// address space (obj_section.addr). `minus` is the SUBTRACTOR's symbol or -1.
bool macho_resolve(const macho_relocs &mr, obj_section *sec, const obj_reloc &r, int minus,
                   unsigned width)
{
    int64_t field;
    uint64_t target, base = 0;
    if (width < 4 || !read_field(sec, r.offset, width, &field))
        return macho_fail(mr, sec, r.offset, "cannot apply relocation", r.type_name);
    if (!macho_address(mr.out, r.symbol, &target) ||
        (minus >= 0 && !macho_address(mr.out, minus, &base)))
        return macho_fail(mr, sec, r.offset, "relocation to an undefined symbol:", r.type_name);
    write_field(sec, r.offset, width, target - base + (uint64_t)field);
    return true;
}

// The addend in RELA form, the field zeroed. x86-64 keeps every addend in the
// field; PC-relative ones count from the field's end (SIGNED_N: N bytes
// further, which the field already holds), and one against a section holds
// the target's object address. arm64 keeps them in ARM64_RELOC_ADDEND
// (`paired`), except UNSIGNED's, in its field.
bool macho_addend(const macho_relocs &mr, obj_section *sec, obj_reloc *o,
                  const MachO::any_relocation_info &re, int64_t paired)
{
    bool arm64 = mr.out->machine == ELF::EM_AARCH64;
    bool external = mr.m.getPlainRelocationExternal(re);
    bool pcrel = mr.m.getAnyRelocationPCRel(re);
    unsigned width = 1u << mr.m.getAnyRelocationLength(re);
    int64_t target = external ? 0 : (int64_t)mr.out->secs[mr.out->syms[o->symbol].section].addr;
    bool in_field = arm64 ? o->type == MachO::ARM64_RELOC_UNSIGNED
                          : o->type != MachO::X86_64_RELOC_SUBTRACTOR;
    if (!in_field) {
        if (arm64 && !external) // no arm64 instruction relocation is section-relative
            return macho_fail(mr, sec, o->offset, "section-relative relocation", o->type_name);
        o->addend = paired; // the instruction's immediate is 0
        return true;
    }
    int64_t field;
    if (width < 4) // refused by name (classify_reloc)
        return true;
    if (!read_field(sec, o->offset, width, &field))
        return macho_fail(mr, sec, o->offset, "relocation past the end:", o->type_name);
    if (pcrel)
        o->addend = external ? field - 4 : (int64_t)(sec->addr + o->offset) + field - target;
    else
        o->addend = field + paired - target;
    write_field(sec, o->offset, width, 0);
    return true;
}

// Which symbol a relocation names: its own (r_extern), or its section's.
bool macho_symbol(const macho_relocs &mr, const MachO::any_relocation_info &re, int *symbol)
{
    uint32_t num = mr.m.getPlainRelocationSymbolNum(re);
    if (mr.m.getPlainRelocationExternal(re)) {
        *symbol = (int)num;
        return num < mr.section_syms;
    }
    int sec = num ? section_position(mr.index_of, num - 1) : -1; // ordinals count from 1
    *symbol = (int)mr.section_syms + sec;
    return sec >= 0;
}

bool macho_section_relocations(const macho_relocs &mr, const SectionRef &s, int applies_to,
                               std::vector<obj_reloc> &relocs)
{
    obj_section *sec = &mr.out->secs[applies_to];
    bool arm64 = mr.out->machine == ELF::EM_AARCH64;
    uint32_t subtractor = arm64 ? MachO::ARM64_RELOC_SUBTRACTOR : MachO::X86_64_RELOC_SUBTRACTOR;
    uint32_t unsigned_type = arm64 ? MachO::ARM64_RELOC_UNSIGNED : MachO::X86_64_RELOC_UNSIGNED;
    const char *pending = nullptr; // an ADDEND or SUBTRACTOR waiting for its relocation
    uint64_t pending_at = 0;
    int64_t paired = 0;
    int minus = -1;
    for (const RelocationRef &r : s.relocations()) {
        MachO::any_relocation_info re = mr.m.getRelocation(r.getRawDataRefImpl());
        obj_reloc o{};
        o.section = applies_to;
        o.offset = r.getOffset();
        o.type = mr.m.getAnyRelocationType(re);
        SmallString<40> tn;
        r.getTypeName(tn);
        snprintf(o.type_name, sizeof o.type_name, "%s", tn.c_str());
        if (mr.m.isRelocationScattered(re))
            return macho_fail(mr, sec, o.offset, "scattered relocation", o.type_name);
        bool pair_start = (arm64 && o.type == MachO::ARM64_RELOC_ADDEND) ||
                          (sec->kind == OBJ_SEC_EH_FRAME && o.type == subtractor);
        if (pending && (o.offset != pending_at || pair_start))
            return macho_fail(mr, sec, pending_at, "lone relocation", pending);
        if (arm64 && o.type == MachO::ARM64_RELOC_ADDEND) { // its "symbol" is the addend
            uint32_t num = mr.m.getPlainRelocationSymbolNum(re);
            paired = (int64_t)(num ^ 0x800000u) - 0x800000; // 24 bits, signed
            pending = "ARM64_RELOC_ADDEND";
            pending_at = o.offset;
            continue;
        }
        if (!macho_symbol(mr, re, &o.symbol))
            return macho_fail(mr, sec, o.offset, "relocation to a symbol out of range:",
                              o.type_name);
        if (sec->kind == OBJ_SEC_EH_FRAME) {
            if (o.type == subtractor) {
                minus = o.symbol;
                pending = "SUBTRACTOR";
                pending_at = o.offset;
                continue;
            }
            if (o.type != unsigned_type ||
                !macho_resolve(mr, sec, o, pending ? minus : -1,
                               1u << mr.m.getAnyRelocationLength(re)))
                return macho_fail(mr, sec, o.offset, "cannot apply relocation", o.type_name);
            pending = nullptr;
            continue;
        }
        if (!macho_addend(mr, sec, &o, re, paired))
            return false;
        // The width is no part of the type: classify_reloc needs both.
        o.type |= mr.m.getAnyRelocationLength(re) << 8;
        pending = nullptr;
        paired = 0;
        relocs.push_back(o);
    }
    if (pending)
        return macho_fail(mr, sec, pending_at, "lone relocation", pending);
    return true;
}

bool read_macho_relocations(const MachOObjectFile &m, objfile *out,
                            const std::vector<uint64_t> &index_of, char *err, size_t errsz)
{
    macho_relocs mr{m, out, index_of, out->nsyms - out->nsecs, err, errsz};
    std::vector<obj_reloc> relocs;
    for (const SectionRef &s : m.sections()) {
        int applies_to = section_position(index_of, s.getIndex());
        // Debug and compact-unwind sections are not loaded (OBJ_SEC_OTHER).
        if (applies_to < 0 || out->secs[applies_to].kind == OBJ_SEC_OTHER)
            continue;
        if (!macho_section_relocations(mr, s, applies_to, relocs))
            return false;
    }
    store_relocations(out, relocs);
    return true;
}

// The ELF e_machine of a COFF machine, so one number names the architecture.
unsigned coff_machine(uint16_t m)
{
    switch (m) {
    case COFF::IMAGE_FILE_MACHINE_AMD64: return ELF::EM_X86_64;
    case COFF::IMAGE_FILE_MACHINE_ARM64: return ELF::EM_AARCH64;
    case COFF::IMAGE_FILE_MACHINE_I386: return ELF::EM_386;
    default: return ELF::EM_NONE;
    }
}

// LLVM 22 accepted a COFF object declaring 2^32-1 symbols 16 bytes before its
// end (a fuzzer's find) and handed out symbol records that run past the
// buffer: the table must fit.
bool coff_symbols_fit(const COFFObjectFile &coff, size_t size, char *err, size_t errsz)
{
    uint64_t count = coff.getNumberOfSymbols(), at = coff.getPointerToSymbolTable();
    uint64_t end = at + count * coff.getSymbolTableEntrySize();
    if (count == 0 || end <= size)
        return true;
    snprintf(err, errsz, "COFF symbol table: %llu symbols at offset 0x%llx run past the end of "
             "the object (%zu bytes)", (unsigned long long)count, (unsigned long long)at, size);
    return false;
}

// The ELF e_machine of a Mach-O CPU type.
unsigned macho_machine(uint32_t cpu)
{
    switch (cpu) {
    case MachO::CPU_TYPE_X86_64: return ELF::EM_X86_64;
    case MachO::CPU_TYPE_ARM64: return ELF::EM_AARCH64;
    default: return ELF::EM_NONE;
    }
}

// COFF and Mach-O symbols have no size: a defined one extends to the next
// symbol of its section, or to the section's end.
void symbol_sizes_from_next(objfile *out)
{
    for (size_t i = 0; i < out->nsyms; i++) {
        obj_symbol *s = &out->syms[i];
        if (s->undefined || s->section < 0 || s->is_section)
            continue;
        uint64_t end = out->secs[s->section].size;
        for (size_t j = 0; j < out->nsyms; j++) {
            const obj_symbol *t = &out->syms[j];
            if (t->section == s->section && !t->is_section && t->value > s->value && t->value < end)
                end = t->value;
        }
        s->size = end > s->value ? end - s->value : 0;
    }
}

} // namespace

extern "C" bool lb_read_object(const uint8_t *buf, size_t size, objfile *out, char *err,
                               size_t errsz)
{
    *out = objfile{};
    MemoryBufferRef ref(StringRef(reinterpret_cast<const char *>(buf), size), "object");
    Expected<std::unique_ptr<ObjectFile>> obj = ObjectFile::createObjectFile(ref);
    if (!obj)
        return fail(err, errsz, "not an object file", obj.takeError());
    snprintf(out->format, sizeof out->format, "%s", (*obj)->getFileFormatName().str().c_str());
    if (const auto *elf = dyn_cast<ELFObjectFileBase>(obj->get())) {
        out->kind = OBJ_FORMAT_ELF;
        out->machine = elf->getEMachine();
    } else if (const auto *coff = dyn_cast<COFFObjectFile>(obj->get())) {
        out->kind = OBJ_FORMAT_COFF;
        out->machine = coff_machine(coff->getMachine());
        if (!coff_symbols_fit(*coff, size, err, errsz))
            return false;
    } else if (const auto *macho = dyn_cast<MachOObjectFile>(obj->get())) {
        out->kind = OBJ_FORMAT_MACHO;
        out->machine = macho_machine(macho->getHeader().cputype);
    } else {
        snprintf(err, errsz, "object format '%s' is not supported (ELF, COFF and Mach-O are)",
                 (*obj)->getFileFormatName().str().c_str());
        return false;
    }
    out->is64 = (*obj)->getBytesInAddress() == 8;
    out->little_endian = (*obj)->isLittleEndian();
    std::vector<uint64_t> index_of;
    std::vector<SymbolRef> syms;
    const auto *macho = dyn_cast<MachOObjectFile>(obj->get());
    bool ok = read_sections(**obj, out, index_of, err, errsz) &&
              read_symbols(**obj, out, index_of, syms, err, errsz) &&
              (macho ? read_macho_relocations(*macho, out, index_of, err, errsz)
                     : read_relocations(**obj, out, index_of, syms, err, errsz));
    if (ok && out->kind != OBJ_FORMAT_ELF)
        symbol_sizes_from_next(out);
    return ok;
}
