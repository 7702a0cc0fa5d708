/* objfile.c - load an object file into the format-neutral model (objfile.h). */
#include "objfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llvm_bridge.h"
#include "util.h"

bool objfile_load(const char *path, objfile *o, char *err, size_t errsz)
{
    uint8_t *buf;
    size_t size;
    if (!read_file(path, &buf, &size)) {
        snprintf(err, errsz, "cannot read '%s': %s", path, strerror(errno));
        return false;
    }
    bool ok = objfile_parse(buf, size, o, err, errsz);
    free(buf);
    return ok;
}

bool objfile_parse(const uint8_t *buf, size_t size, objfile *o, char *err, size_t errsz)
{
    bool ok = lb_read_object(buf, size, o, err, errsz);
    if (!ok)
        objfile_free(o);
    return ok;
}

void objfile_free(objfile *o)
{
    for (size_t i = 0; i < o->nsecs; i++) {
        free(o->secs[i].name);
        free(o->secs[i].bytes);
    }
    for (size_t i = 0; i < o->nsyms; i++)
        free(o->syms[i].name);
    free(o->secs);
    free(o->syms);
    free(o->relocs);
    *o = (objfile){0};
}

static const char *machine_name(unsigned machine)
{
    switch (machine) {
    case 3: return "i386";
    case 40: return "ARM";
    case 62: return "x86-64";
    case 183: return "AArch64";
    case 243: return "RISC-V";
    default: return "machine";
    }
}

static const char *format_name(obj_format kind)
{
    return kind == OBJ_FORMAT_COFF ? "COFF" : kind == OBJ_FORMAT_MACHO ? "Mach-O" : "ELF";
}

bool objfile_is_for(const objfile *o, obj_format kind, unsigned machine, char *err,
                    size_t errsz)
{
    bool is64 = machine != 3; /* EM_386: every supported machine but 32-bit x86 is 64-bit */
    if (o->kind != kind || o->machine != machine || o->is64 != is64 || !o->little_endian) {
        snprintf(err, errsz, "the object is %s%s %s (%u) %s-endian, expected %s%s %s (%u) "
                 "little-endian (is the compiler targeting another machine?)",
                 format_name(o->kind), o->is64 ? "64" : "32", machine_name(o->machine),
                 o->machine, o->little_endian ? "little" : "big", format_name(kind),
                 is64 ? "64" : "32", machine_name(machine), machine);
        return false;
    }
    if (o->rel_section[0]) {
        snprintf(err, errsz, "section '%s' holds relocations without explicit addends (REL); "
                 "stencilgen reads RELA relocations only", o->rel_section);
        return false;
    }
    return true;
}

int objfile_find_defined(const objfile *o, const char *name)
{
    for (size_t i = 0; i < o->nsyms; i++) {
        if (!o->syms[i].undefined && o->syms[i].section >= 0 && !strcmp(o->syms[i].name, name))
            return (int)i;
    }
    return -1;
}
