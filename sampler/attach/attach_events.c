/*
 * sampler/attach/attach_events.c — the perf_event side of attach mode: one sampling
 * event per (thread, CPU) of the target, one ring buffer per CPU, records of
 * all rings merged by time.
 *
 * Why this shape (design.md, "Out-of-process sampling the perf way"): an event
 * on a task with cpu=-1 cannot be mmap'ed when it inherits, so every event is
 * bound to a CPU; rings of different CPUs cannot be joined, so each CPU has
 * one ring (its first event's) and the other events of that CPU are
 * redirected into it with PERF_EVENT_IOC_SET_OUTPUT; the reader merges the
 * CPUs by timestamp. inherit=1 makes the kernel clone the events into
 * threads and processes the target creates later, so only threads that
 * existed at attach time are opened one by one (with a rescan for the ones
 * created while we were listing).
 *
 * Records carry CLOCK_MONOTONIC timestamps (use_clockid), the clock of the
 * raw format.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "sampler/attach/attach_internal.h"

struct ring {
    int fd; /* the CPU's first event; the others write here */
    struct perf_event_mmap_page *meta;
    uint8_t *data;
    size_t data_size; /* power of two */
    size_t map_size;
};

struct attach_events {
    pid_t pid;
    struct perf_event_attr attr;
    int ncpus;
    int *cpu_ids; /* online CPU numbers */
    struct ring *rings;
    int *fds;
    size_t nfds, fds_cap;
    uint32_t *tids; /* threads with events */
    size_t ntids, tids_cap;
    /* One drain's records, copied out of the rings, then sorted by time. */
    uint8_t *batch;
    size_t batch_len, batch_cap;
    struct batch_ref { uint64_t time; size_t off; uint32_t size; uint32_t seq; uint32_t sample_tid; bool newer; } *refs;
    size_t nrefs, refs_cap;
    uint32_t *seen_tids; /* mark_newer's scratch */
    size_t seen_cap;
};

static long perf_event_open(struct perf_event_attr *a, pid_t pid, int cpu, int group, unsigned long flags)
{
    return syscall(SYS_perf_event_open, a, pid, cpu, group, flags);
}

static int online_cpus(int **out)
{
    long n = sysconf(_SC_NPROCESSORS_CONF);
    if (n < 1)
        n = 1;
    int *ids = calloc((size_t)n, sizeof *ids);
    if (!ids)
        return -1;
    int count = 0;
    FILE *f = fopen("/sys/devices/system/cpu/online", "re");
    if (f) {
        /* "0-1,4,6-7" */
        int a, b;
        char sep;
        while (fscanf(f, "%d", &a) == 1) {
            b = a;
            if ((sep = (char)fgetc(f)) == '-') {
                if (fscanf(f, "%d", &b) != 1)
                    break;
                sep = (char)fgetc(f);
            }
            for (int c = a; c <= b && count < n; c++)
                ids[count++] = c;
            if (sep != ',')
                break;
        }
        fclose(f);
    }
    if (count == 0)
        for (count = 0; count < n; count++)
            ids[count] = count;
    *out = ids;
    return count;
}

static bool have_tid(const struct attach_events *ev, uint32_t tid)
{
    for (size_t i = 0; i < ev->ntids; i++)
        if (ev->tids[i] == tid)
            return true;
    return false;
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * elem);
    if (q)
        *cap = c;
    return q;
}

/* Maps the ring of a CPU's first event: the largest data area the kernel
 * grants (perf_event_mlock_kb is 516 KB per CPU for unprivileged users). */
static int map_ring(struct ring *r, int fd)
{
    long page = sysconf(_SC_PAGESIZE);
    for (size_t data = 4u << 20; data >= 64u << 10; data /= 2) {
        size_t len = (size_t)page + data;
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            continue;
        r->fd = fd;
        r->meta = m;
        r->data = (uint8_t *)m + page;
        r->data_size = data;
        r->map_size = len;
        return 0;
    }
    return -1;
}

/* Opens the events of one thread on every CPU. 1 when opened, 0 when the
 * thread is gone, -1 (errno) on a refusal. */
static int open_thread(struct attach_events *ev, uint32_t tid)
{
    int opened = 0;
    for (int i = 0; i < ev->ncpus; i++) {
        int fd = (int)perf_event_open(&ev->attr, (pid_t)tid, ev->cpu_ids[i], -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            if (errno == ESRCH)
                return 0; /* exited meanwhile */
            return -1;
        }
        struct ring *r = &ev->rings[i];
        if (r->fd < 0) {
            if (map_ring(r, fd) != 0) {
                int e = errno;
                close(fd);
                errno = e;
                return -1;
            }
        } else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r->fd) != 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        ev->fds = grow(ev->fds, &ev->fds_cap, ev->nfds + 1, sizeof *ev->fds);
        if (!ev->fds)
            return -1;
        ev->fds[ev->nfds++] = fd;
        opened = 1;
    }
    if (opened) {
        ev->tids = grow(ev->tids, &ev->tids_cap, ev->ntids + 1, sizeof *ev->tids);
        if (!ev->tids)
            return -1;
        ev->tids[ev->ntids++] = tid;
    }
    return opened;
}

/* One pass over /proc/pid/task. Returns threads added, or -1 (errno). */
static int scan_threads(struct attach_events *ev)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)ev->pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int added = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        unsigned long tid = strtoul(e->d_name, &end, 10);
        if (*end || tid == 0 || have_tid(ev, (uint32_t)tid))
            continue;
        int r = open_thread(ev, (uint32_t)tid);
        if (r < 0) {
            int err = errno;
            closedir(d);
            errno = err;
            return -1;
        }
        added += r;
    }
    closedir(d);
    return added;
}

int attach_events_rescan(struct attach_events *ev)
{
    int total = 0, r;
    /* Until a pass finds nothing new: a thread created between our listing
     * and the opening of its creator's events would otherwise be missed. */
    while ((r = scan_threads(ev)) > 0)
        total += r;
    return r < 0 && total == 0 ? -1 : total;
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void describe_refusal(int err, pid_t pid, char *msg, size_t len)
{
    int paranoid = pmu_read_paranoid();
    if (err == EACCES || err == EPERM)
        snprintf(msg, len,
                 "the kernel refused to sample process %d (%s; kernel.perf_event_paranoid=%d): another user's "
                 "process needs root or CAP_PERFMON%s",
                 (int)pid, strerror(err), paranoid,
                 /* 2 already allows your own processes: advise lowering only above it */
                 paranoid > 2 ? "; for your own processes set `sudo sysctl kernel.perf_event_paranoid=2`"
                              : "; this setting already allows your own processes, so the process is another "
                                "user's or not dumpable (setuid, prctl PR_SET_DUMPABLE)");
    else if (err == EMFILE || err == ENFILE)
        snprintf(msg, len, "too many open files for one event per thread and CPU of process %d: raise `ulimit -n`",
                 (int)pid);
    else if (err == ENOMEM)
        snprintf(msg, len, "the kernel refused the ring buffers (%s): raise `ulimit -l` or "
                           "kernel.perf_event_mlock_kb", strerror(err));
    else
        snprintf(msg, len, "perf_event_open on process %d failed: %s", (int)pid, strerror(err));
}

int attach_events_open(struct attach_events **out, pid_t pid, uint64_t period_ns, enum call_graph_mode mode,
                       unsigned stack_bytes, char *err, size_t errlen)
{
    struct attach_events *ev = calloc(1, sizeof *ev);
    if (!ev) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    ev->pid = pid;
    ev->ncpus = online_cpus(&ev->cpu_ids);
    ev->rings = calloc((size_t)(ev->ncpus > 0 ? ev->ncpus : 1), sizeof *ev->rings);
    if (ev->ncpus <= 0 || !ev->rings) {
        snprintf(err, errlen, "out of memory");
        attach_events_close(ev);
        return -1;
    }
    for (int i = 0; i < ev->ncpus; i++)
        ev->rings[i].fd = -1;
    raise_fd_limit();

    struct perf_event_attr *a = &ev->attr;
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->type = PERF_TYPE_SOFTWARE;
    a->config = PERF_COUNT_SW_TASK_CLOCK;
    a->sample_period = period_ns;
    a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
    if (mode == CALL_GRAPH_FP) {
        a->sample_type |= PERF_SAMPLE_CALLCHAIN;
        a->exclude_callchain_kernel = 1;
    } else if (mode == CALL_GRAPH_DWARF) {
        a->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
        a->sample_regs_user = ATTACH_REGS_MASK;
        a->sample_stack_user = stack_bytes;
    }
    a->disabled = 1;
    a->inherit = 1;
    a->exclude_kernel = 1;
    a->exclude_hv = 1;
    a->comm = 1;
    a->comm_exec = 1;
    a->task = 1;
    a->sample_id_all = 1;
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC;
    a->context_switch = 1; /* SWITCH records: did the thread run between a sample and its Python read */
    a->wakeup_events = 1; /* wake the reader per sample: Python frames are read right after */

    if (attach_events_rescan(ev) < 0 || ev->ntids == 0) {
        int e = errno;
        if (ev->ntids == 0 && e == 0)
            e = ESRCH;
        if (e == ESRCH || e == ENOENT)
            snprintf(err, errlen, "process %d exited while opprof was attaching", (int)pid);
        else
            describe_refusal(e, pid, err, errlen);
        attach_events_close(ev);
        return -1;
    }
    *out = ev;
    return 0;
}

void attach_events_enable(struct attach_events *ev, bool on)
{
    /* ENABLE/DISABLE act on an event and the copies inherit made of it. */
    for (size_t i = 0; i < ev->nfds; i++)
        ioctl(ev->fds[i], on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

int attach_events_wait(struct attach_events *ev, int timeout_ms, int extra_fd)
{
    struct pollfd pfd[65];
    int n = 0;
    for (int i = 0; i < ev->ncpus && n < 64; i++)
        if (ev->rings[i].fd >= 0)
            pfd[n++] = (struct pollfd){ev->rings[i].fd, POLLIN, 0};
    int extra = -1;
    if (extra_fd >= 0) {
        extra = n;
        pfd[n++] = (struct pollfd){extra_fd, POLLIN, 0};
    }
    if (poll(pfd, (nfds_t)n, timeout_ms) <= 0)
        return 0;
    return extra >= 0 && (pfd[extra].revents & (POLLIN | POLLHUP)) ? 1 : 0;
}

/* Copies one ring's pending records into the batch and frees them in the ring. */
static void collect_ring(struct attach_events *ev, struct ring *r, uint32_t *seq)
{
    uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = r->meta->data_tail;
    uint64_t mask = r->data_size - 1;
    while (tail + sizeof(struct perf_event_header) <= head) {
        struct perf_event_header h;
        for (size_t i = 0; i < sizeof h; i++)
            ((uint8_t *)&h)[i] = r->data[(tail + i) & mask];
        if (h.size < sizeof h || tail + h.size > head)
            break;
        ev->batch = grow(ev->batch, &ev->batch_cap, ev->batch_len + h.size, 1);
        ev->refs = grow(ev->refs, &ev->refs_cap, ev->nrefs + 1, sizeof *ev->refs);
        if (!ev->batch || !ev->refs)
            break;
        uint8_t *dst = ev->batch + ev->batch_len;
        uint64_t off = tail & mask;
        size_t first = h.size <= r->data_size - off ? h.size : r->data_size - off;
        memcpy(dst, r->data + off, first);
        memcpy(dst + first, r->data, h.size - first);
        /* Every record we asked for carries its time: samples at byte 16
         * (after ip, pid/tid); others in the sample_id trailer, last. */
        uint64_t t = 0;
        uint32_t sample_tid = 0;
        if (h.type == PERF_RECORD_SAMPLE && h.size >= 32) {
            memcpy(&t, dst + 8 + 16, 8);
            memcpy(&sample_tid, dst + 8 + 8 + 4, 4);
        } else if (h.size >= 16) {
            memcpy(&t, dst + h.size - 8, 8);
        }
        ev->refs[ev->nrefs++] = (struct batch_ref){t, ev->batch_len, h.size, (*seq)++, sample_tid, false};
        ev->batch_len += h.size;
        tail += h.size;
    }
    __atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
}

static int compare_refs(const void *a, const void *b)
{
    const struct batch_ref *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Flags the samples of the (time-sorted) batch that have a later sample of
 * the same thread in it: that thread ran a whole period after them before
 * anything of this batch could be read (attach_python_capture). */
static void mark_newer(struct attach_events *ev)
{
    size_t nseen = 0;
    for (size_t i = ev->nrefs; i-- > 0;) {
        uint32_t tid = ev->refs[i].sample_tid;
        if (!tid)
            continue;
        size_t k = 0;
        while (k < nseen && ev->seen_tids[k] != tid)
            k++;
        ev->refs[i].newer = k < nseen;
        if (k == nseen) {
            if (nseen == ev->seen_cap) {
                size_t cap = ev->seen_cap ? ev->seen_cap * 2 : 64;
                uint32_t *n = realloc(ev->seen_tids, cap * sizeof *n);
                if (!n)
                    return; /* unflagged: read as before */
                ev->seen_tids = n, ev->seen_cap = cap;
            }
            ev->seen_tids[nseen++] = tid;
        }
    }
}

/* Decodes a PERF_RECORD_SAMPLE laid out as attr.sample_type says. */
static bool decode_sample(const struct attach_events *ev, const uint8_t *p, const uint8_t *end,
                          struct attach_event *e)
{
    uint64_t st = ev->attr.sample_type;
    uint32_t ids[2];
#define TAKE(dst, n)                   \
    do {                               \
        if (p + (n) > end)             \
            return false;              \
        memcpy((dst), p, (n));         \
        p += (n);                      \
    } while (0)
    TAKE(&e->ip, 8);
    TAKE(ids, 8);
    e->pid = ids[0];
    e->tid = ids[1];
    TAKE(&e->time_ns, 8);
    if (st & PERF_SAMPLE_CALLCHAIN) {
        uint64_t nr;
        TAKE(&nr, 8);
        if (nr > 4096 || p + nr * 8 > end)
            return false;
        e->callchain = (const uint64_t *)p;
        e->ncallchain = (uint32_t)nr;
        p += nr * 8;
    }
    if (st & PERF_SAMPLE_REGS_USER) {
        uint64_t abi;
        TAKE(&abi, 8);
        if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
            if (p + ATTACH_NREGS * 8 > end)
                return false;
            e->regs = (const uint64_t *)p;
            p += ATTACH_NREGS * 8;
        }
    }
    if (st & PERF_SAMPLE_STACK_USER) {
        uint64_t size;
        TAKE(&size, 8);
        if (size) {
            if (p + size + 8 > end)
                return false;
            const uint8_t *data = p;
            p += size;
            uint64_t dyn;
            TAKE(&dyn, 8);
            e->stack = data;
            e->stack_len = dyn < size ? dyn : size;
        }
    }
#undef TAKE
    return true;
}

void attach_events_drain(struct attach_events *ev, void (*fn)(const struct attach_event *, void *), void *arg)
{
    ev->batch_len = 0;
    ev->nrefs = 0;
    uint32_t seq = 0;
    for (int i = 0; i < ev->ncpus; i++)
        if (ev->rings[i].fd >= 0)
            collect_ring(ev, &ev->rings[i], &seq);
    if (ev->nrefs > 1)
        qsort(ev->refs, ev->nrefs, sizeof ev->refs[0], compare_refs);
    mark_newer(ev);
    for (size_t i = 0; i < ev->nrefs; i++) {
        const uint8_t *rec = ev->batch + ev->refs[i].off;
        const uint8_t *end = rec + ev->refs[i].size;
        struct perf_event_header h;
        memcpy(&h, rec, sizeof h);
        const uint8_t *body = rec + sizeof h;
        struct attach_event e;
        memset(&e, 0, sizeof e);
        e.time_ns = ev->refs[i].time;
        uint32_t u[4];
        switch (h.type) {
        case PERF_RECORD_SAMPLE:
            e.kind = ATTACH_EV_SAMPLE;
            e.newer_in_batch = ev->refs[i].newer;
            if (!decode_sample(ev, body, end, &e))
                continue;
            break;
        case PERF_RECORD_COMM:
            if (end - body < 8 + 16)
                continue;
            e.kind = ATTACH_EV_COMM;
            memcpy(u, body, 8);
            e.pid = u[0];
            e.tid = u[1];
            e.comm_exec = (h.misc & PERF_RECORD_MISC_COMM_EXEC) != 0;
            memcpy(e.comm, body + 8, sizeof e.comm - 1);
            e.comm[sizeof e.comm - 1] = '\0';
            break;
        case PERF_RECORD_FORK:
        case PERF_RECORD_EXIT:
            if (end - body < 24)
                continue;
            e.kind = h.type == PERF_RECORD_FORK ? ATTACH_EV_FORK : ATTACH_EV_EXIT;
            memcpy(u, body, 16);
            e.pid = u[0];
            e.ppid = u[1];
            e.tid = u[2];
            e.ptid = u[3];
            memcpy(&e.time_ns, body + 16, 8);
            break;
        case PERF_RECORD_SWITCH:
            if (end - body < 16)
                continue;
            e.kind = ATTACH_EV_SWITCH;
            memcpy(u, body, 8); /* sample_id: pid, tid, time */
            e.pid = u[0];
            e.tid = u[1];
            e.switch_out = (h.misc & PERF_RECORD_MISC_SWITCH_OUT) != 0;
            break;
        case PERF_RECORD_LOST:
            if (end - body < 16)
                continue;
            e.kind = ATTACH_EV_LOST;
            memcpy(&e.lost, body + 8, 8);
            if (end - body >= 16 + 16) {
                memcpy(u, end - 16, 8);
                e.pid = u[0];
                e.tid = u[1];
            }
            break;
        default:
            continue; /* throttling and friends: nothing to write */
        }
        fn(&e, arg);
    }
}

unsigned attach_events_threads(const struct attach_events *ev) { return (unsigned)ev->ntids; }
unsigned attach_events_cpus(const struct attach_events *ev) { return (unsigned)ev->ncpus; }

size_t attach_events_ring_bytes(const struct attach_events *ev)
{
    size_t total = 0;
    for (int i = 0; i < ev->ncpus; i++)
        total += ev->rings[i].fd >= 0 ? ev->rings[i].data_size : 0;
    return total;
}

void attach_events_close(struct attach_events *ev)
{
    if (!ev)
        return;
    /* Closing an event detaches it (and its inherited copies) from the
     * target: nothing is left behind in the process. */
    for (size_t i = 0; i < ev->nfds; i++)
        close(ev->fds[i]);
    for (int i = 0; ev->rings && i < ev->ncpus; i++)
        if (ev->rings[i].fd >= 0)
            munmap(ev->rings[i].meta, ev->rings[i].map_size);
    free(ev->fds);
    free(ev->tids);
    free(ev->rings);
    free(ev->cpu_ids);
    free(ev->batch);
    free(ev->refs);
    free(ev->seen_tids);
    free(ev);
}
