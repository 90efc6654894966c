/*
 * sampler/pmu/stat.c — `opprof stat`: count events over a whole run from outside
 * the workload, the way perf stat does.
 *
 * fork; the child waits on a pipe; the parent opens every event on the child
 * (pid=child, cpu=-1, inherit=1 so threads and child processes add into the
 * same counter, enable_on_exec=1 so counting starts at the workload's exec and
 * not in opprof's code), then releases the child, waits, and reads totals with
 * time_enabled/time_running for multiplexing. Software events (task-clock,
 * context switches, migrations, page faults) are always counted, because they
 * work on every machine; hardware events that cannot be opened are dropped as
 * a whole with one reason, so the result never has zero-filled PMU columns.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sampler/pmu/pmu.h"

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t tv_ns(struct timeval tv)
{
    return (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
}

static const char *const software_defaults[] = {"task-clock", "context-switches", "cpu-migrations",
                                                "page-faults"};

static bool same_event(const struct pmu_event *a, const struct pmu_event *b)
{
    return a->attr.type == b->attr.type && a->attr.config == b->attr.config &&
           a->attr.config1 == b->attr.config1 && a->attr.config2 == b->attr.config2;
}

/* The event list of a run: software defaults, then -e, then the defaults
 * cycles,instructions (as perf stat) or the --metrics preset. */
static int build_events(const struct stat_options *o, struct pmu_event_list *l, char *note, size_t notelen)
{
    char err[768];
    struct pmu_event_list user = {0};
    if (o->events && pmu_parse_events(o->events, &user, err, sizeof err) != 0) {
        fprintf(stderr, "opprof stat: %s\n", err);
        pmu_event_list_free(&user);
        return -1;
    }
    for (size_t i = 0; i < sizeof software_defaults / sizeof software_defaults[0]; i++) {
        struct pmu_event e;
        if (pmu_encode(software_defaults[i], &e, err, sizeof err) != 0) {
            fprintf(stderr, "opprof stat: %s\n", err);
            pmu_event_list_free(&user);
            return -1;
        }
        bool dup = false;
        for (size_t k = 0; k < user.n; k++)
            dup |= same_event(&e, &user.ev[k]);
        if (dup)
            continue;
        e.group = l->ngroups++;
        e.leader = true;
        pmu_event_list_add(l, &e);
    }
    int base = l->ngroups;
    for (size_t k = 0; k < user.n; k++) {
        struct pmu_event e = user.ev[k];
        e.group += base;
        pmu_event_list_add(l, &e);
    }
    l->ngroups += user.ngroups;
    pmu_event_list_free(&user);
    if (o->metrics != METRICS_NONE) {
        if (pmu_preset_add(o->metrics, l, note, notelen, err, sizeof err) != 0) {
            fprintf(stderr, "opprof stat: --metrics %s: %s\n", metric_set_name(o->metrics), err);
            return -1;
        }
    } else if (!o->events && !o->no_default_hw) {
        if (pmu_parse_events("{cycles,instructions}", l, err, sizeof err) != 0) {
            fprintf(stderr, "opprof stat: %s\n", err);
            return -1;
        }
    }
    return 0;
}

static int open_event(struct perf_event_attr *a, pid_t pid, int cpu, int group_fd)
{
    return (int)syscall(SYS_perf_event_open, a, pid, cpu, group_fd, PERF_FLAG_FD_CLOEXEC);
}

/* Opens one event; user+kernel first (perf stat's default), user only when
 * perf_event_paranoid forbids the kernel part. Sets *user_only; -1 + errno. */
static int open_counting(const struct pmu_event *e, pid_t child, int group_fd, bool *user_only)
{
    struct perf_event_attr a = e->attr;
    a.size = sizeof a;
    a.disabled = 1;
    a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    pid_t pid = child;
    int cpu = -1;
    if (e->uncore) {
        /* Socket-wide: per CPU, not per task; enabled by hand around the run. */
        pid = -1;
        cpu = e->cpu < 0 ? 0 : e->cpu;
        a.inherit = 0;
        a.enable_on_exec = 0;
    } else {
        a.inherit = 1;
        a.enable_on_exec = 1;
        a.exclude_kernel = 0;
        a.exclude_hv = 0;
    }
    *user_only = false;
    int fd = open_event(&a, pid, cpu, group_fd);
    if (fd < 0 && (errno == EACCES || errno == EPERM) && !e->uncore) {
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        *user_only = true;
        fd = open_event(&a, pid, cpu, group_fd);
    }
    return fd;
}

void stat_result_free(struct stat_result *r)
{
    free(r->counts);
    r->counts = NULL;
    r->ncounts = 0;
}

/* The forked child: waits until opprof has opened the counters on it, then
 * execs the workload; an exec failure goes back through errpipe. */
static _Noreturn void exec_when_released(const struct stat_options *o, int go[2], int errpipe[2])
{
    close(go[1]);
    close(errpipe[0]);
    char c;
    ssize_t got;
    do
        got = read(go[0], &c, 1);
    while (got < 0 && errno == EINTR);
    if (got != 1)
        _exit(2); /* opprof gave up before releasing us */
    execvp(o->argv[0], o->argv);
    int err = errno;
    ssize_t w = write(errpipe[1], &err, sizeof err);
    (void)w;
    _exit(err == ENOENT ? 127 : 126);
}

/* Opens every event on the waiting child (fds[i], -1 when not counted). A
 * hardware failure drops every hardware event (one reason, no partial PMU
 * columns). */
static void open_all_counting(const struct pmu_event_list *l, pid_t child, int *fds, bool *user_only,
                              struct stat_result *r)
{
    int hw_errno = -1;
    for (size_t i = 0; i < l->n; i++) {
        fds[i] = -1;
        const struct pmu_event *e = &l->ev[i];
        if (e->hardware && hw_errno >= 0)
            continue;
        int group_fd = -1;
        if (!e->leader)
            for (size_t k = i; k-- > 0;)
                if (l->ev[k].group == e->group && l->ev[k].leader) {
                    group_fd = fds[k];
                    break;
                }
        fds[i] = open_counting(e, child, group_fd, &user_only[i]);
        if (fds[i] < 0) {
            int err = errno;
            if (e->hardware) {
                hw_errno = err;
            } else {
                fprintf(stderr, "opprof stat: cannot count %s: %s\n", e->name, strerror(err));
            }
        }
    }
    if (hw_errno >= 0) {
        for (size_t i = 0; i < l->n; i++)
            if (l->ev[i].hardware && fds[i] >= 0) {
                close(fds[i]);
                fds[i] = -1;
            }
        pmu_unavailable_reason(hw_errno, pmu_cpu_has_hypervisor_flag(), pmu_read_paranoid(),
                               r->no_pmu_reason, sizeof r->no_pmu_reason);
        r->note[0] = '\0'; /* a bandwidth-estimate note means nothing without counters */
    }
    for (size_t i = 0; i < l->n; i++)
        if (fds[i] >= 0 && l->ev[i].uncore)
            ioctl(fds[i], PERF_EVENT_IOC_ENABLE, 0);
}

/* How the workload ended, as the parent saw it. */
struct workload_end {
    ssize_t exec_report; /* > 0: the child could not exec, exec_errno says why */
    int exec_errno;
    pid_t waited;        /* the child, or -1 when waiting failed */
    int status;
    struct rusage ru;
};

/* Releases the child, waits for it and times the run into r->wall_ns. */
static void release_and_wait(pid_t child, int go_wr, int errpipe_rd, struct stat_result *r,
                             struct workload_end *end)
{
    /* Like time(1): a terminal's Ctrl-C reaches the workload (same process
     * group); opprof stays to print what was counted. */
    struct sigaction ign, old_int, old_quit;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);

    uint64_t start = monotonic_ns();
    char one = 1;
    if (write(go_wr, &one, 1) != 1)
        fprintf(stderr, "opprof stat: cannot release the workload: %s\n", strerror(errno));
    close(go_wr);
    end->exec_errno = 0;
    do
        end->exec_report = read(errpipe_rd, &end->exec_errno, sizeof end->exec_errno);
    while (end->exec_report < 0 && errno == EINTR);
    close(errpipe_rd);

    end->status = 0;
    memset(&end->ru, 0, sizeof end->ru);
    do
        end->waited = wait4(child, &end->status, 0, &end->ru);
    while (end->waited < 0 && errno == EINTR);
    r->wall_ns = monotonic_ns() - start;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
}

/* Reads each open counter into r->counts and closes it. */
static void read_counts(const struct pmu_event_list *l, const int *fds, const bool *user_only,
                        struct stat_result *r)
{
    for (size_t i = 0; i < l->n; i++) {
        if (fds[i] < 0)
            continue;
        if (l->ev[i].uncore)
            ioctl(fds[i], PERF_EVENT_IOC_DISABLE, 0);
        uint64_t v[3];
        if (read(fds[i], v, sizeof v) == (ssize_t)sizeof v) {
            struct stat_count *c = &r->counts[r->ncounts++];
            snprintf(c->name, sizeof c->name, "%s", l->ev[i].name);
            c->role = l->ev[i].role;
            c->hardware = l->ev[i].hardware;
            c->uncore = l->ev[i].uncore;
            c->user_only = user_only[i];
            c->value = v[0];
            c->time_enabled = v[1];
            c->time_running = v[2];
        }
        close(fds[i]);
    }
}

/* The rusage figures, and the user-only software counts mended with them.
 * Under perf_event_paranoid >= 2 software events are user-only, and the
 * kernel then counts no context switches or migrations at all (they happen
 * in kernel mode): a silent 0. Context switches come from rusage instead
 * (same total for the waited-for tree); migrations have no other source and
 * are dropped with a note. */
static void apply_rusage(const struct rusage *ru, struct stat_result *r)
{
    r->utime_ns = tv_ns(ru->ru_utime);
    r->stime_ns = tv_ns(ru->ru_stime);
    r->minflt = ru->ru_minflt;
    r->majflt = ru->ru_majflt;
    r->nvcsw = ru->ru_nvcsw;
    r->nivcsw = ru->ru_nivcsw;
    r->maxrss_kb = ru->ru_maxrss;
    for (size_t i = 0; i < r->ncounts; i++) {
        struct stat_count *c = &r->counts[i];
        if (!c->user_only || c->hardware)
            continue;
        if (c->role == PMU_ROLE_CONTEXT_SWITCHES) {
            c->value = (uint64_t)(ru->ru_nvcsw + ru->ru_nivcsw);
            c->from_rusage = true;
            c->user_only = false;
        } else if (c->role == PMU_ROLE_CPU_MIGRATIONS) {
            memmove(c, c + 1, (r->ncounts - i - 1) * sizeof *c);
            r->ncounts--;
            i--;
            snprintf(r->note, sizeof r->note, "cpu-migrations not counted: kernel.perf_event_paranoid=%d "
                     "allows user-mode counting only, and migrations happen in the kernel", pmu_read_paranoid());
        }
    }
}

/* The exit status opprof stat passes on: the workload's, 127/126 when it
 * could not be run, 128+N for a signal. */
static void set_exit_status(const struct stat_options *o, pid_t child, const struct workload_end *end,
                            struct stat_result *r)
{
    if (end->exec_report > 0) {
        fprintf(stderr, "opprof stat: %s: %s\n", o->argv[0],
                end->exec_errno == ENOENT ? "command not found" : strerror(end->exec_errno));
        r->exit_status = end->exec_errno == ENOENT ? 127 : 126;
        r->ncounts = 0; /* nothing ran */
    } else if (end->waited == child && WIFSIGNALED(end->status)) {
        r->exit_signal = WTERMSIG(end->status);
        r->exit_status = 128 + r->exit_signal;
    } else if (end->waited == child) {
        r->exit_status = WEXITSTATUS(end->status);
    } else {
        fprintf(stderr, "opprof stat: waitpid: %s\n", strerror(errno));
        r->exit_status = 2;
    }
}

int stat_run(const struct stat_options *o, struct stat_result *r)
{
    memset(r, 0, sizeof *r);
    r->online_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct pmu_event_list l = {0};
    if (build_events(o, &l, r->note, sizeof r->note) != 0) {
        pmu_event_list_free(&l);
        return 2;
    }
    int *fds = malloc(l.n * sizeof *fds);
    bool *user_only = calloc(l.n ? l.n : 1, sizeof *user_only);
    r->counts = calloc(l.n ? l.n : 1, sizeof *r->counts);
    int go[2], errpipe[2];
    pid_t child = -1;
    if (!fds || !user_only || !r->counts) {
        fprintf(stderr, "opprof stat: out of memory\n");
    } else if (pipe2(go, O_CLOEXEC) != 0 || pipe2(errpipe, O_CLOEXEC) != 0) {
        fprintf(stderr, "opprof stat: pipe: %s\n", strerror(errno));
    } else {
        fflush(NULL);
        child = fork();
        if (child < 0)
            fprintf(stderr, "opprof stat: fork: %s\n", strerror(errno));
    }
    if (child < 0) {
        free(fds);
        free(user_only);
        pmu_event_list_free(&l);
        return 2;
    }
    if (child == 0)
        exec_when_released(o, go, errpipe);
    close(go[0]);
    close(errpipe[1]);
    r->pid = child;

    open_all_counting(&l, child, fds, user_only, r);
    struct workload_end end;
    release_and_wait(child, go[1], errpipe[0], r, &end);
    read_counts(&l, fds, user_only, r);
    free(fds);
    free(user_only);
    pmu_event_list_free(&l);
    apply_rusage(&end.ru, r);
    set_exit_status(o, child, &end, r);
    return r->exit_status;
}
