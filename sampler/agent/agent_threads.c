/*
 * sampler/agent/agent_threads.c — the OS-level thread view, polled by the agent's
 * writer thread: works with any OpenMP runtime (or none) and without OMPT.
 *
 * Every ~10 ms (the writer's drain period; 50 ms past 64 threads; up to 80 ms
 * while no thread runs, agent_threads_quiet) it reads,
 * for each thread of the process but the writer itself,
 * /proc/self/task/<tid>/schedstat ("run_ns wait_ns timeslices": time on a
 * CPU and time runnable but waiting on the runqueue), and every ~250 ms its
 * nonvoluntary_ctxt_switches from .../status (the directory is listed
 * again only then or after a pthread_create, see agent_threads_poll). With it go the CPUs online, the
 * CPUs in the affinity mask and the cgroup CPU limit (cgroup v2 cpu.max, or
 * v1 cpu.cfs_quota_us / cpu.cfs_period_us). One SCHED_TICK record per poll
 * carries cumulative values; the report takes differences, so the average
 * number of runnable threads over a period is (delta run + delta wait) / period.
 *
 * Writer thread only (not signal context): may allocate, uses stdio for the
 * rare files. schedstat files stay open and are re-read with pread(…, 0).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sampler/agent/agent.h"

#define POLL_NS 9000000ull         /* the writer wakes every 10 ms (or less often: quiet) */
#define POLL_MANY_NS 49000000ull   /* with more than MANY_THREADS threads */
#define MANY_THREADS 64
#define STATUS_EVERY 25            /* polls between two reads of .../status */
#define MAX_THREADS 4096

struct tracked {
    uint32_t tid;
    int fd;             /* schedstat, -1 when gone */
    int stat_fd;        /* .../stat for the off-CPU poll's task state, -1 until it is first read */
    uint32_t gen;       /* poll that last saw it in /proc/self/task */
    uint64_t nivcsw;
    uint64_t run, wait, slices;
    bool trap_blocked;  /* seen with SIGTRAP in SigBlk: its CPU time cannot be sampled */
    bool trap_before;   /* the last mask read had SIGTRAP blocked */
};

static struct tracked *tracked;
static size_t ntracked;
static uint32_t gen;
static uint64_t last_poll_ns;
static uint64_t created_at_listing; /* threads_created at the last listing of /proc/self/task */
/* The last poll found every thread as the poll before it left it: none ran
 * or waited on a runqueue (schedstat's three values unchanged), none came
 * or went. The writer then sleeps longer (agent_writer.c). */
static bool poll_quiet;
/* The last poll found that no thread was switched in since the poll before
 * (schedstat's runqueue wait and count of times switched in unchanged; the
 * run time may have grown) and none came or went: each thread stayed on its
 * CPU, or off it, or left it once. Its figures then say no more than the
 * samples do (the writer drains less often, agent_writer.c). Not "ran the
 * whole interval": a running thread's schedstat run time is brought up to
 * date only at scheduler ticks (4 ms here), so a thread on its CPU
 * throughout read 8.0 of 10.1 ms. */
static bool poll_steady;
static uint32_t writer_tid;
static struct opr_sched_thread *entries;
static uint32_t cpus_online, cpus_affinity, limit_milli;
/* read_cpus has run in this process or, for a fork child, in its parent:
 * a child's CPUs, affinity mask and cgroup are the parent's at the fork, so
 * it reads them again only at the next periodic read (every CPUS_EVERY
 * polls), not at its first poll (~10 files on a cgroup v1 machine). */
static bool cpus_read;
static unsigned polls_since_cpus;
#define CPUS_EVERY 100
/* accounting: threads seen with SIGTRAP blocked; the CPU time of those gone */
static uint64_t trap_blocked_threads, trap_blocked_gone_ns;
static _Atomic uint64_t threads_created;

/* "cpu" among a v1 line's comma-separated controllers ("cpu,cpuacct"):
 * not "cpuacct" or "cpuset" alone, whose lines would read the cpu
 * controller's files once more. */
static bool lists_cpu_controller(const char *list)
{
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 3 && strncmp(p, "cpu", 3) == 0)
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

/* cgroup v2: the smallest cpu.max of the process's cgroup and its parents;
 * v1: cfs quota/period of the cpu controller. 0: no limit found. */
static uint32_t read_cgroup_limit(void)
{
    char cg[4096];
    if (opr_read_small_file("/proc/self/cgroup", cg, sizeof cg) < 0)
        return 0;
    double best = 0;
    for (char *line = strtok(cg, "\n"); line; line = strtok(NULL, "\n")) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctrl = c1 + 1, *path = c2 + 1;
        char rel[2048];
        snprintf(rel, sizeof rel, "%s", path);
        for (;;) {
            char file[2600], text[128];
            double limit = 0;
            if (ctrl[0] == '\0') { /* v2 */
                snprintf(file, sizeof file, "/sys/fs/cgroup%s/cpu.max", strcmp(rel, "/") ? rel : "");
                long long quota, period;
                if (opr_read_small_file(file, text, sizeof text) > 0 && sscanf(text, "%lld %lld", &quota, &period) == 2 &&
                    quota > 0 && period > 0)
                    limit = (double)quota / (double)period;
            } else if (lists_cpu_controller(ctrl)) { /* v1 */
                const char *mounts[] = {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"};
                for (int m = 0; m < 2 && limit == 0; m++) {
                    char qt[128], pt[128];
                    snprintf(file, sizeof file, "%s%s/cpu.cfs_quota_us", mounts[m], strcmp(rel, "/") ? rel : "");
                    if (opr_read_small_file(file, qt, sizeof qt) <= 0)
                        continue;
                    snprintf(file, sizeof file, "%s%s/cpu.cfs_period_us", mounts[m], strcmp(rel, "/") ? rel : "");
                    if (opr_read_small_file(file, pt, sizeof pt) <= 0)
                        continue;
                    long long quota = atoll(qt), period = atoll(pt);
                    if (quota > 0 && period > 0)
                        limit = (double)quota / (double)period;
                }
            } else {
                break;
            }
            if (limit > 0 && (best == 0 || limit < best))
                best = limit;
            char *slash = strrchr(rel, '/');
            if (!slash || slash == rel)
                break;
            *slash = '\0';
        }
    }
    return best > 0 ? (uint32_t)(best * 1000.0 + 0.5) : 0;
}

static void read_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpus_online = n > 0 ? (uint32_t)n : 0;
    cpu_set_t set;
    cpus_affinity = sched_getaffinity(0, sizeof set, &set) == 0 ? (uint32_t)CPU_COUNT(&set) : 0;
    limit_milli = read_cgroup_limit();
}

/* From .../status: nonvoluntary context switches, and whether SIGTRAP is in
 * the thread's signal mask (SigBlk, hex; SIGTRAP is signal 5, bit 4). A
 * thread that blocks it takes no sample however long it runs: the report
 * says so instead of showing "lost 0" (issue 18, item 5). Reading the mask
 * here costs nothing more: the file is read anyway. */
static uint64_t read_status(struct tracked *t, bool check_mask)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/self/task/%u/status", t->tid);
    if (opr_read_small_file(path, buf, sizeof buf) < 0)
        return UINT64_MAX;
    const char *b = strstr(buf, "SigBlk:");
    uint64_t mask = b ? strtoull(b + 7, NULL, 16) : 0;
    /* Counted when seen blocked on two reads in a row (~250 ms apart): glibc
     * blocks every signal in a thread around pthread_create, and the agent
     * blocks SIGTRAP while it sets up a fork child; those moments are not the
     * workload's mask. */
    bool trap = check_mask && (mask & (1ull << (SIGTRAP - 1)));
    if (trap && t->trap_before && !t->trap_blocked) {
        t->trap_blocked = true;
        trap_blocked_threads++;
    }
    t->trap_before = trap;
    /* "Name:\t<comm>\n", first line: a name set after the thread's first
     * sample reaches the stream here, not only at the end (when a thread
     * that has exited can no longer be read) */
    if (strncmp(buf, "Name:\t", 6) == 0) {
        char name[16];
        size_t len = strcspn(buf + 6, "\n");
        if (len < sizeof name) {
            memcpy(name, buf + 6, len);
            name[len] = '\0';
            agent_writer_thread_name_seen(t->tid, name);
        }
    }
    const char *k = strstr(buf, "nonvoluntary_ctxt_switches:");
    return k ? strtoull(k + 27, NULL, 10) : UINT64_MAX;
}

static struct tracked *find_or_add(uint32_t tid)
{
    for (size_t i = 0; i < ntracked; i++)
        if (tracked[i].tid == tid)
            return &tracked[i];
    if (ntracked == MAX_THREADS)
        return NULL;
    if (!tracked && !(tracked = calloc(MAX_THREADS, sizeof *tracked)))
        return NULL;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%u/schedstat", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct tracked *t = &tracked[ntracked++];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    t->fd = fd;
    t->stat_fd = -1;
    /* Not the mask at first sight: a thread pthread_create has just made
     * runs with every signal blocked until it sets the creator's mask. */
    t->nivcsw = read_status(t, false);
    agent_tick_arm_new_thread(tid); /* --timer tick: its own timer */
    return t;
}

/* Drops threads that have exited (their last values were emitted already). */
static void forget_gone(void)
{
    size_t w = 0;
    for (size_t i = 0; i < ntracked; i++) {
        if (tracked[i].gen == gen && tracked[i].fd >= 0) {
            tracked[w++] = tracked[i];
        } else {
            if (tracked[i].fd >= 0)
                close(tracked[i].fd);
            if (tracked[i].stat_fd >= 0)
                close(tracked[i].stat_fd);
            if (tracked[i].trap_blocked)
                trap_blocked_gone_ns += tracked[i].run;
            agent_tick_forget(tracked[i].tid);
        }
    }
    ntracked = w;
}

/* One thread's schedstat (and status when status_now): marks it seen in
 * this poll, or gone when its files cannot be read. */
static void poll_thread(struct tracked *t, agent_emit_fn emit, uint64_t now, uint64_t interval_ns, bool status_now)
{
    char buf[128];
    ssize_t n = pread(t->fd, buf, sizeof buf - 1, 0);
    agent_writer_counts.schedstat_reads++;
    if (n <= 0) {
        poll_quiet = poll_steady = false;
        t->gen = 0; /* exited */
        return;
    }
    buf[n] = '\0';
    /* "run_ns wait_ns timeslices"; strtoull, not sscanf: this line is parsed
     * for every thread at every poll (sscanf was ~3 % of the writer's CPU) */
    unsigned long long v[3];
    const char *p = buf;
    for (int i = 0; i < 3; i++) {
        char *end;
        if (*p < '0' || *p > '9')
            return;
        v[i] = strtoull(p, &end, 10);
        p = *end == ' ' ? end + 1 : end;
    }
    unsigned long long run = v[0], wait = v[1], slices = v[2];
    bool known = t->gen + 1 == gen;
    if (!known || run != t->run || wait != t->wait || slices != t->slices)
        poll_quiet = false; /* new since the last poll, or it ran or waited */
    if (!known || wait != t->wait || slices != t->slices)
        poll_steady = false; /* new since the last poll, or switched in */
    /* ranks: a Python thread blocked for part of the interval (seen in the last poll) */
    if (t->gen + 1 == gen && run >= t->run && wait >= t->wait && slices >= t->slices)
        agent_offcpu_note(emit, now, interval_ns, t->tid, run - t->run, wait - t->wait, slices - t->slices, run,
                          &t->stat_fd);
    t->run = run, t->wait = wait, t->slices = slices;
    if (status_now) {
        uint64_t v = read_status(t, t->gen != 0); /* known since an earlier poll */
        if (v != UINT64_MAX)
            t->nivcsw = v;
    }
    t->gen = gen;
}

/* Every thread listed in /proc/self/task but the writer. False when the
 * directory cannot be read. */
static bool poll_listed_threads(agent_emit_fn emit, uint64_t now, uint64_t interval_ns, bool status_now)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return false;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        uint32_t tid = (uint32_t)strtoul(e->d_name, NULL, 10);
        if (tid == writer_tid && writer_tid)
            continue;
        struct tracked *t = find_or_add(tid);
        if (t)
            poll_thread(t, emit, now, interval_ns, status_now);
    }
    closedir(d);
    return true;
}

void agent_threads_poll(agent_emit_fn emit, bool final)
{
    uint64_t now = agent_now_ns();
    uint64_t every = ntracked > MANY_THREADS ? POLL_MANY_NS : POLL_NS;
    if (!final && last_poll_ns && now - last_poll_ns < every)
        return;
    if (!cpus_read || ++polls_since_cpus >= CPUS_EVERY) {
        read_cpus();
        cpus_read = true;
        polls_since_cpus = 0;
    }
    uint64_t interval_ns = last_poll_ns ? now - last_poll_ns : 0; /* ranks: off-CPU time */
    last_poll_ns = now;
    gen++;
    poll_quiet = poll_steady = interval_ns != 0; /* until a thread says otherwise (poll_thread) */
    bool status_now = final || gen % STATUS_EVERY == 1;

    /* The list of threads: listing /proc/self/task (getdents on a directory
     * of every thread) is the dearer part of a poll, so it is done only when
     * pthread_create was called since, with the status read, and at the end;
     * in between the open schedstat files of the threads known are re-read
     * (an exited thread's read fails). A thread made without pthread_create
     * (raw clone) is found at the next listing, ~250 ms later. */
    uint64_t created = atomic_load(&threads_created);
    if (status_now || created != created_at_listing || ntracked == 0) {
        created_at_listing = created;
        if (!poll_listed_threads(emit, now, interval_ns, status_now))
            return;
    } else {
        size_t known = ntracked;
        for (size_t i = 0; i < known; i++)
            poll_thread(&tracked[i], emit, now, interval_ns, false);
    }
    forget_gone();

    if (!entries && !(entries = malloc(MAX_THREADS * sizeof *entries)))
        return;
    uint32_t n = 0;
    for (size_t i = 0; i < ntracked; i++) {
        struct tracked *t = &tracked[i];
        entries[n++] = (struct opr_sched_thread){t->tid, 0, t->run, t->wait, t->slices,
                                                  t->nivcsw == UINT64_MAX ? 0 : t->nivcsw};
    }
    struct opr_sched_tick tick = {now, n, cpus_online, cpus_affinity, limit_milli};
    emit(OPR_REC_SCHED_TICK, &tick, sizeof tick, entries, n * sizeof *entries);
}

bool agent_threads_quiet(void)
{
    return poll_quiet && ntracked > 0;
}

bool agent_threads_steady(void)
{
    return poll_steady && ntracked > 0;
}

void agent_threads_trap_blocked(uint64_t *threads, uint64_t *cpu_ns)
{
    uint64_t ns = trap_blocked_gone_ns;
    for (size_t i = 0; i < ntracked; i++)
        if (tracked[i].trap_blocked)
            ns += tracked[i].run;
    *threads = trap_blocked_threads;
    *cpu_ns = ns;
}

/* The writer thread goes through our pthread_create too; it is not the
 * workload's and takes no sample. */
uint64_t agent_threads_started(void)
{
    uint64_t n = atomic_load(&threads_created);
    return 1 + (n > 0 ? n - 1 : 0);
}

/* Counted so that threads too short to take one sample are a number in the
 * report, not silence (issue 18, item 7). Only counted: the start routine is
 * the workload's own, unwrapped, so its stacks are unchanged. */
typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
__attribute__((visibility("default"))) int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                                                          void *(*start)(void *), void *arg)
{
    static pthread_create_fn real;
    if (!real)
        real = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (!real)
        return EAGAIN;
    int rc = real(thread, attr, start, arg);
    if (rc == 0)
        atomic_fetch_add_explicit(&threads_created, 1, memory_order_relaxed);
    return rc;
}

/* Set before the writer's creator goes on (agent_writer.c), so no poll
 * lists the writer: reading a non-leader thread's /proc/self/task/<tid>
 * files leaves proc dentries that cost whoever reaps the process ~2 ms of
 * kernel CPU in wait4 (measured: fork + a thread + one read of its status,
 * the parent's CPU per child 0.1 ms -> 1.8-2.7 ms; with the leader's own
 * files 0.1 ms). */
void agent_threads_set_writer(uint32_t tid) { writer_tid = tid; }

void agent_threads_atfork_child(void)
{
    for (size_t i = 0; i < ntracked; i++) {
        if (tracked[i].fd >= 0)
            close(tracked[i].fd);
        if (tracked[i].stat_fd >= 0)
            close(tracked[i].stat_fd);
    }
    ntracked = 0;
    last_poll_ns = 0;
    writer_tid = 0;
    gen = 0;
    trap_blocked_threads = trap_blocked_gone_ns = 0;
    atomic_store(&threads_created, 0);
    created_at_listing = 0;
    poll_quiet = poll_steady = false;
    agent_tstate_reset(); /* ranks: the parent's threads are not ours */
}
