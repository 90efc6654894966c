/*
 * sampler/agent/agent_counters.c — per-thread counters read at every sample, so
 * counts (page faults, cycles, instructions, cache misses) are attributed to
 * the sampled stack the way time is.
 *
 * SIGNAL-HANDLER CODE: agent_counters_enter/fill/leave run inside the SIGTRAP
 * handler of the sampled thread. No malloc, no locks, no stdio: only
 * perf_event_open, read and close (async-signal-safe system calls), atomics on
 * a static table, and errno saved and restored.
 *
 * Why per thread and opened lazily: the sampling timer is inherited by every
 * thread, but a counting group with inherit=1 cannot be read per thread (the
 * read sums the children). So each thread opens its own groups (pid=0,
 * cpu=-1, inherit=0, read_format GROUP|TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING)
 * from its first sample's handler, without any hook on thread creation.
 * Counting starts there: what a thread did before its first sample is not
 * attributed (at most one period).
 *
 * Why two reads per sample: the values are read at handler entry (the delta
 * since the previous sample belongs to the sampled stack) and again at exit
 * (the next baseline), so the handler's own work (unwinding, the queue pages
 * it touches for the first time) is never counted against the workload.
 *
 * Slots: a fixed table, claimed by CAS, pointed to by an initial-exec TLS
 * variable of its thread. The writer thread frees slots of threads that
 * exited (their group leader polls POLLHUP) and counts the threads that got
 * no counters (table full, EMFILE, ...) for a NOTE.
 */
#include <linux/perf_event.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sampler/agent/agent.h"

#define COUNTER_THREAD_SLOTS 1024

enum { SLOT_FREE = 0, SLOT_ACTIVE = 1 };

struct counter_spec {
    struct perf_event_attr attr;
    uint32_t role, group, flags;
    char name[128];
};

struct counter_thread {
    _Atomic int state;
    _Atomic pid_t tid;                  /* the owner (0: none yet), for the writer's liveness check */
    int fds[OPR_MAX_COUNTERS];          /* -1: not open */
    uint64_t base[OPR_MAX_COUNTERS][3]; /* values at the end of the previous handler */
};

static struct counter_spec specs[OPR_MAX_COUNTERS];
static unsigned nspecs;
/* Groups are contiguous runs of specs: group g is [group_first[g], group_first[g] + group_len[g]). */
static unsigned group_first[OPR_MAX_COUNTERS], group_len[OPR_MAX_COUNTERS], ngroups;

static struct counter_thread table[COUNTER_THREAD_SLOTS];
static __thread struct counter_thread *my_counters __attribute__((tls_model("initial-exec")));
static __thread int my_counters_failed __attribute__((tls_model("initial-exec")));
static _Atomic uint64_t threads_without_counters;
static _Atomic int first_open_errno;
static _Atomic uint64_t threads_with_counters;

/* "type:config:config1:role:group:flags:name;..." as record_counters.c writes it. */
void agent_counters_init(void)
{
    nspecs = ngroups = 0;
    const char *env = getenv(OPR_ENV_COUNTERS);
    if (!env)
        return; /* nothing reads the table (nspecs 0): its 240 KB stay untouched, no page faults at start */
    for (size_t i = 0; i < COUNTER_THREAD_SLOTS; i++)
        for (unsigned c = 0; c < OPR_MAX_COUNTERS; c++)
            table[i].fds[c] = -1;
    const char *p = env;
    while (*p && nspecs < OPR_MAX_COUNTERS) {
        unsigned type, role, group, flags;
        unsigned long long config, config1;
        int used = 0;
        if (sscanf(p, "%u:%llx:%llx:%u:%u:%u:%n", &type, &config, &config1, &role, &group, &flags, &used) != 6 ||
            used == 0)
            break;
        p += used;
        size_t len = strcspn(p, ";");
        struct counter_spec *s = &specs[nspecs];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, "%.*s", (int)len, p);
        p += len;
        if (*p == ';')
            p++;
        s->attr.size = sizeof s->attr;
        s->attr.type = type;
        s->attr.config = config;
        s->attr.config1 = config1;
        s->attr.exclude_kernel = (flags & OPR_COUNTER_USER_ONLY) != 0;
        s->attr.exclude_hv = s->attr.exclude_kernel;
        s->attr.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
        s->role = role;
        s->group = group;
        s->flags = flags;
        /* A new group starts where the group number changes. */
        if (nspecs == 0 || specs[nspecs - 1].group != group) {
            group_first[ngroups] = nspecs;
            group_len[ngroups] = 0;
            ngroups++;
        }
        group_len[ngroups - 1]++;
        nspecs++;
    }
}

/* ---- handler side ------------------------------------------------------------ */

static void close_thread_fds(struct counter_thread *t)
{
    atomic_store(&t->tid, 0);
    for (unsigned c = 0; c < OPR_MAX_COUNTERS; c++) {
        if (t->fds[c] >= 0)
            close(t->fds[c]);
        t->fds[c] = -1;
    }
}

/* Reads every group of t into now. False when a read failed. */
static bool read_groups(const struct counter_thread *t, uint64_t (*now)[3])
{
    for (unsigned g = 0; g < ngroups; g++) {
        uint64_t buf[3 + OPR_MAX_COUNTERS]; /* nr, time_enabled, time_running, values[nr] */
        unsigned first = group_first[g], len = group_len[g];
        ssize_t want = (ssize_t)((3 + len) * sizeof buf[0]);
        if (read(t->fds[first], buf, sizeof buf) < want || buf[0] != len)
            return false;
        for (unsigned k = 0; k < len; k++) {
            now[first + k][0] = buf[3 + k];
            now[first + k][1] = buf[1];
            now[first + k][2] = buf[2];
        }
    }
    return true;
}

/* Claims a slot and opens this thread's groups; NULL (counted once per
 * thread) when it cannot. */
static struct counter_thread *open_for_this_thread(void)
{
    struct counter_thread *t = NULL;
    for (size_t i = 0; i < COUNTER_THREAD_SLOTS && !t; i++) {
        int expected = SLOT_FREE;
        if (atomic_load_explicit(&table[i].state, memory_order_relaxed) == SLOT_FREE &&
            atomic_compare_exchange_strong(&table[i].state, &expected, SLOT_ACTIVE))
            t = &table[i];
    }
    int err = EMFILE;
    if (t) {
        atomic_store(&t->tid, (pid_t)syscall(SYS_gettid));
        bool ok = true;
        for (unsigned g = 0; g < ngroups && ok; g++) {
            int leader = -1;
            for (unsigned k = 0; k < group_len[g] && ok; k++) {
                unsigned c = group_first[g] + k;
                struct perf_event_attr a = specs[c].attr;
                int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, leader, PERF_FLAG_FD_CLOEXEC);
                if (fd < 0) {
                    err = errno;
                    ok = false;
                    break;
                }
                t->fds[c] = fd;
                if (k == 0)
                    leader = fd;
            }
        }
        if (ok && read_groups(t, t->base))
            return t;
        if (ok)
            err = EIO;
        close_thread_fds(t);
        atomic_store_explicit(&t->state, SLOT_FREE, memory_order_release);
    }
    int zero = 0;
    atomic_compare_exchange_strong(&first_open_errno, &zero, err);
    atomic_fetch_add_explicit(&threads_without_counters, 1, memory_order_relaxed);
    return NULL;
}

void agent_counters_enter(struct agent_counter_snapshot *snap)
{
    snap->valid = false;
    if (nspecs == 0 || my_counters_failed)
        return;
    int saved = errno;
    if (!my_counters) {
        /* First sample of this thread: counting starts now; no delta yet. */
        my_counters = open_for_this_thread();
        if (!my_counters)
            my_counters_failed = 1;
        else
            atomic_fetch_add_explicit(&threads_with_counters, 1, memory_order_relaxed);
        errno = saved;
        return;
    }
    snap->valid = read_groups(my_counters, snap->now);
    errno = saved;
}

void agent_counters_fill(struct agent_slot *slot, const struct agent_counter_snapshot *snap)
{
    slot->nctr = 0;
    if (!snap->valid || !my_counters)
        return;
    for (unsigned c = 0; c < nspecs; c++)
        for (unsigned k = 0; k < 3; k++) {
            slot->ctr[c][k] = opr_counter_delta(snap->now[c][k], my_counters->base[c][k]);
        }
    slot->nctr = nspecs;
}

void agent_counters_leave(void)
{
    if (!my_counters)
        return;
    int saved = errno;
    uint64_t now[OPR_MAX_COUNTERS][3];
    if (read_groups(my_counters, now))
        memcpy(my_counters->base, now, sizeof now);
    errno = saved;
}

/* ---- writer side -------------------------------------------------------------- */

void agent_counters_write_desc(agent_emit_fn emit)
{
    for (unsigned c = 0; c < nspecs; c++) {
        const struct counter_spec *s = &specs[c];
        struct opr_counter_desc d = {c, s->role, s->attr.type, s->group, s->attr.config, s->flags,
                                     (uint32_t)strlen(s->name)};
        emit(OPR_REC_COUNTER_DESC, &d, sizeof d, s->name, d.name_len);
    }
}

void agent_counters_reap(agent_emit_fn emit, bool final)
{
    if (nspecs == 0)
        return;
    for (size_t i = 0; i < COUNTER_THREAD_SLOTS; i++) {
        struct counter_thread *t = &table[i];
        if (atomic_load_explicit(&t->state, memory_order_acquire) != SLOT_ACTIVE || t->fds[0] < 0 ||
            atomic_load(&t->tid) <= 0)
            continue;
        /* A thread that no longer exists can never run the handler again, so
         * its slot is free. (poll's POLLHUP cannot tell: a counting event
         * without a ring buffer always reports it.) A tid reused by a new
         * thread only delays the reaping: the new thread has its own slot. */
        if (syscall(SYS_tgkill, getpid(), t->tid, 0) != 0 && errno == ESRCH) {
            close_thread_fds(t);
            atomic_store_explicit(&t->state, SLOT_FREE, memory_order_release);
        }
    }
    uint64_t missing = atomic_load(&threads_without_counters);
    if (final && missing) {
        char text[256];
        int err = atomic_load(&first_open_errno);
        snprintf(text, sizeof text, "counters unavailable for %llu of %llu threads (%s): their samples have no "
                 "counter values", (unsigned long long)missing,
                 (unsigned long long)(missing + atomic_load(&threads_with_counters)),
                 err == EMFILE ? "out of file descriptors or of counter slots" : strerror(err));
        struct opr_note n = {agent_now_ns(), (uint32_t)strlen(text), 0};
        emit(OPR_REC_NOTE, &n, sizeof n, text, n.text_len);
    }
}

/* The child's only thread is the one that forked; the table holds the
 * parent's threads' events (counting the parent): close our copies and start
 * over, so the child's threads open their own on their next sample. */
void agent_counters_atfork_child(void)
{
    if (nspecs == 0)
        return;
    for (size_t i = 0; i < COUNTER_THREAD_SLOTS; i++) {
        close_thread_fds(&table[i]);
        atomic_store(&table[i].state, SLOT_FREE);
    }
    my_counters = NULL;
    my_counters_failed = 0;
    atomic_store(&threads_without_counters, 0);
    atomic_store(&threads_with_counters, 0);
    atomic_store(&first_open_errno, 0);
}
