/* fuzz_manifest.c - libFuzzer target for the manifest reader: any bytes must
 * give either a manifest or an error message, never a crash, a hang or a leak.
 * Paths in the input resolve against the current directory (the run is started
 * in the repository, so real files can be named); nothing is written. */
#include <stddef.h>
#include <stdint.h>

#include "manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gen_manifest m;
    manifest_parse(data, size, "fuzz.yaml", &m);
    manifest_free(&m);
    return 0;
}
