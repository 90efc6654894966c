/*
 * sampler/record/launch_openmp.c — which OpenMP runtime the workload gets (opprof
 * record, before the fork).
 *
 * The default is "keep": the workload runs with its own OpenMP runtime and
 * nothing is added or replaced, because a swapped runtime waits and schedules
 * differently, so the profile would describe another program (measured: a gcc
 * -fopenmp program used 1.76 s of user time bare and 0.86 s under the swap on
 * a loaded machine).
 *
 * Swapping stays an explicit opt-in: --openmp-runtime PATH preloads that LLVM
 * libomp (it implements the GOMP_* ABI and OMPT, so a libgomp program's GOMP_*
 * calls bind to it first), and --openmp-runtime auto searches for one
 * ($OPPROF_LIBOMP, ldconfig's cache, the usual LLVM install paths, newest
 * first). Either way record's summary says which runtime the program ran with.
 *
 * "auto" swaps only where it can matter: a command whose dynamic loader lists libgomp among its
 * libraries, a Python interpreter (extension modules load libgomp later, with
 * dlopen), a shell or launcher (sh, env, mpirun...: they start other
 * programs), or a command we cannot inspect (a script). A native program that
 * does not link libgomp runs exactly as it would without opprof.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <glob.h>
#include <libelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sampler/record/record_internal.h"

enum gomp_use {
    GOMP_USE_UNKNOWN, /* not an ELF we can inspect (script, unreadable) */
    GOMP_USE_NO,      /* dynamic ELF without libgomp, or static */
    GOMP_USE_YES,     /* its loader lists libgomp */
    GOMP_USE_PYTHON,  /* a Python interpreter: libgomp may come with an extension */
};

/* The file execvp would run for cmd: as given when it has a '/', else the
 * first executable match in $PATH. */
static int resolve_command(const char *cmd, char *out, size_t outlen)
{
    if (strchr(cmd, '/')) {
        snprintf(out, outlen, "%s", cmd);
        return access(out, X_OK) == 0 ? 0 : -1;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        snprintf(out, outlen, "%.*s/%s", (int)n, n ? path : ".", cmd);
        if (access(out, X_OK) == 0)
            return 0;
        path += n + (path[n] == ':');
    }
    return -1;
}

/* Commands that run other programs (shells, launchers, wrappers): what they
 * link says nothing about what they start. */
static bool is_launcher_name(const char *path)
{
    static const char *const names[] = {"sh", "bash", "dash", "zsh", "ksh", "env", "nohup", "time", "timeout",
                                         "taskset", "numactl", "nice", "stdbuf", "xargs", "make", "mpirun",
                                         "mpiexec", "orterun", "srun", "torchrun", "setsid", "chrt", "perf"};
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(base, names[i]) == 0)
            return true;
    return false;
}

static bool is_python_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "python", 6) == 0;
}

/* The ELF's PT_INTERP (its dynamic loader) into interp; -1 for a static
 * binary or anything libelf cannot read. */
static int elf_interpreter(const char *path, char *interp, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = -1;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t nph = 0;
    if (e && elf_kind(e) == ELF_K_ELF && elf_getphdrnum(e, &nph) == 0) {
        for (size_t i = 0; i < nph && rc != 0; i++) {
            GElf_Phdr ph;
            if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_INTERP || ph.p_filesz == 0 || ph.p_filesz >= len)
                continue;
            if (pread(fd, interp, ph.p_filesz, (off_t)ph.p_offset) == (ssize_t)ph.p_filesz) {
                interp[ph.p_filesz] = '\0';
                rc = 0;
            }
        }
    }
    if (e)
        elf_end(e);
    close(fd);
    return rc;
}

/* Runs "LOADER --list PROGRAM" (glibc's ld.so lists the libraries it would
 * load, with the program's RUNPATH and this environment's LD_LIBRARY_PATH,
 * without running it) and looks for libgomp. -1 when the loader fails. */
static int loader_lists_libgomp(const char *loader, const char *program)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, STDERR_FILENO);
        unsetenv("LD_PRELOAD");
        execl(loader, loader, "--list", program, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[4096];
    char carry[16] = "";
    bool found = false;
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf - 1)) > 0 || (n < 0 && errno == EINTR)) {
        if (n <= 0)
            continue;
        buf[n] = '\0';
        /* a name split across two reads: keep the last bytes of the previous */
        char joined[sizeof carry + sizeof buf];
        snprintf(joined, sizeof joined, "%s%s", carry, buf);
        if (strstr(joined, "libgomp"))
            found = true;
        size_t jl = strlen(joined);
        size_t keep = jl > 8 ? 8 : jl; /* memcpy: gcc 10 saw a truncation in snprintf here */
        memcpy(carry, joined + jl - keep, keep);
        carry[keep] = '\0';
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    return found ? 1 : 0;
}

static enum gomp_use workload_gomp_use(const char *cmd)
{
    char path[PATH_MAX];
    if (resolve_command(cmd, path, sizeof path) != 0)
        return GOMP_USE_UNKNOWN; /* exec will fail and say so */
    /* "#!/usr/bin/python3" or "#!/usr/bin/env python3": judge the interpreter */
    char head[256] = "";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, head, sizeof head - 1);
        head[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    if (head[0] == '#' && head[1] == '!') {
        char *p = head + 2;
        p += strspn(p, " \t");
        char *interp = p;
        p += strcspn(p, " \t\n");
        char *arg = *p && *p != '\n' ? p + 1 : NULL;
        *p = '\0';
        if (arg) {
            arg += strspn(arg, " \t");
            arg[strcspn(arg, " \t\n")] = '\0';
        }
        if (is_python_name(interp) || (strstr(interp, "/env") && arg && is_python_name(arg)))
            return GOMP_USE_PYTHON;
        return GOMP_USE_UNKNOWN; /* a shell script may run anything */
    }
    if (is_python_name(path))
        return GOMP_USE_PYTHON;
    if (is_launcher_name(path) || is_launcher_name(cmd))
        return GOMP_USE_UNKNOWN;
    char loader[PATH_MAX];
    if (elf_interpreter(path, loader, sizeof loader) != 0)
        return memcmp(head, ELFMAG, SELFMAG) == 0 ? GOMP_USE_NO : GOMP_USE_UNKNOWN; /* static: no LD_PRELOAD anyway */
    int listed = loader_lists_libgomp(loader, path);
    return listed == 1 ? GOMP_USE_YES : listed == 0 ? GOMP_USE_NO : GOMP_USE_UNKNOWN;
}

/* Opt-in only (--openmp-runtime auto|PATH): the LLVM libomp preloaded in place
 * of GNU libgomp. Searched, never assumed, under "auto". */
static char omp_libomp[PATH_MAX];   /* the libomp preloaded, "" for none */
static const char *omp_mode = "keep"; /* auto|keep|path, for the info file */
static const char *omp_view = "";     /* what record set up, for the info file */
static bool omp_regions_off;          /* --no-openmp-regions */

static bool libomp_usable(const char *path)
{
    return path && path[0] == '/' && access(path, R_OK) == 0;
}

static int find_libomp(char *out, size_t outlen)
{
    const char *env = getenv("OPPROF_LIBOMP");
    if (env && env[0]) {
        if (!libomp_usable(env))
            return -1;
        snprintf(out, outlen, "%s", env);
        return 0;
    }
    const char *ldconfig[] = {"/sbin/ldconfig -p 2>/dev/null", "/usr/sbin/ldconfig -p 2>/dev/null",
                              "ldconfig -p 2>/dev/null"};
    for (size_t i = 0; i < 3; i++) {
        FILE *f = popen(ldconfig[i], "r");
        if (!f)
            continue;
        char line[PATH_MAX + 128];
        bool found = false;
        while (!found && fgets(line, sizeof line, f)) {
            /* "\tlibomp.so.5 (libc6,x86-64) => /lib/x86_64-linux-gnu/libomp.so.5" */
            char *arrow = strstr(line, "=> ");
            if (!strstr(line, "libomp.so.5 (") || !strstr(line, "x86-64") || !arrow)
                continue;
            arrow += 3;
            arrow[strcspn(arrow, "\n")] = '\0';
            if (libomp_usable(arrow)) {
                snprintf(out, outlen, "%s", arrow);
                found = true;
            }
        }
        int st = pclose(f);
        if (found)
            return 0;
        if (st == 0)
            break; /* ldconfig ran and knows no libomp */
    }
    const char *patterns[] = {"/usr/lib/llvm-*/lib/libomp.so.5", "/usr/lib/x86_64-linux-gnu/libomp.so.5",
                              "/usr/lib64/libomp.so", "/usr/local/lib/libomp.so", "/opt/*/lib/libomp.so.5"};
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        glob_t g;
        if (glob(patterns[i], 0, NULL, &g) != 0)
            continue;
        for (size_t j = g.gl_pathc; j-- > 0;) { /* sorted: the last is the newest */
            if (libomp_usable(g.gl_pathv[j])) {
                snprintf(out, outlen, "%s", g.gl_pathv[j]);
                globfree(&g);
                return 0;
            }
        }
        globfree(&g);
    }
    return -1;
}

/* Decides the OpenMP setup once, before the info file is first written. */
void launch_openmp_choose(const struct record_options *o)
{
    omp_libomp[0] = '\0';
    omp_regions_off = o->no_openmp_regions;
    /* keep by default: never replace or add a runtime unless asked to */
    const char *mode = o->openmp_runtime && o->openmp_runtime[0] ? o->openmp_runtime : "keep";
    omp_mode = mode;
    if (strcmp(mode, "keep") == 0) {
        omp_view = "keep: the workload's own OpenMP runtime (OMPT if it is libomp or Intel's; GNU libgomp: OS-level "
                   "view)";
        return;
    }
    if (strcmp(mode, "auto") != 0) {
        if (libomp_usable(mode)) {
            snprintf(omp_libomp, sizeof omp_libomp, "%s", mode);
        } else {
            fprintf(stderr, "opprof record: --openmp-runtime %s: not a readable file; "
                            "OpenMP runtime left as the workload has it\n", mode);
        }
        omp_view = omp_libomp[0] ? "swap: the libomp given to --openmp-runtime preloaded" : "keep: as the workload has it";
        return;
    }
    enum gomp_use use = workload_gomp_use(o->argv[0]);
    if (use == GOMP_USE_NO) {
        omp_view = "none-needed: the command does not link GNU libgomp (its dynamic loader's --list), so its "
                   "OpenMP runtime, if any, is left alone";
        return;
    }
    if (find_libomp(omp_libomp, sizeof omp_libomp) != 0) {
        omp_libomp[0] = '\0';
        omp_view = "none-found: no LLVM libomp on this machine (set OPPROF_LIBOMP, or install libomp); libgomp "
                   "programs get the OS-level view only";
        return;
    }
    omp_view = use == GOMP_USE_YES ? "swap: LLVM libomp preloaded (the command links GNU libgomp; its GOMP_* calls "
                                     "bind to libomp)"
               : use == GOMP_USE_PYTHON ? "swap: LLVM libomp preloaded (a Python program: extension modules such as "
                                          "torch may load GNU libgomp; their GOMP_* calls bind to libomp)"
                                        : "swap: LLVM libomp preloaded (GOMP_* calls of libgomp programs bind to it)";
}

/* One line of record's closing summary, only when the program did not run
 * with its own runtime: a profile of a swapped program must say so where the
 * user looks first. */
void launch_openmp_print_summary(FILE *f)
{
    if (omp_regions_off)
        fprintf(f, "opprof record: OpenMP regions not recorded (--no-openmp-regions): the threading view is "
                   "the OS-level one\n");
    if (omp_libomp[0])
        fprintf(f, "opprof record: OpenMP runtime swapped (--openmp-runtime %s): the program ran with %s "
                   "preloaded in place of its own GNU libgomp\n",
                strcmp(omp_mode, "auto") == 0 ? "auto" : "PATH", omp_libomp);
}

void launch_openmp_write_info(FILE *f)
{
    fprintf(f, "openmp_runtime=%s\n", omp_mode);
    fprintf(f, "openmp_setup=%s\n", omp_view);
    if (omp_libomp[0])
        fprintf(f, "openmp_libomp=%s\n", omp_libomp);
    if (omp_regions_off)
        fprintf(f, "openmp_regions=off\n");
}

/* In the child, before exec. */
void launch_openmp_setup_env(const char *agent)
{
    /* OMPT tool discovery: the agent exports ompt_start_tool; naming it in
     * OMP_TOOL_LIBRARIES too makes runtimes that look only there find it. */
    setenv("OMP_TOOL_LIBRARIES", agent, 1);
    if (omp_regions_off) /* the agent's wrappers only forward, its OMPT tool declines */
        setenv(OPR_ENV_OMP_REGIONS, "0", 1);
    else
        unsetenv(OPR_ENV_OMP_REGIONS);
    if (omp_libomp[0]) {
        /* LD_PRELOAD=agent:libomp:...: libomp's GOMP_* come before libgomp's.
         * The agent was prepended already: insert libomp right after it. */
        const char *old = getenv("LD_PRELOAD");
        size_t alen = strlen(agent);
        const char *rest = old && strncmp(old, agent, alen) == 0 ? old + alen : (old ? old : "");
        if (rest[0] == ':')
            rest++;
        size_t len = alen + strlen(omp_libomp) + strlen(rest) + 3;
        char *v = malloc(len);
        if (!v)
            return;
        snprintf(v, len, "%s:%s%s%s", agent, omp_libomp, rest[0] ? ":" : "", rest);
        setenv("LD_PRELOAD", v, 1);
        free(v);
    }
}
