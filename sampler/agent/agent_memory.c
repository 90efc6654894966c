/*
 * sampler/agent/agent_memory.c — memory over time (docs/format.md "Memory"):
 * the writer thread reads this process's resident set and page-fault counts
 * once per writer period and writes a MEM_TICK record when they moved, and
 * the cgroup memory limit once per stream (MEM_LIMIT).
 *
 * Why every writer period (~10 ms): the writer wakes then anyway, so the
 * reading costs no extra wake-up and no thread; statm (one short line) and
 * getrusage are a few microseconds together, well under 0.1 % of a core at
 * 100 readings a second; and 10 ms is ten samples of a busy thread at the
 * default 1 kHz, fine enough to charge growth to what ran in between
 * (analyze/memory.c). A record is written only when the RSS, the peak or the
 * major faults changed, so an idle or steady process costs 64 bytes a
 * change, not 6.4 KB a second; since_ns keeps the growth's interval exact.
 * statm stays open and is re-read with pread, as the threads' schedstat
 * files are: opening /proc/self/statm each period cost ~6 us of the
 * writer's ~170 us per wake-up on a PyTorch process, the pread ~1 us.
 *
 * Not signal-handler code: runs on the writer thread (or at shutdown).
 */
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sampler/agent/agent.h"
#include "sampler/agent/unwind_table.h"

static struct {
    bool have;                /* a MEM_TICK was written in this image */
    bool limit_written;
    struct opr_mem_tick last; /* the last one written */
    uint64_t last_poll_ns;    /* the last reading, written or not */
    bool moved; /* the last poll saw the RSS move by more than MEM_STEADY_BYTES, a new peak or a major fault */
} mem;
/* The cgroup memory limit as last read, with its path: a fork child's
 * cgroup is its parent's at the fork, so a child writes the parent's
 * reading (walking the cgroup tree is 3-6 files) and only an exec'ed
 * image reads it anew. Apart from mem, which a fork child clears. */
static struct {
    bool have;
    struct opr_mem_limit l;
    char path[1024];
} limit_read;
/* /proc/self/statm, open (-1: not yet). Apart from mem, which a fork child
 * clears: the child must close the parent's file, not forget it. */
static int statm_fd = -1;
/* RSS that moves by at most this from one poll to the next is steady for
 * the writer's period (agent_writer.c): torch_train.py's loop moves it by
 * -1.1 to +1.0 MiB every 10-40 ms (its allocator's 256 KiB chunks), with
 * no new peak and no major fault. */
#define MEM_STEADY_BYTES (1u << 20)

/* This process's statm; the file is opened once and read again from
 * offset 0 (each read of a /proc file renders it afresh). */
static int read_statm(struct opr_mem_tick *t)
{
    if (statm_fd < 0)
        statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (statm_fd < 0)
        return opr_memory_read_statm("/proc/self", t);
    char text[256];
    ssize_t n = pread(statm_fd, text, sizeof text - 1, 0);
    if (n > 0) {
        text[n] = '\0';
        if (opr_memory_parse_statm(text, t) == 0)
            return 0;
    }
    /* not statm's text: the workload closed our descriptor (and the number
     * may now be another file of its own); read the file by name this time */
    statm_fd = -1;
    return opr_memory_read_statm("/proc/self", t);
}

/* Writer: one reading; final forces a record (the totals at exit). */
void agent_memory_poll(agent_emit_fn emit, bool final)
{
    if (!mem.limit_written) {
        if (!limit_read.have) {
            limit_read.l = (struct opr_mem_limit){0};
            opr_memory_read_limit("/proc/self", &limit_read.l, limit_read.path, sizeof limit_read.path);
            limit_read.l.path_len = (uint32_t)strlen(limit_read.path);
            limit_read.have = true;
        }
        struct opr_mem_limit l = limit_read.l;
        l.time_ns = agent_now_ns();
        emit(OPR_REC_MEM_LIMIT, &l, sizeof l, limit_read.path, l.path_len);
        mem.limit_written = true;
    }
    struct opr_mem_tick t = {.time_ns = agent_now_ns()};
    mem.moved = true;
    if (read_statm(&t) != 0)
        return;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        t.minflt = (uint64_t)ru.ru_minflt;
        t.majflt = (uint64_t)ru.ru_majflt;
        t.hwm_bytes = (uint64_t)ru.ru_maxrss * 1024; /* kilobytes on Linux */
    }
    /* What the agent itself holds resident: the report leaves it out of
     * the workload's RSS and growth (the ring fills ~12-14 MiB as the run
     * goes, and was charged to whatever code ran meanwhile). */
    t.agent_bytes = agent_queue_resident_bytes() + unwind_tables_mapped_bytes();
    t.agent_file_bytes = unwind_tables_file_bytes();
    if (t.agent_bytes > t.rss_bytes)
        t.agent_bytes = t.rss_bytes;
    if (t.agent_file_bytes > t.agent_bytes)
        t.agent_file_bytes = t.agent_bytes;
    t.since_ns = mem.last_poll_ns;
    mem.last_poll_ns = t.time_ns;
    bool changed = !mem.have || final || t.rss_bytes != mem.last.rss_bytes || t.hwm_bytes != mem.last.hwm_bytes ||
                   t.majflt != mem.last.majflt;
    uint64_t drss =
        t.rss_bytes > mem.last.rss_bytes ? t.rss_bytes - mem.last.rss_bytes : mem.last.rss_bytes - t.rss_bytes;
    mem.moved =
        !mem.have || drss > MEM_STEADY_BYTES || t.hwm_bytes != mem.last.hwm_bytes || t.majflt != mem.last.majflt;
    if (!changed)
        return;
    emit(OPR_REC_MEM_TICK, &t, sizeof t, NULL, 0);
    mem.last = t;
    mem.have = true;
}

bool agent_memory_moved(void)
{
    return mem.moved;
}

/* Fork child: its stream starts afresh (a baseline reading, its own limit). */
void agent_memory_atfork_child(void)
{
    memset(&mem, 0, sizeof mem);
    if (statm_fd >= 0) /* opened as the parent's /proc/self: its statm, not ours */
        close(statm_fd);
    statm_fd = -1;
}
