/* property_notes.c - see property_notes.h. */
#include "property_notes.h"

#include <stdio.h>
#include <string.h>

enum {
    MACHINE_X86_64 = 62,   /* EM_X86_64 */
    MACHINE_AARCH64 = 183, /* EM_AARCH64 */
    NT_GNU_PROPERTY_TYPE_0 = 5,
    PROPERTY_X86_FEATURE_1_AND = 0xc0000002u,
    PROPERTY_AARCH64_FEATURE_1_AND = 0xc0000000u,
};

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static uint32_t feature_property(unsigned machine)
{
    return machine == MACHINE_AARCH64 ? PROPERTY_AARCH64_FEATURE_1_AND
                                      : PROPERTY_X86_FEATURE_1_AND;
}

/* One NT_GNU_PROPERTY_TYPE_0 descriptor: properties of 8-byte aligned data
 * (ELF64, the only class stencilgen reads; its .note.gnu.property holds only
 * such notes, each descriptor 8-byte aligned too). */
static bool parse_properties(const uint8_t *d, size_t size, unsigned machine, uint32_t *features,
                             size_t at, char *err, size_t errsz)
{
    for (size_t off = 0; off < size;) {
        if (size - off < 8) {
            snprintf(err, errsz, "offset %zu: a property header cut short", at + off);
            return false;
        }
        uint32_t type = le32(d + off), datasz = le32(d + off + 4);
        if (datasz > size - off - 8) {
            snprintf(err, errsz, "offset %zu: property 0x%x's %u bytes run past its note",
                     at + off, (unsigned)type, (unsigned)datasz);
            return false;
        }
        if (type == feature_property(machine) && datasz >= 4)
            *features |= le32(d + off + 8);
        off += 8 + align_up(datasz, 8);
    }
    return true;
}

bool pn_parse(const uint8_t *bytes, size_t size, unsigned machine, uint32_t *features,
              char *err, size_t errsz)
{
    uint32_t found = 0;
    *features = 0;
    for (size_t off = 0; off < size;) {
        if (size - off < 12) {
            snprintf(err, errsz, "offset %zu: a note header cut short", off);
            return false;
        }
        uint32_t namesz = le32(bytes + off), descsz = le32(bytes + off + 4);
        uint32_t type = le32(bytes + off + 8);
        size_t name_at = off + 12, name_len = align_up(namesz, 4);
        if (name_len > size - name_at) {
            snprintf(err, errsz, "offset %zu: the note's name runs past the section", off);
            return false;
        }
        size_t desc_at = align_up(name_at + name_len, 8), desc_len = align_up(descsz, 8);
        if (desc_at > size || desc_len > size - desc_at) {
            snprintf(err, errsz, "offset %zu: the note's %u descriptor bytes run past the "
                     "section", off, (unsigned)descsz);
            return false;
        }
        if (type == NT_GNU_PROPERTY_TYPE_0 && namesz == 4 && !memcmp(bytes + name_at, "GNU", 4) &&
            !parse_properties(bytes + desc_at, descsz, machine, &found, desc_at, err, errsz))
            return false;
        off = desc_at + desc_len;
    }
    *features = found;
    return true;
}

bool pn_object_features(const objfile *o, uint32_t *features, char *err, size_t errsz)
{
    *features = 0;
    for (size_t i = 0; i < o->nsecs; i++)
        if (!strcmp(o->secs[i].name, OBJ_PROPERTY_NOTE) && o->secs[i].bytes)
            return pn_parse(o->secs[i].bytes, o->secs[i].size, o->machine, features, err,
                            errsz);
    return true;
}

/* -fcf-protection[=full|branch|return|none|check] (x86; `check` asks nothing
 * of the object). */
static uint32_t cf_protection(const char *value)
{
    if (!value || !strcmp(value, "full"))
        return PN_X86_IBT | PN_X86_SHSTK;
    if (!strcmp(value, "branch"))
        return PN_X86_IBT;
    if (!strcmp(value, "return"))
        return PN_X86_SHSTK;
    return 0;
}

/* -mbranch-protection=none|standard|<part>[+<part>...]: bti, pac-ret (with
 * +leaf, +b-key, +pc modifiers), gcs. Standard's GCS is left out: GCC 12's
 * `standard` does not mark it, and the runtime asks nothing of it. */
static uint32_t branch_protection(const char *value)
{
    if (!strcmp(value, "standard"))
        return PN_AARCH64_BTI | PN_AARCH64_PAC;
    uint32_t f = 0;
    for (const char *p = value; *p;) {
        size_t n = strcspn(p, "+");
        if (n == 3 && !strncmp(p, "bti", 3))
            f |= PN_AARCH64_BTI;
        else if (n == 7 && !strncmp(p, "pac-ret", 7))
            f |= PN_AARCH64_PAC;
        else if (n == 3 && !strncmp(p, "gcs", 3))
            f |= PN_AARCH64_GCS;
        p += n + (p[n] == '+');
    }
    return f;
}

uint32_t pn_asked(char *const *argv, unsigned machine, const char **flag)
{
    uint32_t asked = 0;
    *flag = NULL;
    for (size_t i = 0; argv[i]; i++) {
        const char *a = argv[i];
        if (machine == MACHINE_X86_64 && !strncmp(a, "-fcf-protection", 15) &&
            (a[15] == '\0' || a[15] == '=')) {
            asked = cf_protection(a[15] ? a + 16 : NULL);
            *flag = asked ? a : NULL;
        } else if (machine == MACHINE_AARCH64 && !strncmp(a, "-mbranch-protection=", 20)) {
            asked = branch_protection(a + 20);
            *flag = asked ? a : NULL;
        }
    }
    return asked;
}

void pn_describe(strbuf *sb, unsigned machine, uint32_t features)
{
    static const char *const x86[] = {"IBT", "SHSTK"};
    static const char *const a64[] = {"BTI", "PAC", "GCS"};
    const char *const *names = machine == MACHINE_AARCH64 ? a64 : x86;
    size_t n = machine == MACHINE_AARCH64 ? 3 : 2;
    const char *sep = "";
    for (size_t i = 0; i < n; i++)
        if (features & (1u << i)) {
            sb_printf(sb, "%s%s", sep, names[i]);
            sep = ", ";
        }
}
