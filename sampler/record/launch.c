/*
 * sampler/record/launch.c — `opprof record`: start the workload with the agent
 * preloaded, stay out of its way, and report how the collection went.
 *
 * The launcher itself never samples: the agent inside each workload process
 * does (see agent.c). The launcher checks up front that the kernel will let
 * the agent open its event (so a refusal is one clear sentence here rather
 * than a silent empty result), creates the result directory and its info
 * file, forks and execs the command, forwards signals sent to opprof itself,
 * shows a live status line on a terminal, and returns the workload's status.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "sampler/attach/attach.h"
#include "sampler/common/common.h"
#include "sampler/common/perf_attr.h"
#include "sampler/pmu/pmu.h"
#include "sampler/record/record_internal.h"

const char *call_graph_mode_name(enum call_graph_mode mode)
{
    switch (mode) {
    case CALL_GRAPH_DWARF: return "dwarf";
    case CALL_GRAPH_FP: return "fp";
    case CALL_GRAPH_NONE: return "none";
    }
    return "?";
}

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int record_next_result_dir(const char *dir_of, char *out, size_t outlen)
{
    for (int i = 0; i < 1000; i++) {
        int n = snprintf(out, outlen, "%s%sopprof.%03d", dir_of ? dir_of : "",
                         dir_of && dir_of[0] ? "/" : "", i);
        if (n < 0 || (size_t)n >= outlen)
            return -1;
        struct stat st;
        if (stat(out, &st) != 0 && errno == ENOENT)
            return 0;
    }
    return -1;
}

int path_beside_self(const char *const *relative, size_t n, char *out, size_t outlen)
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return -1;
    self[len] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    for (size_t i = 0; i < n; i++) {
        snprintf(out, outlen, "%s%s", self, relative[i]);
        if (access(out, R_OK) == 0)
            return 0;
    }
    return -1;
}

/* Locates libopprof_agent.so: $OPPROF_AGENT, then beside the binary (build
 * tree: .libs/), then the installed pkglibdir. */
static int find_agent(char *out, size_t outlen)
{
    const char *env = getenv("OPPROF_AGENT");
    if (env && env[0]) {
        snprintf(out, outlen, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    static const char *const beside[] = {"/.libs/libopprof_agent.so", "/libopprof_agent.so",
                                         "/../lib/opprof/libopprof_agent.so"};
    if (path_beside_self(beside, sizeof beside / sizeof beside[0], out, outlen) == 0)
        return 0;
    snprintf(out, outlen, "%s/libopprof_agent.so", OPPROF_PKGLIBDIR);
    return access(out, R_OK) == 0 ? 0 : -1;
}

static int open_probe_event(uint64_t period_ns, bool user_only)
{
    struct opr_perf_attr full;
    opr_perf_attr_init(&full);
    struct perf_event_attr *attr = &full.attr;
    attr->type = PERF_TYPE_SOFTWARE;
    attr->config = PERF_COUNT_SW_TASK_CLOCK;
    attr->sample_period = period_ns;
    attr->inherit = 1;
    opr_perf_attr_sigtrap(&full, 0); /* as the agent opens it: threads, not child processes */
    attr->exclude_kernel = user_only ? 1 : 0;
    attr->exclude_hv = 1;
    attr->disabled = 1;
    return (int)syscall(SYS_perf_event_open, &full, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* Opens (and closes) the same event the agent will open, on ourselves, so that
 * a refusal is explained here. User and kernel mode when the kernel allows it
 * (kernel.perf_event_paranoid <= 1, or CAP_PERFMON), else user mode only with
 * *user_only set. Returns 0 or writes one sentence into msg. */
static int check_perf_event(uint64_t period_ns, bool *user_only, char *msg, size_t msglen)
{
    *user_only = false;
    int fd = open_probe_event(period_ns, false);
    if (fd < 0 && (errno == EACCES || errno == EPERM)) {
        *user_only = true;
        fd = open_probe_event(period_ns, true);
    }
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    int err = errno;
    int paranoid = pmu_read_paranoid();
    if (err == EACCES || err == EPERM)
        snprintf(msg, msglen,
                 "the kernel refused perf_event_open (%s; kernel.perf_event_paranoid=%d): "
                 "allow user-space profiling of your own processes with "
                 "`sudo sysctl kernel.perf_event_paranoid=2`%s",
                 strerror(err), paranoid,
                 paranoid >= 3 ? " (values above 2 forbid it entirely)"
                               : " or check that a seccomp/container policy does not block perf_event_open");
    else if (err == EINVAL || err == E2BIG)
        snprintf(msg, msglen,
                 "this kernel does not support signal-based sampling (perf_event sigtrap, Linux 5.13 "
                 "or newer is needed): %s", strerror(err));
    else if (err == ENOSYS)
        snprintf(msg, msglen, "perf_event_open is not available in this kernel (CONFIG_PERF_EVENTS off)");
    else
        snprintf(msg, msglen, "perf_event_open failed: %s", strerror(err));
    return -1;
}

/* ---- info file ------------------------------------------------------------ */

static void write_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\n')
            fputs("\\n", f);
        else if (*s == '\\')
            fputs("\\\\", f);
        else
            fputc(*s, f);
    }
}

/* Shell-like quoting so the command line in the info file can be read back. */
static void write_command(FILE *f, char *const *argv)
{
    for (int i = 0; argv[i]; i++) {
        if (i)
            fputc(' ', f);
        const char *a = argv[i];
        bool plain = a[0] != '\0' && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                "0123456789-_./=:,+@%") == strlen(a);
        if (plain) {
            write_escaped(f, a);
            continue;
        }
        fputc('\'', f);
        for (const char *p = a; *p; p++) {
            if (*p == '\'')
                fputs("'\\''", f);
            else if (*p == '\n')
                fputs("\\n", f);
            else
                fputc(*p, f);
        }
        fputc('\'', f);
    }
}

struct run_facts {
    uint64_t start_ns, end_ns;
    time_t start_wall;
    int exit_status, exit_signal;
    bool complete;
};


/* --delay/--duration as absolute CLOCK_MONOTONIC times (end 0: open), the
 * same for every process of the run. */
static uint64_t window_start_ns(const struct record_options *o, const struct run_facts *r)
{
    return r->start_ns + (uint64_t)(o->delay_s * 1e9);
}

static uint64_t window_end_ns(const struct record_options *o, const struct run_facts *r)
{
    return o->duration_s > 0 ? window_start_ns(o, r) + (uint64_t)(o->duration_s * 1e9) : 0;
}

/* The kernel allowed user-mode sampling only (check_perf_event). */
static bool o_user_only;

/* -e events counted per sample (OPR_ENV_COUNTERS) and their names for info. */
static char counters_env[4096], counters_names[2048];
/* -c N: the event samples are taken on (OPR_ENV_LEADER), when it can be. */
static struct record_leader o_leader;

/* ranks: the job rank opprof record itself runs as (one opprof per rank
 * under torchrun/mpirun/srun), for report to label this directory. */
static void write_rank_info(FILE *f)
{
    struct opr_rank r;
    opr_rank_from_env(&r);
    if (r.rank == OPR_RANK_UNSET)
        return;
    fprintf(f, "rank=%d\nrank_source=%s\n", (int)r.rank, opr_rank_source_name(r.source));
    if (r.local_rank != OPR_RANK_UNSET)
        fprintf(f, "local_rank=%d\n", (int)r.local_rank);
    if (r.world_size != OPR_RANK_UNSET)
        fprintf(f, "world_size=%d\n", (int)r.world_size);
}

/* Samples a full disk kept out of the streams (live counters), for info. */
static uint64_t final_unwritten;

static int write_info(const char *dir, const struct record_options *o, const struct run_facts *r)
{
    FILE *f = record_begin_info(dir);
    if (!f)
        return -1;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    fprintf(f, "format=opprof-raw %d\n", o_leader.active ? OPR_INFO_VERSION_EVENTS : OPR_FORMAT_VERSION);
    fprintf(f, "opprof_version=%s\n", PACKAGE_VERSION);
    fputs("command=", f);
    write_command(f, o->argv);
    fputc('\n', f);
    fprintf(f, "hostname=%s\n", host);
    if (o_leader.active) {
        /* -c N: a sample is N events, not a period of time (no period_ns) */
        fprintf(f, "event=%s\n", o_leader.name);
        fprintf(f, "sample_period=%llu\n", (unsigned long long)o_leader.period);
        fprintf(f, "sample_role=%d\n", o_leader.role); /* enum pmu_role, as in COUNTER_DESC */
        fprintf(f, "user_only=%d\n", o_user_only || o_leader.user_only ? 1 : 0);
    } else {
        fprintf(f, "event=task-clock\n");
        fprintf(f, "user_only=%d\n", o_user_only ? 1 : 0);
        if (o->tick_timer) /* --timer tick: at most one sample per kernel tick (agent_tick.c) */
            fprintf(f, "timer=tick\n");
        if (o_user_only || o->tick_timer) /* kernel time in the weights instead (agent.c) */
            fprintf(f, "sample_weight=thread_cpu_time\n");
        fprintf(f, "frequency_hz=%u\n", o->frequency_hz);
        fprintf(f, "period_ns=%llu\n", (unsigned long long)(1000000000ull / o->frequency_hz));
    }
    fprintf(f, "call_graph=%s\n", call_graph_mode_name(o->call_graph));
    fprintf(f, "start_ns=%llu\n", (unsigned long long)r->start_ns);
    fprintf(f, "start_time=%lld\n", (long long)r->start_wall);
    fprintf(f, "online_cpus=%ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    if (counters_names[0])
        fprintf(f, "counters=%s\n", counters_names); /* per-sample counters (-e) */
    /* threading/OpenMP: the runtime choice (docs/format.md) */
    launch_openmp_write_info(f); /* threading/OpenMP */
    if (o->delay_s > 0 || o->duration_s > 0) {
        fprintf(f, "window_start_ns=%llu\n", (unsigned long long)window_start_ns(o, r));
        fprintf(f, "window_end_ns=%llu\n", (unsigned long long)window_end_ns(o, r));
    }
    if (o->max_size_bytes)
        fprintf(f, "max_size_bytes=%llu\n", (unsigned long long)o->max_size_bytes);
    write_rank_info(f); /* ranks */
    if (r->complete && final_unwritten) /* disk full: the streams could not say it */
        fprintf(f, "unwritten_samples=%llu\n", (unsigned long long)final_unwritten);
    if (r->complete) {
        fprintf(f, "end_ns=%llu\n", (unsigned long long)r->end_ns);
        fprintf(f, "exit_status=%d\n", r->exit_status);
        fprintf(f, "exit_signal=%d\n", r->exit_signal);
    }
    fprintf(f, "complete=%d\n", r->complete ? 1 : 0);
    return record_end_info(dir, f);
}

/* ---- live status ---------------------------------------------------------- */

/* The .live page is written through a shared mapping: without its space
 * reserved first, a full filesystem turns the first store into SIGBUS
 * (round 1 died with exit 135 and no word). NULL with errno on failure. */
static struct opr_live *create_live_file(const char *dir)
{
    int fd = record_create_file(dir, OPR_LIVE_FILE, O_RDWR);
    if (fd < 0)
        return NULL;
    int rc = posix_fallocate(fd, 0, sizeof(struct opr_live));
    if (rc != 0) {
        close(fd);
        errno = rc;
        return NULL;
    }
    struct opr_live *live = mmap(NULL, sizeof *live, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (live == MAP_FAILED) {
        errno = e;
        return NULL;
    }
    memcpy(live->magic, OPR_LIVE_MAGIC, 8);
    return live;
}

/* Bytes of the regular files in dir; streams_only: the proc-*.raw sample
 * streams only (what --max-size caps). */
static uint64_t files_size(const char *dir, bool streams_only)
{
    uint64_t total = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[PATH_MAX];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
            continue;
        if (streams_only && (strncmp(e->d_name, "proc-", 5) != 0 || !strstr(e->d_name, ".raw")))
            continue;
        if (e->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_size;
    }
    closedir(d);
    return total;
}

static uint64_t dir_size(const char *dir)
{
    return files_size(dir, false);
}

static uint64_t streams_size(const char *dir)
{
    return files_size(dir, true);
}

static void format_size(uint64_t bytes, char *out, size_t outlen)
{
    if (bytes >= 10ull << 20)
        snprintf(out, outlen, "%.1f MB", bytes / 1048576.0);
    else if (bytes >= 10ull << 10)
        snprintf(out, outlen, "%.1f KB", bytes / 1024.0);
    else
        snprintf(out, outlen, "%llu bytes", (unsigned long long)bytes);
}

/* ---- the run ----------------------------------------------------------------- */

static int make_result_dir(const struct record_options *o, char *dir, size_t dirlen)
{
    if (o->output_dir) {
        /* ranks: -o prof.%r, %p, %h (sampler/rank_env.c) */
        char err[512];
        if (record_expand_output(o->output_dir, (long)getpid(), dir, dirlen, err, sizeof err) != 0) {
            fprintf(stderr, "opprof record: %s\n", err);
            return -1;
        }
        if (mkdir(dir, 0755) != 0) {
            if (errno != EEXIST) {
                fprintf(stderr, "opprof record: cannot create %s: %s\n", dir, strerror(errno));
                return -1;
            }
            if (record_check_existing_dir(dir, err, sizeof err) != 0) {
                fprintf(stderr, "opprof record: %s\n", err);
                return -1;
            }
        }
        return 0;
    }
    for (int tries = 0; tries < 20; tries++) {
        if (record_next_result_dir("", dir, dirlen) != 0)
            break;
        if (mkdir(dir, 0755) == 0)
            return 0;
        if (errno != EEXIST)
            break;
    }
    fprintf(stderr, "opprof record: cannot create a result directory opprof.NNN here: %s\n", strerror(errno));
    return -1;
}

static void prepend_env(const char *name, const char *value)
{
    const char *old = getenv(name);
    if (!old || !old[0]) {
        setenv(name, value, 1);
        return;
    }
    size_t len = strlen(value) + strlen(old) + 2;
    char *both = malloc(len);
    if (!both)
        return;
    snprintf(both, len, "%s:%s", value, old);
    setenv(name, both, 1);
    free(both);
}

/* Checks that this machine can sample as asked (perf_event, -c's leader
 * event, -e's counters) and says once how the kernel's rules change what is
 * sampled. 0, or 2 after a message. */
static int check_sampling_setup(const struct record_options *o, uint64_t period_ns)
{
    char msg[512];
    if (o->tick_timer) /* no perf event: thread CPU clocks count user and kernel time */
        o_user_only = false;
    else if (check_perf_event(period_ns, &o_user_only, msg, sizeof msg) != 0) {
        fprintf(stderr, "opprof record: %s\n", msg);
        return 2;
    }
    /* -c N: the first -e event leads, when this machine can count it. */
    memset(&o_leader, 0, sizeof o_leader);
    if (o->sample_count && pmu_record_leader(o->events, o->sample_count, &o_leader) != 0)
        return 2;
    if (o_leader.active && o_leader.user_only && !o->quiet)
        fprintf(stderr, "opprof record: kernel.perf_event_paranoid=%d allows user-mode events only: %s is "
                        "counted and sampled in user mode\n", pmu_read_paranoid(), o_leader.name);
    if (o_user_only && !o_leader.active && !o->quiet)
        fprintf(stderr, "opprof record: kernel.perf_event_paranoid=%d allows user-mode samples only: kernel time "
                        "(page faults, system calls) is charged to each thread's next user-mode sample, not to the "
                        "code that entered the kernel; `sudo sysctl kernel.perf_event_paranoid=1` makes it exact\n",
                pmu_read_paranoid());
    /* -e: a bad name stops here; an event that cannot be opened (no PMU) gets
     * one line and is dropped; the rest are counted per sample by the agent
     * (record_counters.c) while the task-clock timer samples. */
    if (o->events && pmu_record_counters(o->events, o->sample_count ? &o_leader : NULL, counters_env,
                                         sizeof counters_env, counters_names,
                                         sizeof counters_names) != 0)
        return 2;
    return 0;
}

/* The forked child: the agent's environment (result dir, period, limits,
 * counters, LD_PRELOAD), then the workload. An exec failure goes back to the
 * launcher through errpipe_wr. */
static _Noreturn void exec_workload(const struct record_options *o, const char *agent, const char *absdir,
                                    uint64_t period_ns, const struct run_facts *facts, int errpipe_wr,
                                    const char *torch_shapes_dir)
{
    char period[32];
    snprintf(period, sizeof period, "%llu", (unsigned long long)period_ns);
    setenv(OPR_ENV_DIR, absdir, 1);
    setenv(OPR_ENV_PERIOD, period, 1);
    setenv(OPR_ENV_CALLGRAPH, call_graph_mode_name(o->call_graph), 1);
    setenv(OPR_ENV_USER_ONLY, o_user_only ? "1" : "0", 1);
    if (o->tick_timer)
        setenv(OPR_ENV_TIMER, "tick", 1);
    else
        unsetenv(OPR_ENV_TIMER);
    char limit[64];
    if (o->delay_s > 0 || o->duration_s > 0) {
        snprintf(limit, sizeof limit, "%llu:%llu", (unsigned long long)window_start_ns(o, facts),
                 (unsigned long long)window_end_ns(o, facts));
        setenv(OPR_ENV_WINDOW, limit, 1);
    }
    if (o->max_size_bytes) {
        snprintf(limit, sizeof limit, "%llu", (unsigned long long)o->max_size_bytes);
        setenv(OPR_ENV_MAX_BYTES, limit, 1);
    }
    if (o_leader.active)
        setenv(OPR_ENV_LEADER, o_leader.env, 1);
    else
        unsetenv(OPR_ENV_LEADER);
    if (counters_env[0])
        setenv(OPR_ENV_COUNTERS, counters_env, 1); /* per-sample counters */
    else
        unsetenv(OPR_ENV_COUNTERS);
    prepend_env("LD_PRELOAD", agent);
    launch_openmp_setup_env(agent); /* threading/OpenMP: OMP_TOOL_LIBRARIES, libomp preload */
    if (torch_shapes_dir[0])
        launch_torch_shapes_setup_env(torch_shapes_dir); /* record --torch-shapes */
    execvp(o->argv[0], o->argv);
    int err = errno;
    ssize_t w = write(errpipe_wr, &err, sizeof err);
    (void)w;
    _exit(err == ENOENT ? 127 : 126);
}

/* Waits for the workload; returns its wait status. It sleeps until the
 * workload ends (its pidfd, Linux 5.3+) or a signal for it arrives, and wakes
 * every 200 ms only to show the live counts on a terminal (show_status). It
 * used to wake every 20 ms to look: ~25 us of CPU a wake-up on these VMs,
 * ~3 ms of a 2.5 s torch_train.py recording that no overhead figure showed
 * (perf record --no-inherit of record). Without pidfd_open it still does. */
static int wait_for_workload(pid_t child, const struct opr_live *live, const struct run_facts *facts,
                             bool show_status)
{
    int status = 0;
    int pidfd = -1;
#ifdef SYS_pidfd_open
    pidfd = (int)syscall(SYS_pidfd_open, child, 0);
#endif
    uint64_t sleep_ns = show_status ? 200000000ull : pidfd >= 0 ? UINT64_MAX : 20000000ull;
    for (;;) {
        pid_t w = waitpid(child, &status, WNOHANG);
        if (w == child)
            break;
        if (w < 0 && errno != EINTR) {
            fprintf(stderr, "opprof record: waitpid: %s\n", strerror(errno));
            break;
        }
        if (show_status && live) {
            double secs = (monotonic_ns() - facts->start_ns) / 1e9;
            fprintf(stderr, "\ropprof record: %.1f s, %llu samples, %llu threads, %llu processes\033[K", secs,
                    (unsigned long long)__atomic_load_n(&live->samples, __ATOMIC_RELAXED),
                    (unsigned long long)__atomic_load_n(&live->threads, __ATOMIC_RELAXED),
                    (unsigned long long)__atomic_load_n(&live->processes, __ATOMIC_RELAXED));
        }
        launch_signals_poll(); /* pass on a signal sent to record alone (launch_signals.c) */
        /* a signal ends the sleep early (EINTR), so it is decided at once */
        launch_signals_sleep(pidfd, sleep_ns);
    }
    if (pidfd >= 0)
        close(pidfd);
    return status;
}

/* How the workload ended, into facts; returns the status record passes on
 * (the workload's, 127/126 when it could not be run, 128+N for a signal). */
static int note_workload_end(const struct record_options *o, bool exec_failed, int exec_errno, int status,
                             struct run_facts *facts)
{
    if (exec_failed) {
        facts->exit_status = exec_errno == ENOENT ? 127 : 126;
        fprintf(stderr, "opprof record: %s: %s\n", o->argv[0],
                exec_errno == ENOENT ? "command not found" : strerror(exec_errno));
    } else if (WIFSIGNALED(status)) {
        facts->exit_signal = WTERMSIG(status);
        facts->exit_status = 128 + facts->exit_signal;
        if (!o->quiet)
            fprintf(stderr, "opprof record: the workload was killed by signal %d (%s)\n", facts->exit_signal,
                    strsignal(facts->exit_signal));
    } else {
        facts->exit_status = WEXITSTATUS(status);
    }
    return facts->exit_status;
}

/* CPU time no sample stands for (ACCOUNTING totals): said when it is at
 * least 5 % of the CPU time and 10 ms. Below that it is the expected
 * remainder: each thread leaves less than one period unsampled at exit, and
 * the agent's loading before its constructor is not measured. */
static void print_unsampled(const struct opr_live *live, uint64_t period_ns, bool tick_timer)
{
    if (o_leader.active || live->cpu_ns == 0)
        return;
    double share = 100.0 * (double)live->unsampled_ns / (double)live->cpu_ns;
    if (share < 5.0 || live->unsampled_ns < 10000000ull)
        return;
    fprintf(stderr, "opprof record: %.0f %% of CPU time unsampled (%.3f s of %.3f s)", share,
            live->unsampled_ns / 1e9, live->cpu_ns / 1e9);
    uint64_t unsampled_threads =
        live->threads_started > live->threads_sampled ? live->threads_started - live->threads_sampled : 0;
    unsampled_threads = unsampled_threads > live->trap_blocked_threads ? unsampled_threads - live->trap_blocked_threads
                                                                      : 0; /* those are said once, above */
    if (live->trap_blocked_threads)
        fprintf(stderr, ": SIGTRAP blocked in %llu threads (opprof samples with SIGTRAP; a thread that blocks "
                        "it is never sampled: leave SIGTRAP unblocked, e.g. in sigprocmask/pthread_sigmask masks)",
                (unsigned long long)live->trap_blocked_threads);
    if (unsampled_threads && tick_timer) /* armed by the writer's poll, at most once a kernel tick */
        fprintf(stderr,
                "%s%llu of %llu threads (in %llu processes) took no sample (each ended before the writer "
                "armed its timer, or within one kernel tick of CPU time: --timer tick)",
                live->trap_blocked_threads ? "; " : ": ", (unsigned long long)unsampled_threads,
                (unsigned long long)live->threads_started, (unsigned long long)live->processes);
    else if (unsampled_threads)
        fprintf(stderr, "%s%llu of %llu threads (in %llu processes) took no sample (shorter than the %.3f ms "
                        "period: raise -F, or reuse threads and processes, e.g. a pool)",
                live->trap_blocked_threads ? "; " : ": ", (unsigned long long)unsampled_threads,
                (unsigned long long)live->threads_started, (unsigned long long)live->processes, period_ns / 1e6);
    if (!live->trap_blocked_threads && !unsampled_threads && tick_timer)
        fprintf(stderr, ": each thread ends with up to one kernel tick of CPU time after its last sample "
                        "(--timer tick; the default timer leaves less than one period)");
    else if (!live->trap_blocked_threads && !unsampled_threads)
        fprintf(stderr, ": short-lived threads or processes (less than one %.3f ms period each): raise -F",
                period_ns / 1e6);
    fputc('\n', stderr);
}

/* The closing lines on stderr: what was collected and where, and why a
 * recording may hold less than expected (window, size cap, disk full,
 * unsampled CPU time, no agent, no samples, interrupted). */
static void print_record_summary(const struct record_options *o, const char *dir, const char *absdir,
                                 const struct opr_live *live, uint64_t period_ns, const struct run_facts *facts)
{
    char size[32];
    format_size(dir_size(absdir), size, sizeof size);
    unsigned long long samples = live ? live->samples : 0, queue_full = live ? live->lost : 0;
    unsigned long long disk_full = live ? live->unwritten : 0;
    unsigned long long size_cap = live ? live->dropped_size_cap : 0;
    fprintf(stderr, "opprof record: %llu samples (%llu lost", samples, queue_full + disk_full + size_cap);
    if (disk_full || size_cap) { /* per reason, when there is more than the queue's */
        fprintf(stderr, ": %llu queue full", queue_full);
        if (disk_full)
            fprintf(stderr, ", %llu not written (disk full)", disk_full);
        if (size_cap)
            fprintf(stderr, ", %llu size cap", size_cap);
    }
    fprintf(stderr, "), %llu threads, %llu processes -> %s (%s)\n", live ? (unsigned long long)live->threads : 0ull,
            live ? (unsigned long long)live->processes : 0ull, dir, size);
    if (disk_full)
        fprintf(stderr, "opprof record: %s filled up: %llu samples could not be written (counted as lost); "
                        "free some space or use --max-size\n", dir, disk_full);
    if (o->tick_timer && live && live->cpu_ns) /* the rate the kernel's tick allowed, not -F's */
        fprintf(stderr,
                "opprof record: --timer tick: %.0f samples per second of CPU time (-F %u asked; the kernel "
                "checks CPU-time timers at its scheduler tick), each weighted by its thread's CPU time\n",
                (double)samples / ((double)live->cpu_ns / 1e9), o->frequency_hz);
    launch_openmp_print_summary(stderr); /* threading/OpenMP: says so when a runtime was swapped in */
    if (o->torch_shapes) /* the hook changed the program: say so, with its cost */
        launch_torch_shapes_print_summary(stderr, absdir, live ? live->cpu_ns : 0);
    if (live && (o->delay_s > 0 || o->duration_s > 0)) {
        char until[48] = "the end";
        if (o->duration_s > 0)
            snprintf(until, sizeof until, "%.1f s", o->delay_s + o->duration_s);
        fprintf(stderr, "opprof record: sampled from %.1f s to %s after the start; %llu samples outside "
                        "that window were not recorded\n",
                o->delay_s, until, (unsigned long long)live->outside_window);
    }
    if (size_cap) {
        char cap[32], streams[32];
        format_size(o->max_size_bytes, cap, sizeof cap);
        format_size(streams_size(absdir), streams, sizeof streams);
        fprintf(stderr, "opprof record: --max-size %s reached: %llu samples dropped (counted as lost; the report "
                        "counts them); the sample streams hold %s (the cap counts them, not info or vdso.so)\n",
                cap, size_cap, streams);
    }
    if (live && live->processes)
        print_unsampled(live, period_ns, o->tick_timer);
    if (live && live->processes == 0)
        fprintf(stderr, "opprof record: warning: the agent did not start in %s (a static or setuid binary "
                        "ignores LD_PRELOAD): nothing was sampled\n", o->argv[0]);
    else if (samples == 0 && o_leader.active)
        fprintf(stderr, "opprof record: warning: no samples: no thread of the workload caused %llu %s "
                        "events (each thread counts its own); lower -c\n",
                (unsigned long long)o_leader.period, o_leader.name);
    else if (samples == 0 && !disk_full && !(live && live->trap_blocked_threads))
        fprintf(stderr, "opprof record: warning: no samples: the workload used less CPU time "
                        "than one sampling period (%.3f ms); raise -F\n", period_ns / 1e6);
    /* Interrupted only if the signal ended the workload: one that ignores or
     * handles SIGINT and runs to completion was not interrupted. How it
     * reached the workload is said as it happened (launch_signals.c). */
    int sig = launch_signals_received();
    enum launch_signal_route route = launch_signals_route();
    const char *how = route == LAUNCH_SIGNAL_FORWARDED ? "was passed on to the workload by opprof"
                      : route == LAUNCH_SIGNAL_GROUP   ? "reached the workload directly (sent to the whole "
                                                         "process group; opprof did not pass it on again)"
                      : route == LAUNCH_SIGNAL_TERMINAL ? "reached the workload from the terminal"
                                                        : "reached opprof";
    if (sig && facts->exit_signal)
        fprintf(stderr, "opprof record: interrupted by signal %d (%s, which %s); everything collected so far is "
                        "in %s\n", sig, strsignal(sig), how, dir);
    else if (sig)
        fprintf(stderr, "opprof record: signal %d (%s) %s; the workload ran on and exited with status %d: the "
                        "recording is complete\n",
                sig, strsignal(sig), how, facts->exit_status);
}

int record_run(const struct record_options *o)
{
    char agent[PATH_MAX];
    if (find_agent(agent, sizeof agent) != 0) {
        fprintf(stderr, "opprof record: the sampling agent libopprof_agent.so was not found (looked beside "
                        "the opprof binary and in %s): reinstall opprof or set OPPROF_AGENT=/path/to/libopprof_agent.so\n",
                OPPROF_PKGLIBDIR);
        return 2;
    }
    char torch_shapes_dir[PATH_MAX] = "";
    if (o->torch_shapes && launch_torch_shapes_find(torch_shapes_dir, sizeof torch_shapes_dir) != 0)
        return 2;
    uint64_t period_ns = 1000000000ull / o->frequency_hz;
    if (check_sampling_setup(o, period_ns) != 0)
        return 2;
    char dir[PATH_MAX];
    if (make_result_dir(o, dir, sizeof dir) != 0)
        return 2;
    char absdir[PATH_MAX];
    if (!realpath(dir, absdir)) {
        fprintf(stderr, "opprof record: cannot resolve %s: %s\n", dir, strerror(errno));
        return 2;
    }

    launch_openmp_choose(o); /* threading/OpenMP */
    struct run_facts facts = {0};
    facts.start_ns = monotonic_ns();
    facts.start_wall = time(NULL);
    facts.exit_status = -1;
    if (write_info(absdir, o, &facts) != 0) {
        fprintf(stderr, "opprof record: cannot write %s/info: %s\n", dir, strerror(errno));
        return 2;
    }
    struct opr_live *live = create_live_file(absdir);
    if (!live && (errno == ENOSPC || errno == EDQUOT)) {
        /* The streams would not fit either: say so before the workload runs. */
        fprintf(stderr, "opprof record: no space left in %s (%s): free some space or choose another -o DIR\n", dir,
                strerror(errno));
        return 2;
    }

    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        fprintf(stderr, "opprof record: pipe: %s\n", strerror(errno));
        return 2;
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "opprof record: fork: %s\n", strerror(errno));
        return 2;
    }
    if (child == 0) {
        close(errpipe[0]);
        exec_workload(o, agent, absdir, period_ns, &facts, errpipe[1], torch_shapes_dir);
    }
    close(errpipe[1]);
    launch_signals_start(child);

    int exec_errno = 0;
    ssize_t got;
    do
        got = read(errpipe[0], &exec_errno, sizeof exec_errno);
    while (got < 0 && errno == EINTR);
    close(errpipe[0]);

    bool show_status = !o->quiet && isatty(STDERR_FILENO) && got <= 0;
    int status = wait_for_workload(child, live, &facts, show_status);
    launch_signals_stop();
    if (show_status)
        fputs("\r\033[K", stderr);
    facts.end_ns = monotonic_ns();
    facts.complete = true;

    int rc = note_workload_end(o, got > 0, exec_errno, status, &facts);
    final_unwritten = live ? __atomic_load_n(&live->unwritten, __ATOMIC_RELAXED) : 0;
    if (write_info(absdir, o, &facts) != 0)
        fprintf(stderr, "opprof record: cannot finish %s/info: %s\n", dir, strerror(errno));
    if (!o->quiet && got <= 0)
        print_record_summary(o, dir, absdir, live, period_ns, &facts);
    if (live)
        munmap(live, sizeof *live);
    return rc;
}

int record_make_result_dir(const struct record_options *o, char *dir, size_t dirlen)
{
    return make_result_dir(o, dir, dirlen);
}

void record_write_command(FILE *f, char *const *argv)
{
    write_command(f, argv);
}
