/*
 * sampler/record/record_counters.c — `opprof record -e`: which events the agent
 * reads at every sample, and how they are handed to it.
 *
 * Sampling stays on the task-clock timer (the in-process sigtrap event, see
 * agent.c): it works without a PMU and on every thread without per-thread
 * setup. The events given with -e are *counted* per thread and read at each
 * sample, so their deltas are attributed to the sampled stack the way time
 * is. An event this machine cannot count (hardware events without a PMU) is
 * dropped here with one line naming the reason, so the report never shows a
 * column of zeros; software events (page-faults, context-switches, ...) are
 * always countable, which is what makes the whole path testable here.
 *
 * With -c N the first event leads instead (pmu_record_leader): the agent's
 * sigtrap event counts it and samples every N of them (one sample per 100,000
 * cycles, per 64 page faults, ...); the other events are counted per sample
 * as with the timer. A leader this machine cannot count (no PMU) is one line,
 * and sampling stays on the timer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h" /* HAVE_STRUCT_PERF_EVENT_ATTR_SIG_DATA for perf_attr.h */
#include "sampler/pmu/pmu.h"
#include "sampler/common/perf_attr.h"
#include "sampler/record/record.h"

/* Whether this process may open ev as a per-thread counter, in user and
 * kernel mode when perf_event_paranoid allows (as opprof stat counts:
 * context switches and the kernel's work for a page fault happen in kernel
 * mode, a user-only count of them is 0), else in user mode (ev->attr is
 * updated). errno_out gets perf_event_open's errno when it may not. */
static bool can_count_here(struct pmu_event *ev, int *errno_out)
{
    struct perf_event_attr a = ev->attr;
    a.disabled = 1;
    a.inherit = 0;
    a.exclude_kernel = 0;
    a.exclude_hv = 0;
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd >= 0) {
        ev->attr.exclude_kernel = 0;
        ev->attr.exclude_hv = 0;
    } else if (errno == EACCES || errno == EPERM) {
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
        ev->attr.exclude_kernel = 1;
    }
    if (fd < 0) {
        *errno_out = errno;
        return false;
    }
    close(fd);
    return true;
}

static void append(char *out, size_t outlen, const char *text)
{
    size_t used = strlen(out);
    snprintf(out + used, outlen - used, "%s", text);
}

int pmu_record_leader(const char *events, uint64_t period, struct record_leader *out)
{
    memset(out, 0, sizeof *out);
    struct pmu_event_list l = {0};
    char err[768] = "";
    if (pmu_parse_events(events, &l, err, sizeof err) != 0 || l.n == 0) {
        fprintf(stderr, "opprof record: %s\n", l.n == 0 && !err[0] ? "-e names no event" : err);
        pmu_event_list_free(&l);
        return -1;
    }
    struct pmu_event ev = l.ev[0];
    pmu_event_list_free(&l);
    if (ev.role == PMU_ROLE_TASK_CLOCK) {
        fprintf(stderr, "opprof record: -c with %s: task-clock is the default sampling timer; set its rate "
                        "with -F HZ instead\n", ev.name);
        return -1;
    }
    if (ev.uncore) {
        fprintf(stderr, "opprof record: -c with %s: an uncore event counts for the whole socket and cannot "
                        "lead per-thread samples; lead with a core event (cycles, ...) and use `opprof stat "
                        "--metrics memory` for bandwidth\n", ev.name);
        return -1;
    }
    /* Each sample runs the agent's handler inside the workload (~5-25 us,
     * tens of thousands of cycles): fewer hardware events per sample would
     * mostly sample the handler, or re-trigger as it returns. */
    if (ev.hardware && period < OPR_MIN_HW_SAMPLE_PERIOD) {
        fprintf(stderr, "opprof record: -c %llu with %s: give at least %d events per sample for a hardware "
                        "event (each sample runs a handler of tens of thousands of cycles in the workload)\n",
                (unsigned long long)period, ev.name, OPR_MIN_HW_SAMPLE_PERIOD);
        return -1;
    }
    snprintf(out->name, sizeof out->name, "%s", ev.name);
    int e = 0;
    if (!can_count_here(&ev, &e))
        return 0; /* no PMU: pmu_record_counters names it with the rest, in one line */
    /* Software events raised by the scheduler count nothing in user mode. */
    bool kernel_side = ev.attr.type == PERF_TYPE_SOFTWARE &&
                       (ev.attr.config == PERF_COUNT_SW_CONTEXT_SWITCHES ||
                        ev.attr.config == PERF_COUNT_SW_CPU_MIGRATIONS || ev.attr.config == 11 /* CGROUP_SWITCHES */);
    if (ev.attr.exclude_kernel && kernel_side) {
        fprintf(stderr, "opprof record: -c with %s: kernel.perf_event_paranoid=%d allows user-mode events only, "
                        "and %s happen in the kernel: none would be sampled; `sudo sysctl "
                        "kernel.perf_event_paranoid=1` allows it\n", ev.name, pmu_read_paranoid(), ev.name);
        return -1;
    }
    /* Open it the way the agent will (sampling, sigtrap): an event that
     * counts may still not raise overflow signals (some PMUs, some VMs). */
    struct opr_perf_attr full;
    opr_perf_attr_init(&full);
    struct perf_event_attr *a = &full.attr;
    *a = ev.attr;
    a->size = sizeof full;
    a->disabled = 1;
    a->sample_period = period;
    a->inherit = 1;
    opr_perf_attr_sigtrap(&full, 0);
    a->exclude_hv = 1;
    int fd = (int)syscall(SYS_perf_event_open, &full, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "opprof record: %s can be counted but cannot lead samples here (perf_event_open: %s); "
                        "sampling with the task-clock timer and counting it per sample\n", ev.name,
                strerror(errno));
        return 0;
    }
    close(fd);
    out->active = true;
    out->period = period;
    out->role = (int)ev.role;
    out->user_only = ev.attr.exclude_kernel != 0;
    snprintf(out->env, sizeof out->env, "%u:%llx:%llx:%u:%llu", ev.attr.type,
             (unsigned long long)ev.attr.config, (unsigned long long)ev.attr.config1, out->user_only ? 1u : 0u,
             (unsigned long long)period);
    return 0;
}

int pmu_record_counters(const char *events, const struct record_leader *leader, char *env, size_t envlen,
                        char *names, size_t nameslen)
{
    /* With -c the first event is the leader, not counted again; one that
     * cannot be opened here is dropped below like any other (one line). */
    bool first_leads = leader && leader->active;
    char sampling[300];
    if (leader && leader->active)
        snprintf(sampling, sizeof sampling, "sampling on %s", leader->name);
    else
        snprintf(sampling, sizeof sampling, "sampling with the task-clock timer");
    env[0] = '\0';
    names[0] = '\0';
    struct pmu_event_list l = {0};
    char err[768];
    if (pmu_parse_events(events, &l, err, sizeof err) != 0) {
        fprintf(stderr, "opprof record: %s\n", err);
        pmu_event_list_free(&l);
        return -1;
    }
    if (l.n == 0) {
        fprintf(stderr, "opprof record: -e %s names no event\n", events);
        pmu_event_list_free(&l);
        return -1;
    }
    char dropped[512] = "", uncore[512] = "";
    int first_errno = 0;
    size_t kept = 0;
    int group_map[64];
    int ngroups = 0;
    for (size_t i = 0; i < sizeof group_map / sizeof group_map[0]; i++)
        group_map[i] = -1;
    for (size_t i = first_leads ? 1 : 0; i < l.n; i++) {
        struct pmu_event *ev = &l.ev[i];
        if (ev->role == PMU_ROLE_TASK_CLOCK && !(leader && leader->active))
            continue; /* the sampling timer itself: each sample is one period of it */
        if (ev->uncore) {
            append(uncore, sizeof uncore, uncore[0] ? ", " : "");
            append(uncore, sizeof uncore, ev->name);
            continue;
        }
        int e = 0;
        if (!can_count_here(ev, &e)) {
            if (!first_errno)
                first_errno = e;
            append(dropped, sizeof dropped, dropped[0] ? ", " : "");
            append(dropped, sizeof dropped, ev->name);
            continue;
        }
        if (kept == OPR_MAX_COUNTERS) {
            fprintf(stderr, "opprof record: -e %s: at most %d events can be counted per sample; "
                            "give fewer (or use `opprof stat` for whole-run counts)\n", events, OPR_MAX_COUNTERS);
            pmu_event_list_free(&l);
            return -1;
        }
        int g = ev->group;
        if (g < 0 || g >= (int)(sizeof group_map / sizeof group_map[0]))
            g = 0;
        if (group_map[g] < 0)
            group_map[g] = ngroups++;
        char item[400];
        unsigned flags = ev->attr.exclude_kernel ? OPR_COUNTER_USER_ONLY : 0;
        snprintf(item, sizeof item, "%u:%llx:%llx:%d:%d:%u:%s;", ev->attr.type,
                 (unsigned long long)ev->attr.config, (unsigned long long)ev->attr.config1, (int)ev->role,
                 group_map[g], flags, ev->name);
        if (strlen(env) + strlen(item) + 1 > envlen) {
            fprintf(stderr, "opprof record: -e %s: event list too long\n", events);
            pmu_event_list_free(&l);
            return -1;
        }
        append(env, envlen, item);
        append(names, nameslen, kept ? "," : "");
        append(names, nameslen, ev->name);
        kept++;
    }
    /* One line for everything dropped: the reason is the same for all. */
    if (dropped[0]) {
        char why[320];
        pmu_unavailable_reason(first_errno, pmu_cpu_has_hypervisor_flag(), pmu_read_paranoid(), why, sizeof why);
        fprintf(stderr, "opprof record: %s not counted: %s; %s%s\n", dropped, why, sampling,
                kept ? " and counting the other events per sample" : "");
    } else if (uncore[0]) {
        fprintf(stderr, "opprof record: %s not counted per sample: uncore events are socket-wide, not per "
                        "thread (`opprof stat --metrics memory` counts them for the whole run)\n", uncore);
    } else if (l.ev[0].hardware && kept && !leader) { /* no -c: say that -c exists */
        fprintf(stderr, "opprof record: samples are taken on the task-clock timer; %s %s read at each "
                        "sample (-c N samples on the first instead)\n", names,
                kept > 1 ? "are" : "is");
    }
    pmu_event_list_free(&l);
    return 0;
}
