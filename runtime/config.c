/* config.c - sr_config resolved against the environment (STENCILRT_*). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

#define DEFAULT_ARENA_SIZE ((size_t)1 << 20)
#define MAX_ARENA_SIZE ((size_t)1 << 40) /* address space only, but some limit */

/* One warning per variable per process, for a value that is not understood
 * (the setting then keeps its default). */
typedef struct env_var {
    const char *name;
    atomic_flag warned;
} env_var;

static env_var env_frames = {"STENCILRT_FRAMES", ATOMIC_FLAG_INIT};
static env_var env_gdb = {"STENCILRT_GDB", ATOMIC_FLAG_INIT};
static env_var env_perf_mode = {"STENCILRT_PERF", ATOMIC_FLAG_INIT};
static env_var env_code_views = {"STENCILRT_CODE_VIEWS", ATOMIC_FLAG_INIT};
static env_var env_registry = {"STENCILRT_REGISTRY", ATOMIC_FLAG_INIT};

static void env_warn(env_var *v, const char *value, const char *accepted, const char *fallback)
{
    if (!atomic_flag_test_and_set(&v->warned))
        fprintf(stderr, "stencilrt: warning: %s=%s is not one of %s; using %s\n", v->name,
                value, accepted, fallback);
}

static bool one_of(const char *v, const char *const *words)
{
    for (; *words; words++)
        if (!strcasecmp(v, *words))
            return true;
    return false;
}

static int env_switch(env_var *var, int fallback)
{
    static const char *const on[] = {"1", "on", "yes", "true", NULL};
    static const char *const off[] = {"0", "off", "no", "false", NULL};
    const char *v = getenv(var->name);
    if (!v || !*v)
        return fallback;
    if (one_of(v, on))
        return 1;
    if (one_of(v, off))
        return 0;
    env_warn(var, v, "0, 1, on, off, yes, no, true, false", fallback ? "1 (on)" : "0 (off)");
    return fallback;
}

static int env_perf(void)
{
    static const char *const off[] = {"off", "0", "no", "false", "none", NULL};
    const char *v = getenv(env_perf_mode.name);
    if (!v || !*v || one_of(v, off))
        return SR_PERF_OFF;
    if (!strcasecmp(v, "map"))
        return SR_PERF_MAP;
    if (!strcasecmp(v, "jitdump"))
        return SR_PERF_JITDUMP;
    env_warn(&env_perf_mode, v, "off, map, jitdump", "off");
    return SR_PERF_OFF;
}

#ifdef _WIN32
/* Windows: what Linux has and Windows has not. Asked for in the struct, each
 * is refused (a VM that asks for a feature by name should learn it has none);
 * turned on by its variable (the struct said "the environment"), it gets one
 * warning and is off, since the environment is the user's, not the VM's. */
static sr_status windows_refuse(const sr_config *in)
{
    const char *what = in->gdb == 1                  ? "gdb 1: the GDB JIT interface"
                       : in->perf > SR_PERF_OFF      ? "perf: perf's map and jitdump"
                       : in->registry == 1           ? "registry 1: the registry"
                       : in->code_views == 2         ? "code_views 2: a second code view"
                                                     : NULL;
    if (what)
        return sr_fail(SR_EUNSUPPORTED, "sr_config: %s is not on this platform (Windows)", what);
    return SR_OK;
}

/* `from_env`: the struct left the setting to the environment; `on`: the
 * environment turned it on. */
static void not_on_windows(env_var *var, bool from_env, bool on, const char *what)
{
    const char *v = getenv(var->name);
    if (from_env && on && v && *v && !atomic_flag_test_and_set(&var->warned))
        fprintf(stderr, "stencilrt: warning: %s=%s: %s is not on this platform (Windows); "
                "off\n", var->name, v, what);
}

/* frames registers with the system's unwinder (RtlAddFunctionTable); the
 * GDB JIT interface, perf's files and the registry are Linux's, and JIT
 * memory has one view (VirtualProtect flips each chunk). */
static void windows_config(const sr_config *in, sr_config *c)
{
    not_on_windows(&env_gdb, in->gdb < 0, c->gdb == 1, "the GDB JIT interface");
    not_on_windows(&env_perf_mode, in->perf < 0, c->perf != SR_PERF_OFF, "perf");
    not_on_windows(&env_registry, in->registry <= 0, c->registry == 1, "the registry");
    not_on_windows(&env_code_views, in->code_views <= 0, c->code_views == 2,
                   "a second code view");
    c->gdb = 0;
    c->perf = SR_PERF_OFF;
    c->registry = 2;
    c->code_views = 1;
}

static int default_views(sr_views_reason *why)
{
    (void)why;
    return 1;
}
#else
/* Whether a debugger (any ptrace tracer) is attached to this process. */
static bool traced(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[128];
    long tracer = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "TracerPid: %ld", &tracer) == 1)
            break;
    if (f)
        fclose(f);
    return tracer != 0;
}

/* Two views, unless a debugger is attached: a debugger writes its breakpoints
 * into code with ptrace, which the kernel refuses for a view that is shared
 * and not writable. */
static int default_views(sr_views_reason *why)
{
    if (!traced())
        return 2;
    *why = SR_VIEWS_DEBUGGER;
    return 1;
}
#endif

static int env_views(sr_views_reason *why)
{
    const char *v = getenv(env_code_views.name);
    if (!v || !*v)
        return default_views(why);
    if (!strcmp(v, "1") || !strcmp(v, "2"))
        return *v - '0';
    int fallback = default_views(why);
    env_warn(&env_code_views, v, "1, 2", fallback == 2 ? "2" : "1 (a debugger is attached)");
    return fallback;
}

/* Why two views were given up (runtime.c map_shim_arena, jitmem_views_agree). */
#define STALE_CODE "two code views do not work here: code rewritten through the writable " \
    "view still ran as before (an emulator such as qemu-user, valgrind or FEX keeps its old " \
    "translation)"

sr_status config_views_stale(const sr_config *in, sr_config *c)
{
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    if (in && in->code_views == 2) /* asked for by name: refused, as on Windows */
        return sr_fail(SR_EUNSUPPORTED, "sr_config: code_views 2: " STALE_CODE "; use "
                       "code_views 1");
    const char *v = getenv(env_code_views.name);
    bool named = v && !strcmp(v, "2"); /* the variable asked for two */
    if (!atomic_flag_test_and_set(&warned))
        fprintf(stderr, "stencilrt: warning: %s%s" STALE_CODE "; using one code view (%s=1 "
                "skips this check)\n", named ? env_code_views.name : "", named ? "=2: " : "",
                env_code_views.name);
    c->code_views = 1;
    return SR_OK;
}

sr_status config_resolve(const sr_config *in, sr_config *out, sr_views_reason *why)
{
    *why = SR_VIEWS_CONFIGURED;
    sr_config c = in ? *in : (sr_config)SR_CONFIG_DEFAULT;
    if (c.frames < -1 || c.frames > 1 || c.gdb < -1 || c.gdb > 1 || c.perf < -1 ||
        c.perf > SR_PERF_JITDUMP)
        return sr_fail(SR_EINVAL, "sr_config: frames %d, gdb %d, perf %d: each must be -1 "
                       "(environment), 0 or 1 (perf: an sr_perf_mode)", c.frames, c.gdb, c.perf);
    if (c.code_views < -1 || c.code_views > 2)
        return sr_fail(SR_EINVAL, "sr_config: code_views %d: must be 1 or 2 (-1 or 0: the "
                       "environment)", c.code_views);
    if (c.registry < -1 || c.registry > 2)
        return sr_fail(SR_EINVAL, "sr_config: registry %d: must be 1 (published) or 2 (not; "
                       "-1 or 0: the environment)", c.registry);
    if (c.arena_size > MAX_ARENA_SIZE)
        return sr_fail(SR_EINVAL, "sr_config: arena_size %zu is larger than %zu bytes",
                       c.arena_size, MAX_ARENA_SIZE);
#ifdef _WIN32
    sr_status st = windows_refuse(&c);
    if (st != SR_OK)
        return st;
    const sr_config asked = c;
#endif
    if (c.frames < 0)
        c.frames = env_switch(&env_frames, 1);
    if (c.gdb < 0)
        c.gdb = env_switch(&env_gdb, 1);
    if (c.perf < 0)
        c.perf = env_perf();
    if (!c.arena_size)
        c.arena_size = DEFAULT_ARENA_SIZE;
    if (c.code_views <= 0)
        c.code_views = env_views(why);
    if (c.registry <= 0)
        c.registry = env_switch(&env_registry, 1) ? 1 : 2;
#ifdef _WIN32
    windows_config(&asked, &c);
#endif
    *out = c;
    return SR_OK;
}
