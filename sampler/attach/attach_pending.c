/*
 * sampler/attach/attach_pending.c — which attached samples may keep the Python
 * frames read after them.
 *
 * From outside, a sample's Python frames are read when opprof gets to it, and
 * the thread may have run on. Those frames are the thread's at the moment of
 * the read, and on a busy machine that moment is not a random one: a thread
 * that waits for a CPU is read where the scheduler preempted it, mostly in a
 * system call (py_split.py's time.process_time(): 13 % of the attached
 * samples came out as run_work with no spin_* below it in CI's run beside two
 * busy loops, 64 % at load 10, against 0.2 % in a launched run).
 *
 * The kernel's context-switch records (attr.context_switch) say what the
 * thread did between the sample and the end of the read. Frames are kept when
 *   - exact: the thread was switched out right at the sample (within
 *     SWITCHED_AT_SAMPLE_NS: opprof's wake-up preempted it on the way back
 *     from the sampling interrupt) and not switched in again before the read
 *     ended: it had not run a single instruction since, so the frames are
 *     the sampled instant's; or
 *   - running: the thread ran on without a switch until the read ended, and
 *     this is its latest sample in the drain: the read is the sampled state
 *     shifted by the lag, a moment that does not depend on what the thread
 *     was doing (the design's "statistical, not exact").
 * Any other sample gets no Python frames and is counted (python_moved_on).
 * A sample is judged once the records up to the end of its read are in, i.e.
 * after the next drain; until then it waits here.
 */
#include <stdlib.h>
#include <string.h>

#include "sampler/attach/attach_internal.h"

/* From the sampling interrupt to the switch it caused. Measured beside two
 * busy loops (py_split.py at 4 kHz, 1,841 samples): 290 switches came 15-30 us
 * after their sample, 13 of them with the thread already out of its Python
 * frame; at 30-60 us 33 of 82, at 60-100 us 37 of 50 were out (the thread
 * had gone back to its code). 50 us keeps the cluster; the stack-copy check
 * (frame_moved, 3.11/3.12) drops what moved all the same. */
#define SWITCHED_AT_SAMPLE_NS 50000ull

struct pending {
    struct attach_captured c;
    uint64_t first_switch, second_switch; /* of c.tid after c.time_ns; 0 = none yet */
    bool first_out;
};

struct attach_pending {
    struct pending *v;
    size_t n, cap;
    size_t ready; /* entries [0, ready) have seen a whole drain after their read */
};

struct attach_pending *attach_pending_new(void) { return calloc(1, sizeof(struct attach_pending)); }

bool attach_pending_add(struct attach_pending *p, const struct attach_captured *c)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        struct pending *v = realloc(p->v, cap * sizeof *v);
        if (!v)
            return false;
        p->v = v, p->cap = cap;
    }
    p->v[p->n++] = (struct pending){*c, 0, 0, false};
    return true;
}

void attach_pending_switch(struct attach_pending *p, uint32_t tid, uint64_t time_ns, bool out)
{
    for (size_t i = 0; i < p->n; i++) {
        struct pending *e = &p->v[i];
        if (e->c.tid != tid || time_ns <= e->c.time_ns)
            continue;
        if (!e->first_switch)
            e->first_switch = time_ns, e->first_out = out;
        else if (!e->second_switch)
            e->second_switch = time_ns;
    }
}

/* Whether e's Python frames are the sample's (exact) or a lag-shifted read
 * of a running thread; counted in *k. */
static bool keep_python(const struct pending *e, struct attach_python_kept *k)
{
    const struct attach_captured *c = &e->c;
    if (!e->first_switch || e->first_switch > c->read_to) {
        if (c->newer_in_batch) {
            k->moved_on++;
            return false;
        }
        k->running++;
        return true;
    }
    if (e->first_out && e->first_switch - c->time_ns <= SWITCHED_AT_SAMPLE_NS && e->first_switch < c->read_from &&
        (!e->second_switch || e->second_switch > c->read_to) && !c->frame_moved) {
        k->exact++;
        return true;
    }
    k->moved_on++;
    return false;
}

void attach_pending_flush(struct attach_pending *p, bool all, uint64_t switches_until,
                          struct attach_stream *(*stream_of)(void *, uint32_t), void *arg,
                          struct attach_python_kept *k)
{
    size_t upto = all ? p->n : p->ready;
    for (size_t i = 0; i < upto; i++) {
        struct pending *e = &p->v[i];
        bool judged = e->c.read_to <= switches_until;
        if (e->c.npy && !judged)
            k->moved_on++;
        bool with = e->c.npy && judged && keep_python(e, k);
        struct attach_stream *s = stream_of(arg, e->c.pid);
        if (s)
            attach_stream_emit(s, &e->c, with);
        else
            attach_stream_captured_gone(&e->c);
        free(e->c.py);
    }
    memmove(p->v, p->v + upto, (p->n - upto) * sizeof *p->v);
    p->n -= upto;
    p->ready = p->n; /* the rest is judged after the next drain */
}

void attach_pending_flush_pid(struct attach_pending *p, uint32_t pid,
                              struct attach_stream *(*stream_of)(void *, uint32_t), void *arg,
                              struct attach_python_kept *k)
{
    size_t w = 0, ready = 0;
    for (size_t i = 0; i < p->n; i++) {
        struct pending *e = &p->v[i];
        if (e->c.pid != pid) {
            ready += i < p->ready;
            p->v[w++] = *e;
            continue;
        }
        bool with = e->c.npy && keep_python(e, k);
        struct attach_stream *s = stream_of(arg, e->c.pid);
        if (s)
            attach_stream_emit(s, &e->c, with);
        else
            attach_stream_captured_gone(&e->c);
        free(e->c.py);
    }
    p->n = w;
    p->ready = ready;
}

void attach_pending_free(struct attach_pending *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i].c.py);
    free(p->v);
    free(p);
}
