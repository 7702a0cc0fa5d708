/* fuzz_report_header.c - libFuzzer target for the report's header reader
 * (`stencilgen report` reads headers from anywhere: releases, CI artifacts):
 * any bytes must give either a target or an error message, never a crash, a
 * hang or a leak. The seeds are the golden headers. */
#include <stddef.h>
#include <stdint.h>

#include "report_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rp_target t;
    if (rp_read_text("fuzz.h", data, size, &t))
        rp_target_free(&t);
    return 0;
}
