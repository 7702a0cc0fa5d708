/* wrong_target.c - a runtime given the other target's stencil set refuses it.
 * Built against the header named by WRONG_HEADER: on Linux the Windows
 * header (test_windows compiles it natively), on Windows the Linux one
 * (tests/windows/meson.build). Exit 0 when sr_runtime_create refuses with
 * SR_EINVAL and a message naming the cause, both with registration on and
 * off (frames must not decide it); 1 otherwise. */
#include WRONG_HEADER

#include <stdio.h>
#include <string.h>

#include "stencilrt.h"

static const sr_stencil_set wrong_set = SR_STENCIL_SET_FROM_HEADER;

static int refused(int frames)
{
    sr_config cfg = SR_CONFIG_DEFAULT;
    cfg.frames = frames;
    sr_runtime *rt = NULL;
    sr_status st = sr_runtime_create(&wrong_set, NULL, &cfg, &rt);
    const char *msg = st == SR_OK ? "(created)" : sr_last_error();
    printf("wrong_target: frames %d: status %d: %s\n", frames, (int)st, msg);
    if (rt)
        sr_runtime_destroy(rt);
    return st == SR_EINVAL && strstr(msg, "the stencil set is for another target") != NULL;
}

int main(void)
{
    int ok = refused(1) & refused(0);
    printf("wrong_target: %s\n", ok ? "refused" : "NOT refused");
    return ok ? 0 : 1;
}
