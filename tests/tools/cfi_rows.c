/* cfi_rows - print the CFI row table of every FDE in an object, as the
 * generator's parser and interpreter see it, for the differential test
 * against llvm-dwarfdump. Usage: cfi_rows OBJECT (x86-64 ELF). */
#include <stdio.h>
#include <stdlib.h>

#include "frame_shape.h"
#include "objfile.h"
#include "target.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cfi_rows OBJECT\n");
        return 2;
    }
    objfile obj;
    char err[512];
    if (!objfile_load(argv[1], &obj, err, sizeof err)) {
        fprintf(stderr, "cfi_rows: %s\n", err);
        return 1;
    }
    int text = -1;
    for (size_t i = 0; i < obj.nsecs && text < 0; i++)
        text = obj.secs[i].kind == OBJ_SEC_CODE && obj.secs[i].size ? (int)i : -1;
    const gen_target *t = &sg_target_x86_64_linux;
    cfi_section sec;
    gen_where where = {argv[1], 0, 0, "cfi_rows"};
    uint8_t *bytes = text < 0 ? NULL
                              : eh_frame_relocated(&obj, text, obj.secs[text].size, t, &where,
                                                   &sec);
    int rc = bytes ? 0 : 1;
    size_t cursor = 0;
    cfi_cie cie;
    cfi_fde fde;
    cfi_error e = {0};
    int r;
    while (bytes && (r = cfi_next_fde(&sec, &cursor, &cie, &fde, &e)) == 1) {
        cfi_table tab = {0};
        if (cfi_run(&sec, &cie, &fde, &tab, &e) != 0)
            break;
        printf("FDE pc=0x%llx..0x%llx\n", (unsigned long long)fde.pc_begin,
               (unsigned long long)(fde.pc_begin + fde.pc_range));
        for (size_t i = 0; i < tab.count; i++) {
            char row[1024];
            cfi_format_row(&tab.rows[i], t->reg_name, row, sizeof row);
            printf("0x%llx: %s\n", (unsigned long long)(tab.rows[i].loc - fde.pc_begin), row);
        }
        cfi_table_free(&tab);
    }
    if (bytes && e.msg[0]) {
        fprintf(stderr, "cfi_rows: %s\n", e.msg);
        rc = 1;
    }
    free(bytes);
    objfile_free(&obj);
    return rc;
}
