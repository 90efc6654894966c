/*
 * sampler/record/launch_torch_shapes.c — the launcher's side of `opprof record
 * --torch-shapes` (opt-in): finds the hook's directory, puts it first on the
 * workload's PYTHONPATH, and closes record's summary with a line saying that
 * the program ran with a dispatch hook and what the hook cost.
 *
 * The hook is sampler/record/torch_shapes/: a sitecustomize.py that Python
 * imports at start-up (it chains to the user's own sitecustomize and arms the
 * hook for when torch is imported) and opprof_torch_shapes.py, the hook. It is
 * installed in $(pkgdatadir)/torch_shapes and found like the sweep's
 * op_bench.py: $OPPROF_TORCH_SHAPES_DIR, then beside the binary (installed
 * layout), then the source tree of a build, then the pkgdatadir baked in.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "sampler/record/record_internal.h"

#ifndef OPPROF_SRCDIR_TORCH_SHAPES
#define OPPROF_SRCDIR_TORCH_SHAPES "."
#endif
#ifndef OPPROF_PKGDATADIR
#define OPPROF_PKGDATADIR "/usr/local/share/opprof"
#endif

static bool has_hook(const char *dir)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/sitecustomize.py", dir);
    if (access(path, R_OK) != 0)
        return false;
    snprintf(path, sizeof path, "%s/" TORCH_SHAPES_HOOK_FILE, dir);
    return access(path, R_OK) == 0;
}

int launch_torch_shapes_find(char *out, size_t outlen)
{
    const char *env = getenv("OPPROF_TORCH_SHAPES_DIR");
    if (env && env[0]) {
        snprintf(out, outlen, "%s", env);
        if (has_hook(out))
            return 0;
        fprintf(stderr, "opprof record: --torch-shapes: OPPROF_TORCH_SHAPES_DIR=%s holds no sitecustomize.py and "
                        "%s: unset it or point it at opprof's share/opprof/torch_shapes\n", env,
                TORCH_SHAPES_HOOK_FILE);
        return -1;
    }
    static const char *const beside[] = {"/../share/opprof/torch_shapes/sitecustomize.py",
                                         "/../../share/opprof/torch_shapes/sitecustomize.py"};
    if (path_beside_self(beside, sizeof beside / sizeof beside[0], out, outlen) == 0) {
        char *slash = strrchr(out, '/');
        *slash = '\0';
        if (has_hook(out))
            return 0;
    }
    snprintf(out, outlen, "%s", OPPROF_SRCDIR_TORCH_SHAPES);
    if (has_hook(out))
        return 0;
    snprintf(out, outlen, "%s/torch_shapes", OPPROF_PKGDATADIR);
    if (has_hook(out))
        return 0;
    fprintf(stderr, "opprof record: --torch-shapes: the hook (torch_shapes/sitecustomize.py) was not found beside "
                    "the opprof binary or in %s/torch_shapes: reinstall opprof or set OPPROF_TORCH_SHAPES_DIR\n",
            OPPROF_PKGDATADIR);
    return -1;
}

/* In the child, before exec: the hook's directory first on PYTHONPATH (its
 * sitecustomize takes it off sys.path again before the program runs). */
void launch_torch_shapes_setup_env(const char *dir)
{
    const char *old = getenv("PYTHONPATH");
    if (!old || !old[0]) {
        setenv("PYTHONPATH", dir, 1);
        return;
    }
    size_t len = strlen(dir) + strlen(old) + 2;
    char *both = malloc(len);
    if (!both)
        return;
    snprintf(both, len, "%s:%s", dir, old);
    setenv("PYTHONPATH", both, 1);
    free(both);
}

void launch_torch_shapes_print_summary(FILE *f, const char *absdir, uint64_t cpu_ns)
{
    struct torch_shapes ts;
    char err[1024];
    if (torch_shapes_load(absdir, &ts, err, sizeof err) != 0) {
        fprintf(f, "opprof record: --torch-shapes: %s\n", err);
        return;
    }
    if (ts.files == 0) {
        fprintf(f, "opprof record: --torch-shapes: no process imported torch, so no hook ran and nothing was "
                   "recorded (or Python ignored PYTHONPATH: python -E / -I)\n");
    } else if (!ts.api[0]) {
        fprintf(f, "opprof record: --torch-shapes: %s\n",
                ts.unsupported[0] ? ts.unsupported : "no dispatch interception in this torch");
    } else {
        char share[64] = "";
        if (cpu_ns)
            snprintf(share, sizeof share, ", %.1f %% of the workload's CPU time",
                     100.0 * (double)ts.hook_ns / (double)cpu_ns);
        fprintf(f, "opprof record: --torch-shapes: a dispatch hook ran in the workload (torch %s, %s): %llu "
                   "operator calls intercepted, cost %.3f s (%.1f us per call%s); `opprof report --torch-shapes`\n",
                ts.torch_version, ts.api, (unsigned long long)ts.hook_calls, (double)ts.hook_ns / 1e9,
                ts.hook_calls ? (double)ts.hook_ns / 1e3 / (double)ts.hook_calls : 0.0, share);
        if (ts.unsupported[0])
            fprintf(f, "opprof record: --torch-shapes: %s\n", ts.unsupported);
    }
    torch_shapes_free(&ts);
}
